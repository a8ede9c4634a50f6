//! `ubershuffle run --transport tcp` against hostile and faulty peers, as real processes on
//! 127.0.0.1: 100 connections that trickle bytes or stay idle barely delay two honest workers
//! and cost the master little memory; a frozen master (SIGSTOP) is noticed by its workers
//! within 2 x --timeout.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::Proc;

fn master(flags: &[&str]) -> (Proc, String) {
    let mut args = vec!["run", "--transport", "tcp", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(flags);
    let mut m = Proc::spawn(&args);
    let line = m.wait_for("listening on ");
    let addr = line.trim_start_matches("listening on ").split(',').next().unwrap().to_string();
    (m, addr)
}

fn worker(addr: &str) -> Proc {
    Proc::spawn(&["worker", "--connect", addr])
}

/// A field of /proc/PID/status in KiB (Linux).
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Seconds from starting two workers to the master's "all 2 workers joined", and the master's
/// peak resident memory (KiB) then, with `stallers` connections idle or trickling beside them.
fn join_with(stallers: usize) -> (Duration, Option<u64>) {
    let flags = ["-n", "2", "-q", "400", "--epochs", "1", "--timeout", "5", "--join-timeout", "15"];
    let (mut m, addr) = master(&flags);
    let stop = Arc::new(AtomicBool::new(false));
    let mut idle = Vec::new();
    let mut tricklers = Vec::new();
    for k in 0..stallers {
        if k % 2 == 0 {
            idle.push(TcpStream::connect(&addr).unwrap());
            continue;
        }
        let (addr, stop) = (addr.clone(), stop.clone());
        tricklers.push(thread::spawn(move || {
            let mut s = TcpStream::connect(&addr).unwrap();
            while !stop.load(Ordering::Relaxed) {
                if s.write_all(b"U").is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(200));
            }
        }));
    }
    thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let ws = [worker(&addr), worker(&addr)];
    let (joined, _) = m.wait_for_timed("all 2 workers joined");
    let peak = status_kib(m.child.id(), "VmHWM:");
    stop.store(true, Ordering::Relaxed);
    for t in tricklers {
        t.join().unwrap();
    }
    drop(idle);
    let (ok, stderr) = m.finish(Duration::from_secs(30));
    assert!(ok, "{stderr}");
    for w in ws {
        let (ok, stderr) = w.finish(Duration::from_secs(30));
        assert!(ok, "{stderr}");
    }
    (joined.saturating_duration_since(started), peak)
}

#[test]
fn a_hundred_stalling_connections_barely_delay_two_workers() {
    let (alone, alone_peak) = join_with(0);
    let (beside, peak) = join_with(100);
    eprintln!(
        "join: {alone:?} alone, {beside:?} beside 100 stalling connections; master peak RSS {alone_peak:?} / {peak:?} KiB"
    );
    assert!(
        beside < alone + Duration::from_secs(1),
        "100 stalling connections delayed the join from {alone:?} to {beside:?}"
    );
    if let Some(peak) = peak {
        assert!(peak < 50 * 1024, "the master's peak resident memory was {peak} KiB");
    }
}

#[test]
fn workers_notice_a_frozen_master_within_twice_the_timeout() {
    let flags = ["-n", "2", "-q", "400", "--epochs", "1000000", "--timeout", "1"];
    let (mut m, addr) = master(&flags);
    let mut ws = [worker(&addr), worker(&addr)];
    for w in &mut ws {
        w.wait_for("joined as rank");
    }
    m.wait_for("epoch 3/");
    let pid = m.child.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let frozen = Instant::now();
    let mut took = Vec::new();
    for w in ws {
        let (ok, stderr) = w.finish(Duration::from_secs(10));
        took.push(frozen.elapsed());
        assert!(!ok, "a worker of a frozen master succeeded: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("error: ") && last.contains("the master sent nothing for"), "{stderr}");
    }
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    eprintln!("workers left a frozen master after {took:?} (--timeout 1)");
    // 2 x --timeout, plus the time to exit and be seen exiting.
    assert!(took.iter().all(|t| *t < Duration::from_millis(2600)), "{took:?}");
}
