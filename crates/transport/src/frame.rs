//! The wire format: every message on a socket is one frame.
//!
//! ```text
//! offset  size  field
//!      0     4  magic "USHF"
//!      4     1  version (4)
//!      5     1  kind (FrameKind)
//!      6     2  reserved, zero
//!      8     4  sender rank, u32 LE
//!     12     4  tag, u32 LE
//!     16     4  payload length, u32 LE
//!     20     4  CRC32C of the payload, u32 LE (zero on a sealed link, crate::seal)
//!     24     4  CRC32C of bytes 0..24, u32 LE
//!     28   len  payload
//! ```
//!
//! The header has its own checksum, so a corrupt length is caught before anything is
//! allocated; the length is then checked against the reader's bound, and only then is the
//! payload read, into exactly `len` bytes. Every failed check is a [`FrameError`], never a
//! panic.

use std::io::{self, Read, Write};

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"USHF";
/// The version this build writes and reads (4: fresh keys for each worker admitted while the
/// cluster runs, [`FrameKind::PeerKey`]; 3 brought the Noise handshake and sealed links; 2 had
/// HMAC proofs and plain-text links, 1 sent the token in clear).
pub const VERSION: u8 = 4;
/// Bytes in a frame header.
pub const HEADER_LEN: usize = 28;
/// The largest payload the format can describe.
pub const MAX_FORMAT_LEN: usize = u32::MAX as usize;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// Worker to master: the first handshake message (its ephemeral key); the tag says whether
    /// it seals.
    Hello = 1,
    /// Master to worker: its rank, the size and every worker's address.
    Welcome = 2,
    /// Master to worker: refused (the payload says why).
    Refused = 3,
    /// Worker to worker: the connecting rank's first handshake message.
    PeerHello = 4,
    /// Setup step finished (worker to master), or start (master to worker).
    Ready = 5,
    /// A message of an established transport.
    Message = 6,
    /// The accepting side's handshake message, in answer to a hello.
    Challenge = 7,
    /// The connecting side's last handshake message (keyed by the token or pair key, with a
    /// joining worker's listening address inside), or the accepting side's sealed answer.
    Proof = 8,
    /// Worker to master during the join: a welcome taken, linking up with the other workers
    /// (tagged with the welcome's generation), so the master can tell a frozen worker.
    Linking = 9,
    /// Master to worker, over its link while the cluster runs: the key the next worker
    /// admitted into a rank will prove on its link to this worker (the rank, then the key).
    PeerKey = 10,
}

impl FrameKind {
    fn from_byte(b: u8) -> Option<FrameKind> {
        Some(match b {
            1 => FrameKind::Hello,
            2 => FrameKind::Welcome,
            3 => FrameKind::Refused,
            4 => FrameKind::PeerHello,
            5 => FrameKind::Ready,
            6 => FrameKind::Message,
            7 => FrameKind::Challenge,
            8 => FrameKind::Proof,
            9 => FrameKind::Linking,
            10 => FrameKind::PeerKey,
            _ => return None,
        })
    }
}

/// Why bytes are not a valid frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The first four bytes are not [`MAGIC`].
    #[error("bad magic {0:02x?} (not a ubershuffle frame)")]
    BadMagic([u8; 4]),
    /// A version this build does not read.
    #[error("unsupported frame version {0} (this build reads {VERSION})")]
    UnsupportedVersion(u8),
    /// An unknown kind byte.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// The reserved bytes are not zero.
    #[error("reserved header bytes are {0:#06x}, not zero")]
    ReservedBits(u16),
    /// The header checksum does not match.
    #[error("header checksum {found:#010x} does not match {computed:#010x}")]
    HeaderChecksum {
        /// In the frame.
        found: u32,
        /// Computed.
        computed: u32,
    },
    /// The payload checksum does not match.
    #[error("payload checksum {found:#010x} does not match {computed:#010x}")]
    PayloadChecksum {
        /// In the frame.
        found: u32,
        /// Computed.
        computed: u32,
    },
    /// The declared payload is longer than the reader's bound.
    #[error("declared payload of {len} bytes exceeds the {max}-byte bound")]
    TooLong {
        /// Declared.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The bytes end before the frame does.
    #[error("truncated frame: {needed} bytes needed, {have} present")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes present.
        have: usize,
    },
}

/// A decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the frame carries.
    pub kind: FrameKind,
    /// The sender's rank (0 for a worker that has none yet).
    pub sender: u32,
    /// The message tag.
    pub tag: u32,
    /// Payload bytes.
    pub len: usize,
    /// CRC32C of the payload.
    pub payload_crc: u32,
}

/// A whole frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: FrameKind,
    /// The sender's rank.
    pub sender: u32,
    /// The message tag.
    pub tag: u32,
    /// The payload.
    pub payload: Vec<u8>,
}

fn le32(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(w)
}

