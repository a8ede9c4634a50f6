//! Broadcast and barrier built from point-to-point messages, shared by the in-process and TCP
//! transports: the UberShuffle paper's pseudo-broadcast (Section 3.1: scatter, then a ring
//! allgather among the receivers), the plain "root sends to each" broadcast, and a barrier
//! coordinated by rank 0.

use std::time::Duration;

use crate::relayed::Digests;
use crate::{Tag, TransportError};

/// How a transport built on point-to-point links broadcasts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BroadcastMethod {
    /// Van de Geijn's pseudo-broadcast as in the UberShuffle paper, Section 3.1: the root cuts
    /// the buffer into `m` pieces (one per receiver) and scatters them, then the receivers pass
    /// pieces around a ring for `m - 1` stages. The root sends each byte once; on single-ported
    /// links of rate `B` it takes `(2m - 1)/m * len/B` instead of `m * len/B`.
    #[default]
    PseudoBroadcast,
    /// The root sends the whole buffer to each receiver in turn.
    Plain,
}

impl BroadcastMethod {
    /// The name used on command lines and in results.
    pub fn name(self) -> &'static str {
        match self {
            BroadcastMethod::PseudoBroadcast => "pseudo-broadcast",
            BroadcastMethod::Plain => "plain",
        }
    }

    /// The method called `name` (`pseudo-broadcast`/`pseudo`, or `plain`); the error names the
    /// known methods.
    ///
    /// ```
    /// use ubershuffle_transport::BroadcastMethod;
    /// assert_eq!(BroadcastMethod::from_name("plain"), Ok(BroadcastMethod::Plain));
    /// let err = BroadcastMethod::from_name("ring").unwrap_err();
    /// assert_eq!(err.to_string(), "unknown broadcast method 'ring'; known: pseudo-broadcast (or pseudo), plain");
    /// ```
    pub fn from_name(name: &str) -> Result<BroadcastMethod, UnknownBroadcastMethod> {
        match name {
            "pseudo-broadcast" | "pseudo" => Ok(BroadcastMethod::PseudoBroadcast),
            "plain" => Ok(BroadcastMethod::Plain),
            _ => Err(UnknownBroadcastMethod { name: name.to_string() }),
        }
    }

    /// The ideal time to broadcast `len` bytes to `receivers` ranks over single-ported links of
    /// `bytes_per_second`: `(2m-1)/m * len/B` for pseudo-broadcast (UberShuffle Section 3.1),
    /// `m * len/B` for plain.
    pub fn ideal_seconds(self, len: usize, receivers: usize, bytes_per_second: f64) -> f64 {
        let unicast = len as f64 / bytes_per_second;
        let m = receivers as f64;
        match self {
            BroadcastMethod::PseudoBroadcast if receivers > 0 => (2.0 * m - 1.0) / m * unicast,
            BroadcastMethod::PseudoBroadcast => 0.0,
            BroadcastMethod::Plain => m * unicast,
        }
    }
}

impl std::str::FromStr for BroadcastMethod {
    type Err = UnknownBroadcastMethod;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        BroadcastMethod::from_name(name)
    }
}

/// A broadcast method name that is not one of [`BroadcastMethod`]'s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown broadcast method '{name}'; known: pseudo-broadcast (or pseudo), plain")]
pub struct UnknownBroadcastMethod {
    /// The name given.
    pub name: String,
}

/// Scatter pieces of a pseudo-broadcast.
pub(crate) const TAG_PIECE: Tag = 0x7001;
/// Ring stages of a pseudo-broadcast.
pub(crate) const TAG_RING: Tag = 0x7002;
/// The whole buffer of a plain broadcast.
pub(crate) const TAG_PLAIN: Tag = 0x7003;
/// A receiver's acknowledgement (or failure report) of a broadcast.
pub(crate) const TAG_ACK: Tag = 0x7004;
/// A rank arriving at the barrier.
pub(crate) const TAG_BARRIER_IN: Tag = 0x7005;
/// Rank 0 releasing the barrier (or reporting who failed).
pub(crate) const TAG_BARRIER_OUT: Tag = 0x7006;
/// The root's "scatter finished" to the receiver scattered first.
pub(crate) const TAG_SCATTER_DONE: Tag = 0x7007;
/// The root's digests of a pseudo-broadcast's pieces ([`Digests`]), to each receiver.
pub(crate) const TAG_DIGESTS: Tag = 0x7008;

