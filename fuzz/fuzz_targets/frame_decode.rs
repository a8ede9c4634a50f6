//! Feeds arbitrary bytes to the frame decoder, from a slice and from a stream, under small and
//! huge length bounds: it must return an error or a frame that re-encodes to the same bytes,
//! never panic, and never allocate beyond the bound. Because random bytes rarely pass the
//! checksums, it also builds a valid frame from the input, damages it where the input says
//! (one byte changed, or cut short), and decodes that.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ubershuffle_transport::frame::{Frame, FrameKind, read_frame};

fn check(data: &[u8]) {
    for max in [0, 64, 1 << 16, usize::MAX] {
        if let Ok((frame, used)) = Frame::decode(data, max) {
            assert!(frame.payload.len() <= max);
            assert_eq!(frame.to_bytes(), data[..used]);
        }
        if let Ok(frame) = read_frame(&mut &data[..], max) {
            assert!(frame.payload.len() <= max);
            let bytes = frame.to_bytes();
            assert_eq!(bytes, data[..bytes.len()]);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let Some((&[k, at_lo, at_hi, xor, cut], payload)) = data.split_first_chunk::<5>() else { return };
    let kinds = [FrameKind::Hello, FrameKind::Welcome, FrameKind::Refused, FrameKind::PeerHello, FrameKind::Ready, FrameKind::Message, FrameKind::Challenge, FrameKind::Proof];
    let frame = Frame { kind: kinds[k as usize % kinds.len()], sender: u32::from(at_lo), tag: u32::from(xor), payload: payload.to_vec() };
    let mut bytes = frame.to_bytes();
    assert_eq!(Frame::decode(&bytes, payload.len()).map(|(f, _)| f), Ok(frame));
    let at = usize::from(u16::from_le_bytes([at_lo, at_hi])) % bytes.len();
    bytes[at] ^= xor;
    if cut % 2 == 1 {
        bytes.truncate(at);
    }
    check(&bytes);
    if xor != 0 || cut % 2 == 1 {
        assert!(Frame::decode(&bytes, usize::MAX).is_err(), "a damaged frame decoded");
    }
});
