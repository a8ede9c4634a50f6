//! Feeds arbitrary text to the instance JSON parser: it must return an instance or an error,
//! never panic, and never allocate more than the input backs (the declared `points` is checked
//! against the assignment's lists before any per-point table exists). Random bytes rarely form
//! JSON, so the input also steers a well-formed instance whose numbers it chooses: declared
//! sizes up to u32::MAX, ids anywhere, lists of any length.
//!
//! Run with `cargo fuzz run instance_json -- -rss_limit_mb=256` (nightly): a parser that
//! allocated per declared point would pass the RSS limit at once.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ubershuffle_core::ShuffleInstance;

fn u32_at(data: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    for (k, b) in w.iter_mut().enumerate() {
        *b = data.get(at + k).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(inst) = ShuffleInstance::from_json(text) {
            // Whatever parses is consistent and round-trips.
            assert_eq!(ShuffleInstance::from_json(&inst.to_json()).ok(), Some(inst));
        }
    }
    // A well-formed instance with numbers from the input.
    let workers = (data.first().copied().unwrap_or(1) % 5) as usize;
    let points = u32_at(data, 1);
    let ids: Vec<u32> = data.chunks(4).skip(2).take(64).map(|c| u32_at(c, 0) % points.saturating_add(2).max(1)).collect();
    let list = |k: usize| -> Vec<u32> { ids.iter().copied().skip(k).step_by(workers.max(1)).collect() };
    let cache: Vec<Vec<u32>> = (0..workers).map(list).collect();
    let assignment: Vec<Vec<u32>> = (0..workers).map(|k| list((k + 1) % workers.max(1))).collect();
    let text = format!(
        "{{\"workers\":{workers},\"points\":{points},\"cache\":{cache:?},\"assignment\":{assignment:?}}}"
    );
    if let Ok(inst) = ShuffleInstance::from_json(&text) {
        assert_eq!(inst.points(), points as usize);
        assert!(inst.points() <= ids.len(), "an instance larger than its lists");
    }
});
