//! One direction's AEAD: AES-256-GCM under a key from the Noise handshake's split, with Noise's
//! nonce (four zero bytes, then the 64-bit sequence number big-endian) and no associated data.
//! A chunk sealed here is byte for byte the Noise transport message snow's `write_message`
//! makes (a test compares them); working in place spares the copies snow's API makes on each
//! side of the cipher.

use super::TAG_LEN;

/// The AES-256-GCM key of one direction, from `ring` (feature `ring-crypto`) or RustCrypto.
pub(crate) struct ChunkCipher {
    #[cfg(feature = "ring-crypto")]
    key: ring::aead::LessSafeKey,
    #[cfg(not(feature = "ring-crypto"))]
    key: aes_gcm::Aes256Gcm,
}

/// Noise's 96-bit nonce of sequence number `seq`.
fn nonce(seq: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&seq.to_be_bytes());
    n
}

impl ChunkCipher {
    /// The cipher of a 32-byte key.
    #[cfg(feature = "ring-crypto")]
    pub(crate) fn new(key: &[u8; 32]) -> Option<ChunkCipher> {
        let unbound = ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, key).ok()?;
        Some(ChunkCipher { key: ring::aead::LessSafeKey::new(unbound) })
    }

    /// The cipher of a 32-byte key.
    #[cfg(not(feature = "ring-crypto"))]
    pub(crate) fn new(key: &[u8; 32]) -> Option<ChunkCipher> {
        use aes_gcm::KeyInit;
        Some(ChunkCipher { key: aes_gcm::Aes256Gcm::new_from_slice(key).ok()? })
    }

    /// Encrypts `buf` in place under sequence number `seq` and returns its tag (`None` only for
    /// a buffer past the cipher's limit, far above a chunk).
    #[cfg(feature = "ring-crypto")]
    pub(crate) fn seal_in_place(&self, seq: u64, buf: &mut [u8]) -> Option<[u8; TAG_LEN]> {
        use ring::aead::{Aad, Nonce};
        let tag =
            self.key.seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce(seq)), Aad::empty(), buf);
        tag.ok()?.as_ref().try_into().ok()
    }

    /// Encrypts `buf` in place under sequence number `seq` and returns its tag (`None` only for
    /// a buffer past the cipher's limit, far above a chunk).
    #[cfg(not(feature = "ring-crypto"))]
    pub(crate) fn seal_in_place(&self, seq: u64, buf: &mut [u8]) -> Option<[u8; TAG_LEN]> {
        use aes_gcm::AeadInPlace;
        let tag = self.key.encrypt_in_place_detached(&nonce(seq).into(), &[], buf).ok()?;
        Some(tag.into())
    }

    /// Decrypts the ciphertext and tag at `buf[src..]` under sequence number `seq`, writing the
    /// plain bytes at the start of `buf` (shifted left over whatever precedes the chunk, in the
    /// same pass): their length, or `None` when the tag does not match.
    #[cfg(feature = "ring-crypto")]
    pub(crate) fn open_within(&self, seq: u64, buf: &mut [u8], src: usize) -> Option<usize> {
        use ring::aead::{Aad, Nonce};
        let plain = self.key.open_within(Nonce::assume_unique_for_key(nonce(seq)), Aad::empty(), buf, src..);
        plain.ok().map(|p| p.len())
    }

    /// Decrypts the ciphertext and tag at `buf[src..]` under sequence number `seq`, writing the
    /// plain bytes at the start of `buf`: their length, or `None` when the tag does not match.
    #[cfg(not(feature = "ring-crypto"))]
    pub(crate) fn open_within(&self, seq: u64, buf: &mut [u8], src: usize) -> Option<usize> {
        use aes_gcm::AeadInPlace;
        let sealed = buf.get_mut(src..)?;
        let plain = sealed.len().checked_sub(TAG_LEN)?;
        let (text, tag) = sealed.split_at_mut(plain);
        let tag = aes_gcm::Tag::clone_from_slice(tag);
        self.key.decrypt_in_place_detached(&nonce(seq).into(), &[], text, &tag).ok()?;
        buf.copy_within(src..src + plain, 0);
        Some(plain)
    }
}
