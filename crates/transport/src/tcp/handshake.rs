//! The payloads of the setup frames (Hello, Challenge, Proof, Welcome, PeerHello). Every
//! parser is bounded and returns `None` on malformed bytes.

use super::auth::{NONCE_LEN, Nonce, PROOF_LEN};
use crate::BroadcastMethod;

/// The longest address accepted during setup.
pub(crate) const MAX_FIELD: usize = 1024;

/// The longest payload a side reads before the other has proved it knows the token: a proof
/// and an address.
pub(crate) const MAX_UNAUTHENTICATED_PAYLOAD: usize = PROOF_LEN + 2 + 256;

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

/// Hello, PeerHello and Challenge: a nonce.
pub(crate) fn nonce_payload(nonce: &Nonce) -> Vec<u8> {
    nonce.to_vec()
}

/// Parses [`nonce_payload`].
pub(crate) fn parse_nonce(bytes: &[u8]) -> Option<Nonce> {
    let mut f = Fields { bytes };
    let mut n = [0u8; NONCE_LEN];
    n.copy_from_slice(f.take(NONCE_LEN)?);
    f.end()?;
    Some(n)
}

/// Proof: the MAC, then an address (the joining worker's listening address; empty otherwise).
pub(crate) fn proof_payload(proof: &[u8; PROOF_LEN], listen: &str) -> Vec<u8> {
    let mut out = proof.to_vec();
    put_str(&mut out, listen);
    out
}

/// Parses [`proof_payload`]: (MAC, address).
pub(crate) fn parse_proof(bytes: &[u8]) -> Option<([u8; PROOF_LEN], String)> {
    let mut f = Fields { bytes };
    let mut proof = [0u8; PROOF_LEN];
    proof.copy_from_slice(f.take(PROOF_LEN)?);
    let listen = f.str()?;
    f.end()?;
    Some((proof, listen))
}

/// What the master tells a worker it admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Welcome {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) method: BroadcastMethod,
    /// Which welcome this is: the master welcomes its workers again (generation + 1) when one
    /// of them leaves during the join; [`super::auth::LIVE_JOIN`] for a worker admitted while
    /// the cluster runs.
    pub(crate) generation: u32,
    /// The listening address of every rank (entry 0, the master's, is empty).
    pub(crate) addrs: Vec<String>,
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
        f.end()?;
        Some(Welcome { rank, size, method, generation, addrs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_reject_garbage() {
        let n = [7u8; NONCE_LEN];
        assert_eq!(parse_nonce(&nonce_payload(&n)), Some(n));
        assert_eq!(parse_nonce(&n[..31]), None);
        let p = [9u8; PROOF_LEN];
        assert_eq!(parse_proof(&proof_payload(&p, "127.0.0.1:9")), Some((p, "127.0.0.1:9".into())));
        assert!(proof_payload(&p, &"a".repeat(256)).len() <= MAX_UNAUTHENTICATED_PAYLOAD);
        let w = Welcome {
            rank: 2,
            size: 3,
            method: BroadcastMethod::Plain,
            generation: 7,
            addrs: vec![String::new(), "a".into(), "b".into()],
        };
        assert_eq!(Welcome::parse(&w.to_bytes()), Some(w.clone()));
        let bytes = w.to_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(Welcome::parse(&bytes[..cut]), None);
        }
        assert_eq!(parse_proof(&[0xff, 0xff, 1]), None);
    }
}
