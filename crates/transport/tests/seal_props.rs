//! Property tests of the sealed-frame reader (the fuzz target `sealed_frame` runs the same
//! checks under libFuzzer): random bytes never open or panic; a sealed frame opens exactly;
//! any flipped bit, cut, replay or reorder is an error.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use ubershuffle_transport::frame::FrameKind;
use ubershuffle_transport::seal::{
    LinkKeys, Opening, Sealing, read_frame_on, sealed_frame_len, write_frame_on,
};

fn seal(s: &mut Sealing, payload: &[u8]) -> Vec<u8> {
    let mut wire = Vec::new();
    write_frame_on(Some(s), &mut wire, (FrameKind::Message, 1, 2), &[payload]).unwrap();
    wire
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_open(bytes in proptest::collection::vec(any::<u8>(), 0..512), max in 0usize..1024) {
        let (_, recv) = LinkKeys::in_memory_pair().unwrap();
        prop_assert!(read_frame_on(Some(&mut Opening::new(recv)), &bytes[..], max).is_err());
    }

    #[test]
    fn damaged_sealed_frames_are_errors(len in 0usize..140_000, bit in any::<usize>(), cut in any::<usize>()) {
        let (send, recv) = LinkKeys::in_memory_pair().unwrap();
        let payload: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        let mut s = Sealing::new(send);
        let (one, two) = (seal(&mut s, &payload), seal(&mut s, b"next"));
        prop_assert_eq!(one.len(), sealed_frame_len(len));
        let open = |wire: &[u8]| {
            let mut o = Opening::new(recv.clone());
            let mut r = wire;
            let first = read_frame_on(Some(&mut o), &mut r, usize::MAX).map(|f| f.payload);
            let second = read_frame_on(Some(&mut o), &mut r, usize::MAX).map(|f| f.payload);
            (first, second)
        };
        let whole = [one.clone(), two.clone()].concat();
        let (a, b) = open(&whole);
        prop_assert_eq!(a.unwrap(), payload);
        prop_assert_eq!(b.unwrap(), b"next".to_vec());
        let mut flipped = whole.clone();
        let bit = bit % (one.len() * 8);
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(open(&flipped).0.is_err());
        prop_assert!(open(&one[..cut % one.len()]).0.is_err());
        prop_assert!(open(&[one.clone(), one.clone()].concat()).1.is_err(), "a replay opened");
        prop_assert!(open(&[two, one].concat()).0.is_err(), "a reordered frame opened");
    }
}
