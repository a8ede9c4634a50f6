//! A worker that leaves after its welcome, while the workers link up (real loopback sockets):
//! it is replaced by the next worker to join, or the cluster starts with `min_workers`, or the
//! join fails naming it.

#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::net::TcpStream;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::join::MAX_SETUP_FRAME;
use super::noise::{Context, LIVE_JOIN, Psk, live_key, pair_key, token_psk};
use super::setup_io::{Initiate, authenticate_to, read_before};
use super::{MasterListener, TcpConfig, TcpTransport, connect_worker};
use crate::frame::FrameKind;
use crate::{BroadcastMethod, Transport, TransportError};

fn config(join_timeout: Duration) -> TcpConfig {
    TcpConfig::new("t0ken")
        .with_timeout(Duration::from_secs(5))
        .with_join_timeout(join_timeout)
        .with_broadcast(BroadcastMethod::PseudoBroadcast)
}

/// Connects to `master` and proves the token, sending `listen` as the peer address.
fn join_as(master: &str, config: &TcpConfig, listen: &str, deadline: Instant) -> Conn {
    let stream = TcpStream::connect(master).unwrap();
    let how = Initiate {
        psk: &token_psk(&config.token),
        context: Context::Join,
        hello: FrameKind::Hello,
        sender: 0,
        listen,
        sealed: config.sealed,
    };
    authenticate_to(stream, &how, deadline, "master").unwrap()
}

/// Connects to the peer listener at `addr` of rank `to` and claims to be rank `from`, a worker
/// admitted while the cluster runs, proving `psk`.
fn claim_rank(addr: &str, psk: &Psk, from: u32, to: u32) -> Result<Conn, TransportError> {
    let how = Initiate {
        psk,
        context: Context::Peer { from, to, generation: LIVE_JOIN },
        hello: FrameKind::PeerHello,
        sender: from,
        listen: "",
        sealed: true,
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    authenticate_to(TcpStream::connect(addr).unwrap(), &how, deadline, &format!("rank {to}"))
}

/// Joins `master` as a worker that proves the token and then leaves as soon as it is
/// welcomed (as if killed while the workers link up). Returns once it has joined; the thread
/// ends when it has left.
fn join_then_leave_after_welcome(master: &str, config: &TcpConfig) -> thread::JoinHandle<bool> {
    let deadline = Instant::now() + config.join_timeout;
    let mut stream = join_as(master, config, "127.0.0.1:9", deadline);
    thread::spawn(move || {
        let welcomed = read_before(&mut stream, deadline, MAX_SETUP_FRAME, "master")
            .is_ok_and(|f| f.kind == FrameKind::Welcome);
        drop(stream);
        welcomed
    })
}

/// Joins `master` as a worker that proves the token and then freezes (as if stopped with
/// SIGSTOP): its peer listener takes connections into the kernel's backlog and never answers,
/// and it never answers the master. Returns once it has joined; the thread says on `dropped`
/// when the master closed its connection, and whether it was welcomed before.
fn join_then_freeze(master: &str, config: &TcpConfig, dropped: mpsc::Sender<bool>) -> thread::JoinHandle<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = listener.local_addr().unwrap().to_string();
    let deadline = Instant::now() + config.join_timeout;
    let mut conn = join_as(master, config, &listen, deadline);
    thread::spawn(move || {
        let welcomed = read_before(&mut conn, deadline, MAX_SETUP_FRAME, "master")
            .is_ok_and(|f| f.kind == FrameKind::Welcome);
        // Frozen: reads nothing more until the master closes the connection.
        conn.stream.set_read_timeout(None).unwrap();
        let mut rest = Vec::new();
        let _ = (&conn.stream).read_to_end(&mut rest);
        drop(listener);
        let _ = dropped.send(welcomed);
    })
}

fn worker(master: &str, config: &TcpConfig) -> thread::JoinHandle<Result<TcpTransport, TransportError>> {
    let (master, config) = (master.to_string(), config.clone());
    thread::spawn(move || connect_worker(&master, &config))
}

/// Every worker gets the master's broadcast (a cluster that really started).
fn broadcast_reaches_all(mut master: TcpTransport, workers: Vec<TcpTransport>) {
    let group = master.connected();
    let threads: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let mut group = w.connected();
            group.push(w.rank());
            group.sort_unstable();
            thread::spawn(move || {
                let mut buf = Vec::new();
                w.broadcast_among(0, &group, 1, &mut buf).unwrap();
                buf
            })
        })
        .collect();
    let mut group = group;
    group.insert(0, 0);
    let mut buf = b"hello".to_vec();
    master.broadcast_among(0, &group, 1, &mut buf).unwrap();
    for t in threads {
        assert_eq!(t.join().unwrap(), b"hello");
    }
}

