//! A sealed link between two peers that share a pre-shared key, outside the master/worker join:
//! the same Noise `XXpsk3` handshake ([`super::NOISE_PARAMS`]) over any byte stream, each of its
//! three messages sent as a big-endian `u16` length and the message. The caller binds what the
//! link is about (a protocol, the two ranks, a job) into the `prologue`, which both sides must
//! give alike: a link meant for another pair or job fails its handshake.

use std::io::{Read, Write};

use super::{LinkKeys, MAX_NOISE_MESSAGE, NOISE_PARAMS, SealError};

fn fail(e: impl std::fmt::Display) -> SealError {
    SealError::Handshake(e.to_string())
}

fn write_message<S: Write>(stream: &mut S, message: &[u8]) -> Result<(), SealError> {
    let len = u16::try_from(message.len()).map_err(fail)?;
    stream.write_all(&len.to_be_bytes()).map_err(fail)?;
    stream.write_all(message).map_err(fail)?;
    stream.flush().map_err(fail)
}

fn read_message<S: Read>(stream: &mut S, buf: &mut [u8]) -> Result<usize, SealError> {
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).map_err(|e| fail(format!("the peer sent no handshake ({e})")))?;
    let len = usize::from(u16::from_be_bytes(len));
    let slot = buf.get_mut(..len).ok_or_else(|| fail("a handshake message too long"))?;
    stream.read_exact(slot).map_err(fail)?;
    Ok(len)
}

/// Runs one side's handshake over `stream` under `psk`, binding `prologue`; returns the link's
/// keys. A peer with another key or prologue fails the handshake (at the responder's last read:
/// the initiator learns it when the responder, which does not answer, closes the stream).
pub fn handshake_pair<S: Read + Write>(
    stream: &mut S,
    initiator: bool,
    psk: &[u8; 32],
    prologue: &[u8],
) -> Result<LinkKeys, SealError> {
    let params: snow::params::NoiseParams = NOISE_PARAMS.parse().map_err(fail)?;
    let b = snow::Builder::new(params);
    let key = b.generate_keypair().map_err(fail)?;
    let b = b.local_private_key(&key.private).map_err(fail)?.psk(3, psk).map_err(fail)?;
    let b = b.prologue(prologue).map_err(fail)?;
    let mut h = if initiator { b.build_initiator() } else { b.build_responder() }.map_err(fail)?;
    let (mut msg, mut out) = (vec![0u8; MAX_NOISE_MESSAGE], vec![0u8; MAX_NOISE_MESSAGE]);
    for step in 0..3 {
        if (step % 2 == 0) == initiator {
            let n = h.write_message(&[], &mut msg).map_err(fail)?;
            write_message(stream, &msg[..n])?;
        } else {
            let n = read_message(stream, &mut msg)?;
            h.read_message(&msg[..n], &mut out).map_err(|_| {
                SealError::Handshake("the peer's handshake did not verify (another key or job?)".into())
            })?;
        }
    }
    LinkKeys::from_handshake(h)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::os::unix::net::UnixStream;

    use super::*;
    use crate::frame::FrameKind;
    use crate::seal::{Opening, Sealing, read_frame_on, write_frame_on};

    fn pair(
        a: ([u8; 32], &'static [u8]),
        b: ([u8; 32], &'static [u8]),
    ) -> (Result<LinkKeys, SealError>, Result<LinkKeys, SealError>) {
        let (mut x, mut y) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || handshake_pair(&mut y, false, &b.0, b.1).map(|k| (k, y)));
        let left = handshake_pair(&mut x, true, &a.0, a.1);
        let right = t.join().unwrap();
        match (left, right) {
            (Ok(k1), Ok((k2, mut y))) => {
                let mut s = Sealing::new(k1);
                write_frame_on(Some(&mut s), &mut x, (FrameKind::Message, 1, 0), &[b"sealed"]).unwrap();
                let f = read_frame_on(Some(&mut Opening::new(k2.clone())), &mut y, 100).unwrap();
                assert_eq!(f.payload, b"sealed");
                (Ok(LinkKeys::in_memory_pair().unwrap().0), Ok(k2))
            }
            (l, r) => (l, r.map(|(k, _)| k)),
        }
    }

    #[test]
    fn the_same_key_and_prologue_make_a_sealed_link_and_anything_else_fails() {
        let (l, r) = pair(([7; 32], b"job 1: 0-1"), ([7; 32], b"job 1: 0-1"));
        assert!(l.is_ok() && r.is_ok());
        let (_, r) = pair(([7; 32], b"job 1: 0-1"), ([8; 32], b"job 1: 0-1"));
        assert!(matches!(r, Err(SealError::Handshake(m)) if m.contains("did not verify")));
        let (_, r) = pair(([7; 32], b"job 1: 0-1"), ([7; 32], b"job 2: 0-1"));
        assert!(r.is_err(), "another prologue");
    }
}
