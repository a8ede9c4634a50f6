//! The accepting side of setup: many handshakes at once, each with a total deadline, each
//! costing a few hundred bytes until the peer has proved it knows the token.
//!
//! One thread polls non-blocking sockets: it accepts whatever is waiting, then advances every
//! pending handshake by the bytes that have arrived. A handshake must finish within the
//! handshake timeout of its acceptance, however its bytes trickle in; at most `max_pending`
//! are pending at once, and a new connection beyond that drops the oldest pending one (an
//! honest peer answers within a round trip, so only a flood of newer connections can push it
//! out). Before authentication a connection holds a buffer of at most one small setup frame
//! ([`MAX_UNAUTHENTICATED_PAYLOAD`] plus the header), never more.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use snow::HandshakeState;

use super::conn::Conn;
use super::handshake::{self, MAX_UNAUTHENTICATED_PAYLOAD};
use super::noise::{self, Context, Psk};
use crate::TransportError;
use crate::frame::{Frame, FrameHeader, FrameKind, HEADER_LEN, write_frame};
use crate::seal::write_frame_on;

/// A connection the master or a worker turned away during setup.
#[derive(Clone, Debug)]
pub struct Refusal {
    /// Where it came from.
    pub from: SocketAddr,
    /// Why, in one line.
    pub reason: String,
}

/// A peer that proved it knows the token (or its pair key).
#[derive(Debug)]
pub(crate) struct Admitted {
    /// The connection, blocking again, with its keys.
    pub(crate) conn: Conn,
    /// Where it came from.
    pub(crate) from: SocketAddr,
    /// The sender field of its hello (a peer worker's rank; 0 for a joining worker).
    pub(crate) sender: u32,
    /// The address it sent with its proof (a joining worker's listening address).
    pub(crate) listen: String,
}

/// What a poll produced.
#[derive(Debug)]
pub(crate) enum Event {
    /// A handshake succeeded.
    Admitted(Admitted),
    /// A connection was turned away.
    Refused(Refusal),
}

/// Where a pending handshake stands.
enum Stage {
    /// Waiting for the hello.
    Hello,
    /// Challenge sent; waiting for the proof.
    Proof { sender: u32, handshake: Box<HandshakeState> },
}

/// One connection that has not proved itself yet.
struct Pending {
    stream: TcpStream,
    from: SocketAddr,
    accepted: Instant,
    stage: Stage,
    /// The bytes of the frame being read (at most a header and a bounded payload).
    buf: Vec<u8>,
    /// Bytes received so far, for the messages.
    received: usize,
}

/// Accepts and authenticates connections on one listener.
pub(crate) struct Admission<'a> {
    listener: &'a TcpListener,
    /// Whether links are sealed after the handshake (a hello must say the same).
    sealed: bool,
    /// The total time a handshake may take from its acceptance.
    timeout: Duration,
    max_pending: usize,
    /// The frame kind a hello must have (Hello from workers, PeerHello from peers).
    hello: FrameKind,
    /// The sender field of the frames this side writes.
    own_rank: u32,
    /// The context and pre-shared key of a handshake with the sender of a hello, or `None` to
    /// refuse that sender.
    context: Box<dyn Fn(u32) -> Option<(Context, Psk)> + 'a>,
    pending: VecDeque<Pending>,
}

/// Why a pending handshake ended without success.
enum End {
    /// Turned away for this reason, which the peer is told.
    Refuse(String),
    /// The peer closed the connection.
    Closed,
    /// The handshake timeout passed.
    TimedOut,
    /// The connection failed (reset, a write that did not go out).
    Broken,
}

