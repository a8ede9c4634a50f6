//! Blocking setup I/O with deadlines: reading and writing one setup frame before an instant
//! (bytes that trickle in do not move it), and the connecting side of the authentication
//! handshake ([`super::auth`]).

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::auth::{self, Context, Role};
use super::handshake::{self, MAX_UNAUTHENTICATED_PAYLOAD};
use crate::TransportError;
use crate::frame::{Frame, FrameKind, ReadFrameError, read_frame, write_frame};

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

/// Reads one setup frame of at most `max` payload bytes before `deadline`; errors name `who`
/// and say what arrived.
pub(crate) fn read_before(
    stream: &TcpStream,
    deadline: Instant,
    max: usize,
    who: &str,
) -> Result<Frame, TransportError> {
    let limit = deadline.saturating_duration_since(Instant::now());
    let mut r = DeadlineReader { stream, deadline, got: 0 };
    let result = read_frame(&mut r, max);
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
        ReadFrameError::Io(error) => TransportError::Io { context: format!("reading from {who}"), error },
    })
}

/// Writes one setup frame before `deadline`.
pub(crate) fn write_before(
    stream: &TcpStream,
    deadline: Instant,
    kind: FrameKind,
    sender: u32,
    payload: &[u8],
    who: &str,
) -> Result<(), TransportError> {
    write_tagged_before(stream, deadline, (kind, sender, 0), payload, who)
}

/// [`write_before`] with a tag: `(kind, sender, tag)` (a welcome's generation on the ready
/// frames).
pub(crate) fn write_tagged_before(
    stream: &TcpStream,
    deadline: Instant,
    (kind, sender, tag): (FrameKind, u32, u32),
    payload: &[u8],
    who: &str,
) -> Result<(), TransportError> {
    let mut w = DeadlineWriter { stream, deadline };
    write_frame(&mut w, kind, sender, tag, &[payload])
        .map_err(|error| TransportError::Io { context: format!("writing to {who}"), error })
}

/// The connecting side of the handshake: hello, the other side's challenge, this side's proof
/// (with `listen`), the other side's proof. Fails, naming `who`, when the other side refuses,
/// cannot prove it knows the token, or does not answer before `deadline`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn authenticate_to(
    stream: &TcpStream,
    token: &str,
    context: Context,
    hello: FrameKind,
    sender: u32,
    listen: &str,
    deadline: Instant,
    who: &str,
) -> Result<(), TransportError> {
    let max = MAX_UNAUTHENTICATED_PAYLOAD;
    let mine = auth::nonce()?;
    write_before(stream, deadline, hello, sender, &handshake::nonce_payload(&mine), who)?;
    let f = read_before(stream, deadline, max, who)?;
    let theirs = match f.kind {
        FrameKind::Challenge => handshake::parse_nonce(&f.payload)
            .ok_or_else(|| TransportError::Setup(format!("{who} sent a malformed challenge")))?,
        _ => return Err(unexpected(&f, who, "a challenge", context)),
    };
    let proof = auth::prove(token, Role::Initiator, context, &mine, &theirs, listen.as_bytes());
    write_before(stream, deadline, FrameKind::Proof, sender, &handshake::proof_payload(&proof, listen), who)?;
    let f = read_before(stream, deadline, max, who)?;
    match f.kind {
        FrameKind::Proof => {
            let valid = handshake::parse_proof(&f.payload)
                .is_some_and(|(p, _)| auth::check(token, Role::Responder, context, &mine, &theirs, b"", &p));
            if !valid {
                return Err(TransportError::Setup(format!(
                    "{who} did not prove that it knows the token (another token, or not a ubershuffle cluster)"
                )));
            }
            Ok(())
        }
        _ => Err(unexpected(&f, who, "its proof", context)),
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
pub(crate) fn has_word(stream: &TcpStream) -> bool {
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
