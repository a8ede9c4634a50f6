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
//! [`SealError::Forged`]. A frame's first chunk holds its whole header, every chunk but a
//! frame's last is full, and no chunk carries bytes of two frames: once the first chunk has
//! opened, the header says where every later chunk starts and ends. A sealed frame's payload
//! checksum is zero: the tags authenticate every byte, so a second, weaker check over the
//! payload would only cost time.
//!
//! snow runs the handshake; the chunks are sealed and opened with the keys of its split by
//! `ring` or RustCrypto (module `cipher`), in place: the sender copies each plain byte once
//! (into its outgoing buffer), the receiver reads a frame's later chunks, many at a time,
//! straight into its payload and opens each there, shifting the plain bytes over the length
//! prefixes and tags in the same pass.

mod cipher;
mod opening;
mod pair;
mod sealing;

use std::io::{self, Read, Write};
use std::sync::Arc;

use crate::frame::{Frame, FrameHeader, FrameKind, ReadFrameError, read_frame, write_frame};
use cipher::ChunkCipher;
pub use opening::Opening;
pub use pair::handshake_pair;
pub use sealing::Sealing;

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
    /// A chunk's length was not the one its frame's header implies: every chunk but a frame's
    /// last carries exactly [`MAX_CHUNK_PLAIN`] plain bytes.
    #[error("sealed chunk {chunk} declares {len} bytes where its frame needs {expected}")]
    Length {
        /// The sequence number.
        chunk: u64,
        /// The declared length.
        len: usize,
        /// The length the frame's header implies.
        expected: usize,
    },
    /// A frame's first chunk did not hold the whole frame header.
    #[error("sealed chunk {chunk} begins a frame but holds only part of its header")]
    SplitHeader {
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

/// A sealed stream's error as a frame reader's: an I/O error around the [`SealError`] (see
/// [`seal_error`]), like every failure of the stream itself.
impl From<SealError> for ReadFrameError {
    fn from(e: SealError) -> ReadFrameError {
        ReadFrameError::Io(e.into())
    }
}

/// The [`SealError`] inside an I/O error, if that is what it is.
pub fn seal_error(e: &io::Error) -> Option<&SealError> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<SealError>())
}

/// Both directions' ciphers of one link, shared by its writer and its reader thread.
#[derive(Clone)]
pub struct LinkKeys(Arc<Directions>);

/// The sending and the receiving cipher.
struct Directions {
    send: ChunkCipher,
    recv: ChunkCipher,
}

impl std::fmt::Debug for LinkKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkKeys(<redacted>)")
    }
}

impl LinkKeys {
    /// The keys of a finished handshake: Noise's split, the initiator sending under the first.
    pub(crate) fn from_handshake(mut h: snow::HandshakeState) -> Result<LinkKeys, SealError> {
        if !h.is_handshake_finished() {
            return Err(SealError::Handshake("the handshake is not finished".into()));
        }
        let (mut first, mut second) = h.dangerously_get_raw_split();
        let (send, recv) = if h.is_initiator() { (&first, &second) } else { (&second, &first) };
        let ciphers = ChunkCipher::new(send).zip(ChunkCipher::new(recv));
        first.fill(0);
        second.fill(0);
        let (send, recv) = ciphers.ok_or_else(|| SealError::Handshake("a key of the wrong length".into()))?;
        Ok(LinkKeys(Arc::new(Directions { send, recv })))
    }

    fn send(&self) -> &ChunkCipher {
        &self.0.send
    }

    fn recv(&self) -> &ChunkCipher {
        &self.0.recv
    }

    /// Both ends of a link whose handshake ran in memory under a random key: for benches, fuzz
    /// targets and tests of the sealed stream without sockets.
    pub fn in_memory_pair() -> Result<(LinkKeys, LinkKeys), SealError> {
        let (i, r) = in_memory_handshake()?;
        Ok((LinkKeys::from_handshake(i)?, LinkKeys::from_handshake(r)?))
    }
}