impl FrameHeader {
    /// The header of a frame whose payload is the concatenation of `parts`.
    pub fn for_parts(kind: FrameKind, sender: u32, tag: u32, parts: &[&[u8]]) -> FrameHeader {
        let len = parts.iter().map(|p| p.len()).sum();
        let payload_crc = parts.iter().fold(0, |crc, p| crc32c::crc32c_append(crc, p));
        FrameHeader { kind, sender, tag, len, payload_crc }
    }

    /// The header of a frame of `len` payload bytes on a sealed link: its payload checksum is
    /// zero, since the AEAD tag of every chunk authenticates each byte ([`crate::seal`]).
    pub fn sealed(kind: FrameKind, sender: u32, tag: u32, len: usize) -> FrameHeader {
        FrameHeader { kind, sender, tag, len, payload_crc: 0 }
    }

    /// The header itself if a writer may send it: its length fits the format
    /// ([`MAX_FORMAT_LEN`]).
    pub(crate) fn writable(self) -> io::Result<FrameHeader> {
        match self.len > MAX_FORMAT_LEN {
            true => Err(io::Error::new(io::ErrorKind::InvalidInput, "payload longer than u32::MAX bytes")),
            false => Ok(self),
        }
    }

    /// The 28 header bytes. The length must fit the format ([`MAX_FORMAT_LEN`]); writers check.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[4] = VERSION;
        h[5] = self.kind as u8;
        h[8..12].copy_from_slice(&self.sender.to_le_bytes());
        h[12..16].copy_from_slice(&self.tag.to_le_bytes());
        h[16..20].copy_from_slice(&(self.len as u32).to_le_bytes());
        h[20..24].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32c::crc32c(&h[0..24]);
        h[24..28].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Parses and checks header bytes: magic, version, kind, reserved bytes, header checksum,
    /// and the declared length against `max_len`.
    pub fn parse(h: &[u8; HEADER_LEN], max_len: usize) -> Result<FrameHeader, FrameError> {
        let magic = [h[0], h[1], h[2], h[3]];
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        let computed = crc32c::crc32c(&h[0..24]);
        let found = le32(h, 24);
        if found != computed {
            return Err(FrameError::HeaderChecksum { found, computed });
        }
        if h[4] != VERSION {
            return Err(FrameError::UnsupportedVersion(h[4]));
        }
        let kind = FrameKind::from_byte(h[5]).ok_or(FrameError::UnknownKind(h[5]))?;
        let reserved = u16::from_le_bytes([h[6], h[7]]);
        if reserved != 0 {
            return Err(FrameError::ReservedBits(reserved));
        }
        let len = le32(h, 16) as usize;
        if len > max_len {
            return Err(FrameError::TooLong { len, max: max_len });
        }
        Ok(FrameHeader { kind, sender: le32(h, 8), tag: le32(h, 12), len, payload_crc: le32(h, 20) })
    }

    /// Checks `payload` against the header's checksum.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), FrameError> {
        let computed = crc32c::crc32c(payload);
        if computed != self.payload_crc {
            return Err(FrameError::PayloadChecksum { found: self.payload_crc, computed });
        }
        Ok(())
    }
}

impl Frame {
    /// The frame's bytes (header then payload).
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = FrameHeader::for_parts(self.kind, self.sender, self.tag, &[&self.payload]);
        let mut out = Vec::with_capacity(HEADER_LEN + self.payload.len());
        out.extend_from_slice(&header.to_bytes());
        out.extend_from_slice(&self.payload);
        out
    }

    /// Decodes the frame at the start of `bytes`, accepting payloads up to `max_len`; returns
    /// it and the number of bytes it used. Allocates only the payload, after every header check.
    pub fn decode(bytes: &[u8], max_len: usize) -> Result<(Frame, usize), FrameError> {
        let Some(h) = bytes.first_chunk::<HEADER_LEN>() else {
            return Err(FrameError::Truncated { needed: HEADER_LEN, have: bytes.len() });
        };
        let header = FrameHeader::parse(h, max_len)?;
        let end = HEADER_LEN + header.len;
        let Some(payload) = bytes.get(HEADER_LEN..end) else {
            return Err(FrameError::Truncated { needed: end, have: bytes.len() });
        };
        header.check_payload(payload)?;
        let frame =
            Frame { kind: header.kind, sender: header.sender, tag: header.tag, payload: payload.to_vec() };
        Ok((frame, end))
    }
}

/// Why a frame could not be read from a stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadFrameError {
    /// The stream ended cleanly between frames.
    #[error("connection closed")]
    Closed,
    /// The bytes are not a valid frame (a stream ending inside one is `Truncated`).
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The stream failed (reset, timeout).
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Writes one frame whose payload is the concatenation of `parts`, without copying the parts.
/// Small frames go out in one write.
pub fn write_frame<W: Write>(
    w: &mut W,
    kind: FrameKind,
    sender: u32,
    tag: u32,
    parts: &[&[u8]],
) -> io::Result<()> {
    let header = FrameHeader::for_parts(kind, sender, tag, parts).writable()?;
    let head = header.to_bytes();
    if header.len <= 64 * 1024 {
        let mut out = Vec::with_capacity(HEADER_LEN + header.len);
        out.extend_from_slice(&head);
        parts.iter().for_each(|p| out.extend_from_slice(p));
        return w.write_all(&out);
    }
    w.write_all(&head)?;
    for p in parts {
        w.write_all(p)?;
    }
    Ok(())
}

