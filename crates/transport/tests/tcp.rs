//! TCP-specific behaviour: token authentication, and a stalled or departed worker named by
//! the master's error within the timeout.

#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::{Duration, Instant};

use ubershuffle_transport::tcp::{MasterListener, TcpConfig, connect_worker};
use ubershuffle_transport::{BroadcastMethod, Transport, TransportError};

fn quick(token: &str, method: BroadcastMethod) -> TcpConfig {
    TcpConfig::new(token)
        .with_timeout(Duration::from_millis(500))
        .with_join_timeout(Duration::from_secs(20))
        .with_broadcast(method)
}

#[test]
fn a_wrong_token_is_refused_on_both_sides() {
    let config = quick("right", BroadcastMethod::PseudoBroadcast);
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let master = thread::spawn(move || {
        let mut refusals = Vec::new();
        let master = listener.accept_workers(1, |r| refusals.push(r.clone())).unwrap();
        (master, refusals)
    });
    // The intruder is refused; the genuine worker then joins.
    let wrong = config.clone().with_token("wrong");
    let refused = connect_worker(&addr, &wrong).unwrap_err();
    assert!(matches!(&refused, TransportError::Refused { reason } if reason == "wrong token"), "{refused}");
    assert_eq!(refused.to_string(), "the master refused this worker: wrong token");
    let mut worker = connect_worker(&addr, &config).unwrap();
    let (mut master, refusals) = master.join().unwrap();
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].reason, "wrong token");
    master.send(1, 0, b"hello").unwrap();
    assert_eq!(worker.recv(0, 0).unwrap(), b"hello");
}

#[test]
fn the_master_gives_up_when_workers_do_not_come() {
    let config = quick("t", BroadcastMethod::Plain).with_join_timeout(Duration::from_millis(300));
    let listener = MasterListener::bind("127.0.0.1:0", config).unwrap();
    let e = listener.accept_workers(2, |_| {}).unwrap_err();
    assert_eq!(e.to_string(), "only 0 of 2 workers joined within 300ms");
}

/// Master plus 4 workers; worker `stalled` stops taking part (its endpoint stays open) or
/// leaves (drops it); the master's broadcast must fail naming it, within a few timeouts.
fn broadcast_without(method: BroadcastMethod, stalled: usize, leaves: bool) {
    let config = quick("t", method);
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (addr, config) = (addr.clone(), config.clone());
            thread::spawn(move || {
                let mut t = connect_worker(&addr, &config).unwrap();
                if t.rank() == stalled {
                    if leaves {
                        drop(t);
                    } else {
                        thread::sleep(Duration::from_secs(3));
                    }
                    return None;
                }
                let mut buf = Vec::new();
                Some(t.broadcast(0, &mut buf).map(|()| buf.len()))
            })
        })
        .collect();
    let mut master = listener.accept_workers(4, |_| {}).unwrap();
    let started = Instant::now();
    let mut buf = vec![7u8; 1 << 20];
    let e = master.broadcast(0, &mut buf).unwrap_err();
    let took = started.elapsed();
    assert_eq!(e.peer(), Some(stalled), "{method:?}: {e}");
    assert!(e.to_string().contains(&format!("rank {stalled}")), "{e}");
    assert!(took < Duration::from_secs(3), "{method:?}: took {took:?}");
    drop(master);
    for w in workers {
        // Every other worker's broadcast fails too (or completed before the failure).
        let _ = w.join().unwrap();
    }
}

#[test]
fn a_stalled_worker_is_named_by_the_pseudo_broadcast() {
    broadcast_without(BroadcastMethod::PseudoBroadcast, 2, false);
}

#[test]
fn a_stalled_worker_is_named_by_the_plain_broadcast() {
    broadcast_without(BroadcastMethod::Plain, 3, false);
}

#[test]
fn a_departed_worker_is_named_by_the_pseudo_broadcast() {
    broadcast_without(BroadcastMethod::PseudoBroadcast, 1, true);
}

#[test]
fn a_broadcast_without_a_departed_worker_fails_at_once_everywhere() {
    // Rank 2 leaves; the next pseudo-broadcast cannot complete anywhere (every piece passes
    // through every receiver), so no rank waits out its timeout on a ring peer or a scatter
    // piece: each fails at once, naming rank 2. (The survivors stay in the cluster, as the
    // epoch loop's workers do.)
    let config = quick("t", BroadcastMethod::PseudoBroadcast).with_timeout(Duration::from_secs(3));
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let noticed = Duration::from_millis(300); // for every rank's links to see rank 2 gone
    let (result_tx, results) = crossbeam_channel::unbounded();
    let (done_tx, done) = crossbeam_channel::unbounded::<()>();
    let workers: Vec<_> = (0..5)
        .map(|_| {
            let (addr, config, result_tx, done) =
                (addr.clone(), config.clone(), result_tx.clone(), done.clone());
            thread::spawn(move || {
                let mut t = connect_worker(&addr, &config).unwrap();
                if t.rank() == 2 {
                    return;
                }
                thread::sleep(noticed);
                let started = Instant::now();
                let mut buf = Vec::new();
                let result = t.broadcast(0, &mut buf);
                result_tx.send((t.rank(), started.elapsed(), result)).unwrap();
                let _ = done.recv();
            })
        })
        .collect();
    let mut master = listener.accept_workers(5, |_| {}).unwrap();
    thread::sleep(noticed);
    let mut buf = vec![7u8; 1 << 20];
    let started = Instant::now();
    let e = master.broadcast(0, &mut buf).unwrap_err();
    assert_eq!(e.peer(), Some(2), "{e}");
    assert!(started.elapsed() < Duration::from_secs(1), "the root took {:?}: {e}", started.elapsed());
    for _ in 0..4 {
        let (rank, took, result) = results.recv().unwrap();
        let e = result.unwrap_err();
        assert_eq!(e.peer(), Some(2), "rank {rank}: {e}");
        assert!(took < Duration::from_secs(1), "rank {rank} took {took:?}: {e}");
    }
    drop(done_tx);
    for w in workers {
        w.join().unwrap();
    }
}
