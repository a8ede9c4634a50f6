//! [`Conn`]: one TCP connection past its handshake, with the keys that seal its frames (unless
//! the cluster runs in plain text).

use std::net::TcpStream;

use crate::seal::{LinkKeys, Opening, Sealing};

/// A connection whose handshake succeeded: the socket, and each direction's sealing state
/// (`None` on an `--insecure-plaintext` cluster).
#[derive(Debug)]
pub(crate) struct Conn {
    /// The socket.
    pub(crate) stream: TcpStream,
    /// Sending and receiving keys and sequence numbers.
    pub(crate) seal: Option<(Sealing, Opening)>,
}

impl Conn {
    /// A connection whose frames are sealed under `keys` (opened for the first frame already
    /// read under them: the responder's answer to the handshake) when `sealed`.
    pub(crate) fn new(stream: TcpStream, keys: (Sealing, Opening), sealed: bool) -> Conn {
        Conn { stream, seal: sealed.then_some(keys) }
    }

    /// Both directions of fresh keys.
    pub(crate) fn directions(keys: LinkKeys) -> (Sealing, Opening) {
        (Sealing::new(keys.clone()), Opening::new(keys))
    }

    /// The receiving half's state, if sealed.
    pub(crate) fn opening(&mut self) -> Option<&mut Opening> {
        self.seal.as_mut().map(|(_, o)| o)
    }
}
