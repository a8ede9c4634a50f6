//! Setting up a TCP cluster: the master admits workers, workers build the mesh.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use super::handshake::{self, MAX_FIELD, Welcome};
use super::{TcpConfig, TcpTransport};
use crate::TransportError;
use crate::frame::{Frame, FrameKind, ReadFrameError, read_frame, write_frame};

/// The largest setup frame accepted.
const MAX_SETUP_FRAME: usize = handshake::MAX_RANKS * (MAX_FIELD + 2) + 64;
/// Pause between attempts while polling a listener or retrying a connection.
const POLL: Duration = Duration::from_millis(20);

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

/// Reads one setup frame with a read timeout; errors name `who`.
fn read_setup(stream: &mut TcpStream, timeout: Duration, who: &str) -> Result<Frame, TransportError> {
    stream.set_read_timeout(Some(timeout)).map_err(io_error(format!("configuring the link to {who}")))?;
    read_frame(stream, MAX_SETUP_FRAME).map_err(|e| match e {
        ReadFrameError::Frame(error) => TransportError::BadFrame { from: who.to_string(), error },
        ReadFrameError::Closed => TransportError::Setup(format!("{who} closed the connection during setup")),
        ReadFrameError::Io(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            TransportError::Setup(format!("{who} sent nothing within {timeout:?} during setup"))
        }
        ReadFrameError::Io(source) => {
            TransportError::Io { context: format!("reading from {who}"), error: source }
        }
    })
}

fn write_setup(
    stream: &mut TcpStream,
    kind: FrameKind,
    sender: usize,
    payload: &[u8],
    who: &str,
) -> Result<(), TransportError> {
    write_frame(stream, kind, sender as u32, 0, &[payload]).map_err(io_error(format!("writing to {who}")))
}

/// Accepts one connection before `deadline`, polling a non-blocking listener.
fn accept_before(
    listener: &TcpListener,
    deadline: Instant,
) -> Result<Option<(TcpStream, SocketAddr)>, TransportError> {
    loop {
        match listener.accept() {
            Ok((stream, from)) => {
                stream.set_nonblocking(false).map_err(io_error("configuring an accepted connection"))?;
                stream.set_nodelay(true).map_err(io_error("configuring an accepted connection"))?;
                return Ok(Some((stream, from)));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                thread::sleep(POLL);
            }
            Err(e) => return Err(io_error("accepting a connection")(e)),
        }
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
    /// Listens on `addr` (`127.0.0.1:0` picks a free port).
    pub fn bind(addr: &str, config: TcpConfig) -> Result<MasterListener, TransportError> {
        let listener = TcpListener::bind(addr).map_err(io_error(format!("cannot listen on {addr}")))?;
        Ok(MasterListener { listener, config })
    }

    /// The address workers connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        self.listener.local_addr().map_err(io_error("reading the listening address"))
    }

    /// Waits for `workers` workers with the right token (up to the join timeout), turning away
    /// others (each reported to `on_refused`), then starts the cluster; returns rank 0.
    pub fn accept_workers(
        self,
        workers: usize,
        mut on_refused: impl FnMut(&Refusal),
    ) -> Result<TcpTransport, TransportError> {
        let config = self.config;
        if workers == 0 || workers >= handshake::MAX_RANKS {
            return Err(TransportError::Setup(format!(
                "the number of workers must be in 1..{}, got {workers}",
                handshake::MAX_RANKS
            )));
        }
        self.listener.set_nonblocking(true).map_err(io_error("configuring the listener"))?;
        let deadline = Instant::now() + config.join_timeout;
        let mut joined: Vec<(TcpStream, String)> = Vec::new();
        while joined.len() < workers {
            let Some((mut stream, from)) = accept_before(&self.listener, deadline)? else {
                return Err(TransportError::Setup(format!(
                    "only {} of {workers} workers joined within {:?}",
                    joined.len(),
                    config.join_timeout
                )));
            };
            let who = format!("a worker at {from}");
            let refuse = |stream: &mut TcpStream, reason: &str| {
                let _ = write_setup(stream, FrameKind::Refused, 0, reason.as_bytes(), &who);
                Refusal { from, reason: reason.to_string() }
            };
            let refusal = match read_setup(&mut stream, config.timeout, &who) {
                Ok(f) if f.kind == FrameKind::Hello => match handshake::parse_hello(&f.payload) {
                    Some((token, listen)) if handshake::same_token(&token, &config.token) => {
                        joined.push((stream, listen));
                        continue;
                    }
                    Some(_) => refuse(&mut stream, "wrong token"),
                    None => refuse(&mut stream, "malformed hello"),
                },
                Ok(f) => refuse(&mut stream, &format!("expected a hello, got a {:?} frame", f.kind)),
                Err(e) => Refusal { from, reason: e.to_string() },
            };
            on_refused(&refusal);
        }
        let size = workers + 1;
        let mut addrs = vec![String::new()];
        addrs.extend(joined.iter().map(|(_, a)| a.clone()));
        let mut streams: Vec<Option<TcpStream>> = vec![None];
        for (k, (mut stream, _)) in joined.into_iter().enumerate() {
            let rank = k + 1;
            let welcome = Welcome {
                rank: rank as u32,
                size: size as u32,
                method: config.broadcast,
                addrs: addrs.clone(),
            };
            write_setup(&mut stream, FrameKind::Welcome, 0, &welcome.to_bytes(), &format!("rank {rank}"))?;
            streams.push(Some(stream));
        }
        // Every worker reports its mesh built; then all start together.
        for (rank, stream) in streams.iter_mut().enumerate().skip(1) {
            let Some(stream) = stream else { continue };
            let left = deadline.saturating_duration_since(Instant::now()).max(config.timeout);
            let f = read_setup(stream, left, &format!("rank {rank}"))?;
            if f.kind != FrameKind::Ready {
                return Err(TransportError::Setup(format!(
                    "rank {rank} sent a {:?} frame instead of ready",
                    f.kind
                )));
            }
        }
        for (rank, stream) in streams.iter_mut().enumerate().skip(1) {
            if let Some(stream) = stream {
                write_setup(stream, FrameKind::Ready, 0, &[], &format!("rank {rank}"))?;
            }
        }
        TcpTransport::from_streams(0, size, config.broadcast, &config, streams)
    }
}

