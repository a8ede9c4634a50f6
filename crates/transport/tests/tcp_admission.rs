//! TCP admission under hostile peers: connections that trickle bytes or stay silent do not
//! hold up honest workers; a fake master or a fake worker learns nothing of the token; empty
//! tokens are refused and long ones work; a worker that leaves after joining is replaced.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use ubershuffle_transport::frame::{FrameKind, read_frame, write_frame};
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, TcpTransport, connect_worker};
use ubershuffle_transport::{BroadcastMethod, Transport, TransportError};

fn config(token: &str) -> TcpConfig {
    TcpConfig::new(token)
        .with_timeout(Duration::from_secs(5))
        .with_join_timeout(Duration::from_secs(20))
        .with_broadcast(BroadcastMethod::PseudoBroadcast)
}

/// The master's endpoint (or why setup failed) and the reasons of its refusals.
type MasterOutcome = (Result<TcpTransport, TransportError>, Vec<String>);

/// Starts a master for `workers` in a thread; returns its address and its outcome.
fn master(config: TcpConfig, workers: usize) -> (String, thread::JoinHandle<MasterOutcome>) {
    let listener = MasterListener::bind("127.0.0.1:0", config).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let mut refusals = Vec::new();
        let t = listener.accept_workers(workers, |r| refusals.push(r.reason.clone()));
        (t, refusals)
    });
    (addr, handle)
}

#[test]
fn trickling_and_idle_connections_do_not_hold_up_honest_workers() {
    let (addr, master) = master(config("s3cret"), 2);
    // 50 connections that never send, 50 that send one byte of a hello every 100 ms.
    let mut idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let tricklers: Vec<_> = (0..50)
        .map(|_| {
            let addr = addr.clone();
            thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                for b in b"USHF\x02\x01\x00\x00" {
                    if s.write_all(&[*b]).is_err() {
                        return;
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let addr = addr.clone();
            thread::spawn(move || connect_worker(&addr, &config("s3cret")).map(|t| t.rank()))
        })
        .collect();
    let (t, _refusals) = master.join().unwrap();
    let took = started.elapsed();
    let mut ranks: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap().unwrap()).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [1, 2]);
    assert_eq!(t.unwrap().size(), 3);
    assert!(took < Duration::from_secs(1), "two honest workers took {took:?} to join beside 100 stallers");
    idle.clear();
    for t in tricklers {
        t.join().unwrap();
    }
}