/// Point-to-point links with the transport's own tags allowed: what the collectives need.
pub(crate) trait Links {
    /// This rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn size(&self) -> usize;
    /// The timeout of one wait.
    fn wait_timeout(&self) -> Duration;
    /// The longest message accepted.
    fn max_message(&self) -> usize;
    /// Sends the concatenation of `parts` to `to`.
    fn send_parts(
        &mut self,
        to: usize,
        tag: Tag,
        parts: &[&[u8]],
        op: &'static str,
    ) -> Result<(), TransportError>;
    /// Receives the first message with `tag` from any of `from`.
    fn recv_from(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError>;
    /// Sets a received message aside, to be received again after [`Links::release_held`] (a
    /// message of a later broadcast than the one this rank is in). A transport that cannot
    /// keep it drops it.
    fn hold(&mut self, from: usize, tag: Tag, bytes: Vec<u8>) {
        let _ = (from, tag, bytes);
    }
    /// Puts the messages set aside back in front of the waiting ones, in their order.
    fn release_held(&mut self) {}
    /// Of the ranks `among`, the one known to be gone first, and why (`None` when none is, or
    /// when the transport cannot tell).
    fn first_gone(&mut self, among: &[usize]) -> Option<(usize, String)> {
        let _ = among;
        None
    }
    /// Whether receivers check the pieces their ring peers relay against the root's digests
    /// (links between separate hosts; not threads of one process, which trust each other).
    fn checks_relays(&self) -> bool {
        false
    }
}

/// The byte range of piece `j` of `m` of a `len`-byte buffer (sizes differ by at most one).
fn piece_range(len: usize, m: usize, j: usize) -> std::ops::Range<usize> {
    let at = |k: usize| ((len as u128 * k as u128) / m as u128) as usize;
    at(j)..at(j + 1)
}

/// Broadcasts `buf` from `root` to every rank with `method` (the broadcast named 0).
pub(crate) fn broadcast<L: Links + ?Sized>(
    links: &mut L,
    method: BroadcastMethod,
    root: usize,
    buf: &mut Vec<u8>,
) -> Result<(), TransportError> {
    let everyone: Vec<usize> = (0..links.size()).collect();
    broadcast_among(links, method, root, &everyone, (0, 0), buf)
}

/// The receivers of a pseudo-broadcast in ring order for arrangement `turn`: each receiver
/// hands its pieces to the next one (the last to the first). Arrangement `t` steps through the
/// receivers (in the group's order) by the `t`-th stride coprime with their number (taken
/// round), so every arrangement is one ring over all of them, the first (`turn` 0) is the
/// group's order, and for three receivers or more the next one gives every receiver another
/// successor. A caller that restarts a broadcast with the next turn routes around a pair of
/// ring neighbours that disputed a piece.
pub fn ring_order(receivers: &[usize], turn: u32) -> Vec<usize> {
    let m = receivers.len();
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let strides: Vec<usize> = (1..m.max(2)).filter(|&s| gcd(s, m.max(1)) == 1).collect();
    let stride = strides.get(turn as usize % strides.len().max(1)).copied().unwrap_or(1);
    (0..m).map(|j| receivers[(j * stride) % m]).collect()
}

/// Checks a broadcast group at `rank` of `size`: ranks in increasing order (so that every rank
/// sees the same ring), each one existing, the root and this rank among them.
fn check_group(rank: usize, size: usize, root: usize, group: &[usize]) -> Result<(), TransportError> {
    if root >= size {
        return Err(TransportError::NoSuchRank { rank: root, size });
    }
    if let Some(&r) = group.iter().find(|&&r| r >= size) {
        return Err(TransportError::NoSuchRank { rank: r, size });
    }
    let fail = |detail: String| Err(TransportError::Group { detail });
    if group.windows(2).any(|w| w[0] >= w[1]) {
        return fail(format!("{group:?} is not in increasing order"));
    }
    if !group.contains(&root) {
        return fail(format!("{group:?} does not contain the root {root}"));
    }
    if !group.contains(&rank) {
        return fail(format!("{group:?} does not contain this rank {rank}"));
    }
    Ok(())
}

/// Broadcasts `buf` from `root` to the ranks of `group` with `method`; ranks outside the group
/// take no part. `id` names this broadcast at every rank of the group: every message of it
/// carries the name, and a receiver drops messages of another one (left over from a broadcast
/// that a failure abandoned half-way), so a group re-formed after a failure starts clean. The
/// pseudo-broadcast's ring is [`ring_order`] of `turn`.
pub(crate) fn broadcast_among<L: Links + ?Sized>(
    links: &mut L,
    method: BroadcastMethod,
    root: usize,
    group: &[usize],
    (id, turn): (u64, u32),
    buf: &mut Vec<u8>,
) -> Result<(), TransportError> {
    let (rank, size) = (links.rank(), links.size());
    check_group(rank, size, root, group)?;
    let in_group: Vec<usize> = group.iter().copied().filter(|&r| r != root).collect();
    let receivers = ring_order(&in_group, turn);
    if receivers.is_empty() {
        return Ok(());
    }
    let name = id.to_le_bytes();
    links.release_held();
    if rank == root {
        if buf.len() > links.max_message() {
            return Err(TransportError::MessageTooLarge { len: buf.len(), max: links.max_message() });
        }
        // A receiver known gone already: the broadcast cannot complete.
        let sent = match links.first_gone(&receivers) {
            Some((peer, detail)) => Err(TransportError::PeerGone { peer, op: OP, detail }),
            None => match method {
                BroadcastMethod::PseudoBroadcast => scatter(links, &receivers, id, buf),
                BroadcastMethod::Plain => {
                    receivers.iter().try_for_each(|&r| links.send_parts(r, TAG_PLAIN, &[&name, buf], OP))
                }
            },
        };
        let ring = method == BroadcastMethod::PseudoBroadcast;
        return sent
            .map_err(|e| cause_of(links, e, id, (&receivers, ring), &[]))
            .and_then(|()| collect_acks(links, (&receivers, ring), id));
    }
    let received = match method {
        BroadcastMethod::PseudoBroadcast => receive_pseudo(links, root, &receivers, id),
        BroadcastMethod::Plain => {
            recv_named(links, &[root], TAG_PLAIN, id, links.wait_timeout()).map(|(_, mut b)| {
                b.drain(..NAME);
                b
            })
        }
    };
    match received {
        #[cfg(feature = "insider-harness")]
        Ok(bytes) if forged_report(links, root, &name) => {
            *buf = bytes;
            Ok(())
        }
        Ok(bytes) => {
            links.send_parts(root, TAG_ACK, &[&name, &[ACK_OK]], OP)?;
            *buf = bytes;
            Ok(())
        }
        Err(e) => {
            report_failure(links, root, TAG_ACK, &name, &e);
            Err(e)
        }
    }
}

/// Bytes of a broadcast's name at the start of each of its messages.
const NAME: usize = 8;

/// The next message with `tag` from any of `from` that belongs to the broadcast named `id`
/// (its name still in front), with a tally of stale messages of its own (one wait).
fn recv_named<L: Links + ?Sized>(
    links: &mut L,
    from: &[usize],
    tag: Tag,
    id: u64,
    timeout: Duration,
) -> Result<(usize, Vec<u8>), TransportError> {
    recv_named_tallied(links, from, tag, id, timeout, &mut StaleTally::default())
}

/// The next message with `tag` from any of `from` that belongs to the broadcast named `id`
/// (its name still in front). Names are compared as numbers: a message of an older broadcast
/// (left over from one a failure abandoned) is dropped; one of a newer broadcast (the root
/// moved on while this rank still waits in an abandoned one) is set aside for that broadcast
/// ([`Links::hold`]). Each wait is bounded by `timeout`.
///
/// An honest rank has left at most a few messages of each broadcast a failure abandoned (a
/// ring's pieces, an acknowledgement), and an epoch abandons at most one broadcast per rank;
/// a sender of more than [`stale_cap`] such messages within the waits that share `tally`
/// is flooding (each is read, so the inbox bound does not stop it) and fails the call naming
/// it. The tally is per sender, so that messages of honest senders read in between do not
/// reset a flooder's count.
fn recv_named_tallied<L: Links + ?Sized>(
    links: &mut L,
    from: &[usize],
    tag: Tag,
    id: u64,
    timeout: Duration,
    tally: &mut StaleTally,
) -> Result<(usize, Vec<u8>), TransportError> {
    loop {
        let (sender, msg) = links.recv_from(from, tag, timeout, OP)?;
        let name = msg.first_chunk::<NAME>().map(|n| u64::from_le_bytes(*n));
        match name {
            Some(name) if name == id => return Ok((sender, msg)),
            Some(name) if name > id => links.hold(sender, tag, msg),
            _ => {
                if tally.pass(sender) > stale_cap(links.size()) {
                    let detail =
                        format!("sent more than {} messages of finished broadcasts", stale_cap(links.size()));
                    return Err(TransportError::Protocol { peer: sender, op: OP, detail });
                }
            }
        }
    }
}

/// Messages of finished broadcasts passed over, per sender, across the waits of one step.
#[derive(Default)]
struct StaleTally(std::collections::HashMap<usize, usize>);

impl StaleTally {
    /// Counts one more stale message from `sender`; its count so far.
    fn pass(&mut self, sender: usize) -> usize {
        let n = self.0.entry(sender).or_insert(0);
        *n += 1;
        *n
    }
}

/// The messages of finished broadcasts one wait passes over before it blames their sender:
/// `4 * size^2 + 64` (every rank's pieces of one abandoned broadcast per rank, four times).
fn stale_cap(size: usize) -> usize {
    size.saturating_mul(size).saturating_mul(4).saturating_add(64)
}

const OP: &str = "broadcast";
const ACK_OK: u8 = 0;
const ACK_FAILED: u8 = 1;
/// A receiver's report that its ring predecessor relayed an altered piece.
const ACK_TAMPERED: u8 = 2;

/// The root's error, traced back to its cause. A receiver that failed reports whom it blames
/// and may then leave, so the rank a failed send, a closed link or a report names can be a
/// receiver that only gave up (or one that timed out waiting on a ring peer that was itself
/// waiting). Follow the reports from rank to rank (a rank's report comes before the news that
/// it is gone) until one that sent none: a departed or stalled rank.
///
/// A report is a worker's word, so the root checks it first: it may only name another
/// receiver of this broadcast (every piece passes through every receiver, so each one waits
/// on all the others), never the root, a rank outside the group or the reporter itself; and
/// the rank it names must not have acknowledged the broadcast (`ok`: it received every piece,
/// so it sent every piece on). A report that fails a check costs its reporter
/// ([`TransportError::Protocol`] naming it), not the rank it names.
///
/// A report of an altered piece ([`TransportError::Tampered`]) must name the reporter's ring
/// predecessor in a pseudo-broadcast (`ring`), the only rank that hands it pieces; then it
/// stands as it is: the root cannot tell a true report from a false one, so it hands it up to
/// the caller to judge (the runtime routes around the pair and counts: docs/transport.md,
/// "Relayed pieces").
fn cause_of<L: Links + ?Sized>(
    links: &mut L,
    mut e: TransportError,
    id: u64,
    (receivers, ring): (&[usize], bool),
    ok: &[usize],
) -> TransportError {
    let mut followed = Vec::new();
    loop {
        if let TransportError::Tampered { sender, receiver, .. } = e {
            return match receivers.iter().position(|&r| r == receiver) {
                Some(at) if ring && receivers[(at + receivers.len() - 1) % receivers.len()] == sender => e,
                _ => false_report(receiver, sender, "hands it no piece"),
            };
        }
        // A gone rank's report, if it sent one, comes before the news that it is gone, which
        // is on its way; a rank another one reported has, if alive, its own answer coming.
        let (suspect, wait) = match &e {
            TransportError::PeerGone { peer, .. } => (*peer, links.wait_timeout()),
            TransportError::PeerFailed { peer, reported_by, .. } => {
                if let Some(why) = unlikely_report(*reported_by, *peer, receivers, ok) {
                    return false_report(*reported_by, *peer, why);
                }
                (*peer, links.wait_timeout())
            }
            _ => return e,
        };
        if followed.contains(&suspect) {
            return e;
        }
        followed.push(suspect);
        match recv_named(links, &[suspect], TAG_ACK, id, wait) {
            Ok((_, msg)) => match (parse_ack(suspect, &msg[NAME..], OP), &e) {
                (Err(report @ (TransportError::PeerFailed { .. } | TransportError::Tampered { .. })), _)
                    if report.peer() != Some(suspect) =>
                {
                    e = report
                }
                // The rank named received every piece: the report was false.
                (Ok(()), TransportError::PeerFailed { reported_by, .. }) => {
                    return false_report(*reported_by, suspect, "received the broadcast");
                }
                _ => return e,
            },
            Err(_) => return e,
        }
    }
}

/// Why a report by `reporter` naming `named` cannot be true (see [`cause_of`]), if it cannot.
fn unlikely_report(reporter: usize, named: usize, receivers: &[usize], ok: &[usize]) -> Option<&'static str> {
    if named == reporter {
        None // a receiver that blames itself is taken at its word
    } else if !receivers.contains(&named) {
        Some("is no receiver of this broadcast")
    } else if ok.contains(&named) {
        Some("received the broadcast")
    } else {
        None
    }
}

