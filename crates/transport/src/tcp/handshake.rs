//! The payloads of the setup frames (the proof's address, Welcome). Every parser is bounded and
//! returns `None` on malformed bytes.

use super::noise::Psk;
use crate::BroadcastMethod;
use crate::seal::TAG_LEN;

/// The longest address accepted during setup.
pub(crate) const MAX_FIELD: usize = 1024;

/// The longest address a joining worker may send with its proof.
pub(crate) const MAX_LISTEN: usize = 256;

/// The longest payload a side reads before the other has proved it knows the token: the
/// initiator's last handshake message (its encrypted static key, then an encrypted address).
pub(crate) const MAX_UNAUTHENTICATED_PAYLOAD: usize = 32 + TAG_LEN + 2 + MAX_LISTEN + TAG_LEN;

/// Appends a u16-length-prefixed string (callers keep strings under [`MAX_FIELD`]).
fn put_str(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(MAX_FIELD)];
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads fields off a payload, refusing to run past its end.
struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn str(&mut self) -> Option<String> {
        let len = self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)?;
        if len > MAX_FIELD {
            return None;
        }
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }

    fn end(self) -> Option<()> {
        self.bytes.is_empty().then_some(())
    }
}

/// The payload of the initiator's last handshake message: its listening address (a joining
/// worker's; empty otherwise).
pub(crate) fn listen_payload(listen: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, &listen[..listen.len().min(MAX_LISTEN)]);
    out
}

/// Parses [`listen_payload`].
pub(crate) fn parse_listen(bytes: &[u8]) -> Option<String> {
    let mut f = Fields { bytes };
    let listen = f.str()?;
    f.end()?;
    (listen.len() <= MAX_LISTEN).then_some(listen)
}

/// What the master tells a worker it admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Welcome {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) method: BroadcastMethod,
    /// Which welcome this is: the master welcomes its workers again (generation + 1) when one
    /// of them leaves during the join; [`super::noise::LIVE_JOIN`] for a worker admitted while
    /// the cluster runs.
    pub(crate) generation: u32,
    /// The listening address of every rank (entry 0, the master's, is empty).
    pub(crate) addrs: Vec<String>,
    /// Per rank (entries 0 and its own unused): the key of this worker's link to it in this
    /// generation (or, for a newcomer, in this admission), and the key the next worker admitted
    /// into that rank while running will prove ([`super::noise::live_key`]).
    pub(crate) keys: Vec<(Psk, Psk)>,
}

/// The largest cluster setup accepts.
pub(crate) const MAX_RANKS: usize = 4096;

impl Welcome {
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.rank.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.push(match self.method {
            BroadcastMethod::PseudoBroadcast => 0,
            BroadcastMethod::Plain => 1,
        });
        out.extend_from_slice(&self.generation.to_le_bytes());
        for a in &self.addrs {
            put_str(&mut out, a);
        }
        for (k, live) in &self.keys {
            out.extend_from_slice(k);
            out.extend_from_slice(live);
        }
        out
    }

    pub(crate) fn parse(bytes: &[u8]) -> Option<Welcome> {
        let mut f = Fields { bytes };
        let rank = f.u32()?;
        let size = f.u32()?;
        let method = match f.u8()? {
            0 => BroadcastMethod::PseudoBroadcast,
            1 => BroadcastMethod::Plain,
            _ => return None,
        };
        let generation = f.u32()?;
        if size as usize > MAX_RANKS || rank == 0 || rank >= size {
            return None;
        }
        let addrs = (0..size).map(|_| f.str()).collect::<Option<Vec<_>>>()?;
        let mut key = || -> Option<Psk> { f.take(32)?.try_into().ok() };
        let keys = (0..size).map(|_| Some((key()?, key()?))).collect::<Option<Vec<_>>>()?;
        f.end()?;
        Some(Welcome { rank, size, method, generation, addrs, keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_reject_garbage() {
        assert_eq!(parse_listen(&listen_payload("127.0.0.1:9")), Some("127.0.0.1:9".into()));
        assert_eq!(parse_listen(&[0xff, 0xff, 1]), None);
        assert_eq!(listen_payload(&"a".repeat(999)).len(), 2 + MAX_LISTEN);
        let w = Welcome {
            rank: 2,
            size: 3,
            method: BroadcastMethod::Plain,
            generation: 7,
            addrs: vec![String::new(), "a".into(), "b".into()],
            keys: vec![([1; 32], [2; 32]), ([3; 32], [4; 32]), ([5; 32], [6; 32])],
        };
        assert_eq!(Welcome::parse(&w.to_bytes()), Some(w.clone()));
        let bytes = w.to_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(Welcome::parse(&bytes[..cut]), None);
        }
    }
}
