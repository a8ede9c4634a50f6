//! The plane's connections: one TCP connection per pair of ranks, sealed. Every rank listens;
//! rank `i` connects to every rank below it and accepts every rank above it. A connecting rank
//! first names itself (a plain claim: [`CLAIM`] and its rank), then the two run the Noise
//! `XXpsk3` handshake under a key only that pair derives from the job's key, with a prologue
//! that binds the plane's protocol, the job, both ranks and the world size; the accepting rank
//! answers with a sealed, empty frame. A claim that does not hold (another key, another job, a
//! rank already linked) fails its handshake and costs only that connection; the accepting rank
//! goes on waiting for the real peer until the deadline.
//!
//! Who holds the job's key is trusted as a rank of the job: the key keeps out whoever does
//! not (docs/threat-model.md says where the key comes from).

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use ubershuffle_transport::frame::FrameKind;
use ubershuffle_transport::seal::{
    LinkKeys, Opening, Sealing, handshake_pair, read_frame_on, write_frame_on,
};

use crate::error::PlaneError;

/// The first bytes of a connecting rank's claim.
pub const CLAIM: &[u8; 4] = b"UBSP";
/// Names the protocol in every key and prologue.
pub(crate) const DOMAIN: &[u8] = b"ubershuffle-plane-v1";
/// Seconds an accepted connection has to finish its handshake (a slow or silent stranger does
/// not hold up the accept loop longer).
const HANDSHAKE_SECONDS: u64 = 10;
/// The largest message a link reads: an index of 32 million records.
pub const MAX_MESSAGE: usize = 256 << 20;

/// A 32-byte secret all ranks of a job share (never shown).
#[derive(Clone)]
pub struct JobKey(pub [u8; 32]);

impl std::fmt::Debug for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobKey(<redacted>)")
    }
}

impl JobKey {
    /// The key of a token (a secret string from a file or the environment).
    pub fn from_token(token: impl AsRef<[u8]>) -> JobKey {
        JobKey(hmac(b"token", &[token.as_ref()], &[0; 32]))
    }

    /// A fresh random key (the job's first rank makes one and hands it out).
    pub fn random() -> Result<JobKey, PlaneError> {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k)
            .map_err(|e| PlaneError::Internal(format!("the operating system gave no random bytes: {e}")))?;
        Ok(JobKey(k))
    }

    /// The key of a training rank's connection to a store outside the job, while it joins
    /// ([`super::host`]).
    pub(crate) fn join(&self) -> [u8; 32] {
        hmac(b"join", &[], &self.0)
    }

    /// The key of the link between ranks `a` and `b` of job `job`.
    fn pair(&self, job: &str, a: usize, b: usize) -> [u8; 32] {
        let (lo, hi) = (a.min(b) as u64, a.max(b) as u64);
        hmac(b"pair", &[job.as_bytes(), &lo.to_le_bytes(), &hi.to_le_bytes()], &self.0)
    }
}

