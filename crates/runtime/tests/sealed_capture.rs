//! A capture of a whole sealed run (issue 27, item 5): a real master and workers train over
//! loopback TCP, every worker's link to the master routed through a proxy that records every
//! byte both ways, and the capture holds no 16-byte window of any record the run shuffles;
//! the same run in plain text (`--insecure-plaintext`) shows them, so the test can fail.
//!
//! The links between workers are not proxied: each worker listens on an address of its own
//! choosing that the master announces, and the transport has no hook to reroute it. The
//! master-worker links carry every record once at least (the starting caches, then the coded
//! data), so they are where the records show if anything leaks; the sealing of the workers'
//! links is the same code (`tcp/setup_io.rs`), tested at transport level in
//! `crates/transport/tests/mitm.rs`.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod insider_harness;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use insider_harness::{data, run_with};

const WORKERS: usize = 3;
const EPOCHS: usize = 2;

/// Copies `from` to `to`, recording every byte, until either side ends.
fn pump(mut from: TcpStream, mut to: TcpStream, seen: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 65536];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        seen.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// A proxy for one connection to `master`, recording into `seen`; returns its address.
fn proxy(master: &str, seen: Arc<Mutex<Vec<u8>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let master = master.to_string();
    thread::spawn(move || {
        let (worker, _) = listener.accept().unwrap();
        let upstream = TcpStream::connect(master).unwrap();
        let (w2, u2, s2) = (worker.try_clone().unwrap(), upstream.try_clone().unwrap(), seen.clone());
        thread::spawn(move || pump(u2, w2, s2));
        pump(worker, upstream, seen);
    });
    addr
}

/// Every byte a run's proxies saw, sealed or not.
fn capture(sealed: bool) -> Vec<u8> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let route = |master: &str| proxy(master, seen.clone());
    let report = run_with(WORKERS, EPOCHS, &[], sealed, &route);
    assert_eq!(report.epochs.len(), EPOCHS);
    assert!(report.lost_workers.is_empty(), "{:?}", report.lost_workers);
    seen.lock().unwrap().clone()
}

/// How many of the first records' 16-byte windows occur in `captured` (windows of at least 8
/// distinct bytes: no run of zeros that a frame header could hold too).
fn windows_seen(captured: &[u8]) -> usize {
    let data = data();
    let train = data.train.fixed().unwrap();
    let mut windows: Vec<&[u8]> = Vec::new();
    for point in 0..8 {
        let distinct = |w: &&[u8]| w.iter().collect::<std::collections::HashSet<_>>().len() >= 8;
        windows.extend(train.get(point).unwrap().windows(16).filter(distinct));
    }
    assert!(windows.len() > 100, "{} windows to look for", windows.len());
    let windows: std::collections::HashSet<&[u8]> = windows.into_iter().collect();
    captured.windows(16).filter(|w| windows.contains(w)).count()
}

#[test]
fn a_capture_of_a_whole_sealed_run_holds_none_of_the_records() {
    let sealed = capture(true);
    let data = data();
    let train = data.train.fixed().unwrap();
    assert!(sealed.len() > train.as_bytes().len(), "the proxies saw the run ({} bytes)", sealed.len());
    assert_eq!(windows_seen(&sealed), 0, "a sealed capture shows records' bytes");
    let plain = capture(false);
    assert!(windows_seen(&plain) > 0, "a plain-text capture shows the records (the test can fail)");
}