/// Runs a master for `workers` (at least `min`) in a thread: its endpoint and refusals.
type MasterRun = thread::JoinHandle<(Result<TcpTransport, TransportError>, Vec<String>)>;

fn master(config: &TcpConfig, workers: usize, min: usize) -> (String, MasterRun) {
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let run = thread::spawn(move || {
        let mut refused = Vec::new();
        let t = listener.accept_at_least(workers, min, |r| refused.push(r.reason.clone()));
        (t, refused)
    });
    (addr, run)
}

#[test]
fn a_worker_lost_while_linking_up_is_replaced_whatever_its_rank() {
    // The leaver joins first (rank 1: the others fail to connect to it) or last (rank 3: the
    // others wait for its connection); either way a replacement takes its place.
    for leaver_first in [true, false] {
        let cfg = config(Duration::from_secs(20));
        let (addr, run) = master(&cfg, 3, 3);
        let mut workers = Vec::new();
        let leaver = if leaver_first {
            let l = join_then_leave_after_welcome(&addr, &cfg);
            workers.push(worker(&addr, &cfg));
            workers.push(worker(&addr, &cfg));
            l
        } else {
            workers.push(worker(&addr, &cfg));
            workers.push(worker(&addr, &cfg));
            thread::sleep(Duration::from_millis(300));
            join_then_leave_after_welcome(&addr, &cfg)
        };
        assert!(leaver.join().unwrap(), "the leaver was welcomed before it left");
        workers.push(worker(&addr, &cfg));
        let (m, refused) = run.join().unwrap();
        let m = m.unwrap();
        assert_eq!(m.connected(), vec![1, 2, 3]);
        assert!(refused.iter().any(|r| r.contains("after its welcome")), "{refused:?}");
        let workers: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
        let mut ranks: Vec<usize> = workers.iter().map(Transport::rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, vec![1, 2, 3]);
        broadcast_reaches_all(m, workers);
    }
}

#[test]
fn with_min_workers_the_survivors_start_without_the_lost_one() {
    // Workers wait longer than the master, so they are still there when it starts.
    let (cfg, patient) = (config(Duration::from_millis(1500)), config(Duration::from_secs(20)));
    let (addr, run) = master(&cfg, 3, 2);
    let leaver = join_then_leave_after_welcome(&addr, &cfg);
    let workers = [worker(&addr, &patient), worker(&addr, &patient)];
    assert!(leaver.join().unwrap());
    let (m, _) = run.join().unwrap();
    let m = m.unwrap();
    assert_eq!(m.connected(), vec![1, 2]);
    let workers: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    broadcast_reaches_all(m, workers);
}

