//! The engine's messages and their byte forms. A message is one frame's payload: a kind byte,
//! then its fields, little-endian. Decoding checks every length against what is left before it
//! reads or allocates, so a peer's bytes give a [`WireError`], never a panic, and text fields
//! are bounded. Frames themselves (length, type, sealing) are the driver's.

use ubershuffle_core::wire::{ByteReader, WireError, push_bytes, push_u32, push_u32_list, push_u64};

/// The protocol's version: ranks of different versions refuse each other at start.
pub const VERSION: u32 = 2;
/// The most settings a rank may name at start.
pub const MAX_SETTINGS: usize = 64;
/// The most bytes of one text field (a setting's name or value, a reason).
pub const MAX_TEXT: usize = 4096;

/// Why bytes are not a message.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Its fields do not fit their layout.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// Its kind byte names no message.
    #[error("a message of unknown kind {0}")]
    UnknownKind(u8),
    /// A text field or a count is past its bound.
    #[error("a message with {0} past its bound")]
    TooLarge(&'static str),
}

/// The kinds of message.
mod kind {
    pub const HELLO: u8 = 1;
    pub const CONTENT: u8 = 2;
    pub const INDEX: u8 = 3;
    pub const BEAT: u8 = 4;
    pub const HOLDINGS: u8 = 5;
    pub const CREDIT: u8 = 6;
    pub const DATA: u8 = 7;
    pub const CLOSE: u8 = 8;
    pub const GIVE_UP: u8 = 9;
    pub const WANT: u8 = 10;
    pub const PART: u8 = 11;
}

/// What a data set looks like from its index: enough to tell two data sets apart without
/// reading a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexPrint {
    /// Records.
    pub records: u64,
    /// Bytes of all records.
    pub bytes: u64,
    /// A digest of the offsets.
    pub digest: u64,
}

/// A rank's first message to every other: who it is and what it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// [`VERSION`].
    pub version: u32,
    /// The ranks of the plane.
    pub world: u32,
    /// The sender.
    pub rank: u32,
    /// The settings every rank must share, by name, each value as the caller shows it.
    pub settings: Vec<(String, String)>,
    /// The data set's index, when this rank has it.
    pub index: Option<IndexPrint>,
    /// Whether this rank reads records from a source.
    pub reads_source: bool,
    /// Why this rank's record store could not be made (empty: it was).
    pub store_error: String,
}

/// One message of the engine's protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// The start: see [`Hello`].
    Hello(Hello),
    /// A digest of a sample of the records' bytes (sent when two ranks or more read sources).
    Content {
        /// The digest.
        digest: u64,
    },
    /// The data set's offsets, from a rank that has them to one that does not (store mode).
    Index {
        /// `records + 1` offsets.
        offsets: Vec<u64>,
    },
    /// Nothing to say but that the sender is alive.
    Beat,
    /// What the sender holds as it catches up to `epoch`.
    Holdings {
        /// The epoch caught up to.
        epoch: u64,
        /// The sender's chain digest at that epoch.
        digest: u64,
        /// The records it holds, sorted.
        ids: Vec<u32>,
    },
    /// The receiver lets the sender send its stream of `epoch`'s delivery up to byte `upto`.
    Credit {
        /// The delivery's epoch.
        epoch: u64,
        /// The receiver's chain digest where the delivery starts.
        digest: u64,
        /// Bytes of the stream the sender may have sent in all.
        upto: u64,
    },
    /// Bytes of the sender's stream of `epoch`'s delivery to the receiver, from `offset`.
    Data {
        /// The delivery's epoch.
        epoch: u64,
        /// Where in the stream these bytes start.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// A training rank asks the store for `epoch` (store mode).
    Want {
        /// The epoch asked for.
        epoch: u64,
        /// The asking rank's chain digest: at the epoch before (a step), or at `epoch` (a
        /// catch-up).
        digest: u64,
        /// Whether this is a catch-up (from what the rank holds) rather than a step.
        catch_up: bool,
        /// A catch-up's holdings (sorted).
        held: Vec<u32>,
        /// The first training rank's sampler state, for a catch-up (empty otherwise).
        state: Vec<u8>,
    },
    /// The store's answer: how `epoch`'s records come (store mode).
    Part {
        /// The epoch.
        epoch: u64,
        /// Coded packets (the receiver's part of the plan and its routes follow), or records
        /// sent whole (nothing follows).
        coded: bool,
        /// The part.
        bytes: Vec<u8>,
    },
    /// The sender closed its plane, its caller having taken epochs up to `taken` (`u64::MAX`:
    /// none; a store's: `u64::MAX`).
    Close {
        /// The last epoch the sender's caller took.
        taken: u64,
    },
    /// The sender's plane failed; it says why, and stops.
    GiveUp {
        /// What kind of failure.
        cause: Cause,
        /// One bounded line.
        reason: String,
    },
}

/// What kind of failure a [`Message::GiveUp`] reports: every rank fails with the same kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The sender's plane failed (a peer died, broke the protocol, its source failed).
    Failure,
    /// The ranks were given different settings or data sets: the caller's mistake.
    Mismatch,
    /// A rank's record store could not be made.
    Store,
}

