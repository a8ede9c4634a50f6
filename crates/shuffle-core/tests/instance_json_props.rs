//! Instance JSON with arbitrary declared sizes and lists: parsing returns an instance or an
//! error, never panics, and never builds an instance larger than its lists (a declared
//! `points` the assignment does not back is refused before any per-point table exists, so a
//! four-billion-point declaration costs nothing).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use proptest::prelude::*;
use ubershuffle_core::ShuffleInstance;

fn declared() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..12,
        Just(u64::from(u32::MAX)),
        Just(u64::from(u32::MAX) + 1),
        Just(u64::MAX),
        any::<u64>()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_declaration_parses_or_fails_cheaply(
        workers in declared(),
        points in declared(),
        cache in prop::collection::vec(prop::collection::vec(prop_oneof![0u32..12, any::<u32>()], 0..6), 0..5),
        assignment in prop::collection::vec(prop::collection::vec(prop_oneof![0u32..12, any::<u32>()], 0..6), 0..5),
    ) {
        let text = format!(
            r#"{{"workers":{workers},"points":{points},"cache":{cache:?},"assignment":{assignment:?}}}"#
        );
        let started = Instant::now();
        let parsed = ShuffleInstance::from_json(&text);
        prop_assert!(started.elapsed() < Duration::from_millis(100), "{} took {:?}", text, started.elapsed());
        if let Ok(inst) = parsed {
            let ids: usize = assignment.iter().map(Vec::len).sum();
            prop_assert_eq!(inst.points(), ids);
            prop_assert_eq!(ShuffleInstance::from_json(&inst.to_json()).unwrap(), inst);
        } else {
            let e = parsed.unwrap_err().to_string();
            prop_assert!(!e.is_empty() && !e.contains('\n'));
        }
    }
}