/// The error that drops `reporter` for a false report naming `named`, which `why`.
fn false_report(reporter: usize, named: usize, why: &str) -> TransportError {
    let detail = format!("reported rank {named} failed, which {why}");
    TransportError::Protocol { peer: reporter, op: OP, detail }
}

/// Best effort: tells `to` which rank made this one fail (the report itself may fail too);
/// the report starts with `name` (a broadcast's, or nothing).
fn report_failure<L: Links + ?Sized>(links: &mut L, to: usize, tag: Tag, name: &[u8], e: &TransportError) {
    let culprit = e.peer().unwrap_or(links.rank()) as u32;
    // What a ring peer sent wrong (not what the root sent) is a dispute between the two.
    let relay_fault = match e {
        TransportError::Tampered { .. } => true,
        TransportError::Protocol { peer, .. } => *peer != to,
        _ => false,
    };
    let kind = if relay_fault { ACK_TAMPERED } else { ACK_FAILED };
    let detail = e.to_string();
    let parts: [&[u8]; 4] = [name, &[kind], &culprit.to_le_bytes(), detail.as_bytes()];
    let _ = links.send_parts(to, tag, &parts, OP);
}

/// Test only: a rank told to report a failure ([`crate::insider`]) sends that report instead
/// of its acknowledgement (whether it did); one told to flood sends stale acknowledgements
/// first.
#[cfg(feature = "insider-harness")]
fn forged_report<L: Links + ?Sized>(links: &mut L, root: usize, name: &[u8]) -> bool {
    use crate::relayed::insider::{Misbehaviour, current};
    if let Misbehaviour::FloodStale(count) = current() {
        let stale = u64::from_le_bytes(name.try_into().unwrap_or_default()).wrapping_sub(1).to_le_bytes();
        for _ in 0..count {
            let _ = links.send_parts(root, TAG_ACK, &[&stale, &[ACK_OK]], OP);
        }
        return false;
    }
    let Misbehaviour::ReportFailed(named) = current() else {
        return false;
    };
    let culprit = (named as u32).to_le_bytes();
    let parts: [&[u8]; 4] = [name, &[ACK_FAILED], &culprit, b"forged"];
    let _ = links.send_parts(root, TAG_ACK, &parts, OP);
    true
}

