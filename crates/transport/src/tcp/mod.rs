//! The TCP transport: a master (rank 0) and `n` workers (ranks 1..=n), as separate processes
//! or as threads on 127.0.0.1.
//!
//! Setup ([`MasterListener::accept_workers`], [`connect_worker`]): each worker connects to the
//! master and both prove they know the shared token without sending it (a Noise `XXpsk3`
//! handshake keyed by it, see `noise`); the master refuses a wrong proof (both sides see a
//! one-line error), numbers the workers in arrival order, and sends each, over its now sealed
//! link, its rank, the size, the broadcast method, every worker's address and the keys of its
//! links to the other workers. Workers then build a full mesh (each connects to the workers of
//! lower rank, with the same handshake under the pair's key, so a worker can speak only as its
//! own rank), report ready, and the master starts them all at once. Every frame after a
//! handshake is sealed ([`crate::seal`]) unless [`TcpConfig::sealed`] is off. A worker that leaves after its welcome, before the start,
//! is replaced: the master admits another and welcomes every worker again (a new generation,
//! bound into the peers' handshakes, so no link of an older welcome passes for a newer one).
//!
//! Admission cannot be stalled: the master runs its handshakes side by side, each within
//! `timeout` of its connection however slowly its bytes arrive, at most
//! [`MAX_PENDING_HANDSHAKES`] at once (a newer connection drops the oldest pending one), and an
//! unauthenticated connection holds at most one small frame's buffer. Admission ends at
//! `join_timeout`.
//!
//! Once running, every connection has a reader thread that opens and checks each
//! [`crate::frame`] and hands it to the rank's mailbox; sends seal and write frames straight to
//! the socket with a write timeout. A peer that closes, resets, or sends a corrupt or forged
//! frame makes waits for it fail with
//! [`TransportError::PeerGone`]; one that stalls, with [`TransportError::Timeout`]; either
//! names its rank. Broadcast is the pseudo-broadcast of the UberShuffle paper by default.
//!
//! Once running, the master keeps its listener and each worker its peer listener, behind the
//! same bounded handshakes: a worker that joins then is held until the master admits it into a
//! free rank ([`crate::Transport::admit_waiting`]) and the others take its links
//! ([`crate::Transport::await_links`]); see `live`.

mod admission;
mod conn;
mod handshake;
mod join;
#[cfg(test)]
mod join_tests;
mod joiner;
mod live;
mod noise;
mod setup;
mod setup_io;

use std::io::{BufRead, BufReader, ErrorKind};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{Sender, unbounded};

use crate::collectives::{self, BroadcastMethod, Links};
use crate::frame::{FrameKind, ReadFrameError};
use crate::mailbox::{Delivery, InboxLimits, Mailbox, Unread, over_cap};
use crate::seal::{Opening, Sealing, read_frame_on, seal_error, write_frame_on};
use crate::transport::{check_peers, check_send, links_accessors, point_to_point_via_links};
use crate::{COLLECTIVE_HEADER_BYTES, Secret, Tag, Transport, TransportError};
use conn::Conn;
use noise::{Psk, RunSecret};

pub use admission::Refusal;
pub use join::connect_worker;
pub use setup::{MAX_PENDING_HANDSHAKES, MasterListener};

/// How a TCP cluster is set up and behaves: [`TcpConfig::new`] and the `with_` methods.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TcpConfig {
    /// The shared secret of the cluster. It never crosses the wire: it keys a Noise handshake
    /// (see the module doc). Any length; not empty. Never shown by `Debug`.
    pub token: Secret,
    /// The timeout of every blocking wait once running.
    pub timeout: Duration,
    /// How long setup may take: the master waiting for workers, workers waiting to be started.
    pub join_timeout: Duration,
    /// How `broadcast` moves bytes; the master's choice is sent to every worker.
    pub broadcast: BroadcastMethod,
    /// The longest message accepted (frame payload, beyond [`COLLECTIVE_HEADER_BYTES`] of a
    /// collective's header); longer frames are refused unread.
    pub max_message: usize,
    /// Whether every frame after the handshake is sealed (encrypted and authenticated, see
    /// [`crate::seal`]); `false` only on a network trusted not to read or change traffic. Both
    /// sides must agree (a mismatch is refused at the handshake, naming it).
    pub sealed: bool,
    /// What a rank takes from each peer (every worker; the master, trusted, is not limited at
    /// a worker) from the moment its links are up until [`Transport::limit_inbox`] sets the
    /// job's bounds: the join window, in which an application that sends nothing before its
    /// job (the runtime) can keep this small. `None` (the default): unlimited until then.
    pub join_limits: Option<InboxLimits>,
}

