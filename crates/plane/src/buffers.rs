//! The process's message buffers, handed back and taken again rather than allocated per
//! message: a delivery moves its bytes in chunks of about a mebibyte, and a fresh buffer of
//! that size costs a page fault per page it touches (the allocator maps it anew, and gives it
//! back when freed). The readers take a buffer for each frame, the engine gives a message's
//! back once handled and takes one for each chunk it sends, the writers give each back once
//! written. The pool is bounded: what it would keep past that is freed.

use std::sync::Mutex;

/// Buffers kept at most.
const KEPT: usize = 64;
/// Buffers smaller than this are not worth keeping (control messages).
const LEAST: usize = 64 << 10;
/// Buffers larger than this are freed (a rare large message must not pin its memory).
const MOST: usize = 8 << 20;

static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// An empty buffer of at least `capacity` bytes: one given back, or a new one.
pub fn take(capacity: usize) -> Vec<u8> {
    let kept = if capacity >= LEAST / 2 { POOL.lock().ok().and_then(|mut p| p.pop()) } else { None };
    let mut buf = kept.unwrap_or_default();
    buf.reserve(capacity);
    buf
}

/// Gives `buf` back for a later [`take`].
pub fn give(mut buf: Vec<u8>) {
    if !(LEAST..=MOST).contains(&buf.capacity()) {
        return;
    }
    buf.clear();
    if let Ok(mut pool) = POOL.lock()
        && pool.len() < KEPT
    {
        pool.push(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_only_emptied_buffers_of_chunk_size() {
        let mut b = take(LEAST);
        assert!(b.is_empty() && b.capacity() >= LEAST);
        b.extend_from_slice(&[7; 100]);
        give(b);
        give(vec![1; 10]);
        give(Vec::with_capacity(MOST * 2));
        let pool = POOL.lock().unwrap();
        assert!(!pool.is_empty());
        assert!(pool.iter().all(|b| b.is_empty() && (LEAST..=MOST).contains(&b.capacity())));
    }
}
