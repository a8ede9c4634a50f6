//! Meeting at a store outside the job: the training ranks find each other through the store's
//! address and a token, instead of through the job's key-value store ([`super::mesh`] links
//! them up afterwards, as for any plane).
//!
//! One attempt of a job meets like this:
//! 1. A training rank connects to the store's address and says it joins ([`JOIN`]).
//! 2. The two run the Noise `XXpsk3` handshake under a key only holders of the job's token
//!    derive from it; a stranger fails it, and that costs only its connection.
//! 3. The rank says, sealed, its place among the training ranks (torch's rank), how many
//!    training ranks its job has, and the address its engine listens on.
//! 4. Once every place is taken, the store answers each, sealed: a fresh name for the attempt,
//!    the rank's place (its rank in the plane too: the training ranks are ranks `0..n` and the
//!    store is rank `n`, so that errors name a training rank by torch's rank), every rank's
//!    address, and the store's description of the job (bytes the caller gives: its settings).
//!
//! A rank may leave its place to the store (the first free one) and its count too. A place
//! claimed twice (a rank restarted while the others waited) goes to the newer claim.
//! A rank whose place or count does not fit the store's is refused with a one-line reason.
//! A rank that joins while the store serves an earlier attempt waits in the listening queue
//! until the store meets again.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ubershuffle_transport::frame::FrameKind;
use ubershuffle_transport::seal::{Opening, Sealing, handshake_pair, read_frame_on, write_frame_on};

use super::mesh::{DOMAIN, JobKey, MeshConfig, connect_until};
use crate::error::PlaneError;

/// The first bytes of a joining training rank.
pub const JOIN: &[u8; 4] = b"UBSJ";
/// A place or a count a joining rank leaves to the store.
const ANY: u32 = u32::MAX;
/// Seconds a connection the store accepted has to say who it is.
const HANDSHAKE_SECONDS: u64 = 10;
/// The largest request a joining rank may send.
const MAX_REQUEST: usize = 4096;
/// The largest answer a joining rank reads (addresses of a million ranks, and the
/// description).
const MAX_ANSWER: usize = 64 << 20;

/// The prologue both sides of a join bind into their handshake.
fn prologue() -> Vec<u8> {
    let mut p = DOMAIN.to_vec();
    p.extend_from_slice(b" join");
    p
}

/// What a training rank learns once its attempt is complete.
pub struct Joined {
    /// How it links up with the others ([`super::mesh::link_up`]).
    pub mesh: MeshConfig,
    /// The store's description of the job.
    pub about: Vec<u8>,
}

/// The store's socket where training ranks join.
pub struct Host {
    listener: TcpListener,
}

/// A joined rank, waiting for the others.
struct Claim {
    /// `None`: any free place.
    place: Option<usize>,
    address: SocketAddr,
    stream: TcpStream,
    sealing: Sealing,
}

impl Host {
    /// Listens at `address` (port 0: one the system chooses).
    pub fn bind(address: SocketAddr) -> Result<Host, PlaneError> {
        let listener = TcpListener::bind(address)
            .map_err(|e| PlaneError::Mismatch(format!("the store cannot listen at {address}: {e}")))?;
        Ok(Host { listener })
    }

    /// The address the training ranks join at.
    pub fn address(&self) -> Result<SocketAddr, PlaneError> {
        self.listener
            .local_addr()
            .map_err(|e| PlaneError::Internal(format!("cannot read the store's address: {e}")))
    }

