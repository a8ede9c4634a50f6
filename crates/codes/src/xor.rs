//! The XOR kernel every encoder and decoder uses: word-wide, no per-byte branching.

/// Bytes per block of the unrolled loop: four 64-bit words, which the compiler turns into
/// vector instructions.
const BLOCK: usize = 32;

/// `dst ^= src`, word-wide.
///
/// # Panics
/// Panics if the lengths differ (a caller bug: records have one width).
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "xor_into needs equal lengths");
    let mut dst_blocks = dst.chunks_exact_mut(BLOCK);
    let mut src_blocks = src.chunks_exact(BLOCK);
    for (d, s) in (&mut dst_blocks).zip(&mut src_blocks) {
        for k in (0..BLOCK).step_by(8) {
            let word = u64::from_ne_bytes(word_at(d, k)) ^ u64::from_ne_bytes(word_at(s, k));
            d[k..k + 8].copy_from_slice(&word.to_ne_bytes());
        }
    }
    for (d, s) in dst_blocks.into_remainder().iter_mut().zip(src_blocks.remainder()) {
        *d ^= *s;
    }
}

/// `out = sources[0] ^ sources[1] ^ ...`; `out` is zeroed when there is no source.
pub fn xor_sources_into(out: &mut [u8], sources: &[&[u8]]) {
    match sources.split_first() {
        None => out.fill(0),
        Some((first, rest)) => {
            out.copy_from_slice(first);
            for s in rest {
                xor_into(out, s);
            }
        }
    }
}

fn word_at(block: &[u8], k: usize) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(&block[k..k + 8]);
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_bytewise_xor_at_every_length() {
        for len in 0..100 {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let b: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
            let mut d = a.clone();
            xor_into(&mut d, &b);
            let want: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
            assert_eq!(d, want, "len {len}");
            xor_into(&mut d, &b);
            assert_eq!(d, a);
        }
    }

    #[test]
    fn xor_of_sources() {
        let (a, b, c) = ([1u8, 2, 3], [4u8, 5, 6], [7u8, 8, 9]);
        let mut out = [0xffu8; 3];
        xor_sources_into(&mut out, &[&a, &b, &c]);
        assert_eq!(out, [1 ^ 4 ^ 7, 2 ^ 5 ^ 8, 3 ^ 6 ^ 9]);
        xor_sources_into(&mut out, &[]);
        assert_eq!(out, [0; 3]);
    }
}
