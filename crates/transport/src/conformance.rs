//! The conformance suite: one set of checks every [`Transport`] must pass, written once.
//!
//! [`run_suite`] runs at every rank of a cluster (one thread per rank for the in-process and
//! TCP transports, one process per rank under `mpirun` for MPI): send/recv with tag matching
//! and ordering, broadcasts of 0 bytes, 1 byte and 64 MiB, a barrier, a receive that times out,
//! a receive bounded per call on the transport's clock, and, last, a peer that leaves, whose
//! rank the errors of the others must name, after which the others broadcast among themselves. The cluster needs at least 3 ranks.

use std::time::{Duration, Instant};

use crate::{MAX_USER_TAG, Transport, TransportError};

/// A check that failed at one rank.
#[derive(Debug, thiserror::Error)]
#[error("check {check} failed at rank {rank}: {detail}")]
pub struct Failure {
    /// The check.
    pub check: &'static str,
    /// The rank that saw it.
    pub rank: usize,
    /// What went wrong.
    pub detail: String,
}

/// One check, run at every rank.
#[derive(Clone, Copy)]
pub struct Check {
    /// Its name.
    pub name: &'static str,
    /// Runs this rank's part.
    pub run: fn(&mut dyn Transport) -> Result<(), String>,
}

/// The checks [`run_suite`] runs before the dead-peer check, in order.
pub static CHECKS: &[Check] = &[
    Check { name: "send-recv", run: send_recv },
    Check { name: "ordering", run: ordering },
    Check { name: "bad-arguments", run: bad_arguments },
    Check { name: "broadcast-0-bytes", run: |t| broadcast_check(t, 0, 0) },
    Check {
        name: "broadcast-1-byte",
        run: |t| {
            let root = t.size() - 1;
            broadcast_check(t, 1, root)
        },
    },
    Check { name: "broadcast-64-MiB", run: |t| broadcast_check(t, 64 << 20, 0) },
    Check { name: "barrier", run: barrier_waits },
    Check { name: "timeout", run: recv_times_out },
    Check { name: "recv-within", run: recv_within_its_bound },
];

/// The name of the last check, run by [`run_suite`] after [`CHECKS`].
pub const DEAD_PEER: &str = "dead-peer";

/// Runs every check at this rank, with a barrier between checks, then the dead-peer check
/// (the highest rank leaves by dropping its endpoint). Returns the names of the checks passed.
pub fn run_suite<T: Transport>(mut t: T) -> Result<Vec<&'static str>, Failure> {
    let rank = t.rank();
    if t.size() < 3 {
        return Err(Failure { check: "setup", rank, detail: format!("needs 3 ranks, got {}", t.size()) });
    }
    let mut passed = Vec::new();
    for check in CHECKS {
        (check.run)(&mut t).map_err(|detail| Failure { check: check.name, rank, detail })?;
        t.barrier().map_err(|e| Failure {
            check: check.name,
            rank,
            detail: format!("barrier after: {e}"),
        })?;
        passed.push(check.name);
    }
    dead_peer(t).map_err(|detail| Failure { check: DEAD_PEER, rank, detail })?;
    passed.push(DEAD_PEER);
    Ok(passed)
}

/// Runs the suite on one thread per endpoint; returns every rank's failure.
pub fn run_on_threads<T: Transport + Send + 'static>(endpoints: Vec<T>) -> Result<(), Vec<Failure>> {
    let handles: Vec<_> = endpoints
        .into_iter()
        .map(|t| {
            let rank = t.rank();
            (rank, std::thread::spawn(move || run_suite(t)))
        })
        .collect();
    let failures: Vec<Failure> = handles
        .into_iter()
        .filter_map(|(rank, h)| match h.join() {
            Ok(Ok(_)) => None,
            Ok(Err(f)) => Some(f),
            Err(_) => Some(Failure { check: "thread", rank, detail: "panicked".into() }),
        })
        .collect();
    if failures.is_empty() { Ok(()) } else { Err(failures) }
}

/// `len` deterministic bytes for `seed` (SplitMix64, eight bytes at a time).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn err(what: &str, e: TransportError) -> String {
    format!("{what}: {e}")
}

fn expect_bytes(what: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    Err(format!("{what}: got {} bytes, want {}, first difference at byte {first}", got.len(), want.len()))
}

