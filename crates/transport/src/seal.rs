//! Sealed links: after the handshake every frame travels as one or more Noise transport
//! messages (AEAD under per-direction keys, an implicit 64-bit sequence number as the nonce).
//!
//! ```text
//! sealed frame = chunk+ ;  chunk = length (u16 BE, 16..=65535) | AEAD(plain frame bytes) | tag (16)
//! ```
//!
//! A frame's plain bytes (its 28-byte header and payload, [`crate::frame`]) are cut into chunks
//! of at most [`MAX_CHUNK_PLAIN`] bytes, each sealed under the next nonce of its direction, so a
//! frame of `L` payload bytes costs exactly [`sealed_frame_len`]`(L)` bytes on the wire:
//! `28 + L + 18 * ceil((28 + L) / 65519)`. A chunk that fails to open (a flipped bit, a replayed,
//! reordered, dropped or injected chunk: the nonce no longer matches) ends the link with
//! [`SealError::Forged`].

use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;

use snow::StatelessTransportState;

use crate::frame::{Frame, FrameKind, ReadFrameError, read_frame, read_frame_buffered, write_frame};

/// The Noise protocol of every TCP handshake: XX with the pre-shared key mixed in at the
/// third message, X25519, AES-256-GCM, SHA-256 (see docs/threat-model.md for why).
pub const NOISE_PARAMS: &str = "Noise_XXpsk3_25519_AESGCM_SHA256";
/// Whose AES-256-GCM seals the links in this build: `ring` (the default feature `ring-crypto`)
/// or RustCrypto's pure-Rust code (without it).
pub const AEAD_BACKEND: &str = if cfg!(feature = "ring-crypto") { "ring" } else { "RustCrypto" };
/// Bytes of a chunk's authentication tag.
pub const TAG_LEN: usize = 16;
/// Bytes of a chunk's length prefix.
pub const LEN_PREFIX: usize = 2;
/// The longest Noise message (ciphertext and tag).
pub const MAX_NOISE_MESSAGE: usize = 65535;
/// The most plain bytes one chunk carries.
pub const MAX_CHUNK_PLAIN: usize = MAX_NOISE_MESSAGE - TAG_LEN;
/// Bytes a chunk adds to the plain bytes it carries (length prefix and tag).
pub const CHUNK_OVERHEAD: usize = LEN_PREFIX + TAG_LEN;

/// Bytes on the wire of a sealed frame of `payload` bytes (header included).
pub fn sealed_frame_len(payload: usize) -> usize {
    let plain = crate::frame::HEADER_LEN + payload;
    plain + CHUNK_OVERHEAD * plain.div_ceil(MAX_CHUNK_PLAIN)
}

/// Why a sealed stream could not be read or written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The chunk did not open under the expected key and sequence number.
    #[error(
        "sealed chunk {chunk} failed authentication (altered, replayed, reordered, dropped or injected bytes)"
    )]
    Forged {
        /// The sequence number the chunk should have had.
        chunk: u64,
    },
    /// A length prefix shorter than a tag.
    #[error("sealed chunk {chunk} declares {len} bytes, fewer than its {TAG_LEN}-byte tag")]
    ShortChunk {
        /// The sequence number.
        chunk: u64,
        /// The declared length.
        len: usize,
    },
    /// A chunk carried plain bytes past the end of the frame it belongs to.
    #[error("sealed chunk {chunk} carries bytes past the end of its frame")]
    Straddles {
        /// The sequence number.
        chunk: u64,
    },
    /// The handshake failed or its keys could not be set up.
    #[error("the key exchange failed: {0}")]
    Handshake(String),
    /// 2^64 chunks on one link.
    #[error("the link's sequence numbers are exhausted")]
    Exhausted,
}

impl From<SealError> for io::Error {
    fn from(e: SealError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// The [`SealError`] inside an I/O error, if that is what it is.
pub fn seal_error(e: &io::Error) -> Option<&SealError> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<SealError>())
}

/// Both directions' keys of one link, shared by its writer and its reader thread.
#[derive(Clone)]
pub struct LinkKeys(Arc<StatelessTransportState>);

impl std::fmt::Debug for LinkKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKeys(<redacted>)")
    }
}

impl LinkKeys {
    /// The keys of a finished handshake.
    pub(crate) fn from_handshake(h: snow::HandshakeState) -> Result<LinkKeys, SealError> {
        let state = h.into_stateless_transport_mode().map_err(|e| SealError::Handshake(e.to_string()))?;
        Ok(LinkKeys(Arc::new(state)))
    }