impl TcpConfig {
    /// Defaults (10 s timeout, 60 s to join, pseudo-broadcast, 1 GiB messages, sealed) with
    /// `token`.
    pub fn new(token: impl Into<Secret>) -> TcpConfig {
        TcpConfig {
            token: token.into(),
            timeout: Duration::from_secs(10),
            join_timeout: Duration::from_secs(60),
            broadcast: BroadcastMethod::PseudoBroadcast,
            max_message: 1 << 30,
            sealed: true,
            join_limits: None,
        }
    }

    /// With what a rank takes from each peer before [`Transport::limit_inbox`] is called
    /// ([`TcpConfig::join_limits`]).
    pub fn with_join_limits(mut self, limits: Option<InboxLimits>) -> TcpConfig {
        self.join_limits = limits;
        self
    }

    /// With another token.
    pub fn with_token(mut self, token: impl Into<Secret>) -> TcpConfig {
        self.token = token.into();
        self
    }

    /// With the timeout of every blocking wait once running.
    pub fn with_timeout(mut self, timeout: Duration) -> TcpConfig {
        self.timeout = timeout;
        self
    }

    /// With how long setup may take.
    pub fn with_join_timeout(mut self, join_timeout: Duration) -> TcpConfig {
        self.join_timeout = join_timeout;
        self
    }

    /// With how `broadcast` moves bytes.
    pub fn with_broadcast(mut self, broadcast: BroadcastMethod) -> TcpConfig {
        self.broadcast = broadcast;
        self
    }

    /// With the longest message accepted.
    pub fn with_max_message(mut self, max_message: usize) -> TcpConfig {
        self.max_message = max_message;
        self
    }

    /// Sealing every frame after the handshake (`true`, the default) or not.
    pub fn with_sealed(mut self, sealed: bool) -> TcpConfig {
        self.sealed = sealed;
        self
    }
}

/// One connected peer.
#[derive(Debug)]
struct Link {
    stream: TcpStream,
    /// The sending direction's keys and sequence number, if sealed.
    sealing: Option<Sealing>,
    reader: Option<JoinHandle<()>>,
    broken: bool,
}

/// One rank of a TCP cluster. Dropping it closes its connections; its peers see it gone.
#[derive(Debug)]
pub struct TcpTransport {
    rank: usize,
    size: usize,
    timeout: Duration,
    method: BroadcastMethod,
    max_message: usize,
    mailbox: Mailbox,
    /// Where every link's reader delivers.
    inbox: Sender<Delivery>,
    links: Vec<Option<Link>>,
    /// Admission while running: the master's listener, or this worker's peer listener.
    live: Option<live::LiveJoin>,
    /// At the master: each worker rank's peer-listening address (empty if absent).
    addrs: Vec<String>,
    /// At the master: this run's secret, for the keys of workers admitted while running.
    secret: Option<RunSecret>,
    /// At the master: how many workers each rank has admitted while running (welcomes sent).
    admissions: Vec<u32>,
    /// At a worker: the keys of the next newcomer into each rank, renewed by the master.
    live_keys: Option<Arc<live::LiveKeys>>,
    /// Whether the links are sealed.
    sealed: bool,
}

/// How a rank of a starting cluster goes on admitting: the master with its listener and every
/// worker's address, a worker with its peer listener.
pub(crate) enum Listening {
    /// The master, with every worker's address and the run's secret.
    Master { listener: std::net::TcpListener, addrs: Vec<String>, secret: RunSecret },
    /// A worker, with the keys of links from workers admitted while running (`keys[r]`).
    Worker { listener: std::net::TcpListener, keys: Vec<Psk> },
}