/// Master to every worker and back (recv_any), a message of 0 bytes, and a ring among workers.
fn send_recv(t: &mut dyn Transport) -> Result<(), String> {
    let (rank, size) = (t.rank(), t.size());
    let workers = size - 1;
    if rank == 0 {
        for k in 1..size {
            t.send(k, 1, &pattern(k as u64, 1000 + k)).map_err(|e| err("send to a worker", e))?;
        }
        t.send(1, 5, &[]).map_err(|e| err("send 0 bytes", e))?;
        let mut waiting: Vec<usize> = (1..size).collect();
        while !waiting.is_empty() {
            let (from, bytes) = t.recv_any(&waiting, 2).map_err(|e| err("recv_any replies", e))?;
            expect_bytes(&format!("reply of rank {from}"), &bytes, &pattern(100 + from as u64, from))?;
            waiting.retain(|&r| r != from);
        }
        return Ok(());
    }
    let got = t.recv(0, 1).map_err(|e| err("recv from the master", e))?;
    expect_bytes("message from the master", &got, &pattern(rank as u64, 1000 + rank))?;
    if rank == 1 {
        let empty = t.recv(0, 5).map_err(|e| err("recv 0 bytes", e))?;
        expect_bytes("empty message", &empty, &[])?;
    }
    // Workers pass a message around a ring before answering the master.
    let next = rank % workers + 1;
    let prev = (rank + workers - 2) % workers + 1;
    if next != rank {
        t.send(next, 3, &pattern(1000 + rank as u64, 77)).map_err(|e| err("send to next worker", e))?;
        let got = t.recv(prev, 3).map_err(|e| err("recv from previous worker", e))?;
        expect_bytes("worker ring", &got, &pattern(1000 + prev as u64, 77))?;
    }
    t.send(0, 2, &pattern(100 + rank as u64, rank)).map_err(|e| err("reply", e))
}