fn hmac(label: &[u8], parts: &[&[u8]], key: &[u8; 32]) -> [u8; 32] {
    let mut m =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!("any key length"));
    m.update(DOMAIN);
    m.update(label);
    for p in parts {
        m.update(&(p.len() as u64).to_le_bytes());
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The prologue of the link from `from` (connecting) to `to` (accepting).
fn prologue(job: &str, from: usize, to: usize, world: usize) -> Vec<u8> {
    let mut p = DOMAIN.to_vec();
    for w in [job.len() as u64, from as u64, to as u64, world as u64] {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p.extend_from_slice(job.as_bytes());
    p
}

/// One established connection: its two directions and their keys.
pub struct Link {
    /// The peer.
    pub peer: usize,
    /// The read side.
    pub reader: TcpStream,
    /// The write side (the same socket).
    pub writer: TcpStream,
    /// Opens what the peer sends.
    pub opening: Opening,
    /// Seals what this rank sends.
    pub sealing: Sealing,
}

impl Link {
    fn new(peer: usize, stream: TcpStream, keys: LinkKeys) -> Result<Link, PlaneError> {
        stream.set_nodelay(true).map_err(io("set TCP_NODELAY"))?;
        stream.set_read_timeout(None).map_err(io("clear the read timeout"))?;
        let writer = stream.try_clone().map_err(io("clone a socket"))?;
        Ok(Link {
            peer,
            reader: stream,
            writer,
            opening: Opening::new(keys.clone()),
            sealing: Sealing::new(keys),
        })
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> PlaneError {
    move |e| PlaneError::Internal(format!("cannot {what}: {e}"))
}

/// A rank's listening socket, bound before its address is handed out.
pub struct Listener {
    listener: TcpListener,
}

impl Listener {
    /// Listens on `host`, on a port the system chooses.
    pub fn bind(host: IpAddr) -> Result<Listener, PlaneError> {
        let listener = TcpListener::bind((host, 0))
            .map_err(|e| PlaneError::Internal(format!("cannot listen on {host}: {e}")))?;
        Ok(Listener { listener })
    }

    /// The address peers connect to.
    pub fn address(&self) -> Result<SocketAddr, PlaneError> {
        self.listener.local_addr().map_err(io("read the listening address"))
    }
}

/// Who this rank is and whom it links to.
pub struct MeshConfig {
    /// This rank.
    pub rank: usize,
    /// Every rank's address, by rank.
    pub addresses: Vec<SocketAddr>,
    /// The job's key.
    pub key: JobKey,
    /// Names the job (and its attempt): links of another job fail.
    pub job: String,
    /// How long linking up may take.
    pub deadline: Duration,
}

/// Links this rank to every other (see the module's docs); the links by rank (`None` at this
/// rank's place).
pub fn link_up(listener: Listener, cfg: &MeshConfig) -> Result<Vec<Option<Link>>, PlaneError> {
    let (rank, world) = (cfg.rank, cfg.addresses.len());
    let until = Instant::now() + cfg.deadline;
    let accepting = {
        let (key, job) = (cfg.key.clone(), cfg.job.clone());
        std::thread::Builder::new()
            .name("ubershuffle-accept".into())
            .spawn(move || accept_all(listener, rank, world, &key, &job, until))
            .map_err(io("start a thread"))?
    };
    let mut links: Vec<Option<Link>> = (0..world).map(|_| None).collect();
    for (peer, slot) in links.iter_mut().enumerate().take(rank) {
        *slot = Some(connect_one(cfg, peer, until)?);
    }
    let accepted =
        accepting.join().map_err(|_| PlaneError::Internal("the accepting thread panicked".into()))??;
    for link in accepted {
        let peer = link.peer;
        links[peer] = Some(link);
    }
    Ok(links)
}

/// Connects to `addr`, trying again until `until` (the peer may not listen yet); the last
/// error once it passed. `doing` names the attempt in the debug log.
pub(crate) fn connect_until(addr: SocketAddr, until: Instant, doing: &str) -> std::io::Result<TcpStream> {
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() < until => {
                tracing::debug!("{doing} at {addr}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

fn connect_one(cfg: &MeshConfig, peer: usize, until: Instant) -> Result<Link, PlaneError> {
    let (rank, world) = (cfg.rank, cfg.addresses.len());
    let addr = cfg.addresses[peer];
    let mut stream = connect_until(addr, until, &format!("rank {rank} connecting to rank {peer}")).map_err(|e| {
        PlaneError::Mismatch(format!(
            "rank {rank} cannot connect to rank {peer} at {addr}: {e} (is its address reachable from here? set UBERSHUFFLE_SOCKET_IFNAME)"
        ))
    })?;
    stream
        .set_read_timeout(Some(until.saturating_duration_since(Instant::now()).max(Duration::from_secs(1))))
        .ok();
    let refused = |e: &dyn std::fmt::Display| {
        PlaneError::Mismatch(format!(
            "rank {peer} refused the link of rank {rank} ({e}): the ranks do not share the job's key or token"
        ))
    };
    let mut claim = CLAIM.to_vec();
    claim.extend_from_slice(&(rank as u32).to_le_bytes());
    stream.write_all(&claim).map_err(|e| refused(&e))?;
    let keys = handshake_pair(
        &mut stream,
        true,
        &cfg.key.pair(&cfg.job, rank, peer),
        &prologue(&cfg.job, rank, peer, world),
    )
    .map_err(|e| refused(&e))?;
    let mut link = Link::new(peer, stream, keys)?;
    // The accepting rank's sealed answer proves it holds the key too.
    read_frame_on(Some(&mut link.opening), &mut link.reader, 0).map_err(|e| refused(&e))?;
    Ok(link)
}

fn accept_all(
    listener: Listener,
    rank: usize,
    world: usize,
    key: &JobKey,
    job: &str,
    until: Instant,
) -> Result<Vec<Link>, PlaneError> {
    let mut waiting: Vec<usize> = (rank + 1..world).collect();
    let mut links = Vec::new();
    listener.listener.set_nonblocking(true).map_err(io("poll the listener"))?;
    while !waiting.is_empty() {
        let stream = match listener.listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= until {
                    return Err(PlaneError::Mismatch(format!(
                        "rank {rank} waited in vain for ranks {waiting:?} to link up with it (a rank without the job's key or token, or not started?)"
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                return Err(PlaneError::Internal(format!("rank {rank} cannot accept a connection: {e}")));
            }
        };
        match accept_one(stream, rank, world, key, job, &waiting) {
            Ok(link) => {
                waiting.retain(|&p| p != link.peer);
                links.push(link);
            }
            Err(why) => tracing::warn!("rank {rank} refused a connection: {why}"),
        }
    }
    Ok(links)
}

fn accept_one(
    mut stream: TcpStream,
    rank: usize,
    world: usize,
    key: &JobKey,
    job: &str,
    waiting: &[usize],
) -> Result<Link, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(HANDSHAKE_SECONDS))).map_err(|e| e.to_string())?;
    let mut claim = [0u8; 8];
    stream.read_exact(&mut claim).map_err(|e| format!("no claim: {e}"))?;
    if &claim[..4] != CLAIM {
        let _ = stream.shutdown(Shutdown::Both);
        return Err("not a rank of the plane".into());
    }
    let peer = u32::from_le_bytes([claim[4], claim[5], claim[6], claim[7]]) as usize;
    if !waiting.contains(&peer) {
        return Err(format!("a claim to be rank {peer}, which is not awaited"));
    }
    let keys =
        handshake_pair(&mut stream, false, &key.pair(job, rank, peer), &prologue(job, peer, rank, world))
            .map_err(|e| format!("the claim to be rank {peer}: {e}"))?;
    let mut link = Link::new(peer, stream, keys).map_err(|e| e.to_string())?;
    write_frame_on(Some(&mut link.sealing), &mut link.writer, (FrameKind::Ready, rank as u32, 0), &[])
        .map_err(|e| e.to_string())?;
    Ok(link)
}