/// The initiator's and the responder's side of a handshake run in memory under a random key.
fn in_memory_handshake() -> Result<(snow::HandshakeState, snow::HandshakeState), SealError> {
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
    Ok((i, r))
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
            let len = parts.iter().map(|p| p.len()).sum();
            let header = FrameHeader::sealed(kind, sender, tag, len).writable()?;
            s.write_frame(w, &header.to_bytes(), parts)
        }
        None => write_frame(&mut w, kind, sender, tag, parts),
    }
}

/// Reads one frame (see [`crate::frame::read_frame`]) of at most `max` payload bytes, opened
/// when `opening` is given (see [`Opening`] for what a sealed frame must be).
pub fn read_frame_on<R: Read>(
    opening: Option<&mut Opening>,
    mut r: R,
    max: usize,
) -> Result<Frame, ReadFrameError> {
    match opening {
        Some(o) => o.read_frame(r, max),
        None => read_frame(&mut r, max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: (FrameKind, u32, u32) = (FrameKind::Message, 1, 2);

    fn seal_frames(s: &mut Sealing, payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut wire = Vec::new();
        for p in payloads {
            write_frame_on(Some(s), &mut wire, HEAD, &[p]).unwrap();
        }
        wire
    }

    #[test]
    fn frames_round_trip_with_the_stated_overhead() {
        let (a, b) = LinkKeys::in_memory_pair().unwrap();
        let (mut s, mut o) = (Sealing::new(a), Opening::new(b));
        let sizes = [
            0usize,
            1,
            MAX_CHUNK_PLAIN - 28,
            MAX_CHUNK_PLAIN - 27,
            3 * MAX_CHUNK_PLAIN + 5,
            1 << 20,
            (2 << 20) + 3,
        ];
        let payloads: Vec<Vec<u8>> = sizes.iter().map(|&n| (0..n).map(|i| i as u8).collect()).collect();
        let wire = seal_frames(&mut s, &payloads);
        assert_eq!(wire.len(), sizes.iter().map(|&n| sealed_frame_len(n)).sum::<usize>());
        assert_eq!(sealed_frame_len(0), 28 + 18);
        assert_eq!(sealed_frame_len(1 << 20), 28 + (1 << 20) + 18 * 17);
        let mut inner = &wire[..];
        for p in &payloads {
            let f = read_frame_on(Some(&mut o), &mut inner, usize::MAX).unwrap();
            assert_eq!(&f.payload, p);
        }
        assert!(matches!(read_frame_on(Some(&mut o), &mut inner, 10), Err(ReadFrameError::Closed)));
    }

    #[test]
    fn a_chunk_is_the_noise_transport_message_snow_makes() {
        let (mut i, r) = in_memory_handshake().unwrap();
        let ours = LinkKeys::from_handshake(r).unwrap();
        let (first, _) = i.dangerously_get_raw_split();
        let snow = i.into_stateless_transport_mode().unwrap();
        let payload: Vec<u8> = (0..2 * MAX_CHUNK_PLAIN).map(|i| (i * 7) as u8).collect();
        let mut plain = FrameHeader::sealed(HEAD.0, HEAD.1, HEAD.2, payload.len()).to_bytes().to_vec();
        plain.extend_from_slice(&payload);
        let mut expected = Vec::new();
        for (seq, chunk) in plain.chunks(MAX_CHUNK_PLAIN).enumerate() {
            let mut msg = vec![0u8; chunk.len() + TAG_LEN];
            assert_eq!(snow.write_message(seq as u64, chunk, &mut msg).unwrap(), msg.len());
            expected.extend_from_slice(&(msg.len() as u16).to_be_bytes());
            expected.extend_from_slice(&msg);
        }
        // The responder's receiving key is the initiator's sending key, the split's first.
        let sender = LinkKeys(Arc::new(Directions {
            send: ChunkCipher::new(&first).unwrap(),
            recv: ChunkCipher::new(&[0; 32]).unwrap(),
        }));
        let wire = seal_frames(&mut Sealing::new(sender), std::slice::from_ref(&payload));
        assert_eq!(wire, expected);
        let f = read_frame_on(Some(&mut Opening::new(ours)), &wire[..], usize::MAX).unwrap();
        assert_eq!(f.payload, payload);
    }

    /// The chunks of `plain`, cut at `cuts`, sealed under `s`.
    fn chunked(s: &mut Sealing, plain: &[u8], cuts: &[usize]) -> Vec<u8> {
        let mut wire = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain([plain.len()].iter()) {
            wire.extend_from_slice(&s.chunk(&plain[from..to]));
            from = to;
        }
        wire
    }

    #[test]
    fn a_split_header_a_chunk_past_its_frame_and_uneven_chunks_are_refused() {
        let frame = |p: &[u8]| {
            let mut plain = FrameHeader::sealed(HEAD.0, HEAD.1, HEAD.2, p.len()).to_bytes().to_vec();
            plain.extend_from_slice(p);
            plain
        };
        let read = |wire: &[u8], keys: &LinkKeys| {
            read_frame_on(Some(&mut Opening::new(keys.clone())), wire, 1 << 20)
        };
        let refused = |wire: Vec<u8>, keys: &LinkKeys| match read(&wire, keys) {
            Err(ReadFrameError::Io(e)) => seal_error(&e).cloned(),
            other => panic!("{other:?}"),
        };
        let (a, b) = LinkKeys::in_memory_pair().unwrap();
        let sealed = |plain: &[u8], cuts: &[usize]| chunked(&mut Sealing::new(a.clone()), plain, cuts);
        assert_eq!(refused(sealed(&frame(b"abc"), &[10]), &b), Some(SealError::SplitHeader { chunk: 0 }));
        let two = [frame(b"abc"), frame(b"de")].concat();
        assert_eq!(refused(sealed(&two, &[]), &b), Some(SealError::Straddles { chunk: 0 }));
        // A chunk shorter than a tag (only a key holder can send one) is refused.
        assert_eq!(refused(vec![0, 5, 1, 2, 3, 4, 5], &b), Some(SealError::ShortChunk { chunk: 0, len: 5 }));
        // Every chunk but the last is full, so a frame's header fixes where each chunk ends.
        let cut = frame(b"abc").len() - 1;
        let uneven = SealError::Length { chunk: 0, len: cut + TAG_LEN, expected: cut + 1 + TAG_LEN };
        assert_eq!(refused(sealed(&two, &[cut]), &b), Some(uneven));
        let long = frame(&vec![7u8; MAX_CHUNK_PLAIN + 10]);
        let whole = sealed(&long, &[MAX_CHUNK_PLAIN]);
        assert_eq!(read(&whole, &b).unwrap().payload, vec![7u8; MAX_CHUNK_PLAIN + 10]);
        let uneven = SealError::Length { chunk: 1, len: 5 + TAG_LEN, expected: 38 + TAG_LEN };
        assert_eq!(refused(sealed(&long, &[MAX_CHUNK_PLAIN, MAX_CHUNK_PLAIN + 5]), &b), Some(uneven));
        assert!(matches!(
            read(&whole[..whole.len() - 1], &b),
            Err(ReadFrameError::Frame(crate::frame::FrameError::Truncated { .. }))
        ));
    }

    #[test]
    fn a_sealed_frame_carries_no_payload_checksum() {
        let (a, b) = LinkKeys::in_memory_pair().unwrap();
        let mut s = Sealing::new(a);
        let wire = seal_frames(&mut s, &[b"abc".to_vec()]);
        let mut o = Opening::new(b);
        assert_eq!(read_frame_on(Some(&mut o), &wire[..], 100).unwrap().payload, b"abc");
        // A plain-text frame's header (with its CRC32C) inside a sealed chunk is refused.
        let mut plain = FrameHeader::for_parts(HEAD.0, HEAD.1, HEAD.2, &[b"abc"]).to_bytes().to_vec();
        plain.extend_from_slice(b"abc");
        let wire = s.chunk(&plain);
        assert!(matches!(
            read_frame_on(Some(&mut o), &wire[..], 100),
            Err(ReadFrameError::Frame(crate::frame::FrameError::PayloadChecksum { computed: 0, .. }))
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
                if let Err(e) = read_frame_on(Some(&mut o), &mut inner, 100) {
                    err = Some(e);
                    break;
                }
            }
            match err {
                Some(ReadFrameError::Io(e)) => seal_error(&e).cloned().ok_or(e.kind()),
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
