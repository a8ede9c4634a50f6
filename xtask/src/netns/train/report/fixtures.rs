//! Small jobs of two training ranks, written as the ranks' JSON logs are, for the report's
//! tests.

use super::checks::wire_bytes;
use crate::netns::train::types::{Arm, Job, RankLog, Setting};

/// Two ranks at 100 Mbit/s, MTU 1500, two epochs, idle (`--sleep-train 0.5`).
pub fn setting() -> Setting {
    Setting {
        ranks: 2,
        mbit: 100.0,
        qdisc: "tbf",
        mtu: 1500,
        side: 64,
        grain: 0.0,
        records: 10,
        bytes: 10_000,
        epochs: 2,
        fraction: 0.3,
        sleep_train: 0.5,
    }
}

fn log(json: &str) -> RankLog {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// A training rank at `place` that received `received` plane bytes in epoch 1 (the records it
/// lacked: `records`), its link `rx` bytes from epoch 0's start to its end.
fn trainer(place: usize, received: u64, records: u64, rx: u64) -> RankLog {
    log(&format!(
        r#"{{"role": "trainer", "place": {place}, "chain_bytes": [[3500, 1500]], "end_counters": [0, {rx}],
"epochs": [{{"epoch": 0, "counters_start": [0, 0], "cpu_seconds": 0.1}},
{{"epoch": 1, "bytes_received": {received}, "record_bytes_received": {records}, "transfer_seconds": 0.001,
"scatter_seconds": 0.001, "cpu_seconds": 0.2}}]}}"#
    ))
}

/// Arm c: the store unicasts 3500 and 1500 bytes in two rounds; `skew` adds to rank 0's
/// kernel counter, `lacked` is what rank 0 says it lacked.
pub fn uncoded(skew: u64, lacked: u64) -> Job {
    let store = log(&format!(
        r#"{{"role": "store", "end_counters": [{}, 0], "served": [{{"epoch": 1, "kind": "step",
"bytes_sent": 5000, "packets": 5, "segment_bytes": 1000, "data_bytes": 5000, "unicast_packets": 5,
"unicast_bytes": 5000, "round_store_bytes": [[3000, 1000], [500, 500]], "round_relay_bytes": [],
"cpu_seconds": 0.05}}]}}"#,
        wire_bytes(5000, None, 1500)
    ));
    let ranks = vec![
        store,
        trainer(0, 3500, lacked, wire_bytes(3500, None, 1500) + skew),
        trainer(1, 1500, 1500, wire_bytes(1500, None, 1500)),
    ];
    Job { arm: Arm::C, repeat: 0, ranks }
}

/// Arm b: the store sends each rank 1000 bytes, and the ranks relay 1000 bytes each way.
pub fn coded() -> Job {
    let store = log(r#"{"role": "store", "end_counters": [2100, 0], "served": [{"epoch": 1, "kind": "step",
"bytes_sent": 2000, "packets": 2, "coded_packets": 2, "segment_bytes": 1000, "data_bytes": 2000,
"multicast_packets": 2, "multicast_bytes": 2000, "round_store_bytes": [[1000, 1000]],
"round_relay_bytes": [[[0, 1000], [1000, 0]]]}]}"#);
    let mut ranks = vec![store, trainer(0, 2000, 2000, 0), trainer(1, 2000, 2000, 0)];
    for r in &mut ranks[1..] {
        r.chain_bytes = vec![vec![2500, 2500]];
    }
    Job { arm: Arm::B, repeat: 0, ranks }
}