/// Reads an acknowledgement: `Ok` or the failure it reports.
fn parse_ack(from: usize, msg: &[u8], op: &'static str) -> Result<(), TransportError> {
    match msg {
        [ACK_OK] => Ok(()),
        [ACK_FAILED, a, b, c, d, detail @ ..] => Err(TransportError::PeerFailed {
            peer: u32::from_le_bytes([*a, *b, *c, *d]) as usize,
            reported_by: from,
            op,
            detail: String::from_utf8_lossy(detail).into_owned(),
        }),
        [ACK_TAMPERED, a, b, c, d, detail @ ..] => Err(TransportError::Tampered {
            sender: u32::from_le_bytes([*a, *b, *c, *d]) as usize,
            receiver: from,
            detail: String::from_utf8_lossy(detail).into_owned(),
        }),
        _ => Err(TransportError::Protocol { peer: from, op, detail: "malformed acknowledgement".into() }),
    }
}

/// The root's wait for acknowledgements. It waits twice the timeout for each one, so that a
/// receiver that timed out on a stalled peer has reported that peer before the root gives up.
/// A failure (a report, or a receiver that is gone or silent) is traced to its cause
/// ([`cause_of`]) with the receivers that acknowledged so far.
fn collect_acks<L: Links + ?Sized>(
    links: &mut L,
    (receivers, ring): (&[usize], bool),
    id: u64,
) -> Result<(), TransportError> {
    let mut waiting = receivers.to_vec();
    let mut ok = Vec::with_capacity(receivers.len());
    let timeout = links.wait_timeout() * 2;
    let mut tally = StaleTally::default();
    while !waiting.is_empty() {
        let acked = recv_named_tallied(links, &waiting, TAG_ACK, id, timeout, &mut tally)
            .and_then(|(from, msg)| parse_ack(from, &msg[NAME..], OP).map(|()| from));
        match acked {
            Ok(from) => {
                waiting.retain(|&r| r != from);
                ok.push(from);
            }
            Err(e) => return Err(cause_of(links, e, id, (receivers, ring), &ok)),
        }
    }
    Ok(())
}

