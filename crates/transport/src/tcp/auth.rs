//! Mutual authentication over the shared token without sending it: challenge-response with
//! HMAC-SHA256 over fresh nonces from both sides.
//!
//! The side that connects (the initiator: a worker joining the master, or a worker connecting
//! to a lower-ranked peer) and the side that accepts (the responder) each contribute a 32-byte
//! nonce from the operating system's generator. The initiator proves first,
//! `HMAC(token, "initiator" | context | its nonce | the responder's nonce | payload)`; the
//! responder checks it and only then proves in turn with the label `"responder"`. The token
//! never crosses the wire, a proof is bound to both nonces (no replay) and to its role (no
//! reflection), and a side that fails its check learns nothing but "refused". What a proof does
//! reveal is a MAC an attacker may test guesses against offline, so the token should be
//! random (16 bytes or more of entropy), not a word.
//!
//! Tokens of any length work (HMAC hashes keys longer than its block); an empty token is
//! refused on both sides before anything is sent.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::TransportError;

/// Bytes in a nonce.
pub(crate) const NONCE_LEN: usize = 32;
/// Bytes in a proof (HMAC-SHA256).
pub(crate) const PROOF_LEN: usize = 32;

/// A nonce from the operating system's random generator.
pub(crate) type Nonce = [u8; NONCE_LEN];

/// Names the protocol and version inside every MAC, so proofs of another protocol never match.
const DOMAIN: &[u8] = b"ubershuffle-tcp-auth-v3";

/// Which side computes a proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The side that connected.
    Initiator,
    /// The side that accepted.
    Responder,
}

/// What both sides agree a handshake is about, bound into both proofs.
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
pub(crate) fn check_token(token: &str) -> Result<(), TransportError> {
    if token.is_empty() {
        return Err(TransportError::Setup(
            "the token is empty: give a shared secret (e.g. 32 random hex digits)".into(),
        ));
    }
    Ok(())
}

/// A fresh nonce.
pub(crate) fn nonce() -> Result<Nonce, TransportError> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::fill(&mut n)
        .map_err(|e| TransportError::Setup(format!("the operating system gave no random bytes: {e}")))?;
    Ok(n)
}

fn mac(
    token: &str,
    role: Role,
    context: Context,
    initiator: &Nonce,
    responder: &Nonce,
    payload: &[u8],
) -> Hmac<Sha256> {
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(token.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    m.update(DOMAIN);
    m.update(match role {
        Role::Initiator => b"initiator",
        Role::Responder => b"responder",
    });
    m.update(&context.bytes());
    m.update(initiator);
    m.update(responder);
    m.update(&(payload.len() as u64).to_le_bytes());
    m.update(payload);
    m
}

/// The proof `role` sends: a MAC under the token over both nonces, the context and `payload`.
pub(crate) fn prove(
    token: &str,
    role: Role,
    context: Context,
    initiator: &Nonce,
    responder: &Nonce,
    payload: &[u8],
) -> [u8; PROOF_LEN] {
    let mut out = [0u8; PROOF_LEN];
    out.copy_from_slice(&mac(token, role, context, initiator, responder, payload).finalize().into_bytes());
    out
}

/// Whether `proof` is `role`'s proof under `token` (compared in constant time).
pub(crate) fn check(
    token: &str,
    role: Role,
    context: Context,
    initiator: &Nonce,
    responder: &Nonce,
    payload: &[u8],
    proof: &[u8],
) -> bool {
    mac(token, role, context, initiator, responder, payload).verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_token_role_context_nonces_and_payload() {
        let (a, b) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let p = prove("k", Role::Initiator, Context::Join, &a, &b, b"x");
        assert!(check("k", Role::Initiator, Context::Join, &a, &b, b"x", &p));
        assert!(!check("K", Role::Initiator, Context::Join, &a, &b, b"x", &p));
        assert!(!check("k", Role::Responder, Context::Join, &a, &b, b"x", &p));
        assert!(!check(
            "k",
            Role::Initiator,
            Context::Peer { from: 2, to: 1, generation: 0 },
            &a,
            &b,
            b"x",
            &p
        ));
        let peer = |generation| Context::Peer { from: 2, to: 1, generation };
        let q = prove("k", Role::Initiator, peer(0), &a, &b, b"");
        assert!(check("k", Role::Initiator, peer(0), &a, &b, b"", &q));
        assert!(!check("k", Role::Initiator, peer(1), &a, &b, b"", &q));
        assert!(!check("k", Role::Initiator, Context::Join, &b, &a, b"x", &p));
        assert!(!check("k", Role::Initiator, Context::Join, &a, &b, b"y", &p));
        assert!(!check("k", Role::Initiator, Context::Join, &a, &b, b"x", &p[..31]));
        // Long tokens work, and differ from their prefixes.
        let long = "t".repeat(5000);
        let q = prove(&long, Role::Responder, Context::Join, &a, &b, b"");
        assert!(check(&long, Role::Responder, Context::Join, &a, &b, b"", &q));
        assert!(!check(&long[..1024], Role::Responder, Context::Join, &a, &b, b"", &q));
        assert!(check_token("").is_err() && check_token("s").is_ok());
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }
}