#[test]
fn without_a_replacement_the_join_fails_naming_the_lost_worker_and_the_deadline() {
    let cfg = config(Duration::from_millis(800));
    let (addr, run) = master(&cfg, 2, 2);
    let leaver = join_then_leave_after_welcome(&addr, &cfg);
    let w = worker(&addr, &cfg);
    assert!(leaver.join().unwrap());
    let e = run.join().unwrap().0.unwrap_err().to_string();
    assert!(e.contains("only 1 of 2 workers joined within 800ms"), "{e}");
    assert!(e.contains("left during the join: the worker from 127.0.0.1:"), "{e}");
    assert!(e.contains("(rank 1): closed its connection"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert!(w.join().unwrap().is_err());
}

#[test]
fn a_worker_that_joins_while_the_cluster_runs_takes_a_free_rank_and_links_up() {
    let cfg = config(Duration::from_secs(20));
    let (addr, run) = master(&cfg, 3, 3);
    let workers: Vec<_> = (0..3).map(|_| worker(&addr, &cfg)).collect();
    let mut m = run.join().unwrap().0.unwrap();
    let mut workers: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    workers.sort_by_key(Transport::rank);
    // Rank 2 leaves; the others notice.
    drop(workers.remove(1));
    assert!(m.recv_within(2, 5, Duration::from_secs(5)).is_err());
    // Nobody waits yet: nothing to admit.
    assert_eq!(m.admit_waiting(&[2], &[1, 3]).unwrap(), Vec::<usize>::new());
    let newcomer = worker(&addr, &cfg);
    // The present workers wait for its link while the master admits it.
    let present: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            thread::spawn(move || {
                w.await_links(&[2]).unwrap();
                w
            })
        })
        .collect();
    let started = Instant::now();
    let filled = loop {
        let filled = m.admit_waiting(&[2], &[1, 3]).unwrap();
        if !filled.is_empty() || started.elapsed() > Duration::from_secs(10) {
            break filled;
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(filled, vec![2]);
    let newcomer = newcomer.join().unwrap().unwrap();
    assert_eq!((newcomer.rank(), newcomer.connected()), (2, vec![0, 1, 3]));
    let mut workers: Vec<TcpTransport> = present.into_iter().map(|t| t.join().unwrap()).collect();
    workers.push(newcomer);
    assert_eq!(m.connected(), vec![1, 2, 3]);
    // The keys of rank 2's links are fresh per admission: once rank 3 has taken the next one
    // from the master, the key the lost rank 2 held (and the one just spent) open nothing.
    let secret = m.secret.unwrap().0;
    let renewed = Instant::now();
    while claim_rank(&m.addrs[3], &live_key(&secret, 2, 3, 2), 2, 3).is_err() {
        assert!(renewed.elapsed() < Duration::from_secs(5), "rank 3 never took the renewed key");
        thread::sleep(Duration::from_millis(20));
    }
    for spent in [live_key(&secret, 2, 3, 1), pair_key(&secret, 2, 3, 0)] {
        let e = claim_rank(&m.addrs[3], &spent, 2, 3).unwrap_err().to_string();
        assert!(e.contains("refused this worker: wrong key for rank 2"), "{e}");
    }
    broadcast_reaches_all(m, workers);
}

#[test]
fn a_worker_frozen_after_joining_is_replaced_after_one_timeout() {
    // A short timeout: the frozen worker (rank 1) is dropped one timeout after its welcome,
    // and a replacement that joins then takes its place.
    let cfg = config(Duration::from_secs(20)).with_timeout(Duration::from_millis(700));
    let (addr, run) = master(&cfg, 3, 3);
    let (dropped, was_dropped) = mpsc::channel();
    let frozen = join_then_freeze(&addr, &cfg, dropped);
    let mut workers = vec![worker(&addr, &cfg), worker(&addr, &cfg)];
    assert!(was_dropped.recv().unwrap(), "the frozen worker was welcomed before it was dropped");
    workers.push(worker(&addr, &cfg));
    let (m, refused) = run.join().unwrap();
    let m = m.unwrap();
    assert_eq!(m.connected(), vec![1, 2, 3]);
    assert!(refused.iter().any(|r| r.contains("did not answer its welcome within 700ms")), "{refused:?}");
    let workers: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    broadcast_reaches_all(m, workers);
    frozen.join().unwrap();
}

#[test]
fn with_min_workers_a_frozen_worker_is_left_behind() {
    let cfg = config(Duration::from_millis(2500)).with_timeout(Duration::from_millis(700));
    let patient = config(Duration::from_secs(20)).with_timeout(Duration::from_millis(700));
    let (addr, run) = master(&cfg, 3, 2);
    let (dropped, was_dropped) = mpsc::channel();
    let frozen = join_then_freeze(&addr, &cfg, dropped);
    let workers = [worker(&addr, &patient), worker(&addr, &patient)];
    let (m, _) = run.join().unwrap();
    let m = m.unwrap();
    assert_eq!(m.connected(), vec![1, 2]);
    let workers: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    broadcast_reaches_all(m, workers);
    assert!(was_dropped.recv().unwrap());
    frozen.join().unwrap();
}

#[test]
fn a_worker_cannot_speak_as_another_rank_on_a_link_between_workers() {
    // Rank 1 holds the token and its own pair keys; it connects to rank 3's peer listener and
    // claims to be rank 2, under every key it has. Rank 3 refuses each; the cluster goes on.
    let cfg = config(Duration::from_secs(20));
    let (addr, run) = master(&cfg, 3, 3);
    let workers: Vec<_> = (0..3).map(|_| worker(&addr, &cfg)).collect();
    let m = run.join().unwrap().0.unwrap();
    let mut workers: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    workers.sort_by_key(Transport::rank);
    let secret = m.secret.unwrap().0;
    // Every key rank 1 holds: its links now, and its keys for newcomers into ranks 2 and 3.
    let own = [pair_key(&secret, 1, 3, 0), live_key(&secret, 2, 1, 1), live_key(&secret, 3, 1, 1)];
    for psk in own.iter().chain([&token_psk(&cfg.token)]) {
        let e = claim_rank(&m.addrs[3], psk, 2, 3).unwrap_err().to_string();
        assert!(e.contains("refused this worker: wrong key for rank 2"), "{e}");
    }
    // The test can pass: the key a newcomer into rank 2 would hold opens the link.
    assert!(claim_rank(&m.addrs[3], &live_key(&secret, 2, 3, 1), 2, 3).is_ok());
    broadcast_reaches_all(m, workers);
}