/// The most a reader allocates for a payload before its bytes arrive.
pub const FIRST_READ: usize = 1 << 20;

/// Reads one frame, accepting payloads up to `max_len`. Allocates only after the header passed
/// its checks, and then grows the payload with the bytes that actually arrive (from at most
/// [`FIRST_READ`] up to the declared, bounded length), so a header that lies about its length
/// costs little memory.
pub fn read_frame<R: Read>(r: &mut R, max_len: usize) -> Result<Frame, ReadFrameError> {
    let header = read_header(r, max_len)?;
    let mut payload = Vec::with_capacity(header.len.min(FIRST_READ));
    r.take(header.len as u64).read_to_end(&mut payload)?;
    finish_frame(header, payload)
}

/// Reads and checks a frame header.
fn read_header<R: Read>(r: &mut R, max_len: usize) -> Result<FrameHeader, ReadFrameError> {
    let mut h = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Err(ReadFrameError::Closed),
            Ok(0) => return Err(FrameError::Truncated { needed: HEADER_LEN, have: got }.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(FrameHeader::parse(&h, max_len)?)
}

/// The frame of `header` and the payload read for it: whole, and matching its checksum.
fn finish_frame(header: FrameHeader, payload: Vec<u8>) -> Result<Frame, ReadFrameError> {
    if payload.len() < header.len {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN + header.len,
            have: HEADER_LEN + payload.len(),
        }
        .into());
    }
    header.check_payload(&payload)?;
    Ok(Frame { kind: header.kind, sender: header.sender, tag: header.tag, payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Frame {
        Frame { kind: FrameKind::Message, sender: 3, tag: 7, payload: b"hello frames".to_vec() }
    }

    #[test]
    fn round_trips_through_bytes_and_streams() {
        let f = sample();
        let bytes = f.to_bytes();
        assert_eq!(Frame::decode(&bytes, 1024).unwrap(), (f.clone(), bytes.len()));
        let mut stream = Vec::new();
        write_frame(&mut stream, f.kind, f.sender, f.tag, &[b"hello ", b"frames"]).unwrap();
        assert_eq!(stream, bytes);
        assert_eq!(read_frame(&mut &stream[..], 1024).unwrap(), f);
        assert!(matches!(read_frame(&mut &[][..], 1024), Err(ReadFrameError::Closed)));
    }

    #[test]
    fn every_header_check_fires() {
        let bytes = sample().to_bytes();
        let decode = |b: &[u8]| Frame::decode(b, 1024).unwrap_err();
        let mut b = bytes.clone();
        b[0] = b'X';
        assert!(matches!(decode(&b), FrameError::BadMagic(_)));
        let mut b = bytes.clone();
        b[17] ^= 1;
        assert!(matches!(decode(&b), FrameError::HeaderChecksum { .. }));
        let mut b = bytes.clone();
        b[HEADER_LEN] ^= 0x40;
        assert!(matches!(decode(&b), FrameError::PayloadChecksum { .. }));
        assert!(matches!(decode(&bytes[..10]), FrameError::Truncated { needed: 28, have: 10 }));
        assert!(matches!(decode(&bytes[..30]), FrameError::Truncated { .. }));
        assert!(matches!(Frame::decode(&bytes, 4), Err(FrameError::TooLong { len: 12, max: 4 })));
        // A header re-checksummed after changing one field is caught by that field's check.
        let reseal = |mut b: Vec<u8>| {
            let crc = crc32c::crc32c(&b[0..24]);
            b[24..28].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let mut b = bytes.clone();
        b[4] = 9;
        assert!(matches!(decode(&reseal(b)), FrameError::UnsupportedVersion(9)));
        let mut b = bytes.clone();
        b[5] = 99;
        assert!(matches!(decode(&reseal(b)), FrameError::UnknownKind(99)));
        let mut b = bytes.clone();
        b[6] = 1;
        assert!(matches!(decode(&reseal(b)), FrameError::ReservedBits(1)));
    }

    #[test]
    fn a_huge_declared_length_is_refused_before_reading() {
        let mut h = FrameHeader::for_parts(FrameKind::Message, 1, 0, &[]);
        h.len = u32::MAX as usize;
        let head = h.to_bytes();
        let err = read_frame(&mut &head[..], 1 << 20).unwrap_err();
        assert!(matches!(err, ReadFrameError::Frame(FrameError::TooLong { .. })));
        // Within the bound but truncated: an error, with no more than the bound allocated.
        let err = read_frame(&mut &head[..], usize::MAX).unwrap_err();
        assert!(matches!(err, ReadFrameError::Frame(FrameError::Truncated { .. })), "{err:?}");
    }
}
