//! Checking what a worker relays in a pseudo-broadcast's ring: the root sends each receiver,
//! over their own link, the SHA-256 digest of every piece ([`Digests`]); a receiver checks each
//! piece a ring peer hands it against its digest before keeping or forwarding it, so an
//! altered piece stops at the first honest receiver, which knows (from its authenticated link)
//! who handed it over and reports that rank.

use sha2::{Digest, Sha256};

/// Bytes of one digest.
pub(crate) const DIGEST: usize = 32;

/// The digests of a broadcast's pieces, in piece order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Digests(Vec<[u8; DIGEST]>);

impl Digests {
    /// The digests of `pieces`.
    pub(crate) fn of<'a>(pieces: impl Iterator<Item = &'a [u8]>) -> Digests {
        Digests(pieces.map(|p| Sha256::digest(p).into()).collect())
    }

    /// The byte form: the digests back to back.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        self.0.concat()
    }

    /// Parses the digests of `pieces` pieces; `None` unless exactly that many are there.
    pub(crate) fn from_bytes(bytes: &[u8], pieces: usize) -> Option<Digests> {
        if bytes.len() != pieces.checked_mul(DIGEST)? {
            return None;
        }
        let digests = bytes.chunks_exact(DIGEST).filter_map(|d| d.try_into().ok()).collect();
        Some(Digests(digests))
    }

    /// Whether `piece` is piece `index` as the root sent it.
    pub(crate) fn matches(&self, index: usize, piece: &[u8]) -> bool {
        self.0.get(index).is_some_and(|d| *d == <[u8; DIGEST]>::from(Sha256::digest(piece)))
    }
}

/// Test only: makes the rank on the calling thread misbehave in the collectives, so that tests
/// can check what the others do about it (the hostile harness of the runtime's tests). Never
/// enabled in a build anyone runs: the feature `insider-harness` exists for those tests.
#[cfg(feature = "insider-harness")]
pub mod insider {
    use std::cell::Cell;

    /// How the rank on this thread misbehaves.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Misbehaviour {
        /// It does not.
        #[default]
        None,
        /// It flips the first byte of every piece it forwards in a pseudo-broadcast's ring.
        FlipRelayed,
        /// It reports to the root, at every broadcast, that this rank failed.
        ReportFailed(usize),
        /// Before each acknowledgement it sends the root this many acknowledgements of the
        /// broadcast before (messages of a finished broadcast, read and passed over).
        FloodStale(usize),
        /// It reports, at every broadcast, that its ring predecessor's first piece was off the
        /// root's digest (whether it was).
        AccuseRelayer,
    }

    thread_local! {
        static NOW: Cell<Misbehaviour> = const { Cell::new(Misbehaviour::None) };
    }

    /// Makes the rank on this thread misbehave so from now on.
    pub fn set(m: Misbehaviour) {
        NOW.with(|c| c.set(m));
    }

    /// How the rank on this thread misbehaves.
    pub(crate) fn current() -> Misbehaviour {
        NOW.with(Cell::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_round_trip_and_catch_a_flipped_byte() {
        let pieces: [&[u8]; 3] = [b"abc", b"", b"defg"];
        let d = Digests::of(pieces.into_iter());
        assert_eq!(Digests::from_bytes(&d.to_bytes(), 3), Some(d.clone()));
        assert_eq!(Digests::from_bytes(&d.to_bytes(), 2), None);
        assert!(d.matches(2, b"defg") && d.matches(1, b""));
        assert!(!d.matches(2, b"dEfg") && !d.matches(3, b"defg"));
    }
}