    /// Both ends of a link whose handshake ran in memory under a random key: for benches, fuzz
    /// targets and tests of the sealed stream without sockets.
    pub fn in_memory_pair() -> Result<(LinkKeys, LinkKeys), SealError> {
        let fail = |e: snow::Error| SealError::Handshake(e.to_string());
        let mut psk = [0u8; 32];
        getrandom::fill(&mut psk).map_err(|e| SealError::Handshake(e.to_string()))?;
        let params: snow::params::NoiseParams = NOISE_PARAMS.parse().map_err(fail)?;
        let side = |initiator: bool| -> Result<snow::HandshakeState, SealError> {
            let b = snow::Builder::new(params.clone());
            let key = b.generate_keypair().map_err(fail)?;
            let b = b.local_private_key(&key.private).map_err(fail)?.psk(3, &psk).map_err(fail)?;
            if initiator { b.build_initiator() } else { b.build_responder() }.map_err(fail)
        };
        let (mut i, mut r) = (side(true)?, side(false)?);
        let (mut msg, mut out) = (vec![0u8; MAX_NOISE_MESSAGE], vec![0u8; MAX_NOISE_MESSAGE]);
        for step in 0..3 {
            let (from, to) = if step % 2 == 0 { (&mut i, &mut r) } else { (&mut r, &mut i) };
            let n = from.write_message(&[], &mut msg).map_err(fail)?;
            to.read_message(&msg[..n], &mut out).map_err(fail)?;
        }
        Ok((LinkKeys::from_handshake(i)?, LinkKeys::from_handshake(r)?))
    }
}

/// Sealed chunks a writer gathers before it hands them to the socket in one write (about
/// 256 KiB): fewer system calls and wake-ups of the reading side than one write per chunk.
const CHUNKS_PER_WRITE: usize = 4;

/// One link's sending direction: its keys, the next sequence number, reused buffers.
#[derive(Debug)]
pub struct Sealing {
    keys: LinkKeys,
    next: u64,
    /// Plain bytes of the chunk being filled (a frame's header, the tail of a payload).
    plain: Vec<u8>,
    /// Sealed chunks not yet written, at most [`CHUNKS_PER_WRITE`].
    sealed: Vec<u8>,
    chunks: usize,
}

impl Sealing {
    /// Sends under `keys`, from sequence number 0.
    pub fn new(keys: LinkKeys) -> Sealing {
        Sealing { keys, next: 0, plain: Vec::new(), sealed: Vec::new(), chunks: 0 }
    }

    /// A writer that seals what it is given onto `inner`; [`Write::flush`] ends a frame (seals
    /// the last, partial chunk).
    pub fn writer<W: Write>(&mut self, inner: W) -> SealedWriter<'_, W> {
        SealedWriter { inner, s: self }
    }

    /// Seals `plain` (at most [`MAX_CHUNK_PLAIN`] bytes) as the next chunk behind the sealed
    /// bytes not yet written.
    fn seal(&mut self, plain: &[u8]) -> io::Result<()> {
        let nonce = self.next;
        self.next = nonce.checked_add(1).ok_or(SealError::Exhausted)?;
        let at = self.sealed.len();
        self.sealed.resize(at + LEN_PREFIX + plain.len() + TAG_LEN, 0);
        let n = self
            .keys
            .0
            .write_message(nonce, plain, &mut self.sealed[at + LEN_PREFIX..])
            .map_err(|e| SealError::Handshake(e.to_string()))?;
        self.sealed[at..at + LEN_PREFIX].copy_from_slice(&(n as u16).to_be_bytes());
        self.sealed.truncate(at + LEN_PREFIX + n);
        self.chunks += 1;
        Ok(())
    }

    /// Seals the buffered plain bytes as one chunk.
    fn seal_buffered(&mut self) -> io::Result<()> {
        let plain = std::mem::take(&mut self.plain);
        let sealed = self.seal(&plain);
        self.plain = plain;
        self.plain.clear();
        sealed
    }

    /// Writes the sealed chunks onto `inner` once [`CHUNKS_PER_WRITE`] are gathered, or
    /// whatever there is when `all`.
    fn write_out<W: Write>(&mut self, inner: &mut W, all: bool) -> io::Result<()> {
        if self.chunks == 0 || (!all && self.chunks < CHUNKS_PER_WRITE) {
            return Ok(());
        }
        self.chunks = 0;
        let written = inner.write_all(&self.sealed);
        self.sealed.clear();
        written
    }
}

/// Seals the bytes written to it; see [`Sealing::writer`].
#[derive(Debug)]
pub struct SealedWriter<'a, W: Write> {
    inner: W,
    s: &'a mut Sealing,
}

