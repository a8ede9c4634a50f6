//! `ubershuffle master` and `ubershuffle worker` as real processes on 127.0.0.1: a run that
//! checks every byte, a wrong token refused on both sides, and a killed or stopped worker
//! named by the master within the timeout.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::{Proc, TEST_TOKEN};

/// Starts a master on a free port and returns it with its address.
fn master(extra: &[&str]) -> (Proc, String) {
    let mut args = vec!["master", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut m = Proc::spawn(&args);
    let line = m.wait_for("listening on ");
    let addr = line.trim_start_matches("listening on ").split(',').next().unwrap().to_string();
    (m, addr)
}

fn worker(addr: &str, token: &str) -> Proc {
    Proc::spawn_with_token(&["worker", "--connect", addr, "--timeout", "2"], token)
}

/// A master and three workers broadcast 2 rounds of `bytes` by `method`; every byte checked.
fn master_and_workers_check_every_byte(method: &str, bytes: &str) {
    let (mut m, addr) =
        master(&["--workers", "3", "--bytes", bytes, "--rounds", "2", "--method", method, "--json"]);
    let workers: Vec<Proc> = (0..3).map(|_| worker(&addr, TEST_TOKEN)).collect();
    let stdout = m.stdout();
    let (ok, stderr) = m.finish(Duration::from_secs(30));
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["verified"], true);
    assert_eq!(v["method"], method);
    assert_eq!(v["seconds"].as_array().unwrap().len(), 2);
    for w in workers {
        let (ok, stderr) = w.finish(Duration::from_secs(20));
        assert!(ok, "{stderr}");
        assert!(stderr.contains(&format!("received and checked 2 broadcasts of {bytes} bytes")), "{stderr}");
    }
}

#[test]
fn master_and_workers_check_every_byte_of_a_plain_broadcast() {
    master_and_workers_check_every_byte("plain", "300001");
}

#[test]
fn ring_pieces_larger_than_the_join_window_pass_once_the_job_is_known() {
    // 4 MiB in 3 pieces: each far above the 64 KiB frames of the join window.
    master_and_workers_check_every_byte("pseudo-broadcast", "4194304");
}

#[test]
fn a_wrong_token_is_refused_with_a_clear_error() {
    let (mut m, addr) = master(&["--workers", "1", "--bytes", "1000", "--rounds", "1"]);
    let (ok, stderr) = worker(&addr, "a-wrong-guess-that-is-long-enough-to-pass-the-strength-check")
        .finish(Duration::from_secs(20));
    assert!(!ok);
    assert_eq!(stderr.trim(), "error: the master refused this worker: wrong token");
    m.wait_for("refused a connection from 127.0.0.1");
    let good = worker(&addr, TEST_TOKEN);
    let (ok, stderr) = m.finish(Duration::from_secs(20));
    assert!(ok, "{stderr}");
    assert!(good.finish(Duration::from_secs(20)).0);
}

/// Kills (or stops) the worker of rank 2 mid-run; the master must fail naming rank 2.
fn master_names_the_lost_worker(stop_instead_of_kill: bool) {
    let (mut m, addr) =
        master(&["--workers", "3", "--bytes", "65536", "--rounds", "1000000", "--timeout", "2"]);
    let mut workers: Vec<Proc> = (0..3).map(|_| worker(&addr, TEST_TOKEN)).collect();
    let mut ranks = Vec::new();
    for w in &mut workers {
        let line = w.wait_for("joined as rank ");
        ranks.push(line.split_whitespace().nth(3).unwrap().parse::<usize>().unwrap());
    }
    m.wait_for("all 3 workers joined");
    thread::sleep(Duration::from_millis(300));
    let victim = ranks.iter().position(|&r| r == 2).unwrap();
    let pid = workers[victim].child.id().to_string();
    let lost = Instant::now();
    if stop_instead_of_kill {
        assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    } else {
        workers[victim].child.kill().unwrap();
    }
    let (ok, stderr) = m.finish(Duration::from_secs(20));
    let took = lost.elapsed();
    assert!(!ok, "the master succeeded without rank 2: {stderr}");
    let error = stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_default().to_string();
    assert!(error.contains("rank 2 "), "the error does not name rank 2: {stderr}");
    // Within a few timeouts (2 s each): the ack wait is twice the timeout.
    assert!(took < Duration::from_secs(8), "took {took:?}: {error}");
    if stop_instead_of_kill {
        let _ = Command::new("kill").args(["-CONT", &pid]).status();
    }
    for (k, w) in workers.into_iter().enumerate() {
        if k != victim {
            let (ok, stderr) = w.finish(Duration::from_secs(20));
            assert!(!ok, "a worker succeeded although the run failed: {stderr}");
        }
    }
}

#[test]
fn a_killed_worker_is_named_by_the_master() {
    master_names_the_lost_worker(false);
}

#[test]
fn a_stopped_worker_is_named_by_the_master() {
    master_names_the_lost_worker(true);
}