/// Stage 1 of the pseudo-broadcast: piece `j` to receiver `j`, prefixed by the total length and
/// the piece index.
///
/// The paper leaves the order open; we scatter from the last receiver to the first. Receiver
/// `j` forwards to `j + 1` as soon as it has its piece, and `j + 1` has then already received
/// its own, so ring traffic never competes with the root for a receive port. The one edge
/// where it could, from the last receiver (scattered first) to the first (scattered last),
/// waits for the root's "scatter finished" message, as the paper's stage 2 waits for stage 1.
/// On emulated single-ported links, scattering in ring order let early ring messages delay the
/// root's pieces (up to several times the ideal), and the unguarded wrap-around edge cost one
/// piece time.
fn scatter<L: Links + ?Sized>(
    links: &mut L,
    receivers: &[usize],
    id: u64,
    buf: &[u8],
) -> Result<(), TransportError> {
    let m = receivers.len();
    let digests = (links.checks_relays() && m >= 2)
        .then(|| Digests::of((0..m).map(|j| &buf[piece_range(buf.len(), m, j)])).to_bytes());
    for (j, &r) in receivers.iter().enumerate().rev() {
        if let Some(digests) = &digests {
            links.send_parts(r, TAG_DIGESTS, &[&id.to_le_bytes(), digests], OP)?;
        }
        let head = piece_head(id, buf.len() as u64, j as u32);
        links.send_parts(r, TAG_PIECE, &[&head, &buf[piece_range(buf.len(), m, j)]], OP)?;
    }
    if m >= 2 {
        links.send_parts(receivers[m - 1], TAG_SCATTER_DONE, &[&id.to_le_bytes()], OP)?;
    }
    Ok(())
}

