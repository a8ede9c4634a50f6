//! The in-process transport: one endpoint per rank, each used from its own thread, linked by
//! channels. Optionally an emulated cluster ([`LinkShaping`]): every rank then keeps its own
//! emulated clock ([`ComputeTime`] says how it counts computing), messages are priced by the
//! link model of single-ported nodes and carry their send time, and nothing sleeps in real
//! time, so an emulated cluster of 100 nodes runs on 2 cores as fast as its computing allows
//! and reports what 100 nodes would see.

mod clock;
mod shaping;

use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, unbounded};

use crate::collectives::{self, BroadcastMethod, Links};
use crate::mailbox::{Candidates, Delivery, Mailbox, deadline_after};
use crate::transport::{check_peers, check_send, check_user_tag, links_accessors};
use crate::{Tag, Transport, TransportError};

pub use clock::ComputeTime;
use clock::NodeClock;
pub use shaping::LinkShaping;
use shaping::Ports;

/// How an in-process cluster behaves: [`InProcessConfig::default`] and the `with_` methods.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InProcessConfig {
    /// The timeout of every blocking wait (in real time: how long a rank waits for a peer that
    /// sends nothing).
    pub timeout: Duration,
    /// How `broadcast` moves bytes.
    pub broadcast: BroadcastMethod,
    /// Link shaping: `Some` emulates a cluster on per-rank emulated clocks; `None` moves
    /// messages as fast as channels do, on real time.
    pub shaping: Option<LinkShaping>,
    /// How an emulated rank's clock counts its computing (with `shaping` only).
    pub compute: ComputeTime,
    /// The longest message accepted.
    pub max_message: usize,
}

impl Default for InProcessConfig {
    fn default() -> Self {
        InProcessConfig {
            timeout: Duration::from_secs(10),
            broadcast: BroadcastMethod::PseudoBroadcast,
            shaping: None,
            compute: ComputeTime::ThreadCpu,
            max_message: crate::frame::MAX_FORMAT_LEN,
        }
    }
}

impl InProcessConfig {
    /// Every blocking wait times out after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `broadcast` moves bytes by `method`.
    pub fn with_broadcast(mut self, method: BroadcastMethod) -> Self {
        self.broadcast = method;
        self
    }

    /// Emulates a cluster with these links (`None`: messages move as fast as channels do, on
    /// real time).
    pub fn with_shaping(mut self, shaping: Option<LinkShaping>) -> Self {
        self.shaping = shaping;
        self
    }

    /// Counts an emulated rank's computing by `compute`.
    pub fn with_compute_time(mut self, compute: ComputeTime) -> Self {
        self.compute = compute;
        self
    }

    /// Refuses messages longer than `bytes`.
    pub fn with_max_message(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }
}

/// `size` connected endpoints, rank 0 first; move each into the thread of its rank.
pub fn cluster(size: usize, config: &InProcessConfig) -> Result<Vec<InProcessTransport>, TransportError> {
    if size == 0 {
        return Err(TransportError::Setup("a cluster needs at least one rank".into()));
    }
    if let Some(s) = &config.shaping {
        s.check()?;
    }
    let (senders, receivers): (Vec<Sender<Delivery>>, Vec<_>) = (0..size).map(|_| unbounded()).unzip();
    let start = Instant::now();
    Ok(receivers
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| InProcessTransport {
            rank,
            size,
            timeout: config.timeout,
            method: config.broadcast,
            max_message: config.max_message,
            mailbox: Mailbox::new(size, inbox),
            peers: senders.clone(),
            emulated: config.shaping.map(|shaping| Emulated {
                shaping,
                start,
                clock: NodeClock::new(config.compute),
                ports: Ports::default(),
                depth: 0,
            }),
            leaving: None,
        })
        .collect())
}

