//! `ubershuffle run --transport tcp` with `ubershuffle worker` processes on 127.0.0.1: the
//! numbers of an in-process run, a worker process killed with SIGKILL mid-run, and the
//! fault-injection flag over TCP.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod common;

use std::time::{Duration, Instant};

use common::{Proc, json};
use serde_json::Value;

/// Starts `ubershuffle run --transport tcp` on a free port with `flags`; returns it and the
/// address workers connect to.
fn master(flags: &[&str]) -> (Proc, String) {
    let mut args = vec!["run", "--transport", "tcp", "--listen", "127.0.0.1:0", "--json"];
    args.extend_from_slice(flags);
    let mut m = Proc::spawn(&args);
    let line = m.wait_for("listening on ");
    let addr = line.trim_start_matches("listening on ").split(',').next().unwrap().to_string();
    (m, addr)
}

/// Starts `n` worker processes; returns them indexed by worker (rank - 1).
fn workers(addr: &str, n: usize) -> Vec<Proc> {
    let started: Vec<Proc> = (0..n).map(|_| Proc::spawn(&["worker", "--connect", addr])).collect();
    let mut joined: Vec<(usize, Proc)> = started
        .into_iter()
        .map(|mut w| {
            let line = w.wait_for("joined as rank ");
            let rank: usize = line.split_whitespace().nth(3).unwrap().parse().unwrap();
            (rank - 1, w)
        })
        .collect();
    joined.sort_by_key(|(w, _)| *w);
    assert_eq!(joined.iter().map(|(w, _)| *w).collect::<Vec<_>>(), (0..n).collect::<Vec<_>>());
    joined.into_iter().map(|(_, p)| p).collect()
}

fn finish_master(mut m: Proc) -> Value {
    let stdout = m.stdout();
    let (ok, stderr) = m.finish(Duration::from_secs(30));
    assert!(ok, "the master failed: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn losses(v: &Value) -> Vec<f64> {
    v["epochs"].as_array().unwrap().iter().map(|e| e["loss"].as_f64().unwrap()).collect()
}

const RUN: &[&str] = &["--workers", "3", "--points", "600", "--epochs", "3", "--seed", "3", "--timeout", "1"];

#[test]
fn worker_processes_train_exactly_as_threads_do() {
    let (m, addr) = master(RUN);
    let ws = workers(&addr, 3);
    let over_tcp = finish_master(m);
    for (k, w) in ws.into_iter().enumerate() {
        let (ok, stderr) = w.finish(Duration::from_secs(20));
        assert!(ok && stderr.contains(&format!("worker {k} finished 3 epochs")), "{stderr}");
    }
    let mut local = vec!["run"];
    local.extend_from_slice(RUN);
    let in_process = json(&local);
    assert_eq!(over_tcp["config"]["transport"], "tcp");
    assert!(over_tcp["config"].get("token").is_none(), "the token is echoed");
    assert_eq!(losses(&over_tcp), losses(&in_process));
    assert_eq!(over_tcp["totals"]["transmissions"], in_process["totals"]["transmissions"]);
    assert_eq!(over_tcp["totals"]["payload_bytes"], in_process["totals"]["payload_bytes"]);
    assert!(over_tcp["epochs"].as_array().unwrap().iter().all(|e| e["broadcast_packets"].as_u64() > Some(0)));
}

#[test]
fn a_worker_killed_with_sigkill_is_reported_and_the_others_go_on() {
    // Stragglers hold their updates to the 0.25 s deadline, so epochs last long enough for the
    // kill to land mid-run. A kill between broadcasts is noticed at once; one during a
    // broadcast leaves the survivors waiting out one timeout in the ring.
    let timeout = Duration::from_secs(1);
    let flags =
        "--workers 4 --points 800 --epochs 6 --seed 5 --timeout 1 --stragglers iid:0.5 --deadline 0.25";
    let (mut m, addr) = master(&flags.split(' ').collect::<Vec<_>>());
    let mut ws = workers(&addr, 4);
    m.wait_for("epoch 2/6 done");
    let victim = 1;
    ws[victim].child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    let (noticed, line) = m.wait_for_timed("lost workers 1");
    let took = noticed.saturating_duration_since(killed);
    // The epoch that lost it ends within the timeout, plus the deadline and some slack.
    assert!(took < timeout + Duration::from_secs(1), "the loss was reported {took:?} after the kill: {line}");
    let v = finish_master(m);
    assert_eq!(v["complete"], true);
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([victim]));
    let epochs = v["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 6);
    let lost_at = epochs.iter().position(|e| e["lost_workers"] == serde_json::json!([victim])).unwrap();
    assert!(lost_at >= 2, "lost in epoch {}", lost_at + 1);
    for e in &epochs[lost_at + 1..] {
        assert_eq!(e["workers"], 3, "{e}");
        assert_eq!(e["updates"].as_u64().unwrap() + e["stragglers"].as_u64().unwrap(), 3, "{e}");
        // The survivors broadcast among themselves: the coding gain stays.
        assert!(e["broadcast_packets"].as_u64() > Some(0), "{e}");
        assert!(e["packets_sent"].as_u64() < e["uncoded_transmissions"].as_u64(), "{e}");
    }
    assert_eq!(v["totals"]["epochs_without_coding_gain"], 0);
    for (k, w) in ws.into_iter().enumerate().filter(|(k, _)| *k != victim) {
        let (ok, stderr) = w.finish(Duration::from_secs(20));
        assert!(ok && stderr.contains(&format!("worker {k} finished")), "{stderr}");
    }
}

#[test]
fn fault_injection_reaches_worker_processes() {
    let mut flags = RUN.to_vec();
    flags.extend(["--kill-worker", "0@2"]);
    let (m, addr) = master(&flags);
    let ws = workers(&addr, 3);
    let v = finish_master(m);
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([0]));
    assert_eq!(v["epochs"][1]["lost_workers"], serde_json::json!([0]));
    for (k, w) in ws.into_iter().enumerate() {
        let (ok, stderr) = w.finish(Duration::from_secs(20));
        let want = if k == 0 { "left after 1 epochs (fault injection" } else { "finished" };
        assert!(ok && stderr.contains(want), "worker {k}: {stderr}");
    }
}

