//! Setting up a TCP cluster, the worker's side: joining the master, linking up with the other
//! workers as each welcome says, and starting when the master says so.
//!
//! The master may welcome a worker more than once: when another worker leaves during the join,
//! the master replaces it and welcomes every worker again (a new generation, perhaps a new
//! rank). A worker therefore watches its master while it links up, drops the links of an older
//! welcome, and treats a peer that fails as news the master will follow with a new welcome.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use super::admission::{Admission, Event};
use super::conn::Conn;
use super::handshake::{self, MAX_FIELD, Welcome};
use super::noise::{self, Context, LIVE_JOIN};
use super::setup::IDLE_POLL;
use super::setup_io::{Initiate, authenticate_to, has_word, read_before, write_tagged_before};
use super::{Listening, TcpConfig, TcpTransport};
use crate::TransportError;
use crate::frame::FrameKind;

/// The largest setup frame accepted once the other side has proved it knows the token (a
/// welcome listing every worker's address and two keys per rank).
pub(crate) const MAX_SETUP_FRAME: usize = handshake::MAX_RANKS * (MAX_FIELD + 2 + 64) + 64;
/// Pause between attempts while retrying a connection.
const POLL: Duration = Duration::from_millis(20);

pub(crate) fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TransportError {
    let context = context.into();
    move |source| TransportError::Io { context, error: source }
}

/// Connects to `addr`, retrying refused connections until `deadline` (the other side may not
/// be listening yet); `None` as soon as `interrupted` says so between attempts.
pub(crate) fn connect_before(
    addr: &str,
    deadline: Instant,
    interrupted: &mut dyn FnMut() -> bool,
) -> Result<Option<TcpStream>, TransportError> {
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
                    return Ok(Some(s));
                }
                Err(e) => last = Some(e),
            }
        }
        for _ in 0..5 {
            if interrupted() {
                return Ok(None);
            }
            thread::sleep(POLL);
        }
    }
    Err(TransportError::Setup(format!(
        "cannot connect to {addr}: {}",
        last.map_or_else(|| "timed out".to_string(), |e| e.to_string())
    )))
}

/// What the master says during the join.
enum Word {
    /// A (new) welcome.
    Welcome(Welcome),
    /// Start, for the welcome of this generation.
    Start(u32),
}

/// Reads the master's next setup frame before `deadline`.
fn read_word(conn: &mut Conn, deadline: Instant, who: &str) -> Result<Word, TransportError> {
    let f = read_before(conn, deadline, MAX_SETUP_FRAME, who)?;
    match f.kind {
        FrameKind::Welcome => Welcome::parse(&f.payload)
            .map(Word::Welcome)
            .ok_or_else(|| TransportError::Setup(format!("{who} sent a malformed welcome"))),
        FrameKind::Ready => Ok(Word::Start(f.tag)),
        FrameKind::Refused => {
            Err(TransportError::Refused { reason: String::from_utf8_lossy(&f.payload).into_owned() })
        }
        other => Err(TransportError::Setup(format!("{who} sent a {other:?} frame during the join"))),
    }
}

/// How linking up for one welcome ended.
enum Mesh {
    /// Linked to every other present worker (`streams[r]` to rank `r`).
    Built(Vec<Option<Conn>>),
    /// The master welcomed this worker again before the links were up.
    Welcomed(Welcome),
    /// A peer failed (it left during the join): the master will welcome again or give up.
    PeerFailed(TransportError),
}

