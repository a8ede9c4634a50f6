//! Feeds arbitrary bytes to the sealed-frame reader (as the chunks of a link under fixed keys):
//! it must return an error, never panic, never allocate beyond its bound. Because random bytes
//! never pass the tag, it also seals a valid frame from the input, damages it where the input
//! says (one byte changed, a chunk replayed, or cut short), and reads that: an undamaged frame
//! must come back exactly, a damaged one must be an error.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ubershuffle_transport::frame::FrameKind;
use ubershuffle_transport::seal::{LinkKeys, Opening, Sealing, read_frame_on, write_frame_on};

fn keys() -> &'static (LinkKeys, LinkKeys) {
    static KEYS: OnceLock<(LinkKeys, LinkKeys)> = OnceLock::new();
    KEYS.get_or_init(|| LinkKeys::in_memory_pair().expect("an in-memory handshake"))
}

fuzz_target!(|data: &[u8]| {
    let (send, recv) = keys();
    for max in [0, 64, 1 << 16] {
        let mut o = Opening::new(recv.clone());
        assert!(read_frame_on(Some(&mut o), data, max).is_err(), "random bytes opened");
    }
    let Some((&[at_lo, at_hi, xor, how], payload)) = data.split_first_chunk::<4>() else { return };
    // Long payloads span chunks: repeat the input to reach past one chunk sometimes.
    let payload: Vec<u8> = payload.iter().copied().cycle().take(payload.len() * (1 + usize::from(how % 5) * 300)).collect();
    let mut wire = Vec::new();
    let head = (FrameKind::Message, 1, 2);
    write_frame_on(Some(&mut Sealing::new(send.clone())), &mut wire, head, &[&payload]).expect("sealing into memory");
    let at = usize::from(u16::from_le_bytes([at_lo, at_hi])) % wire.len();
    let damaged = match how % 3 {
        0 => {
            wire[at] ^= xor;
            xor != 0
        }
        1 => {
            wire.truncate(at);
            true
        }
        _ => {
            let again = wire.clone();
            wire.extend_from_slice(&again);
            false
        }
    };
    let mut o = Opening::new(recv.clone());
    let mut r = &wire[..];
    match read_frame_on(Some(&mut o), &mut r, usize::MAX) {
        Ok(f) => {
            assert!(!damaged, "a damaged frame opened");
            assert_eq!(f.payload, payload);
            // A replayed copy never opens.
            if !r.is_empty() {
                assert!(read_frame_on(Some(&mut o), &mut r, usize::MAX).is_err(), "a replayed frame opened");
            }
        }
        Err(_) => assert!(damaged, "an intact frame did not open"),
    }
});