impl TcpTransport {
    /// Wraps established, authenticated connections (`streams[r]` to rank `r`).
    fn from_streams(
        rank: usize,
        size: usize,
        method: BroadcastMethod,
        config: &TcpConfig,
        streams: Vec<Option<Conn>>,
        listening: Listening,
    ) -> Result<TcpTransport, TransportError> {
        let (tx, rx) = unbounded();
        let (live, addrs, secret, live_keys) = match listening {
            Listening::Master { listener, addrs, secret } => {
                (live::LiveJoin::master(listener, config, size.saturating_sub(1)), addrs, Some(secret), None)
            }
            Listening::Worker { listener, keys } => {
                let keys = live::LiveKeys::new(keys);
                (
                    live::LiveJoin::worker(listener, config, rank, size, keys.clone()),
                    Vec::new(),
                    None,
                    Some(keys),
                )
            }
        };
        tracing::info!(
            rank,
            sealed = config.sealed,
            protocol = crate::seal::NOISE_PARAMS,
            aead = crate::seal::AEAD_BACKEND,
            "TCP links up ({})",
            if config.sealed { "sealed" } else { "plain text: --insecure-plaintext" }
        );
        let mut t = TcpTransport {
            rank,
            size,
            timeout: config.timeout,
            method,
            max_message: config.max_message,
            mailbox: Mailbox::new(size, rx),
            inbox: tx,
            links: Vec::with_capacity(size),
            live: Some(live),
            addrs,
            secret,
            admissions: vec![0; size],
            live_keys,
            sealed: config.sealed,
        };
        if let Some(limits) = config.join_limits {
            // Before any reader runs: no frame of the join window escapes the bound.
            let peers: Vec<usize> = (1..size).filter(|&p| p != rank).collect();
            t.mailbox.unread().limit(&peers, limits);
        }
        for (peer, stream) in streams.into_iter().enumerate() {
            let Some(stream) = stream else {
                if peer != rank {
                    // An absent rank (the master started without it) counts as gone.
                    let detail = "it never joined (the cluster started without it)".to_string();
                    let _ = t.inbox.send(Delivery::Gone { from: peer, detail });
                }
                t.links.push(None);
                continue;
            };
            let link = t.link(peer, stream)?;
            t.links.push(Some(link));
        }
        Ok(t)
    }

    /// A link to `peer` over `conn`, its reader delivering to this rank's mailbox.
    fn link(&self, peer: usize, conn: Conn) -> Result<Link, TransportError> {
        let Conn { stream, seal } = conn;
        let (sealing, opening) = seal.map_or((None, None), |(s, o)| (Some(s), Some(o)));
        let io = |context: String| move |source| TransportError::Io { context, error: source };
        stream.set_read_timeout(None).map_err(io(format!("configuring the link to rank {peer}")))?;
        stream
            .set_write_timeout(Some(self.timeout))
            .map_err(io(format!("configuring the link to rank {peer}")))?;
        let read_half = stream.try_clone().map_err(io(format!("cloning the link to rank {peer}")))?;
        let max = self.max_message.saturating_add(COLLECTIVE_HEADER_BYTES);
        let reader = spawn_reader(
            self.rank,
            peer,
            (read_half, opening),
            (self.inbox.clone(), self.mailbox.unread()),
            max,
            self.live_keys.clone().filter(|_| peer == 0),
        );
        Ok(Link { stream, sealing, reader, broken: false })
    }

    /// The ranks this one has a connection to, in order (every other rank, unless the cluster
    /// started without some: [`MasterListener::accept_at_least`]).
    pub fn connected(&self) -> Vec<usize> {
        (0..self.size).filter(|&r| self.links.get(r).is_some_and(Option::is_some)).collect()
    }

    /// How this cluster broadcasts (chosen by the master).
    pub fn broadcast_method(&self) -> BroadcastMethod {
        self.method
    }

    /// Whether this rank's links are sealed (see [`crate::seal`]).
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }
}

/// The read buffer of a sealed link: smaller than a chunk, so that a chunk's bytes bypass it.
const SEALED_READ_BUFFER: usize = 1024;

/// The thread that reads frames from `peer` (opened under its keys, if sealed) into the mailbox
/// until the link ends; on a worker's link to the master it also takes the master's renewed
/// keys of newcomers into `renews`.
fn spawn_reader(
    rank: usize,
    peer: usize,
    (stream, mut opening): (TcpStream, Option<Opening>),
    (inbox, unread): (Sender<Delivery>, Arc<Unread>),
    max_message: usize,
    renews: Option<Arc<live::LiveKeys>>,
) -> Option<JoinHandle<()>> {
    let body = move || {
        // Sealed chunks (up to 64 KiB) are read past a small buffer, straight into the frame's
        // payload; plain-text frames' small headers and payloads gain from a large one.
        let capacity = if opening.is_some() { SEALED_READ_BUFFER } else { 64 * 1024 };
        let mut reader = BufReader::with_capacity(capacity, stream);
        loop {
            // The bound is taken once the next frame's first bytes are here, not while waiting
            // for them: a bound set meanwhile (the job's, replacing the join window's) applies
            // to that frame. An error or the end of the stream is met again by the read below.
            let _ = reader.fill_buf();
            let detail = match read_frame_on(
                opening.as_mut(),
                &mut reader,
                unread.max_frame(peer, max_message),
            ) {
                Ok(f)
                    if f.kind == FrameKind::Message
                        && f.sender as usize == peer
                        && f.tag <= u16::MAX as u32 =>
                {
                    if let Err(cap) = unread.admit(peer, f.payload.len()) {
                        let _ = reader.get_ref().shutdown(Shutdown::Both);
                        let _ = inbox.send(Delivery::Gone { from: peer, detail: over_cap(cap) });
                        return;
                    }
                    let d =
                        Delivery::Message { from: peer, tag: f.tag as Tag, bytes: f.payload, stamp: None };
                    if inbox.send(d).is_err() {
                        return;
                    }
                    continue;
                }
                Ok(f)
                    if f.kind == FrameKind::PeerKey
                        && f.sender == 0
                        && renews.as_ref().is_some_and(|k| k.renew(&f.payload)) =>
                {
                    continue;
                }
                Ok(f) => {
                    format!("sent an unexpected {:?} frame (sender {}, tag {})", f.kind, f.sender, f.tag)
                }
                Err(ReadFrameError::Closed) => "closed the connection".to_string(),
                Err(ReadFrameError::Frame(e)) => format!("sent a corrupt frame: {e}"),
                Err(ReadFrameError::Io(e)) if seal_error(&e).is_some() => {
                    tracing::warn!(rank, peer, error = %e, "link ended: a sealed frame failed authentication");
                    format!("sent a forged frame: {e}")
                }
                Err(ReadFrameError::Io(e)) => format!("connection failed: {e}"),
            };
            let _ = inbox.send(Delivery::Gone { from: peer, detail });
            return;
        }
    };
    thread::Builder::new().name(format!("tcp-{rank}-from-{peer}")).spawn(body).ok()
}

