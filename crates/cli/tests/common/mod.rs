//! What the process-level tests share: running `ubershuffle` to completion, and following a
//! running `ubershuffle` process line by line.

#![allow(dead_code)] // each test binary uses part of this
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Runs `ubershuffle` with `args` to completion.
pub fn ubershuffle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ubershuffle")).args(args).output().expect("the binary runs")
}

/// Runs with `--json` and returns the parsed object; the run must succeed.
pub fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ubershuffle(&all);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

/// Runs expecting failure; returns stderr, which must be one line starting with `error: `.
pub fn fails(args: &[&str]) -> String {
    let out = ubershuffle(args);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
    stderr
}

/// A running `ubershuffle` process whose stderr lines arrive on a channel, with the instant
/// each was read.
pub struct Proc {
    /// The process.
    pub child: Child,
    lines: Receiver<(Instant, String)>,
    /// Every stderr line seen so far.
    pub seen: Vec<String>,
}

/// The cluster token of the TCP tests (strong enough), given to every spawned process in
/// `UBERSHUFFLE_TOKEN`: no token on any command line.
pub const TEST_TOKEN: &str = "5f1c0a9e7d3b4c2a8e6f0d1b3a5c7e9f2b4d6f8a0c1e3a5b7d9f1a3c5e7b9d0f";

impl Proc {
    /// Starts `ubershuffle args` with stdout and stderr piped and [`TEST_TOKEN`] in the
    /// environment.
    pub fn spawn(args: &[&str]) -> Proc {
        Proc::spawn_with_token(args, TEST_TOKEN)
    }

    /// [`Proc::spawn`] with another token in `UBERSHUFFLE_TOKEN`.
    pub fn spawn_with_token(args: &[&str], token: &str) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ubershuffle"))
            .args(args)
            .env("UBERSHUFFLE_TOKEN", token)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let stderr = child.stderr.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send((Instant::now(), line));
            }
        });
        Proc { child, lines, seen: Vec::new() }
    }

    /// Waits for a stderr line containing `needle`; returns it and when it was read.
    pub fn wait_for_timed(&mut self, needle: &str) -> (Instant, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok((at, line)) = self.lines.recv_timeout(Duration::from_millis(100)) {
                self.seen.push(line.clone());
                if line.contains(needle) {
                    return (at, line);
                }
            }
        }
        panic!("no line with {needle:?}; saw {:?}", self.seen);
    }

    /// Waits for a stderr line containing `needle` and returns it.
    pub fn wait_for(&mut self, needle: &str) -> String {
        self.wait_for_timed(needle).1
    }

    /// All of stdout (waits until the process closes it).
    pub fn stdout(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            out.read_to_string(&mut text).unwrap();
        }
        text
    }

    /// Waits for exit (at most `limit`); returns success and all of stderr.
    pub fn finish(mut self, limit: Duration) -> (bool, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("did not exit within {limit:?}; stderr so far: {:?}", self.seen);
            }
            thread::sleep(Duration::from_millis(20));
        };
        thread::sleep(Duration::from_millis(50));
        self.seen.extend(self.lines.try_iter().map(|(_, l)| l));
        (status.success(), self.seen.join("\n"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
