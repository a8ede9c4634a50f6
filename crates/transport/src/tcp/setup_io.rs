//! Blocking setup I/O with deadlines: reading and writing one setup frame before an instant
//! (bytes that trickle in do not move it), sealed once the handshake is done, and the
//! connecting side of the handshake ([`super::noise`]).

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::conn::Conn;
use super::handshake::{self, MAX_UNAUTHENTICATED_PAYLOAD};
use super::noise::{self, Context, Psk};
use crate::TransportError;
use crate::frame::{Frame, FrameKind, MAGIC, ReadFrameError};
use crate::seal::{Opening, Sealing, read_frame_on, seal_error, write_frame_on};

/// Reads from a stream until `deadline`, however the bytes trickle in; counts them.
struct DeadlineReader<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
    got: usize,
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(ErrorKind::TimedOut));
        }
        self.stream.set_read_timeout(Some(left))?;
        let n = (&*self.stream).read(buf)?;
        self.got += n;
        Ok(n)
    }
}

/// Writes to a stream until `deadline`.
struct DeadlineWriter<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Write for DeadlineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(ErrorKind::TimedOut));
        }
        self.stream.set_write_timeout(Some(left))?;
        (&*self.stream).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.stream).flush()
    }
}

/// Reads one setup frame of at most `max` payload bytes from `conn` before `deadline`; errors
/// name `who` and say what arrived.
pub(crate) fn read_before(
    conn: &mut Conn,
    deadline: Instant,
    max: usize,
    who: &str,
) -> Result<Frame, TransportError> {
    let Conn { stream, seal } = conn;
    read_raw_before(stream, seal.as_mut().map(|(_, o)| o), deadline, max, who)
}

/// [`read_before`] on a bare stream, opened under `opening` if given.
fn read_raw_before(
    stream: &TcpStream,
    opening: Option<&mut Opening>,
    deadline: Instant,
    max: usize,
    who: &str,
) -> Result<Frame, TransportError> {
    let limit = deadline.saturating_duration_since(Instant::now());
    let mut r = DeadlineReader { stream, deadline, got: 0 };
    let result = read_frame_on(opening, &mut r, max);
    result.map_err(|e| match e {
        ReadFrameError::Frame(error) => TransportError::BadFrame { from: who.to_string(), error },
        ReadFrameError::Closed => TransportError::Setup(format!("{who} closed the connection during setup")),
        ReadFrameError::Io(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            TransportError::Setup(match r.got {
                0 => format!("{who} sent nothing within {limit:.1?} during setup"),
                n => format!(
                    "{who} sent {n} bytes but not a whole setup frame within {limit:.1?} (it stalled mid-frame)"
                ),
            })
        }
        ReadFrameError::Io(e) if seal_error(&e).is_some() => TransportError::Setup(format!("{who}: {e}")),
        ReadFrameError::Io(error) => TransportError::Io { context: format!("reading from {who}"), error },
    })
}

/// Writes one setup frame before `deadline`.
pub(crate) fn write_before(
    conn: &mut Conn,
    deadline: Instant,
    kind: FrameKind,
    sender: u32,
    payload: &[u8],
    who: &str,
) -> Result<(), TransportError> {
    write_tagged_before(conn, deadline, (kind, sender, 0), payload, who)
}

/// [`write_before`] with a tag: `(kind, sender, tag)` (a welcome's generation on the ready
/// frames).
pub(crate) fn write_tagged_before(
    conn: &mut Conn,
    deadline: Instant,
    head: (FrameKind, u32, u32),
    payload: &[u8],
    who: &str,
) -> Result<(), TransportError> {
    let Conn { stream, seal } = conn;
    write_raw_before(stream, seal.as_mut().map(|(s, _)| s), deadline, head, payload, who)
}

/// [`write_tagged_before`] on a bare stream, sealed under `sealing` if given.
fn write_raw_before(
    stream: &TcpStream,
    sealing: Option<&mut Sealing>,
    deadline: Instant,
    head: (FrameKind, u32, u32),
    payload: &[u8],
    who: &str,
) -> Result<(), TransportError> {
    let w = DeadlineWriter { stream, deadline };
    write_frame_on(sealing, w, head, &[payload])
        .map_err(|error| TransportError::Io { context: format!("writing to {who}"), error })
}

