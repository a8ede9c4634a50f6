//! Mutual authentication and key exchange: a Noise `XXpsk3` handshake ([`NOISE_PARAMS`]) whose
//! pre-shared key is the cluster token's hash (a worker joining the master) or a pair key the
//! master issued to both workers (a link between two workers), and whose prologue binds the
//! protocol version, whether the link is sealed, and the link's [`Context`] (who connects to
//! whom in which welcome).
//!
//! The connecting side (the initiator) and the accepting side (the responder) each send a fresh
//! ephemeral X25519 key; the pre-shared key enters at the initiator's second message, after the
//! ephemeral Diffie-Hellman, so a recorded handshake gives no one a way to test token guesses
//! offline, and recorded traffic stays closed even to a token leaked later (forward secrecy).
//! The responder answers with a frame sealed under the new keys, which proves that it knows the
//! key in turn. The static keys of the XX pattern are fresh per handshake: identity comes from
//! the pre-shared key alone. What an active impostor can still learn: docs/threat-model.md.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use snow::HandshakeState;

use crate::seal::{LinkKeys, NOISE_PARAMS, SealError};
use crate::{Secret, TransportError};

/// A 32-byte pre-shared key.
pub(crate) type Psk = [u8; 32];

/// The master's secret of one run, from which it derives every pair key; never shown.
#[derive(Clone, Copy)]
pub(crate) struct RunSecret(pub(crate) Psk);

impl std::fmt::Debug for RunSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunSecret(<redacted>)")
    }
}

/// Names the protocol and its version in every prologue and key derivation.
const DOMAIN: &[u8] = b"ubershuffle-tcp-noise-v1";

/// What both sides agree a handshake is about, bound into its prologue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Context {
    /// A worker joining the master.
    Join,
    /// Worker `from` connecting to worker `to` while building the mesh of one welcome.
    Peer {
        /// The connecting rank.
        from: u32,
        /// The accepting rank.
        to: u32,
        /// The welcome's generation (the master welcomes again after a worker left during the
        /// join; a link of an older welcome must not pass for one of the newer), or
        /// [`LIVE_JOIN`] for a worker admitted while the cluster runs.
        generation: u32,
    },
}

/// The generation of the peer handshakes of a worker admitted while the cluster runs.
pub(crate) const LIVE_JOIN: u32 = u32::MAX;

impl Context {
    fn bytes(self) -> [u8; 13] {
        let mut out = [0u8; 13];
        if let Context::Peer { from, to, generation } = self {
            out[0] = 1;
            out[1..5].copy_from_slice(&from.to_le_bytes());
            out[5..9].copy_from_slice(&to.to_le_bytes());
            out[9..13].copy_from_slice(&generation.to_le_bytes());
        }
        out
    }
}

/// Refuses tokens the handshake cannot use (empty).
pub(crate) fn check_token(token: &Secret) -> Result<(), TransportError> {
    if token.is_empty() {
        return Err(TransportError::Setup(
            "the token is empty: give a shared secret (`ubershuffle token` prints a fresh one)".into(),
        ));
    }
    Ok(())
}

/// 32 bytes from the operating system's generator.
pub(crate) fn random32() -> Result<Psk, TransportError> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n)
        .map_err(|e| TransportError::Setup(format!("the operating system gave no random bytes: {e}")))?;
    Ok(n)
}

/// The pre-shared key of the links to the master: a hash of the token.
pub(crate) fn token_psk(token: &Secret) -> Psk {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    h.update(b"token");
    h.update(token.expose().as_bytes());
    h.finalize().into()
}

/// The key of the link between workers `a` and `b` in the welcome of `generation`, derived from
/// the master's secret of this run: the master sends each worker only the keys of its own
/// links, so a worker can speak as no other rank to a third.
pub(crate) fn pair_key(secret: &Psk, a: u32, b: u32, generation: u32) -> Psk {
    derive(secret, b"pair", [a.min(b), a.max(b), generation])
}

/// HMAC-SHA256 under the run's `secret` of the protocol's name, `label` and `words`.
fn derive(secret: &Psk, label: &[u8], words: [u32; 3]) -> Psk {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    m.update(DOMAIN);
    m.update(label);
    words.iter().for_each(|w| m.update(&w.to_le_bytes()));
    m.finalize().into_bytes().into()
}

/// The key the `admission`-th worker admitted into rank `newcomer` while the cluster runs
/// proves on its link to worker `other`. Fresh per admission (a worker that once held the rank
/// knows none of the later keys), and one-sided (the newcomer's rank comes first), so it never
/// equals a key of the same pair with the roles swapped.
pub(crate) fn live_key(secret: &Psk, newcomer: u32, other: u32, admission: u32) -> Psk {
    derive(secret, b"live", [newcomer, other, admission])
}

