//! `ubershuffle gradient-coding --run --transport tcp` with `ubershuffle worker` processes on
//! 127.0.0.1: gradient-coded descent on the runtime between real processes, a late worker's
//! coded gradient really dropped, and the numbers of the same run on threads.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod common;

use std::time::Duration;

use common::{Proc, json};
use serde_json::Value;

/// Four workers, FRC with s = 2, roles shuffled at random (so role blocks move between the
/// processes every iteration), worker 1 slow and always late, the others never.
const RUN: &[&str] = &[
    "gradient-coding",
    "--run",
    "-n",
    "4",
    "-s",
    "2",
    "--code",
    "frc",
    "--shuffle",
    "random",
    "--iterations",
    "4",
    "--slow-workers",
    "1",
    "--p-slow-straggle",
    "1",
    "--p-active-straggle",
    "0",
    "--deadline",
    "0.5",
    "--seed",
    "3",
    "--timeout",
    "10",
];

fn column(v: &Value, key: &str) -> Vec<Value> {
    v["iterations"].as_array().unwrap().iter().map(|i| i[key].clone()).collect()
}

#[test]
fn coded_descent_runs_between_worker_processes_as_on_threads() {
    let mut args = RUN.to_vec();
    args.extend_from_slice(&["--json", "--transport", "tcp", "--listen", "127.0.0.1:0"]);
    let mut m = Proc::spawn(&args);
    let line = m.wait_for("listening on ");
    let addr = line.trim_start_matches("listening on ").split(',').next().unwrap().to_string();
    let ws: Vec<Proc> = (0..4).map(|_| Proc::spawn(&["worker", "--connect", &addr])).collect();
    let stdout = m.stdout();
    let (ok, stderr) = m.finish(Duration::from_secs(60));
    assert!(ok, "the master failed: {stderr}");
    for w in ws {
        // The slow worker may still hold its last result when the master stops the run: it
        // finishes 3 epochs, the others 4.
        let (ok, stderr) = w.finish(Duration::from_secs(30));
        assert!(ok && stderr.contains(" epochs"), "{stderr}");
    }
    let over_tcp: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(over_tcp["transport"], "tcp");
    // The slow worker's result came after the deadline every iteration and was dropped; FRC
    // with s = 2 decodes the full gradient from the other three.
    let expected: Vec<Value> = (0..4).map(|_| serde_json::json!([0, 2, 3])).collect();
    assert_eq!(column(&over_tcp, "updated_workers"), expected);
    assert!(column(&over_tcp, "decoding_error").iter().all(|e| e.as_f64() == Some(0.0)));
    let in_process = json(RUN);
    for key in ["held_out_loss", "decoding_error", "updated_workers"] {
        assert_eq!(column(&over_tcp, key), column(&in_process, key), "{key}");
    }
    assert_eq!(over_tcp["model"], in_process["model"]);
    assert!(over_tcp["final_loss"].as_f64() < over_tcp["initial_loss"].as_f64());
}