/// An emulated rank's clock and ports.
#[derive(Debug)]
struct Emulated {
    shaping: LinkShaping,
    /// The real instant emulated time 0 stands for (the same at every rank, so that
    /// [`Transport::now`] compares across ranks).
    start: Instant,
    clock: NodeClock,
    ports: Ports,
    /// How many transport calls are under way (a broadcast sends and receives): the clock
    /// stands still while it is above 0.
    depth: u32,
}

/// One rank of an in-process cluster. Dropping it is how a rank leaves (or dies): its peers'
/// waits for it fail with [`TransportError::PeerGone`] naming it.
#[derive(Debug)]
pub struct InProcessTransport {
    rank: usize,
    size: usize,
    timeout: Duration,
    method: BroadcastMethod,
    max_message: usize,
    mailbox: Mailbox,
    peers: Vec<Sender<Delivery>>,
    /// `Some` on an emulated cluster.
    emulated: Option<Emulated>,
    /// Why this rank leaves, when it said ([`Transport::leave`]).
    leaving: Option<String>,
}

impl InProcessTransport {
    /// How this endpoint broadcasts.
    pub fn broadcast_method(&self) -> BroadcastMethod {
        self.method
    }

    /// Changes how this endpoint broadcasts (every rank must use the same method).
    pub fn set_broadcast_method(&mut self, method: BroadcastMethod) {
        self.method = method;
    }

    /// This rank's emulated time since the cluster started (`None` on real time).
    pub fn emulated_time(&self) -> Option<Duration> {
        self.emulated.as_ref().map(|e| e.clock.now())
    }

    /// Runs a transport call with the emulated clock standing still: the emulator's own work
    /// (copies, bookkeeping) is not the modelled node's.
    fn inside<R>(&mut self, call: impl FnOnce(&mut Self) -> R) -> R {
        if let Some(e) = &mut self.emulated {
            if e.depth == 0 {
                e.clock.stop();
            }
            e.depth += 1;
        }
        let result = call(self);
        if let Some(e) = &mut self.emulated {
            e.depth -= 1;
            if e.depth == 0 {
                e.clock.start();
            }
        }
        result
    }

    /// A receive of the first message with `tag` from any of `from`, waiting in real time up
    /// to `real_wait`. On an emulated cluster it waits until every rank of `from` has a
    /// matching message or is gone or silent, takes the one that left its sender first, and
    /// moves the clock to its arrival; with `within`, a message arriving later than that on
    /// the emulated clock is left waiting and the receive times out with the clock moved on by
    /// `within`.
    fn receive(
        &mut self,
        from: &[usize],
        tag: Tag,
        real_wait: Duration,
        within: Option<Duration>,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        let Some(e) = &mut self.emulated else {
            return self.mailbox.recv(from, tag, real_wait, op);
        };
        if let Candidates::Gone(peer) = self.mailbox.await_candidates(from, tag, deadline_after(real_wait)) {
            let detail = self.mailbox.gone(peer).unwrap_or("gone").to_string();
            return Err(TransportError::PeerGone { peer, op, detail });
        }
        let lowest = from.iter().copied().min().unwrap_or(0);
        let Some((sender, stamp)) = self.mailbox.earliest(from, tag) else {
            // Nothing came: a bounded wait has used up its bound on the emulated clock too.
            if let Some(within) = within {
                e.clock.advance_by(within);
            }
            return Err(TransportError::Timeout { peer: lowest, op, after: real_wait });
        };
        if let Some(within) = within
            && e.ports.arrival(&e.shaping, stamp) > e.clock.now().saturating_add(within)
        {
            e.clock.advance_by(within);
            return Err(TransportError::Timeout { peer: lowest, op, after: within });
        }
        let arrival = e.ports.receive(&e.shaping, stamp);
        e.clock.advance_to(arrival);
        let bytes = self.mailbox.take(sender, tag).unwrap_or_default();
        Ok((sender, bytes))
    }
}

impl Links for InProcessTransport {
    links_accessors!();