#[test]
fn a_handshake_has_a_total_deadline_however_bytes_trickle() {
    let c = config("k").with_timeout(Duration::from_millis(400)).with_join_timeout(Duration::from_secs(3));
    let (addr, master) = master(c, 1);
    let mut s = TcpStream::connect(&addr).unwrap();
    let started = Instant::now();
    // A byte every 100 ms would keep a per-read timeout alive for ever.
    let mut cut_off = None;
    for _ in 0..20 {
        if s.write_all(b"U").is_err() {
            break;
        }
        thread::sleep(Duration::from_millis(100));
        let mut byte = [0u8; 1];
        s.set_nonblocking(true).unwrap();
        let closed = !matches!(s.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        s.set_nonblocking(false).unwrap();
        if closed {
            cut_off = Some(started.elapsed());
            break;
        }
    }
    let cut_off = cut_off.expect("the master closed the trickling connection");
    assert!(cut_off < Duration::from_millis(900), "cut off after {cut_off:?}");
    let worker = thread::spawn(move || connect_worker(&addr, &config("k")).map(|t| t.rank()));
    let (t, refusals) = master.join().unwrap();
    assert!(t.is_ok() && worker.join().unwrap().unwrap() == 1);
    assert!(
        refusals.iter().any(|r| r.contains("bytes but did not finish its hello within 400ms")),
        "{refusals:?}"
    );
}

/// One side of the handshake of a worker joining the master (the public prologue: protocol
/// name, sealed, the join context) under a guessed key, as an impostor would run it.
fn impostor(initiator: bool, guess: [u8; 32]) -> snow::HandshakeState {
    let params: snow::params::NoiseParams = ubershuffle_transport::seal::NOISE_PARAMS.parse().unwrap();
    let b = snow::Builder::new(params);
    let key = b.generate_keypair().unwrap();
    let prologue = [&b"ubershuffle-tcp-noise-v1"[..], &[1], &[0; 13]].concat();
    let b = b.local_private_key(&key.private).unwrap().psk(3, &guess).unwrap().prologue(&prologue).unwrap();
    if initiator { b.build_initiator() } else { b.build_responder() }.unwrap()
}

#[test]
fn a_fake_master_learns_nothing_and_is_not_believed() {
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap().to_string();
    let token = "a-secret-token-the-fake-master-wants";
    let seen = thread::spawn(move || {
        let (mut s, _) = fake.accept().unwrap();
        let hello = read_frame(&mut s, 4096).unwrap();
        // Run the key exchange as far as it can without the token (another prologue and key:
        // the worker's proof does not open), then claim success with junk.
        let mut h = impostor(false, [7; 32]);
        let mut out = vec![0u8; 1024];
        h.read_message(&hello.payload, &mut out).unwrap();
        let n = h.write_message(&[], &mut out).unwrap();
        write_frame(&mut s, FrameKind::Challenge, 0, 0, &[&out[..n]]).unwrap();
        let proof = read_frame(&mut s, 4096).unwrap();
        assert!(h.read_message(&proof.payload, &mut vec![0u8; 1024]).is_err(), "a guess opened the proof");
        write_frame(&mut s, FrameKind::Proof, 0, 0, &[&[0u8; 32]]).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        (hello, proof, rest)
    });
    let e = connect_worker(&addr, &config(token)).unwrap_err();
    assert!(e.to_string().contains("did not prove that it knows the key"), "{e}");
    let (hello, proof, rest) = seen.join().unwrap();
    assert_eq!(hello.kind, FrameKind::Hello);
    assert_eq!(hello.payload.len(), 32 + 16, "a hello is an ephemeral public key (and an empty tag)");
    assert_eq!(proof.kind, FrameKind::Proof);
    let all: Vec<u8> = [hello.payload, proof.payload, rest].concat();
    assert!(!all.windows(token.len()).any(|w| w == token.as_bytes()), "the token crossed the wire");
    assert!(!all.windows(6).any(|w| w == b"secret"));
    assert!(!all.windows(9).any(|w| w == b"127.0.0.1"), "the address travels encrypted");
}

#[test]
fn a_fake_worker_is_refused_without_a_proof_from_the_master() {
    let (addr, master) = master(config("right"), 1);
    let mut s = TcpStream::connect(&addr).unwrap();
    // A well-formed first message (tag 1: sealed), then a proof under a guessed key.
    let mut h = impostor(true, [9; 32]);
    let mut out = vec![0u8; 1024];
    let n = h.write_message(&[], &mut out).unwrap();
    write_frame(&mut s, FrameKind::Hello, 0, 1, &[&out[..n]]).unwrap();
    let challenge = read_frame(&mut s, 4096).unwrap();
    assert_eq!((challenge.kind, challenge.payload.len()), (FrameKind::Challenge, 32 + 48 + 16));
    // The challenge carries nothing that depends on the token; the proof under a guess fails.
    h.read_message(&challenge.payload, &mut out).unwrap();
    let n = h.write_message(&[0, 0], &mut out).unwrap();
    write_frame(&mut s, FrameKind::Proof, 0, 0, &[&out[..n]]).unwrap();
    let answer = read_frame(&mut s, 4096).unwrap();
    assert_eq!(answer.kind, FrameKind::Refused);
    assert_eq!(answer.payload, b"wrong token");
    // A worker with the wrong token is refused too; the right one joins.
    let wrong = connect_worker(&addr, &config("wrong")).unwrap_err();
    assert_eq!(wrong.to_string(), "the master refused this worker: wrong token");
    let worker = thread::spawn(move || connect_worker(&addr, &config("right")).map(|t| t.rank()));
    let (t, refusals) = master.join().unwrap();
    assert!(t.is_ok() && worker.join().unwrap().unwrap() == 1);
    assert_eq!(refusals.iter().filter(|r| *r == "wrong token").count(), 2, "{refusals:?}");
}

#[test]
fn empty_tokens_are_refused_and_long_tokens_work() {
    let e = MasterListener::bind("127.0.0.1:0", config("")).unwrap_err();
    assert!(e.to_string().contains("token is empty"), "{e}");
    let e = connect_worker("127.0.0.1:9", &config("")).unwrap_err();
    assert!(e.to_string().contains("token is empty"), "{e}");
    let long = "x".repeat(4000);
    let (addr, m) = master(config(&long), 1);
    let truncated = connect_worker(&addr, &config(&long[..1024])).unwrap_err();
    assert!(matches!(truncated, TransportError::Refused { .. }), "{truncated}");
    let worker = thread::spawn(move || connect_worker(&addr, &config(&"x".repeat(4000))).map(|t| t.rank()));
    let (t, _) = m.join().unwrap();
    assert_eq!(t.unwrap().size(), 2);
    assert_eq!(worker.join().unwrap().unwrap_or_else(|e| panic!("{e}")), 1);
}

#[test]
fn a_worker_that_leaves_after_joining_is_replaced() {
    let (addr, master) = master(config("t"), 2);
    // A worker that authenticates, then leaves before the cluster starts.
    let leaver = {
        let addr = addr.clone();
        thread::spawn(move || {
            let mut c = config("t");
            c.join_timeout = Duration::from_millis(300);
            let _ = connect_worker(&addr, &c); // gives up waiting for the welcome, drops
        })
    };
    leaver.join().unwrap();
    thread::sleep(Duration::from_millis(100));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let addr = addr.clone();
            thread::spawn(move || connect_worker(&addr, &config("t")).map(|t| t.rank()))
        })
        .collect();
    let (t, refusals) = master.join().unwrap();
    assert_eq!(t.unwrap().size(), 3);
    for w in workers {
        w.join().unwrap().unwrap();
    }
    assert!(refusals.iter().any(|r| r.contains("left after joining")), "{refusals:?}");
}