/// Joins the cluster of the master at `master` (`HOST:PORT`), retrying until it listens, and
/// returns this worker's endpoint once the master starts the cluster.
///
/// Each handshake (with the master, with every peer) must finish within the timeout; the
/// whole join, waiting for the master's other workers (and replacements of those that left)
/// included, within the join timeout.
pub fn connect_worker(master: &str, config: &TcpConfig) -> Result<TcpTransport, TransportError> {
    noise::check_token(&config.token)?;
    let deadline = Instant::now() + config.join_timeout;
    let handshake_by = deadline.min(Instant::now() + config.timeout);
    let stream = connect_before(master, deadline, &mut || false)?
        .ok_or_else(|| TransportError::Setup(format!("cannot connect to {master}")))?;
    let local = stream.local_addr().map_err(io_error("reading the local address"))?;
    let listener = TcpListener::bind((local.ip(), 0)).map_err(io_error("cannot listen for peer workers"))?;
    let listen = listener.local_addr().map_err(io_error("reading the peer listening address"))?;
    let who = format!("the master at {master}");
    let listen = listen.to_string();
    let how = Initiate {
        psk: &noise::token_psk(&config.token),
        context: Context::Join,
        hello: FrameKind::Hello,
        sender: 0,
        listen: &listen,
        sealed: config.sealed,
    };
    let mut stream = authenticate_to(stream, &how, handshake_by, &who)?;
    let mut welcome = match read_word(&mut stream, deadline, &who)? {
        Word::Welcome(w) => w,
        Word::Start(_) => {
            return Err(TransportError::Setup(format!("{who} started this worker before welcoming it")));
        }
    };
    loop {
        // Say the welcome arrived: a worker that does not is taken for frozen and replaced.
        let took = (FrameKind::Linking, welcome.rank, welcome.generation);
        write_tagged_before(&mut stream, deadline, took, &[], &who)?;
        let streams = match link_up(&mut stream, &listener, &welcome, config, deadline, &who)? {
            Mesh::Built(streams) => streams,
            Mesh::Welcomed(w) => {
                welcome = w;
                continue;
            }
            Mesh::PeerFailed(e) => match read_word(&mut stream, deadline, &who) {
                Ok(Word::Welcome(w)) => {
                    welcome = w;
                    continue;
                }
                Ok(Word::Start(_)) => return Err(e),
                Err(then) => {
                    return Err(TransportError::Setup(format!("{e}; then {then}")));
                }
            },
        };
        let (rank, generation) = (welcome.rank, welcome.generation);
        write_tagged_before(&mut stream, deadline, (FrameKind::Ready, rank, generation), &[], &who)?;
        match read_word(&mut stream, deadline, &who)? {
            Word::Start(g) if g == generation => {
                let mut streams = streams;
                streams[0] = Some(stream);
                let (rank, size) = (rank as usize, welcome.size as usize);
                let keys = welcome.keys.iter().map(|(_, live)| *live).collect();
                let listening = Listening::Worker { listener, keys };
                return TcpTransport::from_streams(rank, size, welcome.method, config, streams, listening);
            }
            Word::Start(g) => {
                return Err(TransportError::Setup(format!(
                    "{who} started welcome {g} while this worker was in welcome {generation}"
                )));
            }
            Word::Welcome(w) => welcome = w,
        }
    }
}

/// Links up with the other workers `welcome` names, watching the master meanwhile: this worker
/// connects to every lower rank and accepts every higher one (a worker admitted while the
/// cluster runs connects to every present worker).
fn link_up(
    master: &mut Conn,
    listener: &TcpListener,
    welcome: &Welcome,
    config: &TcpConfig,
    deadline: Instant,
    who: &str,
) -> Result<Mesh, TransportError> {
    let (rank, size, generation) = (welcome.rank as usize, welcome.size as usize, welcome.generation);
    let live = generation == LIVE_JOIN;
    let mut streams: Vec<Option<Conn>> = (0..size).map(|_| None).collect();
    let present = |peer: &(usize, &String)| !peer.1.is_empty() && peer.0 != rank;
    let connect_to = if live { size } else { rank };
    for (peer, addr) in welcome.addrs.iter().enumerate().take(connect_to).skip(1).filter(present) {
        let Some(s) = connect_before(addr, deadline, &mut || has_word(master))? else {
            return next_welcome(master, deadline, who);
        };
        let Some((key, _)) = welcome.keys.get(peer) else { continue };
        let how = Initiate {
            psk: key,
            context: Context::Peer { from: rank as u32, to: peer as u32, generation },
            hello: FrameKind::PeerHello,
            sender: rank as u32,
            listen: "",
            sealed: config.sealed,
        };
        let handshake_by = deadline.min(Instant::now() + config.timeout);
        match authenticate_to(s, &how, handshake_by, &format!("rank {peer}")) {
            Ok(conn) => streams[peer] = Some(conn),
            Err(e) => return Ok(Mesh::PeerFailed(e)),
        }
    }
    let mut missing =
        if live { 0 } else { welcome.addrs.iter().enumerate().skip(rank + 1).filter(present).count() };
    if missing > 0 {
        let me = rank as u32;
        let higher = |from: u32| {
            let key = welcome.keys.get(from as usize)?.0;
            (from > me && (from as usize) < size).then_some((Context::Peer { from, to: me, generation }, key))
        };
        let mut admission =
            Admission::new(listener, config.sealed, config.timeout, size, FrameKind::PeerHello, me, higher)?;
        let mut events = Vec::new();
        while missing > 0 {
            if Instant::now() >= deadline {
                return Err(TransportError::Setup(format!(
                    "rank {rank}: {missing} higher-ranked workers did not connect within {:?}",
                    config.join_timeout
                )));
            }
            if has_word(master) {
                return next_welcome(master, deadline, who);
            }
            let moved = admission.poll(&mut events)?;
            for event in events.drain(..) {
                // A stray or repeated connection is dropped; the join goes on.
                if let Event::Admitted(a) = event
                    && streams[a.sender as usize].is_none()
                {
                    streams[a.sender as usize] = Some(a.conn);
                    missing -= 1;
                }
            }
            if !moved {
                thread::sleep(IDLE_POLL);
            }
        }
    }
    Ok(Mesh::Built(streams))
}

/// The master spoke while this worker linked up: only a new welcome makes sense then.
fn next_welcome(master: &mut Conn, deadline: Instant, who: &str) -> Result<Mesh, TransportError> {
    match read_word(master, deadline, who)? {
        Word::Welcome(w) => Ok(Mesh::Welcomed(w)),
        Word::Start(_) => {
            Err(TransportError::Setup(format!("{who} started the cluster before this worker was linked up")))
        }
    }
}