    fn send_parts(
        &mut self,
        to: usize,
        tag: Tag,
        parts: &[&[u8]],
        op: &'static str,
    ) -> Result<(), TransportError> {
        check_send(self.rank, self.size, to, parts, self.max_message)?;
        self.mailbox.ensure_present(to, op)?;
        let bytes = parts.concat();
        let stamp = self.emulated.as_mut().map(|e| {
            let stamp = e.ports.send(&e.shaping, e.clock.now(), bytes.len());
            e.clock.advance_to(stamp.sent.saturating_add(stamp.transfer));
            stamp
        });
        let delivery = Delivery::Message { from: self.rank, tag, bytes, stamp };
        if self.peers[to].send(delivery).is_ok() {
            return Ok(());
        }
        // The peer left between the check above and this send. An endpoint says why it leaves
        // before it drops its inbox, so its reason is already in this rank's inbox.
        self.mailbox.ensure_present(to, op)?;
        Err(TransportError::PeerGone { peer: to, op, detail: "its endpoint was dropped".into() })
    }

    fn recv_from(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        check_peers(self.rank, self.size, from)?;
        self.receive(from, tag, timeout, None, op)
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

impl Transport for InProcessTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    fn send(&mut self, to: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        check_user_tag(tag)?;
        self.inside(|t| t.send_parts(to, tag, &[bytes], "send"))
    }

    /// On an emulated cluster `timeout` bounds the emulated wait, and the transport's timeout
    /// (or `timeout`, if longer) the real one.
    fn recv_within(&mut self, from: usize, tag: Tag, timeout: Duration) -> Result<Vec<u8>, TransportError> {
        self.recv_any_within(&[from], tag, timeout).map(|(_, bytes)| bytes)
    }

    fn recv_any_within(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        check_user_tag(tag)?;
        check_peers(self.rank, self.size, from)?;
        let real_wait = match self.emulated {
            Some(_) => timeout.max(self.timeout),
            None => timeout,
        };
        self.inside(|t| t.receive(from, tag, real_wait, Some(timeout), "recv"))
    }

    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        let method = self.method;
        self.inside(|t| collectives::broadcast(t, method, root, buf))
    }

    fn broadcast_among(
        &mut self,
        root: usize,
        group: &[usize],
        id: u64,
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        let method = self.method;
        self.inside(|t| collectives::broadcast_among(t, method, root, group, (id, 0), buf))
    }

    fn broadcast_turned(
        &mut self,
        root: usize,
        group: &[usize],
        named: (u64, u32),
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        let method = self.method;
        self.inside(|t| collectives::broadcast_among(t, method, root, group, named, buf))
    }

    fn barrier(&mut self) -> Result<(), TransportError> {
        self.inside(collectives::barrier)
    }

    /// Real time, or on an emulated cluster this rank's emulated time.
    fn now(&self) -> Instant {
        match &self.emulated {
            Some(e) => e.start + e.clock.now(),
            None => Instant::now(),
        }
    }

    /// Advances an emulated clock in [`ComputeTime::Charged`] mode; ignored otherwise.
    fn charge(&mut self, cost: Duration) {
        if let Some(e) = &mut self.emulated
            && e.clock.compute() == ComputeTime::Charged
        {
            e.clock.advance_by(cost);
        }
    }

    /// Moves an emulated clock on at once; sleeps on real time.
    fn pass(&mut self, duration: Duration) {
        match &mut self.emulated {
            Some(e) => e.clock.advance_by(duration),
            None => std::thread::sleep(duration),
        }
    }

    /// Passes `reason` on with the news that this rank left.
    fn leave(&mut self, reason: &str) {
        self.leaving = Some(reason.replace('\n', " "));
    }
}

impl Drop for InProcessTransport {
    fn drop(&mut self) {
        for (_, inbox) in self.peers.iter().enumerate().filter(|(p, _)| *p != self.rank) {
            let detail = match &self.leaving {
                Some(reason) => format!("rank {} left: {reason}", self.rank),
                None => format!("rank {} left (endpoint dropped)", self.rank),
            };
            let _ = inbox.send(Delivery::Gone { from: self.rank, detail });
        }
    }
}