impl<'a> Admission<'a> {
    /// Admission on `listener` (made non-blocking here).
    pub(crate) fn new(
        listener: &'a TcpListener,
        sealed: bool,
        timeout: Duration,
        max_pending: usize,
        hello: FrameKind,
        own_rank: u32,
        context: impl Fn(u32) -> Option<(Context, Psk)> + 'a,
    ) -> Result<Admission<'a>, TransportError> {
        listener
            .set_nonblocking(true)
            .map_err(|error| TransportError::Io { context: "configuring the listener".into(), error })?;
        Ok(Admission {
            listener,
            sealed,
            timeout,
            max_pending: max_pending.max(1),
            hello,
            own_rank,
            context: Box::new(context),
            pending: VecDeque::new(),
        })
    }

    /// Handshakes under way.
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Accepts what is waiting and advances every pending handshake; appends what happened
    /// to `events`. Returns whether anything moved (callers sleep briefly when nothing did).
    pub(crate) fn poll(&mut self, events: &mut Vec<Event>) -> Result<bool, TransportError> {
        let mut moved = self.accept_waiting(events)?;
        let now = Instant::now();
        let count = self.pending.len();
        let mut still = VecDeque::with_capacity(count);
        while let Some(mut p) = self.pending.pop_front() {
            let before = p.received;
            let result = self.advance(&mut p, now);
            moved |= p.received != before;
            match result {
                Ok(None) => still.push_back(p),
                Ok(Some(admitted)) => events.push(Event::Admitted(admitted)),
                Err(end) => {
                    if let End::Refuse(reason) = &end {
                        refuse(&mut p.stream, self.own_rank, reason);
                    }
                    let reason = describe(&p, end, self.timeout);
                    events.push(Event::Refused(Refusal { from: p.from, reason }));
                }
            }
        }
        moved |= still.len() != count;
        self.pending = still;
        Ok(moved || !events.is_empty())
    }

    fn accept_waiting(&mut self, events: &mut Vec<Event>) -> Result<bool, TransportError> {
        let mut any = false;
        loop {
            let (stream, from) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    return Ok(any);
                }
                // Too many open files, a connection reset before it was accepted: this one is
                // lost, the listener goes on.
                Err(_) => return Ok(any),
            };
            any = true;
            if stream.set_nonblocking(true).is_err() || stream.set_nodelay(true).is_err() {
                continue;
            }
            if self.pending.len() >= self.max_pending
                && let Some(oldest) = self.pending.pop_front()
            {
                let reason = format!(
                    "dropped after {:.1?} with {} bytes received: {} handshakes were pending and it was the oldest",
                    oldest.accepted.elapsed(),
                    oldest.received,
                    self.max_pending
                );
                events.push(Event::Refused(Refusal { from: oldest.from, reason }));
            }
            self.pending.push_back(Pending {
                stream,
                from,
                accepted: Instant::now(),
                stage: Stage::Hello,
                buf: Vec::new(),
                received: 0,
            });
        }
    }

    /// Moves one handshake on: `Ok(None)` while it waits for bytes, `Ok(Some(..))` once the
    /// peer proved itself, `Err(..)` when it ends otherwise.
    fn advance(&self, p: &mut Pending, now: Instant) -> Result<Option<Admitted>, End> {
        let refuse = |reason: String| End::Refuse(reason);
        loop {
            if now.saturating_duration_since(p.accepted) >= self.timeout {
                return Err(End::TimedOut);
            }
            let Some(frame) = read_some(p)? else { return Ok(None) };
            match std::mem::replace(&mut p.stage, Stage::Hello) {
                Stage::Hello => {
                    if frame.kind != self.hello {
                        return Err(refuse(format!(
                            "expected a {:?} frame, got a {:?} frame",
                            self.hello, frame.kind
                        )));
                    }
                    if frame.tag != u32::from(self.sealed) {
                        return Err(refuse(mode_mismatch(self.sealed)));
                    }
                    let (context, psk) = (self.context)(frame.sender)
                        .ok_or_else(|| refuse(format!("rank {} may not connect here", frame.sender)))?;
                    let mut h =
                        noise::start(false, &psk, context, self.sealed).map_err(|e| refuse(e.to_string()))?;
                    noise::read(&mut h, &frame.payload).ok_or_else(|| refuse("malformed hello".into()))?;
                    let payload = noise::write(&mut h, &[]).map_err(|e| refuse(e.to_string()))?;
                    write_frame(&mut p.stream, FrameKind::Challenge, self.own_rank, 0, &[&payload])
                        .map_err(|_| End::Broken)?;
                    p.stage = Stage::Proof { sender: frame.sender, handshake: Box::new(h) };
                }
                Stage::Proof { sender, mut handshake } => {
                    if frame.kind != FrameKind::Proof || frame.sender != sender {
                        return Err(refuse(format!("expected a proof, got a {:?} frame", frame.kind)));
                    }
                    let Some(payload) = noise::read(&mut handshake, &frame.payload) else {
                        return Err(refuse(match self.hello {
                            FrameKind::Hello => "wrong token".into(),
                            _ => {
                                format!("wrong key for rank {sender} (another token, or a rank not its own)")
                            }
                        }));
                    };
                    let listen =
                        handshake::parse_listen(&payload).ok_or_else(|| refuse("malformed proof".into()))?;
                    let keys = noise::finish(*handshake).map_err(|e| refuse(e.to_string()))?;
                    let (mut sealing, opening) = Conn::directions(keys);
                    let head = (FrameKind::Proof, self.own_rank, 0);
                    write_frame_on(Some(&mut sealing), &p.stream, head, &[]).map_err(|_| End::Broken)?;
                    p.stream.set_nonblocking(false).map_err(|_| End::Broken)?;
                    let stream = p.stream.try_clone().map_err(|_| End::Broken)?;
                    let conn = Conn::new(stream, (sealing, opening), self.sealed);
                    return Ok(Some(Admitted { conn, from: p.from, sender, listen }));
                }
            }
        }
    }
}