impl Cause {
    fn byte(self) -> u8 {
        match self {
            Cause::Failure => 0,
            Cause::Mismatch => 1,
            Cause::Store => 2,
        }
    }

    fn from_byte(b: u8) -> Cause {
        match b {
            1 => Cause::Mismatch,
            2 => Cause::Store,
            _ => Cause::Failure,
        }
    }
}

/// Bytes of a [`Message::Data`]'s head (kind, epoch, offset).
pub const DATA_HEAD: usize = 1 + 8 + 8;

/// The head of a [`Message::Data`], to which the caller appends the bytes.
pub fn data_head(out: &mut Vec<u8>, epoch: u64, offset: u64) {
    out.push(kind::DATA);
    push_u64(out, epoch);
    push_u64(out, offset);
}

fn push_text(out: &mut Vec<u8>, text: &str) {
    let cut = text.len().min(MAX_TEXT);
    // At a character's boundary.
    let cut = (0..=cut).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    push_bytes(out, &text.as_bytes()[..cut]);
}

fn text(r: &mut ByteReader<'_>) -> Result<String, MessageError> {
    let bytes = r.bytes()?;
    if bytes.len() > MAX_TEXT {
        return Err(MessageError::TooLarge("a text field"));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

impl Message<'_> {
    /// The byte form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Message::Hello(h) => {
                out.push(kind::HELLO);
                push_u32(&mut out, h.version);
                push_u32(&mut out, h.world);
                push_u32(&mut out, h.rank);
                push_u32(&mut out, h.settings.len().min(MAX_SETTINGS) as u32);
                for (name, value) in h.settings.iter().take(MAX_SETTINGS) {
                    push_text(&mut out, name);
                    push_text(&mut out, value);
                }
                match h.index {
                    Some(p) => {
                        out.push(1);
                        push_u64(&mut out, p.records);
                        push_u64(&mut out, p.bytes);
                        push_u64(&mut out, p.digest);
                    }
                    None => out.push(0),
                }
                out.push(u8::from(h.reads_source));
                push_text(&mut out, &h.store_error);
            }
            Message::Content { digest } => {
                out.push(kind::CONTENT);
                push_u64(&mut out, *digest);
            }
            Message::Index { offsets } => {
                out.push(kind::INDEX);
                push_u64(&mut out, offsets.len() as u64);
                offsets.iter().for_each(|&o| push_u64(&mut out, o));
            }
            Message::Beat => out.push(kind::BEAT),
            Message::Holdings { epoch, digest, ids } => {
                out.push(kind::HOLDINGS);
                push_u64(&mut out, *epoch);
                push_u64(&mut out, *digest);
                push_u32_list(&mut out, ids);
            }
            Message::Credit { epoch, digest, upto } => {
                out.push(kind::CREDIT);
                push_u64(&mut out, *epoch);
                push_u64(&mut out, *digest);
                push_u64(&mut out, *upto);
            }
            Message::Data { epoch, offset, bytes } => {
                out.reserve(DATA_HEAD + bytes.len());
                data_head(&mut out, *epoch, *offset);
                out.extend_from_slice(bytes);
            }
            Message::Want { epoch, digest, catch_up, held, state } => {
                out.push(kind::WANT);
                push_u64(&mut out, *epoch);
                push_u64(&mut out, *digest);
                out.push(u8::from(*catch_up));
                push_u32_list(&mut out, held);
                push_u64(&mut out, state.len() as u64);
                out.extend_from_slice(state);
            }
            Message::Part { epoch, coded, bytes } => {
                out.push(kind::PART);
                push_u64(&mut out, *epoch);
                out.push(u8::from(*coded));
                push_u64(&mut out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
            Message::Close { taken } => {
                out.push(kind::CLOSE);
                push_u64(&mut out, *taken);
            }
            Message::GiveUp { cause, reason } => {
                out.push(kind::GIVE_UP);
                out.push(cause.byte());
                push_text(&mut out, reason);
            }
        }
        out
    }

    /// Parses a message, borrowing a [`Message::Data`]'s bytes from `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Message<'_>, MessageError> {
        let mut r = ByteReader::new(bytes, "a message of the data plane");
        let message = match r.take(1)?[0] {
            kind::HELLO => {
                let (version, world, rank) = (r.u32()?, r.u32()?, r.u32()?);
                let count = r.u32()? as usize;
                if count > MAX_SETTINGS {
                    return Err(MessageError::TooLarge("its count of settings"));
                }
                let mut settings = Vec::with_capacity(count);
                for _ in 0..count {
                    settings.push((text(&mut r)?, text(&mut r)?));
                }
                let index = match r.take(1)?[0] {
                    0 => None,
                    _ => Some(IndexPrint { records: r.u64()?, bytes: r.u64()?, digest: r.u64()? }),
                };
                let reads_source = r.take(1)?[0] != 0;
                let store_error = text(&mut r)?;
                Message::Hello(Hello { version, world, rank, settings, index, reads_source, store_error })
            }
            kind::CONTENT => Message::Content { digest: r.u64()? },
            kind::INDEX => {
                let count = r.u64()? as usize;
                let raw = r.take(count.saturating_mul(8))?;
                let offsets = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
                Message::Index { offsets: offsets.collect() }
            }
            kind::BEAT => Message::Beat,
            kind::HOLDINGS => Message::Holdings { epoch: r.u64()?, digest: r.u64()?, ids: r.u32_list()? },
            kind::CREDIT => Message::Credit { epoch: r.u64()?, digest: r.u64()?, upto: r.u64()? },
            kind::DATA => {
                let (epoch, offset) = (r.u64()?, r.u64()?);
                let rest = r.remaining();
                Message::Data { epoch, offset, bytes: r.take(rest)? }
            }
            kind::WANT => {
                let (epoch, digest, catch_up) = (r.u64()?, r.u64()?, r.take(1)?[0] != 0);
                let held = r.u32_list()?;
                let len = r.u64()? as usize;
                Message::Want { epoch, digest, catch_up, held, state: r.take(len)?.to_vec() }
            }
            kind::PART => {
                let (epoch, coded) = (r.u64()?, r.take(1)?[0] != 0);
                let len = r.u64()? as usize;
                Message::Part { epoch, coded, bytes: r.take(len)?.to_vec() }
            }
            kind::CLOSE => Message::Close { taken: r.u64()? },
            kind::GIVE_UP => {
                Message::GiveUp { cause: Cause::from_byte(r.take(1)?[0]), reason: text(&mut r)? }
            }
            other => return Err(MessageError::UnknownKind(other)),
        };
        r.finish()?;
        Ok(message)
    }

    /// What kind of message this is, in words (for errors).
    pub fn name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "a hello",
            Message::Content { .. } => "a content digest",
            Message::Index { .. } => "an index",
            Message::Beat => "a heartbeat",
            Message::Holdings { .. } => "its holdings",
            Message::Credit { .. } => "a credit",
            Message::Data { .. } => "records",
            Message::Want { .. } => "a request",
            Message::Part { .. } => "its part of a delivery",
            Message::Close { .. } => "a close",
            Message::GiveUp { .. } => "a give-up",
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn every_kind() -> Vec<Message<'static>> {
        vec![
            Message::Hello(Hello {
                version: VERSION,
                world: 4,
                rank: 2,
                settings: vec![("seed".into(), "3".into()), ("policy".into(), "'global'".into())],
                index: Some(IndexPrint { records: 10, bytes: 1000, digest: 77 }),
                reads_source: true,
                store_error: String::new(),
            }),
            Message::Content { digest: 5 },
            Message::Index { offsets: vec![0, 3, 9] },
            Message::Beat,
            Message::Holdings { epoch: 3, digest: 9, ids: vec![1, 5, 8] },
            Message::Credit { epoch: 4, digest: 1, upto: 1 << 40 },
            Message::Data { epoch: 4, offset: 17, bytes: b"records" },
            Message::Want { epoch: 2, digest: 5, catch_up: true, held: vec![3, 4], state: b"{}".to_vec() },
            Message::Part { epoch: 2, coded: true, bytes: vec![1, 2, 3] },
            Message::Close { taken: 7 },
            Message::GiveUp { cause: Cause::Mismatch, reason: "rank 3 has not been heard from".into() },
        ]
    }

    #[test]
    fn every_message_round_trips_and_every_cut_or_extension_is_an_error() {
        for m in every_kind() {
            let bytes = m.encode();
            assert_eq!(Message::decode(&bytes).unwrap(), m);
            for cut in 0..bytes.len() {
                // A data message's bytes run to the end: a cut within them is shorter data.
                if matches!(m, Message::Data { .. }) && cut >= DATA_HEAD {
                    continue;
                }
                assert!(Message::decode(&bytes[..cut]).is_err(), "{} cut at {cut}", m.name());
            }
            if !matches!(m, Message::Data { .. }) {
                assert!(Message::decode(&[bytes.clone(), vec![0]].concat()).is_err(), "{}", m.name());
            }
        }
        assert!(Message::decode(&[200]).is_err(), "an unknown kind");
    }

    #[test]
    fn text_is_bounded_both_ways() {
        let long = Message::GiveUp { cause: Cause::Failure, reason: "é".repeat(MAX_TEXT) };
        let Message::GiveUp { reason, .. } = Message::decode(&long.encode()).unwrap() else { panic!() };
        assert!(reason.len() <= MAX_TEXT && reason.chars().all(|c| c == 'é'));
        let mut hostile = vec![kind::GIVE_UP, 0];
        push_bytes(&mut hostile, &vec![b'x'; MAX_TEXT + 1]);
        assert!(Message::decode(&hostile).is_err());
        let mut many = vec![kind::HELLO];
        for v in [VERSION, 2, 0, u32::MAX] {
            push_u32(&mut many, v);
        }
        assert!(Message::decode(&many).is_err(), "a count of settings past the bound");
    }
}
