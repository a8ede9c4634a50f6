//! Property tests of the wire format: random and mutated bytes never panic, and round trips
//! are exact.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use ubershuffle_transport::frame::{Frame, FrameKind, HEADER_LEN, read_frame};

fn kind(k: u8) -> FrameKind {
    match k % 6 {
        0 => FrameKind::Hello,
        1 => FrameKind::Welcome,
        2 => FrameKind::Refused,
        3 => FrameKind::PeerHello,
        4 => FrameKind::Ready,
        _ => FrameKind::Message,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), max in 0usize..512) {
        let _ = Frame::decode(&bytes, max);
        let _ = read_frame(&mut &bytes[..], max);
    }

    #[test]
    fn frames_round_trip(k in any::<u8>(), sender in any::<u32>(), tag in any::<u32>(),
                         payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let f = Frame { kind: kind(k), sender, tag, payload };
        let bytes = f.to_bytes();
        prop_assert_eq!(Frame::decode(&bytes, 300).unwrap(), (f.clone(), bytes.len()));
        prop_assert_eq!(read_frame(&mut &bytes[..], 300).unwrap(), f);
    }

    /// Any single flipped bit of a valid frame is caught by a check (CRC32C detects every
    /// single-bit error), and cutting it short is `Truncated`.
    #[test]
    fn damaged_frames_are_errors(payload in proptest::collection::vec(any::<u8>(), 0..100),
                                 bit in any::<usize>(), cut in any::<usize>()) {
        let bytes = Frame { kind: FrameKind::Message, sender: 1, tag: 2, payload }.to_bytes();
        let mut flipped = bytes.clone();
        let bit = bit % (bytes.len() * 8);
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(Frame::decode(&flipped, 1000).is_err());
        let cut = cut % bytes.len();
        prop_assert!(Frame::decode(&bytes[..cut], 1000).is_err());
        prop_assert!(read_frame(&mut &bytes[..cut], 1000).is_err());
        prop_assert!(cut < HEADER_LEN || bytes.len() > HEADER_LEN);
    }
}