/// A scattered piece's header: the broadcast's name, the buffer's length, the piece index.
fn piece_head(id: u64, len: u64, j: u32) -> [u8; PIECE_HEAD] {
    let mut h = [0u8; PIECE_HEAD];
    h[..NAME].copy_from_slice(&id.to_le_bytes());
    h[NAME..NAME + 8].copy_from_slice(&len.to_le_bytes());
    h[NAME + 8..].copy_from_slice(&j.to_le_bytes());
    h
}

/// Bytes of a scattered piece's header.
const PIECE_HEAD: usize = NAME + 12;

/// A receiver's part of the pseudo-broadcast: its scattered piece, then `m - 1` ring stages in
/// which it forwards to its successor the piece it got in the previous stage and takes a new
/// one from its predecessor. (The paper's Section 3.1 writes the piece index of stage `j + 1`
/// as `((i + j - 2) mod n) + 1`; we use the standard ring allgather, which moves the same
/// bytes over the same links: worker `j` forwards what it received last.)
fn receive_pseudo<L: Links + ?Sized>(
    links: &mut L,
    root: usize,
    receivers: &[usize],
    id: u64,
) -> Result<Vec<u8>, TransportError> {
    let m = receivers.len();
    let me = receivers.iter().position(|&r| r == links.rank()).unwrap_or(0);
    let protocol = |peer: usize, detail: String| TransportError::Protocol { peer, op: OP, detail };
    // Every piece passes through every receiver: with one of them known gone, this broadcast
    // cannot complete, so it fails at once naming it (instead of waiting out a timeout on a
    // ring peer). A departure during the broadcast is met by the timeouts, as a stall is: a
    // receiver that gave up may leave, and must not then be taken for the cause.
    let others: Vec<usize> = receivers.iter().copied().filter(|&r| r != links.rank()).collect();
    if let Some((peer, detail)) = links.first_gone(&others) {
        return Err(TransportError::PeerGone { peer, op: OP, detail });
    }
    let (_, first) = recv_named(links, &[root], TAG_PIECE, id, links.wait_timeout())?;
    let Some((head, piece)) = first.split_first_chunk::<PIECE_HEAD>() else {
        return Err(protocol(root, "scatter piece shorter than its header".into()));
    };
    let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().unwrap_or_default());
    let len = word(NAME);
    let index = u32::from_le_bytes(head[NAME + 8..].try_into().unwrap_or_default()) as usize;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= links.max_message())
        .ok_or_else(|| protocol(root, format!("announces a {len}-byte broadcast, above the bound")))?;
    if index != me || piece.len() != piece_range(len, m, me).len() {
        return Err(protocol(root, format!("sent piece {index} of {} bytes to receiver {me}", piece.len())));
    }
    let mut buf = vec![0u8; len];
    buf[piece_range(len, m, me)].copy_from_slice(piece);
    drop(first);
    let next = receivers[(me + 1) % m];
    let prev = receivers[(me + m - 1) % m];
    let digests = if links.checks_relays() && m >= 2 {
        let (_, msg) = recv_named(links, &[root], TAG_DIGESTS, id, links.wait_timeout())?;
        let digests = Digests::from_bytes(&msg[NAME..], m);
        Some(digests.ok_or_else(|| protocol(root, format!("sent digests not of {m} pieces")))?)
    } else {
        None
    };
    if me == m - 1 && m >= 2 {
        recv_named(links, &[root], TAG_SCATTER_DONE, id, links.wait_timeout())?;
    }
    for stage in 1..m {
        let send_index = (me + m - (stage - 1)) % m;
        let recv_index = (me + m - stage) % m;
        let head = (send_index as u32).to_le_bytes();
        let piece = &buf[piece_range(len, m, send_index)];
        #[cfg(feature = "insider-harness")]
        let flipped = flip_relayed(piece);
        #[cfg(feature = "insider-harness")]
        let piece = flipped.as_deref().unwrap_or(piece);
        links.send_parts(next, TAG_RING, &[&id.to_le_bytes(), &head, piece], OP)?;
        let (_, msg) = recv_named(links, &[prev], TAG_RING, id, links.wait_timeout())?;
        let range = piece_range(len, m, recv_index);
        match msg[NAME..].split_first_chunk::<4>() {
            Some((h, piece))
                if u32::from_le_bytes(*h) as usize == recv_index && piece.len() == range.len() =>
            {
                #[cfg(feature = "insider-harness")]
                let piece: &[u8] = if accuses_relayer() { &[] } else { piece };
                if digests.as_ref().is_some_and(|d| !d.matches(recv_index, piece)) {
                    let detail = format!("ring stage {stage}: piece {recv_index} is off the root's digest");
                    return Err(TransportError::Tampered { sender: prev, receiver: links.rank(), detail });
                }
                buf[range].copy_from_slice(piece);
            }
            _ => return Err(protocol(prev, format!("ring stage {stage}: not piece {recv_index}"))),
        }
    }
    Ok(buf)
}