#[test]
fn a_master_that_stalls_mid_frame_is_described_as_such() {
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap().to_string();
    let stalls = thread::spawn(move || {
        let (mut s, _) = fake.accept().unwrap();
        let _hello = read_frame(&mut s, 4096).unwrap();
        s.write_all(b"USHF\x02\x07\x00").unwrap(); // 7 bytes of a challenge's header, then nothing
        thread::sleep(Duration::from_millis(900));
    });
    let c = config("k").with_timeout(Duration::from_millis(400));
    let e = connect_worker(&addr, &c).unwrap_err().to_string();
    assert!(e.contains("sent 7 bytes but not a whole setup frame within"), "{e}");
    stalls.join().unwrap();
}

#[test]
fn with_at_least_a_number_the_cluster_starts_without_the_missing_workers() {
    let mut c = config("t");
    c.join_timeout = Duration::from_millis(800);
    let listener = MasterListener::bind("127.0.0.1:0", c.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let master = thread::spawn(move || listener.accept_at_least(3, 2, |r| panic!("refused {r:?}")));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (addr, c) = (addr.clone(), config("t"));
            thread::spawn(move || connect_worker(&addr, &c).unwrap())
        })
        .collect();
    let mut t = master.join().unwrap().unwrap();
    assert_eq!((t.size(), t.connected()), (4, vec![1, 2]));
    // The absent rank counts as gone at once; the others work as usual.
    let started = Instant::now();
    assert_eq!(t.recv(3, 1).unwrap_err().peer(), Some(3));
    assert!(started.elapsed() < Duration::from_secs(1));
    let mut ws: Vec<TcpTransport> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    ws.sort_by_key(|w| w.rank());
    assert_eq!(ws[0].connected(), vec![0, 2]);
    let group = [0, 1, 2];
    let senders: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            thread::spawn(move || {
                let mut buf = Vec::new();
                w.broadcast_among(0, &group, 5, &mut buf).unwrap();
                buf
            })
        })
        .collect();
    t.broadcast_among(0, &group, 5, &mut b"hello".to_vec()).unwrap();
    for s in senders {
        assert_eq!(s.join().unwrap(), b"hello");
    }
    // Too few: the join fails as before.
    let listener = MasterListener::bind("127.0.0.1:0", c).unwrap();
    let err = listener.accept_at_least(3, 1, |_| {}).unwrap_err().to_string();
    assert!(err.contains("only 0 of 3 workers joined"), "{err}");
}
