//! The payloads of the setup frames (Hello, Welcome, PeerHello) and the token check. Every
//! parser is bounded and returns `None` on malformed bytes.

use crate::BroadcastMethod;

/// The longest token or address accepted during setup.
pub(crate) const MAX_FIELD: usize = 1024;

/// Compares tokens in time independent of where they differ.
pub(crate) fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

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

/// Worker to master: token and the address the worker listens on for its peers.
pub(crate) fn hello(token: &str, listen: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, token);
    put_str(&mut out, listen);
    out
}

/// Parses [`hello`]: (token, listen address).
pub(crate) fn parse_hello(bytes: &[u8]) -> Option<(String, String)> {
    let mut f = Fields { bytes };
    let token = f.str()?;
    let listen = f.str()?;
    f.end()?;
    Some((token, listen))
}

/// What the master tells a worker it admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Welcome {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) method: BroadcastMethod,
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
        if size as usize > MAX_RANKS || rank == 0 || rank >= size {
            return None;
        }
        let addrs = (0..size).map(|_| f.str()).collect::<Option<Vec<_>>>()?;
        f.end()?;
        Some(Welcome { rank, size, method, addrs })
    }
}

/// Worker to worker: the token (the sender field of the frame carries the rank).
pub(crate) fn peer_hello(token: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_str(&mut out, token);
    out
}

/// Parses [`peer_hello`].
pub(crate) fn parse_peer_hello(bytes: &[u8]) -> Option<String> {
    let mut f = Fields { bytes };
    let token = f.str()?;
    f.end()?;
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_reject_garbage() {
        assert_eq!(parse_hello(&hello("t0k", "127.0.0.1:9")), Some(("t0k".into(), "127.0.0.1:9".into())));
        let w = Welcome {
            rank: 2,
            size: 3,
            method: BroadcastMethod::Plain,
            addrs: vec![String::new(), "a".into(), "b".into()],
        };
        assert_eq!(Welcome::parse(&w.to_bytes()), Some(w.clone()));
        let bytes = w.to_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(Welcome::parse(&bytes[..cut]), None);
        }
        assert_eq!(parse_peer_hello(&peer_hello("x")), Some("x".into()));
        assert_eq!(parse_hello(&[0xff, 0xff, 1]), None);
        assert!(same_token("abc", "abc") && !same_token("abc", "abd") && !same_token("abc", "ab"));
    }
}
