//! Admission while the cluster runs: the master keeps its listener, every worker its peer
//! listener, each behind a thread that runs the same bounded, authenticated handshakes as
//! setup ([`super::admission`]) and hands on whoever proved itself.
//!
//! At the master a worker that joins (a spare, or a lost worker's process started again) is
//! held, at most one per worker rank, until the master asks for newcomers at an epoch boundary
//! ([`crate::Transport::admit_waiting`]): it is then welcomed into a free rank with the
//! addresses of the present workers, connects to each of them (a peer handshake of the
//! [`LIVE_JOIN`] generation), reports ready and is started. At a worker the newcomer's link
//! waits until the master announces it and the worker takes it
//! ([`crate::Transport::await_links`]).
//!
//! The key a newcomer proves to a present worker is fresh per admission ([`noise::live_key`]):
//! once a welcome into rank `r` has been sent, the master gives every present worker the key of
//! the next admission into `r` ([`FrameKind::PeerKey`], over its own link), so a worker that
//! once held `r` cannot pose as `r`'s later newcomers.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, bounded};

use super::admission::{Admission, Admitted, Event};
use super::conn::Conn;
use super::handshake::Welcome;
use super::joiner::Joiner;
use super::noise::{self, Context, LIVE_JOIN, Psk};
use super::setup::{IDLE_POLL, MAX_PENDING_HANDSHAKES};
use super::setup_io::{write_before, write_tagged_before};
use super::{TcpConfig, TcpTransport};
use crate::TransportError;
use crate::frame::FrameKind;
use crate::seal::write_frame_on;

/// Pause between polls of the listener while no handshake is pending.
const QUIET_POLL: Duration = Duration::from_millis(25);

/// At a worker: the key the next worker admitted into each rank will prove on its link to
/// this one (`keys[r]` for rank `r`), renewed by the master after every admission.
pub(crate) struct LiveKeys(Mutex<Vec<Psk>>);

impl std::fmt::Debug for LiveKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveKeys(<redacted>)")
    }
}

/// Bytes of a [`FrameKind::PeerKey`] frame's payload: the rank (u32 LE), then its key.
const PEER_KEY_LEN: usize = 4 + 32;

impl LiveKeys {
    /// The keys of this worker's welcome.
    pub(crate) fn new(keys: Vec<Psk>) -> Arc<LiveKeys> {
        Arc::new(LiveKeys(Mutex::new(keys)))
    }

    fn get(&self, rank: usize) -> Option<Psk> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(rank).copied()
    }

    /// Takes a [`FrameKind::PeerKey`] payload from the master; `false` if it is malformed or
    /// names a rank outside the cluster.
    pub(crate) fn renew(&self, payload: &[u8]) -> bool {
        let Some((rank, key)) = payload.split_first_chunk::<4>() else { return false };
        let (Ok(key), rank) = (<Psk>::try_from(key), u32::from_le_bytes(*rank) as usize) else {
            return false;
        };
        let mut keys = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        keys.get_mut(rank).map(|k| *k = key).is_some()
    }
}

/// A [`FrameKind::PeerKey`] payload: `key` for the next worker admitted into `rank`.
fn peer_key_payload(rank: u32, key: &Psk) -> [u8; PEER_KEY_LEN] {
    let mut out = [0u8; PEER_KEY_LEN];
    out[..4].copy_from_slice(&rank.to_le_bytes());
    out[4..].copy_from_slice(key);
    out
}

/// A listener's thread and what it admitted.
#[derive(Debug)]
pub(crate) struct LiveJoin {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    arrivals: Receiver<Admitted>,
    /// At a worker: the newest link from each rank not yet taken.
    stash: Vec<Option<Conn>>,
}

impl LiveJoin {
    /// The master's: workers that join while the cluster runs, at most `waiting` held.
    pub(crate) fn master(listener: TcpListener, config: &TcpConfig, waiting: usize) -> LiveJoin {
        let psk = noise::token_psk(&config.token);
        Self::spawn(listener, config, FrameKind::Hello, 0, 0, waiting, move |_| Some((Context::Join, psk)))
    }

    /// Worker `rank`'s of `size` ranks: links from workers admitted while the cluster runs,
    /// each under the key `keys` holds for its rank when it connects.
    pub(crate) fn worker(
        listener: TcpListener,
        config: &TcpConfig,
        rank: usize,
        size: usize,
        keys: Arc<LiveKeys>,
    ) -> LiveJoin {
        let me = rank as u32;
        let context = move |from: u32| {
            let key = keys.get(from as usize)?;
            (from != 0 && from != me && (from as usize) < size)
                .then_some((Context::Peer { from, to: me, generation: LIVE_JOIN }, key))
        };
        Self::spawn(listener, config, FrameKind::PeerHello, me, size, size, context)
    }