/// Why a hello whose sealing flag differs from this side's is refused.
fn mode_mismatch(sealed: bool) -> String {
    match sealed {
        true => {
            "this side seals its links and the other does not (--insecure-plaintext on one side only)".into()
        }
        false => "this side runs in plain text (--insecure-plaintext) and the other seals its links".into(),
    }
}

/// Reads what has arrived of the current frame, never past its end; a whole frame once it is
/// in.
fn read_some(p: &mut Pending) -> Result<Option<Frame>, End> {
    let max = MAX_UNAUTHENTICATED_PAYLOAD;
    loop {
        let want = match p.buf.first_chunk::<HEADER_LEN>() {
            None => HEADER_LEN,
            Some(h) => {
                let header =
                    FrameHeader::parse(h, max).map_err(|e| End::Refuse(format!("sent a bad frame: {e}")))?;
                HEADER_LEN + header.len
            }
        };
        if p.buf.len() == want {
            let (frame, _) =
                Frame::decode(&p.buf, max).map_err(|e| End::Refuse(format!("sent a bad frame: {e}")))?;
            p.buf.clear();
            return Ok(Some(frame));
        }
        let mut chunk = [0u8; 64];
        let n = (want - p.buf.len()).min(chunk.len());
        match (&p.stream).read(&mut chunk[..n]) {
            Ok(0) => return Err(End::Closed),
            Ok(k) => {
                p.buf.extend_from_slice(&chunk[..k]);
                p.received += k;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(End::Broken),
        }
    }
}

/// Best effort: tells the peer why (it may be gone, or not reading).
fn refuse(stream: &mut TcpStream, own_rank: u32, reason: &str) {
    let _ = write_frame(stream, FrameKind::Refused, own_rank, 0, &[reason.as_bytes()]);
}

/// The one-line reason reported for a handshake that ended: what the peer did.
fn describe(p: &Pending, end: End, timeout: Duration) -> String {
    let stage = match p.stage {
        Stage::Hello => "its hello",
        Stage::Proof { .. } => "its proof",
    };
    let n = p.received;
    match end {
        End::Refuse(reason) => reason,
        End::Closed if n == 0 => "closed the connection without sending anything".into(),
        End::Closed => format!("closed the connection after {n} bytes, before finishing {stage}"),
        End::TimedOut if n == 0 => format!("sent nothing within {timeout:?} (the handshake timeout)"),
        End::TimedOut => format!(
            "sent {n} bytes but did not finish {stage} within {timeout:?} (the handshake timeout; \
             bytes trickling in do not extend it)"
        ),
        End::Broken => format!("the connection failed before finishing {stage}"),
    }
}
