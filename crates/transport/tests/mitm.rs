//! A man in the middle on 127.0.0.1, between the master and worker 1: it flips one bit in,
//! replays or drops one sealed frame after the handshake, and each time only that link ends,
//! named (worker 1 sees the master gone with the authentication failure; worker 2 goes on).
//! Its capture of a sealed run holds none of the payload's bytes; of a plain-text run
//! (`sealed: false`) it does, so the capture test can fail.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use ubershuffle_transport::tcp::{MasterListener, TcpConfig, TcpTransport, connect_worker};
use ubershuffle_transport::{Transport, TransportError};

/// What the proxy does to the master's sealed chunks towards worker 1.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Attack {
    /// Forward everything (and record it).
    None,
    /// Flip one bit in the middle of this chunk.
    Flip(usize),
    /// Send this chunk twice.
    Replay(usize),
    /// Leave this chunk out.
    Drop(usize),
}

/// Sealed chunks the master sends worker 1 before the cluster starts (its handshake proof,
/// the welcome, the start): the first message of the test is chunk 3.
const FIRST_MESSAGE: usize = 3;

fn read_exactly(s: &mut TcpStream, n: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).ok()?;
    Some(buf)
}

/// Copies the master's bytes to the worker: its plain challenge frame, then sealed chunks,
/// attacked as `attack` says.
fn master_to_worker(mut from: TcpStream, mut to: TcpStream, attack: Attack, seen: Arc<Mutex<Vec<u8>>>) {
    let mut forward = |bytes: &[u8]| {
        seen.lock().unwrap().extend_from_slice(bytes);
        to.write_all(bytes).is_ok()
    };
    if attack == Attack::None {
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            if !forward(&buf[..n]) {
                return;
            }
        }
        return;
    }
    let Some(head) = read_exactly(&mut from, 28) else { return };
    let len = u32::from_le_bytes([head[16], head[17], head[18], head[19]]) as usize;
    let Some(body) = read_exactly(&mut from, len) else { return };
    if !forward(&[head, body].concat()) {
        return;
    }
    for k in 0.. {
        let Some(prefix) = read_exactly(&mut from, 2) else { return };
        let Some(body) = read_exactly(&mut from, u16::from_be_bytes([prefix[0], prefix[1]]) as usize) else {
            return;
        };
        let mut chunk = [prefix, body].concat();
        let ok = match attack {
            Attack::Flip(at) if at == k => {
                let mid = chunk.len() / 2;
                chunk[mid] ^= 0x04;
                forward(&chunk)
            }
            Attack::Replay(at) if at == k => forward(&chunk) && forward(&chunk),
            Attack::Drop(at) if at == k => true,
            _ => forward(&chunk),
        };
        if !ok {
            return;
        }
    }
}

/// A proxy for one connection to `master`; returns its address and the bytes it saw.
fn proxy(master: String, attack: Attack) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    thread::spawn(move || {
        let (worker, _) = listener.accept().unwrap();
        let upstream = TcpStream::connect(master).unwrap();
        let (w2, u2, rec) = (worker.try_clone().unwrap(), upstream.try_clone().unwrap(), record.clone());
        thread::spawn(move || master_to_worker(u2, w2, attack, rec));
        let (mut from, mut to) = (worker, upstream);
        let mut buf = [0u8; 65536];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            record.lock().unwrap().extend_from_slice(&buf[..n]);
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    (addr, seen)
}

/// The master, worker 1 (through the proxy) and worker 2 (direct).
fn cluster(attack: Attack, sealed: bool) -> (TcpTransport, TcpTransport, TcpTransport, Arc<Mutex<Vec<u8>>>) {
    let config = TcpConfig::new("mitm-test-token-0123456789abcdef0123456789")
        .with_timeout(Duration::from_secs(3))
        .with_sealed(sealed);
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (via, seen) = proxy(addr.clone(), attack);
    let master = thread::spawn(move || listener.accept_workers(2, |_| {}).unwrap());
    let c = config.clone();
    let first = thread::spawn(move || connect_worker(&via, &c).unwrap());
    thread::sleep(Duration::from_millis(200)); // the proxied worker joins first: rank 1
    let second = connect_worker(&addr, &config).unwrap();
    let (m, w1) = (master.join().unwrap(), first.join().unwrap());
    assert_eq!((w1.rank(), second.rank()), (1, 2));
    (m, w1, second, seen)
}

/// Sends two messages to each worker; returns what worker 1 saw and checks worker 2 got both.
fn attacked(attack: Attack) -> TransportError {
    let (mut m, mut w1, mut w2, _) = cluster(attack, true);
    for tag in [1, 2] {
        m.send(1, tag, &[tag as u8; 1000]).unwrap();
        m.send(2, tag, &[tag as u8; 1000]).unwrap();
    }
    for tag in [1, 2] {
        assert_eq!(w2.recv(0, tag).unwrap(), vec![tag as u8; 1000], "worker 2's link is untouched");
    }
    let e = (|| {
        for tag in [1, 2] {
            w1.recv(0, tag)?;
        }
        Ok(())
    })();
    // The master still reaches worker 2 afterwards.
    m.send(2, 3, b"after").unwrap();
    assert_eq!(w2.recv(0, 3).unwrap(), b"after");
    e.unwrap_err()
}

fn assert_forged(e: &TransportError, what: &str) {
    assert!(matches!(e, TransportError::PeerGone { peer: 0, .. }), "{what}: {e}");
    assert!(e.to_string().contains("sent a forged frame: sealed chunk"), "{what}: {e}");
    assert!(e.to_string().contains("failed authentication"), "{what}: {e}");
}

#[test]
fn a_flipped_bit_ends_that_link_named() {
    assert_forged(&attacked(Attack::Flip(FIRST_MESSAGE)), "flip");
}

#[test]
fn a_replayed_frame_ends_that_link_named() {
    assert_forged(&attacked(Attack::Replay(FIRST_MESSAGE)), "replay");
}

#[test]
fn a_dropped_frame_ends_that_link_named() {
    assert_forged(&attacked(Attack::Drop(FIRST_MESSAGE)), "drop");
}

#[test]
fn a_capture_of_a_sealed_run_holds_none_of_the_payload() {
    let record = b"DISTINCTIVE-RECORD-PAYLOAD:0123456789:".repeat(50);
    let captured = |sealed: bool| {
        let (mut m, mut w1, _w2, seen) = cluster(Attack::None, sealed);
        m.send(1, 1, &record).unwrap();
        w1.send(0, 2, &record).unwrap();
        assert_eq!(w1.recv(0, 1).unwrap(), record);
        assert_eq!(m.recv(1, 2).unwrap(), record);
        let all = seen.lock().unwrap().clone();
        assert!(all.len() > 2 * record.len(), "the proxy saw the traffic");
        all.windows(16).any(|w| record.windows(16).take(38).any(|r| r == w))
    };
    assert!(!captured(true), "a sealed capture shows the payload");
    assert!(captured(false), "a plain-text capture shows the payload (the test can fail)");
}
