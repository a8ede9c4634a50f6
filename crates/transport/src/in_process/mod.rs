//! The in-process transport: one endpoint per rank, each used from its own thread, linked by
//! channels. Optionally shaped ([`LinkShaping`]) so that a cluster of 1 Gbit/s single-ported
//! nodes can be emulated on one machine.

mod shaping;

use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, unbounded};

use crate::collectives::{self, BroadcastMethod, Links};
use crate::mailbox::{Delivery, Mailbox};
use crate::transport::{check_peers, check_send, links_accessors, point_to_point_via_links};
use crate::{Tag, Transport, TransportError};

pub use shaping::LinkShaping;
use shaping::{Nic, Ports, QueueError, RankClock};

/// How an in-process cluster behaves: [`InProcessConfig::default`] and the `with_` methods.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InProcessConfig {
    /// The timeout of every blocking wait.
    pub timeout: Duration,
    /// How `broadcast` moves bytes.
    pub broadcast: BroadcastMethod,
    /// Link shaping; `None` moves messages as fast as channels do.
    pub shaping: Option<LinkShaping>,
    /// The longest message accepted.
    pub max_message: usize,
}

impl Default for InProcessConfig {
    fn default() -> Self {
        InProcessConfig {
            timeout: Duration::from_secs(10),
            broadcast: BroadcastMethod::PseudoBroadcast,
            shaping: None,
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

    /// Shapes every link (`None`: messages move as fast as channels do).
    pub fn with_shaping(mut self, shaping: Option<LinkShaping>) -> Self {
        self.shaping = shaping;
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
    let ports = Ports::new(size);
    Ok(receivers
        .into_iter()
        .enumerate()
        .map(|(rank, inbox)| {
            let out = match &config.shaping {
                None => Outbound::Direct(senders.clone()),
                Some(shaping) => Outbound::Shaped(
                    Nic::spawn(rank, *shaping, ports.clone(), senders.clone()),
                    RankClock::new(),
                ),
            };
            InProcessTransport {
                rank,
                size,
                timeout: config.timeout,
                method: config.broadcast,
                max_message: config.max_message,
                mailbox: Mailbox::new(size, inbox),
                out,
            }
        })
        .collect())
}

/// Where an endpoint's messages go.
#[derive(Debug)]
enum Outbound {
    /// Straight into the peers' inboxes.
    Direct(Vec<Sender<Delivery>>),
    /// Through this rank's shaped network interface, stamped with the rank's emulated clock.
    Shaped(Nic, RankClock),
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
    out: Outbound,
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
}

impl InProcessTransport {
    fn stop_clock(&mut self) {
        if let Outbound::Shaped(_, clock) = &mut self.out {
            clock.stop();
        }
    }

    fn start_clock(&mut self) {
        if let Outbound::Shaped(_, clock) = &mut self.out {
            clock.start();
        }
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
        // On shaped links the message leaves at the emulated time of the call: copying it is the
        // emulator's work, not the modelled node's.
        let sent_at = self.now();
        let bytes = parts.concat();
        let gone = || TransportError::PeerGone { peer: to, op, detail: "its endpoint was dropped".into() };
        match &mut self.out {
            Outbound::Direct(inboxes) => inboxes[to]
                .send(Delivery::Message { from: self.rank, tag, bytes, arrival: None })
                .map_err(|_| gone()),
            Outbound::Shaped(nic, clock) => {
                let queued = nic.send(to, tag, bytes, sent_at, self.timeout);
                clock.set(sent_at);
                queued.map_err(|e| match e {
                    QueueError::Full => TransportError::Timeout { peer: to, op, after: self.timeout },
                    QueueError::Stopped => gone(),
                })
            }
        }
    }

    fn recv_from(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
        op: &'static str,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        check_peers(self.rank, self.size, from)?;
        let Outbound::Shaped(_, clock) = &mut self.out else {
            return self.mailbox.recv(from, tag, timeout, op);
        };
        let waited_from = clock.now();
        let (from, _, bytes, arrival) = self.mailbox.recv_stamped(from, tag, timeout, op)?;
        clock.after_wait(waited_from, arrival);
        Ok((from, bytes))
    }

    fn first_gone(&mut self, among: &[usize]) -> Option<(usize, String)> {
        self.mailbox.poll();
        self.mailbox.first_gone(among).map(|(peer, detail)| (peer, detail.to_string()))
    }
}

impl Transport for InProcessTransport {
    point_to_point_via_links!();

    fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        self.stop_clock();
        let result = collectives::broadcast(self, self.method, root, buf);
        self.start_clock();
        result
    }

    fn barrier(&mut self) -> Result<(), TransportError> {
        self.stop_clock();
        let result = collectives::barrier(self);
        self.start_clock();
        result
    }

    /// Real time, or on shaped links this rank's emulated time (see [`LinkShaping`]).
    fn now(&self) -> Instant {
        match &self.out {
            Outbound::Shaped(_, clock) => clock.now(),
            Outbound::Direct(_) => Instant::now(),
        }
    }
}

impl Drop for InProcessTransport {
    fn drop(&mut self) {
        // A shaped endpoint's interface sends the notice itself after its queued messages.
        if let Outbound::Direct(inboxes) = &self.out {
            for (_, inbox) in inboxes.iter().enumerate().filter(|(p, _)| *p != self.rank) {
                let detail = format!("rank {} left (endpoint dropped)", self.rank);
                let _ = inbox.send(Delivery::Gone { from: self.rank, detail });
            }
        }
    }
}