impl Links for TcpTransport {
    links_accessors!();

    fn checks_relays(&self) -> bool {
        true
    }

    fn send_parts(
        &mut self,
        to: usize,
        tag: Tag,
        parts: &[&[u8]],
        op: &'static str,
    ) -> Result<(), TransportError> {
        check_send(self.rank, self.size, to, parts, self.max_message)?;
        self.mailbox.ensure_present(to, op)?;
        let Some(link) = self.links.get_mut(to).and_then(Option::as_mut) else {
            return Err(TransportError::PeerGone { peer: to, op, detail: "no connection".into() });
        };
        if link.broken {
            return Err(TransportError::PeerGone { peer: to, op, detail: "an earlier send failed".into() });
        }
        let head = (FrameKind::Message, self.rank as u32, u32::from(tag));
        match write_frame_on(link.sealing.as_mut(), &link.stream, head, parts) {
            Ok(()) => Ok(()),
            Err(e) => {
                // A frame cut short would desynchronise the stream: this link is done.
                link.broken = true;
                let _ = link.stream.shutdown(Shutdown::Both);
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                    Err(TransportError::Timeout { peer: to, op, after: self.timeout })
                } else {
                    Err(TransportError::PeerGone { peer: to, op, detail: format!("send failed: {e}") })
                }
            }
        }
    }

    fn recv_from(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        check_peers(self.rank, self.size, from)?;
        self.mailbox.recv(from, tag, timeout, op)
    }

    fn hold(&mut self, from: usize, tag: Tag, bytes: Vec<u8>) {
        self.mailbox.hold(from, tag, bytes);
    }

    fn release_held(&mut self) {
        self.mailbox.release_held();
    }

    fn first_gone(&mut self, among: &[usize]) -> Option<(usize, String)> {
        self.mailbox.poll();
        self.mailbox.first_gone(among).map(|(peer, detail)| (peer, detail.to_string()))
    }
}

impl Transport for TcpTransport {
    point_to_point_via_links!();

    fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        for link in self.links.iter().flatten() {
            let _ = link.stream.set_write_timeout(Some(timeout));
        }
    }

    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        collectives::broadcast(self, self.method, root, buf)
    }

    fn broadcast_among(
        &mut self,
        root: usize,
        group: &[usize],
        id: u64,
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        collectives::broadcast_among(self, self.method, root, group, (id, 0), buf)
    }

    fn broadcast_turned(
        &mut self,
        root: usize,
        group: &[usize],
        named: (u64, u32),
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        collectives::broadcast_among(self, self.method, root, group, named, buf)
    }

    fn barrier(&mut self) -> Result<(), TransportError> {
        collectives::barrier(self)
    }

    fn admit_waiting(&mut self, free: &[usize], present: &[usize]) -> Result<Vec<usize>, TransportError> {
        self.admit_newcomers(free, present)
    }

    fn await_links(&mut self, ranks: &[usize]) -> Result<(), TransportError> {
        self.take_links(ranks)
    }

    fn limit_inbox(&mut self, peers: &[usize], limits: InboxLimits) {
        self.mailbox.unread().limit(peers, limits);
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        for link in self.links.iter_mut().flatten() {
            let _ = link.stream.shutdown(Shutdown::Both);
        }
        for link in self.links.iter_mut().flatten() {
            if let Some(t) = link.reader.take() {
                let _ = t.join();
            }
        }
    }
}