/// How the connecting side runs its handshake.
pub(crate) struct Initiate<'a> {
    /// The pre-shared key: the token's (to the master) or the pair key (to a worker).
    pub(crate) psk: &'a Psk,
    /// What the link is.
    pub(crate) context: Context,
    /// Hello (to the master) or PeerHello (to a worker).
    pub(crate) hello: FrameKind,
    /// This side's rank (0 for a worker joining the master).
    pub(crate) sender: u32,
    /// The listening address sent with the proof (a joining worker's; empty otherwise).
    pub(crate) listen: &'a str,
    /// Whether the link's frames are sealed after the handshake.
    pub(crate) sealed: bool,
}

/// The connecting side of the handshake: hello (the first key-exchange message), the other
/// side's challenge (the second), this side's proof (the third, with the pre-shared key and the
/// listening address), the other side's proof (a sealed frame). Fails, naming `who`, when the
/// other side refuses, cannot prove it knows the key, or does not answer before `deadline`.
pub(crate) fn authenticate_to(
    stream: TcpStream,
    how: &Initiate<'_>,
    deadline: Instant,
    who: &str,
) -> Result<Conn, TransportError> {
    let max = MAX_UNAUTHENTICATED_PAYLOAD;
    let (context, sender) = (how.context, how.sender);
    let mut h = noise::start(true, how.psk, context, how.sealed)?;
    let head = (how.hello, sender, u32::from(how.sealed));
    write_raw_before(&stream, None, deadline, head, &noise::write(&mut h, &[])?, who)?;
    let f = read_raw_before(&stream, None, deadline, max, who)?;
    if f.kind != FrameKind::Challenge {
        return Err(unexpected(&f, who, "a challenge", context));
    }
    noise::read(&mut h, &f.payload)
        .ok_or_else(|| TransportError::Setup(format!("{who} sent a malformed challenge")))?;
    let proof = noise::write(&mut h, &handshake::listen_payload(how.listen))?;
    write_raw_before(&stream, None, deadline, (FrameKind::Proof, sender, 0), &proof, who)?;
    let (sealing, mut opening) = Conn::directions(noise::finish(h)?);
    // A refusal comes in plain text (the other side has no keys then), a proof sealed.
    let mut prefix = [0u8; 4];
    DeadlineReader { stream: &stream, deadline, got: 0 }
        .read_exact(&mut prefix)
        .map_err(|e| TransportError::Setup(format!("{who} did not answer this side's proof: {e}")))?;
    let rest = DeadlineReader { stream: &stream, deadline, got: 0 };
    let read = match prefix == MAGIC {
        true => read_frame_on(None, (&prefix[..]).chain(rest), max),
        false => read_frame_on(Some(&mut opening), (&prefix[..]).chain(rest), 0),
    };
    match read {
        Ok(f) if f.kind == FrameKind::Proof && prefix != MAGIC => {
            Ok(Conn::new(stream, (sealing, opening), how.sealed))
        }
        Ok(f) if f.kind == FrameKind::Refused => Err(unexpected(&f, who, "its proof", context)),
        _ => Err(TransportError::Setup(format!(
            "{who} did not prove that it knows the key (another token, or not a ubershuffle cluster)"
        ))),
    }
}

/// A refusal, or a frame of the wrong kind, as an error.
fn unexpected(f: &Frame, who: &str, wanted: &str, context: Context) -> TransportError {
    match f.kind {
        FrameKind::Refused if context == Context::Join => {
            TransportError::Refused { reason: String::from_utf8_lossy(&f.payload).into_owned() }
        }
        FrameKind::Refused => TransportError::Setup(format!(
            "{who} refused this worker: {}",
            String::from_utf8_lossy(&f.payload)
        )),
        other => TransportError::Setup(format!("{who} sent a {other:?} frame instead of {wanted}")),
    }
}

/// Whether the other side has sent something (or closed) that a blocking read would return
/// at once; never blocks.
pub(crate) fn has_word(conn: &Conn) -> bool {
    let stream = &conn.stream;
    if stream.set_nonblocking(true).is_err() {
        return true; // a read will report what is wrong
    }
    let mut byte = [0u8; 1];
    let seen = stream.peek(&mut byte);
    let _ = stream.set_nonblocking(false);
    !matches!(seen, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted))
}

/// The later of `deadline` and `at_least` from now.
pub(crate) fn at_least(deadline: Instant, at_least: Duration) -> Instant {
    deadline.max(Instant::now() + at_least)
}
