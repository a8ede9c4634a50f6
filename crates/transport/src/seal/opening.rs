//! The receiving direction of a sealed link: a frame's later chunks are read, many at a time,
//! straight into its payload and opened there, so their bytes are copied only by the socket
//! read (which does not zero the memory first) and by the cipher.

use std::io::{self, Read};

use super::{CHUNK_OVERHEAD, LEN_PREFIX, LinkKeys, MAX_CHUNK_PLAIN, SealError, TAG_LEN};
use crate::frame::{Frame, FrameError, FrameHeader, HEADER_LEN, ReadFrameError};

/// Later chunks of a frame read from the socket together before they are opened (about 1 MiB):
/// few system calls, and the payload needs room for only this many chunks' prefixes and tags.
const CHUNKS_PER_READ: usize = 16;

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
        let opened = self.open_within(&mut buf, 0);
        self.first = buf;
        self.first.truncate(opened?);
        Ok(&self.first)
    }

    /// Opens the chunk (ciphertext, then tag) at `buf[src..]` under the next sequence number,
    /// its plain bytes landing at the start of `buf`; returns their length.
    fn open_within(&mut self, buf: &mut [u8], src: usize) -> Result<usize, SealError> {
        let seq = self.next;
        let len = buf.len().saturating_sub(src);
        if len < TAG_LEN {
            return Err(SealError::ShortChunk { chunk: seq, len });
        }
        self.next = seq.checked_add(1).ok_or(SealError::Exhausted)?;
        self.keys.recv().open_within(seq, buf, src).ok_or(SealError::Forged { chunk: seq })
    }

    /// Reads one sealed frame of at most `max` payload bytes (see the module [`super`] for
    /// what its chunks must be). Once its first chunk opened, the header is the peer's own (not
    /// a corruption on the path), so the payload is allocated whole, up to `max`: growing it as
    /// chunks arrive would copy it again and again.
    pub(super) fn read_frame<R: Read>(&mut self, r: R, max: usize) -> Result<Frame, ReadFrameError> {
        self.read_frame_into(r, max, Vec::new())
    }

    /// Reads and opens one frame, its payload in `payload` (emptied first; its capacity kept,
    /// so a caller that hands buffers back allocates none in the steady state).
    pub fn read_frame_into<R: Read>(
        &mut self,
        mut r: R,
        max: usize,
        mut payload: Vec<u8>,
    ) -> Result<Frame, ReadFrameError> {
        let Some(len) = read_prefix(&mut r)? else { return Err(ReadFrameError::Closed) };
        let mut first = std::mem::take(&mut self.first);
        let parsed = self.read_first(&mut r, &mut first, len).and_then(|_| self.header_of(&first, max));
        let header = match parsed {
            Ok(header) => header,
            Err(e) => {
                self.first = first;
                return Err(e);
            }
        };
        let later = (header.len + HEADER_LEN - first.len()).div_ceil(MAX_CHUNK_PLAIN);
        payload.clear();
        payload.reserve(header.len + CHUNK_OVERHEAD * later.min(CHUNKS_PER_READ));
        payload.extend_from_slice(&first[HEADER_LEN..]);
        self.first = first;
        while payload.len() < header.len {
            self.read_chunks(&mut r, &mut payload, header.len)?;
        }
        if header.payload_crc != 0 {
            return Err(FrameError::PayloadChecksum { found: header.payload_crc, computed: 0 }.into());
        }
        Ok(Frame { kind: header.kind, sender: header.sender, tag: header.tag, payload })
    }

    /// Reads a frame's first chunk, of `len` sealed bytes, into `buf` and opens it there.
    fn read_first<R: Read>(
        &mut self,
        r: &mut R,
        buf: &mut Vec<u8>,
        len: usize,
    ) -> Result<(), ReadFrameError> {
        if len < TAG_LEN {
            return Err(SealError::ShortChunk { chunk: self.next, len }.into());
        }
        buf.clear();
        buf.resize(len, 0);
        r.read_exact(buf)?;
        let plain = self.open_within(buf, 0)?;
        buf.truncate(plain);
        Ok(())
    }

    /// Reads the next (up to [`CHUNKS_PER_READ`]) chunks of a frame of `total` payload bytes
    /// onto the end of `payload` in one go, then opens each in place, its plain bytes shifted
    /// left over the prefixes and tags before it. `read_to_end` fills the payload's spare
    /// capacity without zeroing it first.
    fn read_chunks<R: Read>(
        &mut self,
        r: &mut R,
        payload: &mut Vec<u8>,
        total: usize,
    ) -> Result<(), ReadFrameError> {
        let at = payload.len();
        let left = total - at;
        let chunks = left.div_ceil(MAX_CHUNK_PLAIN).min(CHUNKS_PER_READ);
        let plain = left.min(chunks * MAX_CHUNK_PLAIN);
        let wire = plain + chunks * CHUNK_OVERHEAD;
        let got = r.take(wire as u64).read_to_end(payload)?;
        if got < wire {
            let (needed, have) = (HEADER_LEN + total, HEADER_LEN + at);
            return Err(FrameError::Truncated { needed, have }.into());
        }
        let (mut dst, mut src) = (at, at);
        for k in 0..chunks {
            let expected = (plain - k * MAX_CHUNK_PLAIN).min(MAX_CHUNK_PLAIN) + TAG_LEN;
            let prefix = [payload[src], payload[src + 1]];
            let len = usize::from(u16::from_be_bytes(prefix));
            if len != expected {
                return Err(SealError::Length { chunk: self.next, len, expected }.into());
            }
            let end = src + LEN_PREFIX + len;
            dst += self.open_within(&mut payload[dst..end], src + LEN_PREFIX - dst)?;
            src = end;
        }
        payload.truncate(dst);
        Ok(())
    }

    /// The checked header at the start of a frame's opened first chunk `plain`; a frame longer
    /// than its first chunk must have filled it.
    fn header_of(&self, plain: &[u8], max: usize) -> Result<FrameHeader, ReadFrameError> {
        let chunk = self.next.saturating_sub(1);
        let Some(bytes) = plain.first_chunk::<HEADER_LEN>() else {
            return Err(SealError::SplitHeader { chunk }.into());
        };
        let header = FrameHeader::parse(bytes, max)?;
        let frame = HEADER_LEN + header.len;
        if plain.len() > frame {
            return Err(SealError::Straddles { chunk }.into());
        }
        if plain.len() < frame.min(MAX_CHUNK_PLAIN) {
            let (len, expected) = (plain.len() + TAG_LEN, frame.min(MAX_CHUNK_PLAIN) + TAG_LEN);
            return Err(SealError::Length { chunk, len, expected }.into());
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
