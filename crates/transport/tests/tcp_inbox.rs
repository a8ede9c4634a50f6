//! Bounded inboxes over TCP (`Transport::limit_inbox`): a peer that sends a frame longer than
//! the bound, or more bytes than the bound no one reads, loses its link, named, while the
//! others' messages still arrive; and before any such call, the join window's bounds
//! (`TcpConfig::with_join_limits`) do the same.

#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::Duration;

use ubershuffle_transport::tcp::{MasterListener, TcpConfig, TcpTransport, connect_worker};
use ubershuffle_transport::{InboxLimits, Transport, TransportError};

/// A master and two workers on loopback, the master limiting worker 1 (rank 1) only.
fn cluster(limits: InboxLimits) -> (TcpTransport, TcpTransport, TcpTransport) {
    let mut ranks = joining(None);
    ranks[0].limit_inbox(&[1], limits);
    let second = ranks.pop().unwrap();
    let first = ranks.pop().unwrap();
    (ranks.pop().unwrap(), first, second)
}

fn gone_detail(e: TransportError) -> String {
    match e {
        TransportError::PeerGone { peer: 1, detail, .. } => detail,
        other => panic!("not rank 1 gone: {other}"),
    }
}

#[test]
fn a_frame_longer_than_the_bound_ends_the_link() {
    let (mut master, mut one, mut two) = cluster(InboxLimits::new(1024, 1 << 20));
    one.send(0, 5, &[7; 1000]).unwrap();
    assert_eq!(master.recv(1, 5).unwrap().len(), 1000);
    let _ = one.send(0, 5, &[7; 2000]);
    let detail = gone_detail(master.recv(1, 5).unwrap_err());
    assert!(detail.contains("corrupt frame"), "{detail}");
    // Rank 2, not limited, is heard as before.
    two.send(0, 5, &[1; 4000]).unwrap();
    assert_eq!(master.recv(2, 5).unwrap().len(), 4000);
}

#[test]
fn unread_bytes_past_the_bound_end_the_link() {
    let (mut master, mut one, _two) = cluster(InboxLimits::new(1 << 20, 8000));
    // Read as they come, any number of messages pass.
    for _ in 0..20 {
        one.send(0, 5, &[7; 1000]).unwrap();
        assert_eq!(master.recv(1, 5).unwrap().len(), 1000);
    }
    // Left unread (tag 9, which no one waits for), the ninth passes the bound.
    for _ in 0..9 {
        let _ = one.send(0, 9, &[7; 1000]);
    }
    let detail = gone_detail(master.recv_within(1, 5, Duration::from_secs(5)).unwrap_err());
    assert!(detail.contains("8000 bytes a rank holds unread"), "{detail}");
}

/// A master and two workers on loopback with `join` limits from the start and no
/// `limit_inbox` call: the join window, before any job.
fn joining(join: Option<InboxLimits>) -> Vec<TcpTransport> {
    let config = TcpConfig::new("inbox").with_timeout(Duration::from_secs(2)).with_join_limits(join);
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (addr, config) = (addr.clone(), config.clone());
            thread::spawn(move || connect_worker(&addr, &config).unwrap())
        })
        .collect();
    let mut all = vec![listener.accept_workers(2, |r| panic!("refused {r:?}")).unwrap()];
    all.extend(workers.into_iter().map(|h| h.join().unwrap()));
    all.sort_by_key(Transport::rank);
    all
}

#[test]
fn a_flood_in_the_join_window_ends_the_link_at_the_join_bound() {
    let join = InboxLimits::new(64 * 1024, 256 * 1024);
    let mut ranks = joining(Some(join));
    // The master, trusted, is not limited at a worker: a message far past the bound arrives.
    ranks[0].send(2, 5, &[3; 1 << 20]).unwrap();
    assert_eq!(ranks[2].recv(0, 5).unwrap().len(), 1 << 20);
    // Worker 1 floods worker 2 and the master with 64 MiB of frames no one waits for, each
    // under the frame bound: both end its link once they hold 256 KiB of it.
    let junk = vec![0x5a; 60 * 1024];
    for to in [2, 0] {
        let mut sent = 0;
        while sent < 64 << 20 && ranks[1].send(to, 9, &junk).is_ok() {
            sent += junk.len();
        }
    }
    for at in [2, 0] {
        let detail = gone_detail(ranks[at].recv_within(1, 5, Duration::from_secs(5)).unwrap_err());
        assert!(detail.contains("262144 bytes a rank holds unread"), "at rank {at}: {detail}");
    }
    // Without join limits the same frames are held, unread (the bound is what ends the link).
    let mut open = joining(None);
    for _ in 0..16 {
        open[1].send(2, 9, &junk).unwrap();
    }
    open[1].send(2, 5, b"still here").unwrap();
    assert_eq!(open[2].recv(1, 5).unwrap(), b"still here");
}

#[test]
fn a_bound_raised_while_the_link_waits_applies_to_the_next_frame() {
    // The job's bounds replace the join window's while every reader waits for its next frame
    // (as a worker that takes its job and then a ring piece of a broadcast larger than the
    // join window's frames): that frame is read under the new bound.
    let mut ranks = joining(Some(InboxLimits::new(64 * 1024, 256 * 1024)));
    thread::sleep(Duration::from_millis(200)); // every reader is waiting by now
    ranks[2].limit_inbox(&[1], InboxLimits::new(2 << 20, 8 << 20));
    ranks[1].send(2, 5, &[9; 1 << 20]).unwrap();
    assert_eq!(ranks[2].recv(1, 5).unwrap().len(), 1 << 20);
}