impl<W: Write> Write for SealedWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.s.plain.len() == MAX_CHUNK_PLAIN {
            self.s.seal_buffered()?;
            self.s.write_out(&mut self.inner, false)?;
        }
        if self.s.plain.is_empty() && buf.len() >= MAX_CHUNK_PLAIN {
            // A whole chunk: sealed straight from the caller's bytes, not copied first.
            self.s.seal(&buf[..MAX_CHUNK_PLAIN])?;
            self.s.write_out(&mut self.inner, false)?;
            return Ok(MAX_CHUNK_PLAIN);
        }
        let n = buf.len().min(MAX_CHUNK_PLAIN - self.s.plain.len());
        self.s.plain.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.s.plain.is_empty() {
            self.s.seal_buffered()?;
        }
        self.s.write_out(&mut self.inner, true)?;
        self.inner.flush()
    }
}

/// One link's receiving direction: its keys, the next sequence number expected, the plain
/// bytes of the chunk being read.
#[derive(Debug)]
pub struct Opening {
    keys: LinkKeys,
    next: u64,
    sealed: Vec<u8>,
    plain: Vec<u8>,
    pos: usize,
}

impl Opening {
    /// Receives under `keys`, from sequence number 0.
    pub fn new(keys: LinkKeys) -> Opening {
        Opening { keys, next: 0, sealed: Vec::new(), plain: Vec::new(), pos: 0 }
    }