/// A receive skips other tags (they wait), and messages with one tag arrive in order.
fn ordering(t: &mut dyn Transport) -> Result<(), String> {
    const COUNT: usize = 100;
    match t.rank() {
        0 => {
            t.send(1, 10, b"first").map_err(|e| err("send tag 10", e))?;
            t.send(1, 11, b"second").map_err(|e| err("send tag 11", e))?;
            for i in 0..COUNT {
                t.send(1, 12, &(i as u32).to_le_bytes()).map_err(|e| err("send sequence", e))?;
            }
            Ok(())
        }
        1 => {
            let second = t.recv(0, 11).map_err(|e| err("recv tag 11", e))?;
            let first = t.recv(0, 10).map_err(|e| err("recv tag 10", e))?;
            expect_bytes("tag 11", &second, b"second")?;
            expect_bytes("tag 10", &first, b"first")?;
            for i in 0..COUNT {
                let got = t.recv(0, 12).map_err(|e| err("recv sequence", e))?;
                expect_bytes(&format!("message {i} of the sequence"), &got, &(i as u32).to_le_bytes())?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Bad ranks and reserved tags are errors, not panics or hangs.
fn bad_arguments(t: &mut dyn Transport) -> Result<(), String> {
    let (rank, size) = (t.rank(), t.size());
    let checks = [
        ("send to itself", t.send(rank, 1, b"x").err()),
        ("send past the last rank", t.send(size, 1, b"x").err()),
        ("send with a reserved tag", t.send((rank + 1) % size, MAX_USER_TAG + 1, b"x").err()),
        ("recv with a reserved tag", t.recv((rank + 1) % size, MAX_USER_TAG + 1).err()),
        ("broadcast from a rank past the last", t.broadcast(size, &mut Vec::new()).err()),
        ("broadcast in a group out of order", t.broadcast_among(0, &[rank, 0], 9, &mut Vec::new()).err()),
        ("broadcast in a group without the caller", {
            let other = (rank + 1) % size;
            t.broadcast_among(other, &[other], 9, &mut Vec::new()).err()
        }),
    ];
    for (what, e) in checks {
        if e.is_none() {
            return Err(format!("{what} succeeded"));
        }
    }
    Ok(())
}

/// `len` bytes broadcast from `root`; every rank checks them.
fn broadcast_check(t: &mut dyn Transport, len: usize, root: usize) -> Result<(), String> {
    let want = pattern(7 + len as u64, len);
    let mut buf = if t.rank() == root { want.clone() } else { vec![0xAB; 3] };
    t.broadcast(root, &mut buf).map_err(|e| err(&format!("broadcast of {len} bytes from rank {root}"), e))?;
    expect_bytes(&format!("broadcast of {len} bytes"), &buf, &want)
}

/// The barrier holds every rank until the last one (rank 0, 300 ms late) arrives.
fn barrier_waits(t: &mut dyn Transport) -> Result<(), String> {
    const LATE: Duration = Duration::from_millis(300);
    if t.rank() == 0 {
        std::thread::sleep(LATE);
    }
    let started = Instant::now();
    t.barrier().map_err(|e| err("barrier", e))?;
    let waited = started.elapsed();
    if t.rank() != 0 && waited < LATE / 2 {
        return Err(format!("left the barrier after {waited:?}, before rank 0 arrived ({LATE:?} late)"));
    }
    Ok(())
}

/// A receive nobody answers fails with a timeout naming the peer, on time.
fn recv_times_out(t: &mut dyn Transport) -> Result<(), String> {
    let peer = match t.rank() {
        0 => 1,
        1 => 0,
        _ => return Ok(()),
    };
    let saved = t.timeout();
    t.set_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let result = t.recv(peer, 99);
    let waited = started.elapsed();
    t.set_timeout(saved);
    match result {
        Err(e @ TransportError::Timeout { .. }) if e.peer() == Some(peer) => {
            if waited < Duration::from_millis(250) || waited > Duration::from_secs(5) {
                return Err(format!("timed out after {waited:?}, the timeout was 300 ms"));
            }
            Ok(())
        }
        Err(e) => Err(format!("expected a timeout naming rank {peer}, got: {e}")),
        Ok(_) => Err("a receive nobody answered returned a message".into()),
    }
}

/// A receive bounded per call ([`Transport::recv_within`]) times out on the transport's clock
/// when the message comes later (rank 1 holds it back 600 ms with [`Transport::pass`]), leaves
/// it for the next receive, and leaves the transport's own timeout as it was.
fn recv_within_its_bound(t: &mut dyn Transport) -> Result<(), String> {
    const HOLD: Duration = Duration::from_millis(600);
    const BOUND: Duration = Duration::from_millis(300);
    match t.rank() {
        0 => {
            let timeout = t.timeout();
            let started = t.now();
            match t.recv_within(1, 97, BOUND) {
                Err(e @ TransportError::Timeout { .. }) if e.peer() == Some(1) => {}
                Err(e) => return Err(format!("expected a timeout naming rank 1, got: {e}")),
                Ok(_) => return Err("a message held back past the bound arrived within it".into()),
            }
            let waited = t.now().saturating_duration_since(started);
            if waited < BOUND * 5 / 6 {
                return Err(format!(
                    "timed out after {waited:?} on the transport's clock, the bound was {BOUND:?}"
                ));
            }
            if t.timeout() != timeout {
                return Err("recv_within changed the transport's timeout".into());
            }
            let got = t.recv(1, 97).map_err(|e| err("recv of the late message", e))?;
            expect_bytes("late message", &got, b"late")
        }
        1 => {
            t.pass(HOLD);
            t.send(0, 97, b"late").map_err(|e| err("send of the late message", e))
        }
        _ => Ok(()),
    }
}

/// The highest rank leaves (drops its endpoint); rank 0's receive from it and its broadcast
/// fail, naming it, within the timeout; the others' broadcasts fail too instead of hanging.
fn dead_peer<T: Transport>(mut t: T) -> Result<(), String> {
    let victim = t.size() - 1;
    if t.rank() == victim {
        drop(t);
        return Ok(());
    }
    t.set_timeout(Duration::from_secs(1));
    let started = Instant::now();
    if t.rank() == 0 {
        match t.recv(victim, 98) {
            Err(e) if e.peer() == Some(victim) => {}
            Err(e) => return Err(format!("recv from the departed rank {victim}: wrong error: {e}")),
            Ok(_) => return Err(format!("recv from the departed rank {victim} returned a message")),
        }
    }
    let mut buf = if t.rank() == 0 { pattern(5, 4096) } else { Vec::new() };
    // The root must fail and name the departed rank. A receiver fails when its bytes had to
    // pass through that rank (the pseudo-broadcast ring); with a plain broadcast it may get
    // them straight from the root, and then they must be right.
    match (t.rank(), t.broadcast(0, &mut buf)) {
        (0, Err(e)) if e.peer() == Some(victim) => {}
        (0, Err(e)) => {
            return Err(format!("broadcast without rank {victim}: error names the wrong rank: {e}"));
        }
        (0, Ok(())) => return Err(format!("broadcast succeeded although rank {victim} left")),
        (_, Err(_)) => {}
        (_, Ok(())) if buf == pattern(5, 4096) => {}
        (_, Ok(())) => return Err("broadcast without the departed rank delivered wrong bytes".into()),
    }
    // The survivors re-form their broadcast without the departed rank; what the abandoned
    // broadcast left in their mailboxes must not disturb it.
    // A survivor may still wait in the abandoned broadcast (up to its timeout) while another
    // has given up, so every survivor tells the root it left it, and the root says when to
    // start once all have (as the epoch loop's restart does).
    let survivors: Vec<usize> = (0..victim).collect();
    if t.rank() == 0 {
        for &r in &survivors[1..] {
            t.recv_within(r, 97, Duration::from_secs(10))
                .map_err(|e| err("recv of a survivor's leave", e))?;
        }
        for &r in &survivors[1..] {
            t.send(r, 99, b"go").map_err(|e| err("send of the go-ahead", e))?;
        }
    } else {
        t.send(0, 97, b"left").map_err(|e| err("send of the leave", e))?;
        t.recv_within(0, 99, Duration::from_secs(10)).map_err(|e| err("recv of the go-ahead", e))?;
    }
    let mut buf = if t.rank() == 0 { pattern(6, 4096) } else { Vec::new() };
    t.broadcast_among(0, &survivors, 1, &mut buf).map_err(|e| err("broadcast among the survivors", e))?;
    expect_bytes("broadcast among the survivors", &buf, &pattern(6, 4096))?;
    // Every wait is bounded: no rank may take more than a few timeouts in all.
    let took = started.elapsed();
    if took > Duration::from_secs(10) {
        return Err(format!("took {took:?} to notice rank {victim} left"));
    }
    Ok(())
}