    fn spawn(
        listener: TcpListener,
        config: &TcpConfig,
        hello: FrameKind,
        own_rank: u32,
        size: usize,
        waiting: usize,
        context: impl Fn(u32) -> Option<(Context, Psk)> + Send + 'static,
    ) -> LiveJoin {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, arrivals) = bounded(waiting.max(1));
        let (sealed, timeout, flag) = (config.sealed, config.timeout, stop.clone());
        let body = move || {
            let Ok(mut admission) =
                Admission::new(&listener, sealed, timeout, MAX_PENDING_HANDSHAKES, hello, own_rank, context)
            else {
                return;
            };
            let mut events = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let Ok(moved) = admission.poll(&mut events) else { return };
                for event in events.drain(..) {
                    if let Event::Admitted(a) = event
                        && let Err(e) = tx.try_send(a)
                    {
                        // Every place is taken by a waiting newcomer: this one is turned away.
                        let mut a = e.into_inner();
                        let reason = b"no place is free for another worker";
                        let _ = write_before(
                            &mut a.conn,
                            Instant::now() + IDLE_POLL * 10,
                            FrameKind::Refused,
                            own_rank,
                            reason,
                            "",
                        );
                    }
                }
                if !moved {
                    thread::sleep(if admission.pending() == 0 { QUIET_POLL } else { IDLE_POLL });
                }
            }
        };
        let thread = thread::Builder::new().name(format!("tcp-{own_rank}-admission")).spawn(body).ok();
        LiveJoin { stop, thread, arrivals, stash: (0..size).map(|_| None).collect() }
    }

    /// The next newcomer waiting at the master, if any.
    pub(crate) fn next_waiting(&self) -> Option<Admitted> {
        self.arrivals.try_recv().ok()
    }

    /// At a worker: the link from `rank`, waiting until `deadline`; an older link from it that
    /// closed meanwhile is dropped.
    pub(crate) fn link_from(&mut self, rank: usize, deadline: Instant) -> Option<Conn> {
        loop {
            while let Ok(a) = self.arrivals.try_recv() {
                if let Some(slot) = self.stash.get_mut(a.sender as usize) {
                    *slot = Some(a.conn);
                }
            }
            if let Some(s) = self.stash.get_mut(rank).and_then(Option::take) {
                if !closed(&s.stream) {
                    return Some(s);
                }
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.arrivals.recv_timeout(left.min(QUIET_POLL)) {
                Ok(a) => {
                    if let Some(slot) = self.stash.get_mut(a.sender as usize) {
                        *slot = Some(a.conn);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

impl Drop for LiveJoin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether the other side closed `stream` (bytes waiting do not count); never blocks.
fn closed(stream: &std::net::TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return true;
    }
    let mut byte = [0u8; 1];
    let seen = stream.peek(&mut byte);
    let _ = stream.set_nonblocking(false);
    match seen {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
    }
}

impl TcpTransport {
    /// [`crate::Transport::admit_waiting`] over TCP: each newcomer the master's listener holds
    /// is welcomed into the next free rank, must link up with `present` and report ready
    /// within the timeout, and is started; one that fails is dropped.
    pub(crate) fn admit_newcomers(
        &mut self,
        free: &[usize],
        present: &[usize],
    ) -> Result<Vec<usize>, TransportError> {
        let mut filled = Vec::new();
        if self.rank != 0 {
            return Ok(filled);
        }
        let size = self.size;
        let mut free = free.iter().copied().filter(|&r| r != 0 && r < size);
        let mut rank = free.next();
        while let Some(r) = rank {
            let Some(admitted) = self.live.as_ref().and_then(LiveJoin::next_waiting) else { break };
            let mut newcomer = Joiner::new(admitted);
            if newcomer.poll().is_err() {
                continue; // it left while it waited
            }
            newcomer.rank = Some(r);
            if let Some(a) = self.admissions.get_mut(r) {
                *a = a.saturating_add(1);
            }
            let linked = self.welcome_newcomer(&mut newcomer, r, present);
            // Whatever came of it, the keys this welcome handed out are spent.
            self.renew_live_keys(r, present);
            if !linked {
                continue;
            }
            if let Some(a) = self.addrs.get_mut(r) {
                a.clone_from(&newcomer.admitted.listen);
            }
            self.replace_link(r, newcomer.into_conn())?;
            filled.push(r);
            rank = free.next();
        }
        Ok(filled)
    }

    /// Welcomes `newcomer` into rank `r` with the addresses of `present` and this admission's
    /// keys; whether it linked up with them, reported ready within the timeout and was started.
    fn welcome_newcomer(&self, newcomer: &mut Joiner, r: usize, present: &[usize]) -> bool {
        let size = self.size;
        let mut addrs = vec![String::new(); size];
        for &p in present.iter().filter(|&&p| p != 0 && p != r && p < size) {
            addrs[p] = self.addrs.get(p).cloned().unwrap_or_default();
        }
        let keys = self
            .secret
            .map_or_else(Vec::new, |s| noise::welcome_keys(&s.0, r as u32, LIVE_JOIN, &self.admissions));
        let welcome = Welcome {
            rank: r as u32,
            size: size as u32,
            method: self.method,
            generation: LIVE_JOIN,
            addrs,
            keys,
        };
        let by = Instant::now() + self.timeout;
        if write_before(&mut newcomer.admitted.conn, by, FrameKind::Welcome, 0, &welcome.to_bytes(), "")
            .is_err()
        {
            return false;
        }
        let ready = loop {
            match newcomer.poll() {
                Err(_) => break false,
                Ok(()) if newcomer.ready_for(LIVE_JOIN) => break true,
                Ok(()) if Instant::now() >= by => break false,
                Ok(()) => thread::sleep(IDLE_POLL),
            }
        };
        let start = (FrameKind::Ready, 0, LIVE_JOIN);
        ready && write_tagged_before(&mut newcomer.admitted.conn, by, start, &[], "").is_ok()
    }

    /// Gives every present worker the key of the next admission into rank `r`, over its own
    /// link; a link that fails to take it ends (its reader reports the worker gone).
    fn renew_live_keys(&mut self, r: usize, present: &[usize]) {
        let (Some(secret), Some(&count)) = (self.secret, self.admissions.get(r)) else { return };
        for &p in present.iter().filter(|&&p| p != 0 && p != r && p < self.size) {
            let key = noise::live_key(&secret.0, r as u32, p as u32, count.saturating_add(1));
            let Some(link) = self.links.get_mut(p).and_then(Option::as_mut) else { continue };
            let head = (FrameKind::PeerKey, 0, 0);
            if !link.broken
                && write_frame_on(
                    link.sealing.as_mut(),
                    &link.stream,
                    head,
                    &[&peer_key_payload(r as u32, &key)],
                )
                .is_err()
            {
                link.broken = true;
                let _ = link.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// [`crate::Transport::await_links`] over TCP: the links newcomers made to this worker.
    pub(crate) fn take_links(&mut self, ranks: &[usize]) -> Result<(), TransportError> {
        let (me, size) = (self.rank, self.size);
        for &r in ranks.iter().filter(|&&r| r != 0 && r != me && r < size) {
            let deadline = Instant::now() + self.timeout;
            let Some(stream) = self.live.as_mut().and_then(|l| l.link_from(r, deadline)) else {
                return Err(TransportError::Timeout { peer: r, op: "await_links", after: self.timeout });
            };
            self.replace_link(r, stream)?;
        }
        Ok(())
    }

    /// Replaces the link to `rank` by `stream` (a newcomer's): the old link is closed and its
    /// reader's last deliveries taken in before the mailbox forgets the rank's departure.
    pub(crate) fn replace_link(&mut self, rank: usize, stream: Conn) -> Result<(), TransportError> {
        if let Some(mut old) = self.links.get_mut(rank).and_then(Option::take) {
            let _ = old.stream.shutdown(std::net::Shutdown::Both);
            if let Some(t) = old.reader.take() {
                let _ = t.join();
            }
        }
        self.mailbox.poll();
        self.mailbox.revive(rank);
        let link = self.link(rank, stream)?;
        if let Some(slot) = self.links.get_mut(rank) {
            *slot = Some(link);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewed_key_replaces_its_rank_and_nothing_malformed_is_taken() {
        let keys = LiveKeys::new(vec![[0; 32]; 3]);
        assert!(keys.renew(&peer_key_payload(2, &[9; 32])));
        assert_eq!((keys.get(2), keys.get(1)), (Some([9; 32]), Some([0; 32])));
        assert!(!keys.renew(&peer_key_payload(3, &[9; 32])), "rank outside the cluster");
        assert!(!keys.renew(&peer_key_payload(1, &[9; 32])[..35]), "short payload");
        assert!(!keys.renew(&[peer_key_payload(1, &[9; 32]).as_slice(), &[0]].concat()), "long payload");
        assert_eq!(keys.get(1), Some([0; 32]));
        assert_eq!(format!("{keys:?}"), "LiveKeys(<redacted>)");
    }
}