    /// A reader of the plain bytes of the chunks read from `inner`.
    pub fn reader<R: Read>(&mut self, inner: R) -> SealedReader<'_, R> {
        SealedReader { inner, s: self }
    }

    /// Opens one whole chunk (without its length prefix) under the next sequence number and
    /// returns its plain bytes; a chunk of another frame must not remain unread.
    pub fn open(&mut self, chunk: &[u8]) -> Result<&[u8], SealError> {
        let nonce = self.next;
        if chunk.len() < TAG_LEN {
            return Err(SealError::ShortChunk { chunk: nonce, len: chunk.len() });
        }
        self.next = nonce.checked_add(1).ok_or(SealError::Exhausted)?;
        self.plain.resize(chunk.len(), 0);
        let n = self
            .keys
            .0
            .read_message(nonce, chunk, &mut self.plain)
            .map_err(|_| SealError::Forged { chunk: nonce })?;
        self.plain.truncate(n);
        self.pos = n;
        Ok(&self.plain)
    }

    /// Whether plain bytes of the last chunk are still unread (after a whole frame was read,
    /// that means the chunk straddled two frames).
    pub fn pending(&self) -> bool {
        self.pos < self.plain.len()
    }

    /// Checks that the frame just read ended with its last chunk.
    pub fn end_of_frame(&self) -> Result<(), SealError> {
        match self.pending() {
            true => Err(SealError::Straddles { chunk: self.next.saturating_sub(1) }),
            false => Ok(()),
        }
    }

    fn read_chunk<R: Read>(&mut self, inner: &mut R) -> io::Result<bool> {
        let mut prefix = [0u8; LEN_PREFIX];
        let mut got = 0;
        while got < LEN_PREFIX {
            match inner.read(&mut prefix[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let len = u16::from_be_bytes(prefix) as usize;
        if len < TAG_LEN {
            return Err(SealError::ShortChunk { chunk: self.next, len }.into());
        }
        let mut sealed = std::mem::take(&mut self.sealed);
        sealed.resize(len, 0);
        let read = inner.read_exact(&mut sealed);
        let opened = read.and_then(|()| self.open(&sealed).map(|_| ()).map_err(io::Error::from));
        self.sealed = sealed;
        opened?;
        self.pos = 0;
        Ok(true)
    }
}

/// Reads the plain bytes of sealed chunks; see [`Opening::reader`]. A stream that ends between
/// chunks reads as its end (0 bytes); one that ends inside a chunk is an error.
#[derive(Debug)]
pub struct SealedReader<'a, R: Read> {
    inner: R,
    s: &'a mut Opening,
}

impl<R: Read> BufRead for SealedReader<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if !self.s.pending() && !self.s.read_chunk(&mut self.inner)? {
            return Ok(&[]);
        }
        Ok(&self.s.plain[self.s.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.s.pos = self.s.pos.saturating_add(n).min(self.s.plain.len());
    }
}

impl<R: Read> Read for SealedReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let plain = self.fill_buf()?;
        let n = buf.len().min(plain.len());
        buf[..n].copy_from_slice(&plain[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// Writes one frame (see [`crate::frame::write_frame`]), sealed when `sealing` is given.
pub fn write_frame_on<W: Write>(
    sealing: Option<&mut Sealing>,
    mut w: W,
    (kind, sender, tag): (FrameKind, u32, u32),
    parts: &[&[u8]],
) -> io::Result<()> {
    match sealing {
        Some(s) => {
            let mut sw = s.writer(w);
            write_frame(&mut sw, kind, sender, tag, parts)?;
            sw.flush()
        }
        None => write_frame(&mut w, kind, sender, tag, parts),
    }
}

/// Reads one frame (see [`crate::frame::read_frame`]) of at most `max` payload bytes, opened
/// when `opening` is given; a sealed frame must end with its last chunk.
pub fn read_frame_on<R: Read>(
    opening: Option<&mut Opening>,
    mut r: R,
    max: usize,
) -> Result<Frame, ReadFrameError> {
    match opening {
        Some(o) => {
            let f = read_frame_buffered(&mut o.reader(r), max)?;
            o.end_of_frame().map_err(|e| ReadFrameError::Io(e.into()))?;
            Ok(f)
        }
        None => read_frame(&mut r, max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seal_frames(s: &mut Sealing, payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut wire = Vec::new();
        for p in payloads {
            let mut w = s.writer(&mut wire);
            write_frame(&mut w, FrameKind::Message, 1, 2, &[p]).unwrap();
            w.flush().unwrap();
        }
        wire
    }

    #[test]
    fn frames_round_trip_with_the_stated_overhead() {
        let (a, b) = LinkKeys::in_memory_pair().unwrap();
        let (mut s, mut o) = (Sealing::new(a), Opening::new(b));
        let sizes = [0usize, 1, MAX_CHUNK_PLAIN - 28, MAX_CHUNK_PLAIN - 27, 3 * MAX_CHUNK_PLAIN + 5, 1 << 20];
        let payloads: Vec<Vec<u8>> = sizes.iter().map(|&n| (0..n).map(|i| i as u8).collect()).collect();
        let wire = seal_frames(&mut s, &payloads);
        assert_eq!(wire.len(), sizes.iter().map(|&n| sealed_frame_len(n)).sum::<usize>());
        assert_eq!(sealed_frame_len(0), 28 + 18);
        assert_eq!(sealed_frame_len(1 << 20), 28 + (1 << 20) + 18 * 17);
        let mut inner = &wire[..];
        for p in &payloads {
            let f = read_frame(&mut o.reader(&mut inner), usize::MAX).unwrap();
            assert_eq!(&f.payload, p);
            o.end_of_frame().unwrap();
        }
        assert!(matches!(
            read_frame(&mut o.reader(&mut inner), 10),
            Err(crate::frame::ReadFrameError::Closed)
        ));
    }

    #[test]
    fn flipped_replayed_dropped_and_reordered_chunks_fail() {
        let (a, b) = LinkKeys::in_memory_pair().unwrap();
        let mut s = Sealing::new(a);
        let one = seal_frames(&mut s, &[b"first".to_vec()]);
        let two = seal_frames(&mut s, &[b"second".to_vec()]);
        let forged = |wire: Vec<u8>, keys: &LinkKeys| {
            let mut o = Opening::new(keys.clone());
            let mut inner = &wire[..];
            let mut err = None;
            for _ in 0..2 {
                if let Err(e) = read_frame(&mut o.reader(&mut inner), 100) {
                    err = Some(e);
                    break;
                }
            }
            match err {
                Some(crate::frame::ReadFrameError::Io(e)) => seal_error(&e).cloned().ok_or(e.kind()),
                other => panic!("{other:?}"),
            }
        };
        // A flipped length runs into the next chunk (or past the end); any other bit fails the tag.
        let mut flipped = [one.clone(), two.clone()].concat();
        flipped[0] ^= 0x10;
        assert_eq!(forged(flipped, &b), Err(std::io::ErrorKind::UnexpectedEof));
        for at in [1, 2, 30, one.len() - 1, one.len() + 3] {
            let mut flipped = [one.clone(), two.clone()].concat();
            flipped[at] ^= 0x10;
            let chunk = u64::from(at >= one.len());
            assert_eq!(forged(flipped, &b), Ok(SealError::Forged { chunk }), "flip at {at}");
        }
        let replayed = [one.clone(), one.clone()].concat();
        assert_eq!(forged(replayed, &b), Ok(SealError::Forged { chunk: 1 }));
        assert_eq!(forged(two.clone(), &b), Ok(SealError::Forged { chunk: 0 }));
        assert_eq!(forged([two.clone(), one.clone()].concat(), &b), Ok(SealError::Forged { chunk: 0 }));
        // The other direction's keys do not open it (no reflection).
        let (_, other) = LinkKeys::in_memory_pair().unwrap();
        assert_eq!(forged([one, two].concat(), &other), Ok(SealError::Forged { chunk: 0 }));
    }
}
