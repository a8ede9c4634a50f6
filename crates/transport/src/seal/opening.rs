//! The receiving direction of a sealed link: each chunk is read straight into the frame's
//! payload and opened there in place, so its bytes are copied only by the socket read.

use std::io::{self, Read};

use super::{LEN_PREFIX, LinkKeys, SealError, TAG_LEN};
use crate::frame::{Frame, FrameError, FrameHeader, HEADER_LEN, ReadFrameError};

/// One link's receiving direction: its keys, the next sequence number expected, a reused
/// buffer for each frame's first chunk.
#[derive(Debug)]
pub struct Opening {
    keys: LinkKeys,
    next: u64,
    first: Vec<u8>,
}

impl Opening {
    /// Receives under `keys`, from sequence number 0.
    pub fn new(keys: LinkKeys) -> Opening {
        Opening { keys, next: 0, first: Vec::new() }
    }

    /// Opens one whole chunk (without its length prefix) under the next sequence number and
    /// returns its plain bytes.
    pub fn open(&mut self, chunk: &[u8]) -> Result<&[u8], SealError> {
        let mut buf = std::mem::take(&mut self.first);
        buf.clear();
        buf.extend_from_slice(chunk);
        let opened = self.open_in_place(&mut buf);
        self.first = buf;
        self.first.truncate(opened?);
        Ok(&self.first)
    }

    /// Opens `buf` (ciphertext, then tag) in place under the next sequence number.
    fn open_in_place(&mut self, buf: &mut [u8]) -> Result<usize, SealError> {
        let seq = self.next;
        if buf.len() < TAG_LEN {
            return Err(SealError::ShortChunk { chunk: seq, len: buf.len() });
        }
        self.next = seq.checked_add(1).ok_or(SealError::Exhausted)?;
        self.keys.recv().open_in_place(seq, buf).ok_or(SealError::Forged { chunk: seq })
    }

    /// Reads the next chunk's `len` sealed bytes onto the end of `buf` and opens them there;
    /// with `ahead` (more chunks of this frame follow, so their bytes are due) it reads the next
    /// chunk's length prefix in the same call and returns it.
    fn read_chunk<R: Read>(
        &mut self,
        r: &mut R,
        buf: &mut Vec<u8>,
        len: usize,
        ahead: bool,
    ) -> io::Result<Option<usize>> {
        if len < TAG_LEN {
            return Err(SealError::ShortChunk { chunk: self.next, len }.into());
        }
        // Zeroed before the read, chunk by chunk while it is in cache (`read_to_end`, which
        // would not zero, reads in small steps: several system calls per chunk).
        let at = buf.len();
        buf.resize(at + len + if ahead { LEN_PREFIX } else { 0 }, 0);
        r.read_exact(&mut buf[at..])?;
        let next =
            buf.get(at + len..).and_then(|p| p.first_chunk::<LEN_PREFIX>()).map(|p| u16::from_be_bytes(*p));
        let plain = self.open_in_place(&mut buf[at..at + len])?;
        buf.truncate(at + plain);
        Ok(next.map(usize::from))
    }

    /// Reads one sealed frame of at most `max` payload bytes. Its first chunk must hold the
    /// whole header and no chunk may carry bytes past the frame's end. Once that chunk opened,
    /// the header is the peer's own (not a corruption on the path), so the payload is allocated
    /// whole, up to `max`: growing it as chunks arrive would copy it again and again.
    pub(super) fn read_frame<R: Read>(&mut self, mut r: R, max: usize) -> Result<Frame, ReadFrameError> {
        let Some(len) = read_prefix(&mut r)? else { return Err(ReadFrameError::Closed) };
        let mut first = std::mem::take(&mut self.first);
        first.clear();
        let read = self.read_chunk(&mut r, &mut first, len, false);
        let parsed = read.map_err(ReadFrameError::Io).and_then(|_| self.header_of(&first, max));
        let header = match parsed {
            Ok(header) => header,
            Err(e) => {
                self.first = first;
                return Err(e);
            }
        };
        let mut payload = Vec::with_capacity(header.len + TAG_LEN + LEN_PREFIX);
        payload.extend_from_slice(&first[HEADER_LEN..]);
        self.first = first;
        let mut next = None;
        while payload.len() < header.len {
            let len = match next {
                Some(len) => len,
                None => read_prefix(&mut r)?.ok_or(FrameError::Truncated {
                    needed: HEADER_LEN + header.len,
                    have: HEADER_LEN + payload.len(),
                })?,
            };
            let left = header.len - payload.len();
            if len.saturating_sub(TAG_LEN) > left {
                return Err(io::Error::from(SealError::Straddles { chunk: self.next }).into());
            }
            next = self.read_chunk(&mut r, &mut payload, len, len.saturating_sub(TAG_LEN) < left)?;
        }
        if header.payload_crc != 0 {
            return Err(FrameError::PayloadChecksum { found: header.payload_crc, computed: 0 }.into());
        }
        Ok(Frame { kind: header.kind, sender: header.sender, tag: header.tag, payload })
    }

    /// The checked header at the start of a frame's opened first chunk `plain`.
    fn header_of(&self, plain: &[u8], max: usize) -> Result<FrameHeader, ReadFrameError> {
        let chunk = self.next.saturating_sub(1);
        let Some(bytes) = plain.first_chunk::<HEADER_LEN>() else {
            return Err(io::Error::from(SealError::SplitHeader { chunk }).into());
        };
        let header = FrameHeader::parse(bytes, max)?;
        if plain.len() - HEADER_LEN > header.len {
            return Err(io::Error::from(SealError::Straddles { chunk }).into());
        }
        Ok(header)
    }
}

/// The next chunk's declared length, or `None` if the stream ends cleanly before it.
fn read_prefix<R: Read>(r: &mut R) -> io::Result<Option<usize>> {
    let mut prefix = [0u8; LEN_PREFIX];
    let mut got = 0;
    while got < LEN_PREFIX {
        match r.read(&mut prefix[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(u16::from_be_bytes(prefix) as usize))
}