/// Test only: whether this rank is told to accuse its ring predecessor falsely
/// ([`crate::insider`]): it then checks an empty piece in place of the one it got.
#[cfg(feature = "insider-harness")]
fn accuses_relayer() -> bool {
    crate::relayed::insider::current() == crate::relayed::insider::Misbehaviour::AccuseRelayer
}

/// Test only: the piece a rank told to flip what it relays ([`crate::insider`]) sends instead.
#[cfg(feature = "insider-harness")]
fn flip_relayed(piece: &[u8]) -> Option<Vec<u8>> {
    use crate::relayed::insider::{Misbehaviour, current};
    (current() == Misbehaviour::FlipRelayed && !piece.is_empty()).then(|| {
        let mut flipped = piece.to_vec();
        flipped[0] ^= 0xff;
        flipped
    })
}

/// A barrier coordinated by rank 0: everyone reports in, rank 0 releases everyone (or tells
/// them which rank never came).
pub(crate) fn barrier<L: Links + ?Sized>(links: &mut L) -> Result<(), TransportError> {
    const OP: &str = "barrier";
    let size = links.size();
    if size < 2 {
        return Ok(());
    }
    if links.rank() != 0 {
        links.send_parts(0, TAG_BARRIER_IN, &[], OP)?;
        let (_, msg) = links.recv_from(&[0], TAG_BARRIER_OUT, links.wait_timeout() * 2, OP)?;
        return parse_ack(0, &msg, OP);
    }
    let mut waiting: Vec<usize> = (1..size).collect();
    let timeout = links.wait_timeout();
    while !waiting.is_empty() {
        match links.recv_from(&waiting, TAG_BARRIER_IN, timeout, OP) {
            Ok((from, _)) => waiting.retain(|&r| r != from),
            Err(e) => {
                for r in (1..size).filter(|r| !waiting.contains(r)) {
                    report_failure(links, r, TAG_BARRIER_OUT, &[], &e);
                }
                return Err(e);
            }
        }
    }
    for r in 1..size {
        links.send_parts(r, TAG_BARRIER_OUT, &[&[ACK_OK]], OP)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_turn_is_one_ring_and_the_next_gives_new_successors() {
        let receivers = [2, 3, 5, 7];
        assert_eq!(ring_order(&receivers, 0), receivers);
        let successor = |ring: &[usize], r: usize| {
            let at = ring.iter().position(|&x| x == r).unwrap();
            ring[(at + 1) % ring.len()]
        };
        for m in 1..9 {
            let receivers: Vec<usize> = (1..=m).collect();
            for turn in 0..6 {
                let mut ring = ring_order(&receivers, turn);
                let next = ring_order(&receivers, turn + 1);
                if m >= 3 {
                    assert!(
                        receivers.iter().all(|&r| successor(&ring, r) != successor(&next, r)),
                        "{m} {turn}"
                    );
                }
                ring.sort_unstable();
                assert_eq!(ring, receivers);
            }
        }
    }

    #[test]
    fn pieces_cover_the_buffer_exactly() {
        for (len, m) in [(0, 3), (1, 3), (10, 3), (1 << 20, 7), (5, 8)] {
            let ranges: Vec<_> = (0..m).map(|j| piece_range(len, m, j)).collect();
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges[m - 1].end, len);
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            assert!(ranges.iter().all(|r| r.len() <= len.div_ceil(m)));
        }
    }

    #[test]
    fn ideal_times_follow_the_paper() {
        let pseudo = BroadcastMethod::PseudoBroadcast.ideal_seconds(1000, 4, 1000.0);
        assert!((pseudo - 7.0 / 4.0).abs() < 1e-12);
        assert_eq!(BroadcastMethod::Plain.ideal_seconds(1000, 4, 1000.0), 4.0);
        assert_eq!(BroadcastMethod::from_name("pseudo"), Ok(BroadcastMethod::PseudoBroadcast));
        assert_eq!(BroadcastMethod::from_name(BroadcastMethod::Plain.name()), Ok(BroadcastMethod::Plain));
    }

    #[test]
    fn acks_parse_or_fail_cleanly() {
        assert!(parse_ack(1, &[ACK_OK], OP).is_ok());
        let mut failed = vec![ACK_FAILED];
        failed.extend_from_slice(&3u32.to_le_bytes());
        failed.extend_from_slice(b"gone");
        assert_eq!(parse_ack(1, &failed, OP).unwrap_err().peer(), Some(3));
        assert!(matches!(parse_ack(1, &[7, 7], OP), Err(TransportError::Protocol { peer: 1, .. })));
    }
}