#[test]
fn a_resume_over_tcp_takes_every_worker_back() {
    let dir = std::env::temp_dir().join(format!("ubershuffle-readmit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().unwrap();
    let base = ["--workers", "3", "--points", "600", "--seed", "3", "--timeout", "1", "--out", out];
    let mut first = base.to_vec();
    first.extend(["--epochs", "2", "--kill-worker", "0@2"]);
    let (m, addr) = master(&first);
    let ws = workers(&addr, 3);
    let v = finish_master(m);
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([0]));
    for w in ws {
        assert!(w.finish(Duration::from_secs(20)).0);
    }
    // All three come back: the checkpoint's lost worker is admitted again, and every one of
    // them works to the end (none is left over).
    let mut rest = base.to_vec();
    rest.extend(["--epochs", "4", "--resume"]);
    let (m, addr) = master(&rest);
    let ws = workers(&addr, 3);
    let v = finish_master(m);
    let epochs = v["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 4);
    for e in &epochs[2..] {
        assert_eq!((e["workers"].as_u64(), e["updates"].as_u64()), (Some(3), Some(3)), "{e}");
        assert!(e["broadcast_packets"].as_u64() > Some(0), "{e}");
    }
    for (k, w) in ws.into_iter().enumerate() {
        let (ok, stderr) = w.finish(Duration::from_secs(20));
        assert!(ok && stderr.contains(&format!("worker {k} finished 2 epochs")), "worker {k}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_min_workers_the_run_starts_without_a_worker_that_never_came() {
    let flags =
        ["--workers", "3", "--min-workers", "2", "--join-timeout", "2", "--points", "600", "--epochs", "2"];
    let (mut m, addr) = master(&flags);
    let ws: Vec<Proc> = (0..2).map(|_| Proc::spawn(&["worker", "--connect", &addr])).collect();
    m.wait_for("2 of 3 workers joined within --join-timeout");
    let v = finish_master(m);
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([2]));
    assert_eq!(v["epochs"][0]["lost_workers"], serde_json::json!([2]));
    for e in v["epochs"].as_array().unwrap() {
        assert_eq!((e["workers"].as_u64(), e["updates"].as_u64()), (Some(2), Some(2)), "{e}");
    }
    for w in ws {
        let (ok, stderr) = w.finish(Duration::from_secs(20));
        assert!(ok && stderr.contains("finished 2 epochs"), "{stderr}");
    }
}

#[test]
fn a_worker_killed_during_the_join_is_replaced() {
    let flags = ["--workers", "2", "--join-timeout", "20", "--points", "600", "--epochs", "1"];
    let (mut m, addr) = master(&flags);
    let mut early = Proc::spawn(&["worker", "--connect", &addr]);
    // Once it has proved the token it waits for the second worker; kill it then.
    std::thread::sleep(Duration::from_millis(1500));
    early.child.kill().unwrap(); // SIGKILL
    let _ = early.finish(Duration::from_secs(5));
    let ws: Vec<Proc> = (0..2).map(|_| Proc::spawn(&["worker", "--connect", &addr])).collect();
    // Killed after its handshake ("left after joining") or, on a slow machine, during it.
    m.wait_for("warning: refused a connection from 127.0.0.1");
    let v = finish_master(m);
    assert_eq!(v["complete"], true);
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([]));
    for w in ws {
        assert!(w.finish(Duration::from_secs(20)).0);
    }
}

#[test]
fn a_worker_frozen_during_the_join_is_replaced_after_one_timeout() {
    let flags =
        ["--workers", "2", "--join-timeout", "30", "--timeout", "2", "--points", "600", "--epochs", "1"];
    let (mut m, addr) = master(&flags);
    let frozen = Proc::spawn(&["worker", "--connect", &addr]);
    // Once it has proved the token it waits for the second worker; stop it then.
    std::thread::sleep(Duration::from_millis(1500));
    let signal = |sig: &str| {
        let pid = frozen.child.id().to_string();
        assert!(std::process::Command::new("kill").args([sig, &pid]).status().unwrap().success());
    };
    signal("-STOP");
    // The others' peer handshake with the frozen one times out after their own --timeout.
    let worker = ["worker", "--connect", &addr, "--timeout", "2"];
    let mut ws = vec![Proc::spawn(&worker)];
    // Welcomed with the second worker, it does not answer: dropped one --timeout later.
    let line = m.wait_for("did not answer its welcome");
    assert!(line.contains("within 2s (frozen or cut off)"), "{line}");
    ws.push(Proc::spawn(&worker));
    let v = finish_master(m);
    assert_eq!(v["complete"], true);
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([]));
    assert_eq!(v["epochs"][0]["workers"], 2);
    for w in ws {
        assert!(w.finish(Duration::from_secs(20)).0);
    }
    signal("-CONT");
    let _ = frozen.finish(Duration::from_secs(5));
}

#[test]
fn a_worker_killed_mid_run_and_started_again_rejoins_at_an_epoch_boundary() {
    // Stragglers hold updates to the 0.25 s deadline, so the run outlasts the restart.
    let flags =
        "--workers 3 --points 600 --epochs 6 --seed 5 --timeout 1 --stragglers iid:0.5 --deadline 0.25";
    let (mut m, addr) = master(&flags.split(' ').collect::<Vec<_>>());
    let mut ws = workers(&addr, 3);
    m.wait_for("epoch 2/6 done");
    let victim = 1;
    ws[victim].child.kill().unwrap(); // SIGKILL
    let _ = ws.remove(victim).finish(Duration::from_secs(5));
    // A new process for it: held by the master, then admitted at the next epoch boundary.
    let mut back = Proc::spawn(&["worker", "--connect", &addr]);
    back.wait_for(&format!("joined as rank {}", victim + 1));
    let v = finish_master(m);
    assert_eq!(v["complete"], true);
    let epochs = v["epochs"].as_array().unwrap();
    let lost_at = epochs.iter().position(|e| e["lost_workers"] == serde_json::json!([victim])).unwrap();
    let back_at = epochs.iter().position(|e| e["rejoined_workers"] == serde_json::json!([victim])).unwrap();
    assert!(back_at > lost_at && back_at < epochs.len(), "lost in {lost_at}, back in {back_at}");
    for e in &epochs[back_at..] {
        // All three again, coded and broadcast over all of them.
        assert_eq!(
            (e["workers"].as_u64(), e["lost_workers"].as_array().map(Vec::len)),
            (Some(3), Some(0)),
            "{e}"
        );
        assert_eq!(e["updates"].as_u64().unwrap() + e["stragglers"].as_u64().unwrap(), 3, "{e}");
        assert!(e["broadcast_packets"].as_u64() > Some(0), "{e}");
        assert!(e["packets_sent"].as_u64() < e["uncoded_transmissions"].as_u64(), "{e}");
    }
    let (ok, stderr) = back.finish(Duration::from_secs(20));
    // Its last update may still be held (a straggler) when the master stops it.
    assert!(ok && stderr.contains(&format!("worker {victim} finished")), "{stderr}");
    println!("lost in epoch {}, rejoined before epoch {}", lost_at + 1, back_at + 1);
    for w in ws {
        assert!(w.finish(Duration::from_secs(20)).0);
    }
}
