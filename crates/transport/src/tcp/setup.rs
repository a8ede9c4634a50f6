//! Setting up a TCP cluster: the master admits workers, workers build the mesh.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use super::admission::{Admission, Admitted, Event};
use super::auth::{self, Context};
use super::handshake::{self, MAX_FIELD, Welcome};
use super::setup_io::{at_least, authenticate_to, read_before, write_before};
use super::{TcpConfig, TcpTransport};
use crate::TransportError;
use crate::frame::FrameKind;

/// The largest setup frame accepted once the other side has proved it knows the token (a
/// welcome listing every worker's address).
const MAX_SETUP_FRAME: usize = handshake::MAX_RANKS * (MAX_FIELD + 2) + 64;
/// Pause between attempts while retrying a connection.
const POLL: Duration = Duration::from_millis(20);
/// Pause between polls of pending handshakes when nothing moved.
const IDLE_POLL: Duration = Duration::from_millis(2);
/// Handshakes the master keeps pending at once; a newer connection drops the oldest.
pub const MAX_PENDING_HANDSHAKES: usize = 64;

/// A connection the master or a worker turned away during setup.
#[derive(Clone, Debug)]
pub struct Refusal {
    /// Where it came from.
    pub from: SocketAddr,
    /// Why, in one line.
    pub reason: String,
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TransportError {
    let context = context.into();
    move |source| TransportError::Io { context, error: source }
}

/// Whether an admitted worker that should be silent until the welcome is still connected:
/// `Err` with what it did when it closed, failed or spoke out of turn.
fn still_waiting(stream: &TcpStream) -> Result<(), String> {
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut byte = [0u8; 1];
    let seen = (&*stream).read(&mut byte);
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    match seen {
        Ok(0) => Err("left after joining, before the cluster started; waiting for another worker".into()),
        Ok(_) => Err("sent bytes out of turn after joining; dropped".into()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(()),
        Err(e) => Err(format!("its connection failed after joining ({e}); waiting for another worker")),
    }
}

/// Connects to `addr`, retrying refused connections until `deadline` (the other side may not
/// be listening yet).
fn connect_before(addr: &str, deadline: Instant) -> Result<TcpStream, TransportError> {
    let mut last = None;
    while Instant::now() < deadline {
        let addrs: Vec<SocketAddr> = match addr.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err(TransportError::Setup(format!("cannot resolve {addr}: {e}"))),
        };
        for a in &addrs {
            let left = deadline.saturating_duration_since(Instant::now()).max(POLL);
            match TcpStream::connect_timeout(a, left) {
                Ok(s) => {
                    s.set_nodelay(true).map_err(io_error(format!("configuring the connection to {addr}")))?;
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        thread::sleep(POLL * 5);
    }
    Err(TransportError::Setup(format!(
        "cannot connect to {addr}: {}",
        last.map_or_else(|| "timed out".to_string(), |e| e.to_string())
    )))
}

/// The master's listening socket, before the workers have joined.
#[derive(Debug)]
pub struct MasterListener {
    listener: TcpListener,
    config: TcpConfig,
}

impl MasterListener {
    /// Listens on `addr` (`127.0.0.1:0` picks a free port); refuses an empty token first.
    pub fn bind(addr: &str, config: TcpConfig) -> Result<MasterListener, TransportError> {
        auth::check_token(&config.token)?;
        let listener = TcpListener::bind(addr).map_err(io_error(format!("cannot listen on {addr}")))?;
        Ok(MasterListener { listener, config })
    }

    /// The address workers connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.listener.local_addr().map_err(io_error("reading the listening address"))
    }

    /// Waits for `workers` workers that prove they know the token, turning away others (each
    /// reported to `on_refused`), then starts the cluster; returns rank 0.
    ///
    /// Handshakes run side by side, each within the timeout of its connection however its
    /// bytes trickle in, at most [`MAX_PENDING_HANDSHAKES`] at once. Admission ends at the
    /// join timeout; a worker that leaves after joining, before the start, is replaced by the
    /// next one to join. Once all are in, the welcome and the workers' mesh have until the join
    /// timeout, or one timeout from then if that is later.
    pub fn accept_workers(
        self,
        workers: usize,
        on_refused: impl FnMut(&Refusal),
    ) -> Result<TcpTransport, TransportError> {
        self.accept_at_least(workers, workers, on_refused)
    }

    /// [`MasterListener::accept_workers`], starting at the join timeout with the workers that
    /// have joined if they are at least `min_workers`: they take ranks `1..=k`, and ranks
    /// `k+1..=workers` stay absent (the cluster's size is still `workers + 1`; every wait for an
    /// absent rank fails at once with [`TransportError::PeerGone`], as for a departed one). With
    /// `min_workers == workers` it is [`MasterListener::accept_workers`].
    pub fn accept_at_least(
        self,
        workers: usize,
        min_workers: usize,
        mut on_refused: impl FnMut(&Refusal),
    ) -> Result<TcpTransport, TransportError> {
        let config = self.config;
        if workers == 0 || workers >= handshake::MAX_RANKS {
            return Err(TransportError::Setup(format!(
                "the number of workers must be in 1..{}, got {workers}",
                handshake::MAX_RANKS
            )));
        }
        if !(1..=workers).contains(&min_workers) {
            return Err(TransportError::Setup(format!(
                "the least number of workers to start with must be in 1..={workers}, got {min_workers}"
            )));
        }
        auth::check_token(&config.token)?;
        let deadline = Instant::now() + config.join_timeout;
        let mut admission = Admission::new(
            &self.listener,
            &config.token,
            config.timeout,
            MAX_PENDING_HANDSHAKES,
            FrameKind::Hello,
            0,
            |_| Some(Context::Join),
        )?;
        let mut joined: Vec<Admitted> = Vec::new();
        let mut events = Vec::new();
        while joined.len() < workers {
            if Instant::now() >= deadline && joined.len() >= min_workers {
                break;
            }
            if Instant::now() >= deadline {
                let pending = match admission.pending() {
                    0 => String::new(),
                    n => format!(" ({n} handshakes unfinished)"),
                };
                return Err(TransportError::Setup(format!(
                    "only {} of {workers} workers joined within {:?}{pending}",
                    joined.len(),
                    config.join_timeout,
                )));
            }
            let moved = admission.poll(&mut events)?;
            for event in events.drain(..) {
                match event {
                    Event::Admitted(a) => joined.push(a),
                    Event::Refused(r) => on_refused(&r),
                }
            }
            joined.retain(|a| match still_waiting(&a.stream) {
                Ok(()) => true,
                Err(reason) => {
                    on_refused(&Refusal { from: a.from, reason });
                    false
                }
            });
            if !moved {
                thread::sleep(IDLE_POLL);
            }
        }
        drop(admission);
        let start_by = at_least(deadline, config.timeout);
        let size = workers + 1;
        // Ranks past the joined workers stay absent: no address, no connection.
        let mut addrs = vec![String::new()];
        addrs.extend(joined.iter().map(|a| a.listen.clone()));
        addrs.resize(size, String::new());
        let mut streams: Vec<Option<TcpStream>> = vec![None];
        for (k, a) in joined.into_iter().enumerate() {
            let rank = k + 1;
            let welcome = Welcome {
                rank: rank as u32,
                size: size as u32,
                method: config.broadcast,
                addrs: addrs.clone(),
            };
            let who = format!("rank {rank}");
            write_before(&a.stream, start_by, FrameKind::Welcome, 0, &welcome.to_bytes(), &who)?;
            streams.push(Some(a.stream));
        }
        streams.resize_with(size, || None);
        // Every worker reports its mesh built; then all start together.
        for (rank, stream) in streams.iter().enumerate().skip(1) {
            let Some(stream) = stream else { continue };
            let f = read_before(stream, start_by, 0, &format!("rank {rank}"))?;
            if f.kind != FrameKind::Ready {
                return Err(TransportError::Setup(format!(
                    "rank {rank} sent a {:?} frame instead of ready",
                    f.kind
                )));
            }
        }
        for (rank, stream) in streams.iter().enumerate().skip(1) {
            if let Some(stream) = stream {
                write_before(stream, start_by, FrameKind::Ready, 0, &[], &format!("rank {rank}"))?;
            }
        }
        TcpTransport::from_streams(0, size, config.broadcast, &config, streams)
    }
}

/// Joins the cluster of the master at `master` (`HOST:PORT`), retrying until it listens, and
/// returns this worker's endpoint once the master starts the cluster.
///
/// Each handshake (with the master, with every peer) must finish within the timeout; the
/// whole join, waiting for the master's other workers included, within the join timeout.
pub fn connect_worker(master: &str, config: &TcpConfig) -> Result<TcpTransport, TransportError> {
    auth::check_token(&config.token)?;
    let deadline = Instant::now() + config.join_timeout;
    let handshake_by = || deadline.min(Instant::now() + config.timeout);
    let stream = connect_before(master, deadline)?;
    let local = stream.local_addr().map_err(io_error("reading the local address"))?;
    let listener = TcpListener::bind((local.ip(), 0)).map_err(io_error("cannot listen for peer workers"))?;
    let listen = listener.local_addr().map_err(io_error("reading the peer listening address"))?;
    let who = format!("the master at {master}");
    let token = &config.token;
    let join = Context::Join;
    authenticate_to(&stream, token, join, FrameKind::Hello, 0, &listen.to_string(), handshake_by(), &who)?;
    let f = read_before(&stream, deadline, MAX_SETUP_FRAME, &who)?;
    let welcome = match f.kind {
        FrameKind::Welcome => Welcome::parse(&f.payload)
            .ok_or_else(|| TransportError::Setup(format!("{who} sent a malformed welcome")))?,
        other => {
            return Err(TransportError::Setup(format!("{who} sent a {other:?} frame instead of a welcome")));
        }
    };
    let (rank, size) = (welcome.rank as usize, welcome.size as usize);
    let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    // Connect to every lower-ranked worker, then accept every higher-ranked one (a rank with
    // no address is absent: the master started without it).
    let present = |peer: &(usize, &String)| !peer.1.is_empty();
    for (peer, addr) in welcome.addrs.iter().enumerate().take(rank).skip(1).filter(present) {
        let s = connect_before(addr, deadline)?;
        let context = Context::Peer { from: rank as u32, to: peer as u32 };
        let peer_who = format!("rank {peer}");
        authenticate_to(
            &s,
            token,
            context,
            FrameKind::PeerHello,
            rank as u32,
            "",
            handshake_by(),
            &peer_who,
        )?;
        streams[peer] = Some(s);
    }
    let mut missing = welcome.addrs.iter().enumerate().skip(rank + 1).filter(present).count();
    if missing > 0 {
        let me = rank as u32;
        let higher =
            |from: u32| (from > me && (from as usize) < size).then_some(Context::Peer { from, to: me });
        let mut admission =
            Admission::new(&listener, token, config.timeout, size, FrameKind::PeerHello, me, higher)?;
        let mut events = Vec::new();
        while missing > 0 {
            if Instant::now() >= deadline {
                return Err(TransportError::Setup(format!(
                    "rank {rank}: {missing} higher-ranked workers did not connect within {:?}",
                    config.join_timeout
                )));
            }
            let moved = admission.poll(&mut events)?;
            for event in events.drain(..) {
                // A stray or repeated connection is dropped; the join goes on.
                if let Event::Admitted(a) = event
                    && streams[a.sender as usize].is_none()
                {
                    streams[a.sender as usize] = Some(a.stream);
                    missing -= 1;
                }
            }
            if !moved {
                thread::sleep(IDLE_POLL);
            }
        }
    }
    write_before(&stream, deadline, FrameKind::Ready, rank as u32, &[], &who)?;
    let go = read_before(&stream, deadline, 0, &who)?;
    if go.kind != FrameKind::Ready {
        return Err(TransportError::Setup(format!("{who} sent a {:?} frame instead of start", go.kind)));
    }
    streams[0] = Some(stream);
    TcpTransport::from_streams(rank, size, welcome.method, config, streams)
}