    /// Waits (at most `deadline`; `None`: as long as it takes, or until `stop` is set) for one
    /// attempt's `trainers` training ranks, answers each with the attempt's name, every address (the store's
    /// engine listens at `engine_address`) and `about`; returns the store's link-up (rank
    /// `trainers`), whose links may take `link_deadline`.
    pub fn meet(
        &self,
        key: &JobKey,
        trainers: usize,
        engine_address: SocketAddr,
        about: &[u8],
        (deadline, link_deadline): (Option<Duration>, Duration),
        stop: &AtomicBool,
    ) -> Result<MeshConfig, PlaneError> {
        let until = deadline.map(|d| Instant::now() + d);
        let mut claims: Vec<Option<Claim>> = (0..trainers).map(|_| None).collect();
        self.listener.set_nonblocking(true).map_err(io("poll the store's socket"))?;
        while claims.iter().any(Option::is_none) {
            let (stream, from) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if stop.load(Ordering::Relaxed) {
                        return Err(PlaneError::Closed {
                            plane: "store".into(),
                            me: 0,
                            doing: "waiting for training ranks to join".into(),
                        });
                    }
                    if until.is_some_and(|u| Instant::now() >= u) {
                        let missing: Vec<usize> = (0..trainers).filter(|&p| claims[p].is_none()).collect();
                        return Err(PlaneError::Mismatch(format!(
                            "the store waited {:.0} s in vain for training ranks {missing:?} to join (not started, or without the job's token?)",
                            deadline.unwrap_or_default().as_secs_f64()
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(e) => {
                    return Err(PlaneError::Internal(format!("the store cannot accept a connection: {e}")));
                }
            };
            match admit(stream, key, trainers) {
                Ok(mut claim) => {
                    let free = claims.iter().position(Option::is_none);
                    let Some(place) = claim.place.or(free) else { continue };
                    claim.place = Some(place);
                    if claims[place].replace(claim).is_some() {
                        tracing::info!("training rank {place} joined again: its newer claim takes its place");
                    }
                }
                Err(why) => tracing::warn!("the store refused a connection from {from}: {why}"),
            }
        }
        let job = attempt_name()?;
        let mut addresses: Vec<SocketAddr> = claims.iter().flatten().map(|c| c.address).collect();
        addresses.push(engine_address);
        for (place, mut claim) in claims.into_iter().flatten().enumerate() {
            let answer = welcome(&job, place, &addresses, about);
            let sent = write_frame_on(
                Some(&mut claim.sealing),
                &mut claim.stream,
                (FrameKind::Welcome, 0, 0),
                &[&answer],
            );
            if let Err(e) = sent {
                // The attempt fails at its link-up, and the next one meets again.
                tracing::warn!("the store could not answer training rank {place}: {e}");
            }
        }
        Ok(MeshConfig { rank: trainers, addresses, key: key.clone(), job, deadline: link_deadline })
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> PlaneError {
    move |e| PlaneError::Internal(format!("cannot {what}: {e}"))
}

/// A fresh name for an attempt (its links are bound to it: a stale rank's fail).
fn attempt_name() -> Result<String, PlaneError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| PlaneError::Internal(format!("the operating system gave no random bytes: {e}")))?;
    Ok(format!("outside-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// Reads a joining rank's claim, or says why not (refusing it in one line where it can).
fn admit(mut stream: TcpStream, key: &JobKey, trainers: usize) -> Result<Claim, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(HANDSHAKE_SECONDS))).map_err(|e| e.to_string())?;
    let mut first = [0u8; 4];
    stream.read_exact(&mut first).map_err(|e| format!("it said nothing: {e}"))?;
    if &first != JOIN {
        let _ = stream.shutdown(Shutdown::Both);
        return Err("it is not a training rank joining".into());
    }
    let keys = handshake_pair(&mut stream, false, &key.join(), &prologue())
        .map_err(|e| format!("its handshake failed, so it does not hold the job's token ({e})"))?;
    let mut opening = Opening::new(keys.clone());
    let mut sealing = Sealing::new(keys);
    let frame = read_frame_on(Some(&mut opening), &mut stream, MAX_REQUEST)
        .map_err(|e| format!("no request: {e}"))?;
    let mut refuse = |why: String| {
        let _ =
            write_frame_on(Some(&mut sealing), &mut stream, (FrameKind::Refused, 0, 0), &[why.as_bytes()]);
        why
    };
    let mut r = Fields::new(&frame.payload);
    let (place, count, address) = match (r.u32(), r.u32(), r.text()) {
        (Some(p), Some(c), Some(a)) => (p, c, a),
        _ => return Err(refuse("its request is malformed".into())),
    };
    if count != ANY && count as usize != trainers {
        return Err(refuse(format!(
            "the store serves {trainers} training ranks; this rank's job has {count}"
        )));
    }
    if place != ANY && place as usize >= trainers {
        return Err(refuse(format!("place {place} is not one of the store's {trainers} training ranks")));
    }
    let place = (place != ANY).then_some(place as usize);
    let address: SocketAddr =
        address.parse().map_err(|_| refuse(format!("{address:?} is not an address to link up at")))?;
    Ok(Claim { place, address, stream, sealing })
}

/// The store's answer: the attempt's name, the rank, every address, the description.
fn welcome(job: &str, rank: usize, addresses: &[SocketAddr], about: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, job.as_bytes());
    out.extend_from_slice(&(rank as u32).to_le_bytes());
    out.extend_from_slice(&(addresses.len() as u32).to_le_bytes());
    for a in addresses {
        put_bytes(&mut out, a.to_string().as_bytes());
    }
    put_bytes(&mut out, about);
    out
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads the fields of a request or an answer, each bounded by what is left.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Fields { rest: bytes }
    }

    fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.rest.split_first_chunk::<4>()?;
        self.rest = rest;
        Some(u32::from_le_bytes(*head))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > self.rest.len() {
            return None;
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Some(head)
    }

    fn text(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
}

/// Joins the store at `store` as the training rank at `place` of `trainers` (`None`: the
/// store's first free place, of as many as it serves), whose engine listens at `address`;
/// waits (at most `deadline`) for the attempt to be complete. The links may then take
/// `link_deadline`.
pub fn join(
    store: SocketAddr,
    key: &JobKey,
    (place, trainers): (Option<usize>, Option<usize>),
    address: SocketAddr,
    (deadline, link_deadline): (Duration, Duration),
) -> Result<Joined, PlaneError> {
    let until = Instant::now() + deadline;
    let who = match place {
        Some(p) => format!("training rank {p}"),
        None => "a training rank".to_string(),
    };
    let mut stream = connect_until(store, until, &format!("{who} joining the store")).map_err(|e| {
        PlaneError::Mismatch(format!("{who} cannot reach the store at {store}: {e} (is it serving?)"))
    })?;
    let left = || until.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
    stream.set_read_timeout(Some(left())).map_err(io("set a read timeout"))?;
    let refused = |e: &dyn std::fmt::Display| {
        PlaneError::Mismatch(format!(
            "the store at {store} refused {who}: {e} (do the two hold the same token?)"
        ))
    };
    stream.write_all(JOIN).map_err(|e| refused(&e))?;
    let keys = handshake_pair(&mut stream, true, &key.join(), &prologue()).map_err(|e| refused(&e))?;
    let mut opening = Opening::new(keys.clone());
    let mut sealing = Sealing::new(keys);
    let mut request = Vec::new();
    let (place, trainers) = (place.map_or(ANY, |p| p as u32), trainers.map_or(ANY, |t| t as u32));
    request.extend_from_slice(&place.to_le_bytes());
    request.extend_from_slice(&trainers.to_le_bytes());
    put_bytes(&mut request, address.to_string().as_bytes());
    write_frame_on(Some(&mut sealing), &mut stream, (FrameKind::Hello, place, 0), &[&request])
        .map_err(|e| refused(&e))?;
    stream.set_read_timeout(Some(left())).map_err(io("set a read timeout"))?;
    // The handshake's last message carries the token's proof, so a store that does not share
    // it closes the connection here; a store that does waits for the attempt's other ranks.
    let frame = read_frame_on(Some(&mut opening), &mut stream, MAX_ANSWER).map_err(|e| {
        if Instant::now() < until {
            refused(&e)
        } else {
            PlaneError::Mismatch(format!(
                "{who} waited {:.0} s in vain at the store {store} for the other training ranks to join",
                deadline.as_secs_f64()
            ))
        }
    })?;
    let _ = stream.shutdown(Shutdown::Both);
    if frame.kind == FrameKind::Refused {
        let why = String::from_utf8_lossy(&frame.payload);
        return Err(PlaneError::Mismatch(format!(
            "the store at {store} refused {who}: {}",
            crate::error::bounded_line(&why, crate::wire::MAX_TEXT)
        )));
    }
    let malformed = || PlaneError::Mismatch(format!("the store at {store} answered {who} malformed"));
    let mut r = Fields::new(&frame.payload);
    let job = r.text().ok_or_else(malformed)?;
    let rank = r.u32().ok_or_else(malformed)? as usize;
    let count = r.u32().ok_or_else(malformed)? as usize;
    let fits = |asked: u32, got: usize| asked == ANY || asked as usize == got;
    if count < 2 || rank + 1 >= count || !fits(trainers, count - 1) || !fits(place, rank) {
        return Err(malformed());
    }
    let mut addresses: Vec<SocketAddr> = Vec::with_capacity(count);
    for _ in 0..count {
        addresses.push(r.text().and_then(|a| a.parse().ok()).ok_or_else(malformed)?);
    }
    let about = r.bytes().ok_or_else(malformed)?.to_vec();
    let engine = &mut addresses[count - 1];
    if engine.ip().is_unspecified() {
        // The store listens on every interface: its engine is where this rank reached it.
        engine.set_ip(store.ip());
    }
    Ok(Joined { mesh: MeshConfig { rank, addresses, key: key.clone(), job, deadline: link_deadline }, about })
}