/// Joins the cluster of the master at `master` (`HOST:PORT`), retrying until it listens, and
/// returns this worker's endpoint once the master starts the cluster.
pub fn connect_worker(master: &str, config: &TcpConfig) -> Result<TcpTransport, TransportError> {
    let deadline = Instant::now() + config.join_timeout;
    let mut stream = connect_before(master, deadline)?;
    let local = stream.local_addr().map_err(io_error("reading the local address"))?;
    let listener = TcpListener::bind((local.ip(), 0)).map_err(io_error("cannot listen for peer workers"))?;
    let listen = listener.local_addr().map_err(io_error("reading the peer listening address"))?;
    let who = format!("the master at {master}");
    write_setup(
        &mut stream,
        FrameKind::Hello,
        0,
        &handshake::hello(&config.token, &listen.to_string()),
        &who,
    )?;
    let left = deadline.saturating_duration_since(Instant::now()).max(config.timeout);
    let f = read_setup(&mut stream, left, &who)?;
    let welcome = match f.kind {
        FrameKind::Welcome => Welcome::parse(&f.payload)
            .ok_or_else(|| TransportError::Setup(format!("{who} sent a malformed welcome")))?,
        FrameKind::Refused => {
            return Err(TransportError::Refused { reason: String::from_utf8_lossy(&f.payload).into_owned() });
        }
        other => {
            return Err(TransportError::Setup(format!("{who} sent a {other:?} frame instead of a welcome")));
        }
    };
    let (rank, size) = (welcome.rank as usize, welcome.size as usize);
    let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    // Connect to every lower-ranked worker, then accept every higher-ranked one.
    for (peer, addr) in welcome.addrs.iter().enumerate().take(rank).skip(1) {
        let mut s = connect_before(addr, deadline)?;
        write_setup(
            &mut s,
            FrameKind::PeerHello,
            rank,
            &handshake::peer_hello(&config.token),
            &format!("rank {peer}"),
        )?;
        streams[peer] = Some(s);
    }
    listener.set_nonblocking(true).map_err(io_error("configuring the peer listener"))?;
    let mut missing = size - 1 - rank;
    while missing > 0 {
        let Some((mut s, from)) = accept_before(&listener, deadline)? else {
            return Err(TransportError::Setup(format!(
                "rank {rank}: {missing} higher-ranked workers did not connect within {:?}",
                config.join_timeout
            )));
        };
        let Ok(f) = read_setup(&mut s, config.timeout, &format!("a peer at {from}")) else { continue };
        let peer = f.sender as usize;
        let valid = f.kind == FrameKind::PeerHello
            && handshake::parse_peer_hello(&f.payload)
                .is_some_and(|t| handshake::same_token(&t, &config.token))
            && peer > rank
            && peer < size
            && streams[peer].is_none();
        if valid {
            streams[peer] = Some(s);
            missing -= 1;
        }
    }
    write_setup(&mut stream, FrameKind::Ready, rank, &[], &who)?;
    let left = deadline.saturating_duration_since(Instant::now()).max(config.timeout);
    let go = read_setup(&mut stream, left, &who)?;
    if go.kind != FrameKind::Ready {
        return Err(TransportError::Setup(format!("{who} sent a {:?} frame instead of start", go.kind)));
    }
    streams[0] = Some(stream);
    TcpTransport::from_streams(rank, size, welcome.method, config, streams)
}