/// The keys a welcome of `generation` gives worker `rank` of `size` ranks, each rank `p` having
/// been admitted while running `admissions[p]` times (this welcome's own admission counted):
/// its link to `p` now (in that generation, or as the newcomer of [`LIVE_JOIN`]), and the key
/// the next worker admitted into `p` will prove to it.
pub(crate) fn welcome_keys(secret: &Psk, rank: u32, generation: u32, admissions: &[u32]) -> Vec<(Psk, Psk)> {
    let own = admissions.get(rank as usize).copied().unwrap_or(0);
    (0..admissions.len() as u32)
        .map(|p| {
            let now = match generation {
                LIVE_JOIN => live_key(secret, rank, p, own),
                g => pair_key(secret, rank, p, g),
            };
            let next = admissions.get(p as usize).map_or(1, |a| a.saturating_add(1));
            (now, live_key(secret, p, rank, next))
        })
        .collect()
}

/// Starts one side's handshake under `psk` for `context`, sealed or not.
pub(crate) fn start(
    initiator: bool,
    psk: &Psk,
    context: Context,
    sealed: bool,
) -> Result<HandshakeState, TransportError> {
    let fail = |e: snow::Error| TransportError::Setup(format!("cannot start the key exchange: {e}"));
    let params: snow::params::NoiseParams = NOISE_PARAMS.parse().map_err(fail)?;
    let mut prologue = DOMAIN.to_vec();
    prologue.push(u8::from(sealed));
    prologue.extend_from_slice(&context.bytes());
    let b = snow::Builder::new(params);
    let key = b.generate_keypair().map_err(fail)?;
    let b = b.local_private_key(&key.private).map_err(fail)?.psk(3, psk).map_err(fail)?;
    let b = b.prologue(&prologue).map_err(fail)?;
    if initiator { b.build_initiator() } else { b.build_responder() }.map_err(fail)
}

/// Writes the next handshake message carrying `payload`.
pub(crate) fn write(h: &mut HandshakeState, payload: &[u8]) -> Result<Vec<u8>, TransportError> {
    let mut out = vec![0u8; crate::seal::MAX_NOISE_MESSAGE];
    let n = h
        .write_message(payload, &mut out)
        .map_err(|e| TransportError::Setup(format!("cannot write a key-exchange message: {e}")))?;
    out.truncate(n);
    Ok(out)
}

/// Reads the next handshake message; `None` when it does not verify (another key, a forgery).
pub(crate) fn read(h: &mut HandshakeState, message: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0u8; message.len()];
    let n = h.read_message(message, &mut out).ok()?;
    out.truncate(n);
    Some(out)
}

/// The link keys of a finished handshake.
pub(crate) fn finish(h: HandshakeState) -> Result<LinkKeys, TransportError> {
    LinkKeys::from_handshake(h).map_err(|e: SealError| TransportError::Setup(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(a: (&Psk, Context, bool), b: (&Psk, Context, bool)) -> bool {
        let mut i = start(true, a.0, a.1, a.2).unwrap();
        let mut r = start(false, b.0, b.1, b.2).unwrap();
        let m1 = write(&mut i, &[]).unwrap();
        let Some(_) = read(&mut r, &m1) else { return false };
        let m2 = write(&mut r, &[]).unwrap();
        let Some(_) = read(&mut i, &m2) else { return false };
        let m3 = write(&mut i, b"listen").unwrap();
        read(&mut r, &m3).is_some_and(|p| p == b"listen")
    }

    #[test]
    fn handshakes_bind_key_context_and_mode() {
        let k = token_psk(&Secret::new("k"));
        let peer = |generation| Context::Peer { from: 2, to: 1, generation };
        assert!(run((&k, Context::Join, true), (&k, Context::Join, true)));
        assert!(!run((&token_psk(&Secret::new("K")), Context::Join, true), (&k, Context::Join, true)));
        assert!(!run((&k, Context::Join, true), (&k, peer(0), true)));
        assert!(!run((&k, peer(1), true), (&k, peer(0), true)));
        assert!(!run((&k, Context::Join, false), (&k, Context::Join, true)));
        let s = [7u8; 32];
        assert_eq!(pair_key(&s, 1, 2, 0), pair_key(&s, 2, 1, 0));
        assert_ne!(pair_key(&s, 1, 2, 0), pair_key(&s, 1, 3, 0));
        assert_ne!(pair_key(&s, 1, 2, 0), pair_key(&s, 1, 2, 1));
        assert_ne!(live_key(&s, 1, 2, 1), live_key(&s, 2, 1, 1));
        assert_ne!(live_key(&s, 1, 2, 1), live_key(&s, 1, 2, 2));
        // A newcomer's key to a present worker is the one that worker was given for it.
        let (mut admissions, present) = (vec![0, 0, 0, 0], welcome_keys(&s, 3, 0, &[0; 4]));
        admissions[2] = 1;
        assert_eq!(welcome_keys(&s, 2, LIVE_JOIN, &admissions)[3].0, present[2].1);
        assert!(check_token(&Secret::new("")).is_err() && check_token(&Secret::new("s")).is_ok());
    }
}
