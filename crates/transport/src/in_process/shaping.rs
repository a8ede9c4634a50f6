//! Link shaping for the in-process transport: each rank has a network interface thread that
//! sends one message at a time at the link rate, and each rank receives one message at a time
//! (single-ported nodes, as the UberShuffle paper assumes in Section 3.1).
//!
//! A message of `b` bytes from `a` to `c` occupies `a`'s send port and `c`'s receive port for
//! `b / rate` seconds, starting when both are free and the message was queued; it is delivered
//! `latency` after its last byte left. Port times are kept on a virtual schedule (the end of
//! the previous transfer, not the moment a sleeping thread woke), so sleep overshoot does not
//! accumulate over a run of messages.
//!
//! Each endpoint also keeps an emulated clock ([`RankClock`], read with
//! [`crate::Transport::now`]): it advances with the real time the rank spends outside the
//! transport (its computation) and jumps to a message's scheduled arrival when it waits for
//! one. It does not count the transport's own copying (a real NIC moves bytes by DMA while
//! sending), nor the moments between a message's scheduled arrival and its thread actually
//! being woken. Messages are queued at the sender's emulated time. So on a machine with fewer
//! cores than emulated nodes, copies and thread wake-ups do not pile up along a chain of
//! messages (a ring of n stages would otherwise pay n of them), while the ranks' own work is
//! still charged. Wall-clock time is still real: ranks sleep until each transfer's end.

use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, SendTimeoutError, Sender, bounded, unbounded};

use crate::mailbox::Delivery;
use crate::{Tag, TransportError};

/// A rank's emulated clock: its value at the real instant it was last set, and whether it is
/// stopped (inside the transport's own work).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RankClock {
    emulated: Instant,
    set_at: Instant,
    stopped: bool,
}

impl RankClock {
    /// A running clock that starts equal to real time.
    pub(crate) fn new() -> RankClock {
        let now = Instant::now();
        RankClock { emulated: now, set_at: now, stopped: false }
    }

    /// The emulated time now: the last value, plus the real time since if running.
    pub(crate) fn now(&self) -> Instant {
        if self.stopped { self.emulated } else { self.emulated + self.set_at.elapsed() }
    }

    /// Sets the clock to `at` as of now.
    pub(crate) fn set(&mut self, at: Instant) {
        self.emulated = at;
        self.set_at = Instant::now();
    }

    /// Stops the clock (entering a collective operation: its copies are the emulator's, not
    /// the modelled cluster's, and are not charged).
    pub(crate) fn stop(&mut self) {
        let now = self.now();
        self.set(now);
        self.stopped = true;
    }

    /// Restarts it.
    pub(crate) fn start(&mut self) {
        let now = self.now();
        self.stopped = false;
        self.set(now);
    }

    /// After a wait that started at emulated time `waited_from` and took a message scheduled to
    /// arrive at `arrival`: the clock is the later of the two.
    pub(crate) fn after_wait(&mut self, waited_from: Instant, arrival: Option<Instant>) {
        self.set(arrival.map_or(waited_from, |a| a.max(waited_from)));
    }
}

/// The shape of every link of an in-process cluster: [`LinkShaping::new`] or
/// [`LinkShaping::gbit_per_second`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct LinkShaping {
    /// Bytes per second through each node's send port and each node's receive port.
    pub bytes_per_second: f64,
    /// Delay between a message's last byte leaving and its arrival.
    pub latency: Duration,
}

impl LinkShaping {
    /// Links of `bytes_per_second` through each port, each message arriving `latency` after
    /// its last byte left.
    pub fn new(bytes_per_second: f64, latency: Duration) -> LinkShaping {
        LinkShaping { bytes_per_second, latency }
    }

    /// Links of `gbit` gigabits per second (1 Gbit/s = 125 000 000 bytes/s), no latency.
    pub fn gbit_per_second(gbit: f64) -> LinkShaping {
        LinkShaping { bytes_per_second: gbit * 1e9 / 8.0, latency: Duration::ZERO }
    }

    /// The time a message of `len` bytes occupies a port (saturating at [`Duration::MAX`]).
    pub fn transfer_time(&self, len: usize) -> Duration {
        Duration::try_from_secs_f64(len as f64 / self.bytes_per_second).unwrap_or(Duration::MAX)
    }

    pub(crate) fn check(&self) -> Result<(), TransportError> {
        if !(self.bytes_per_second.is_finite() && self.bytes_per_second > 0.0) {
            return Err(TransportError::Setup(format!(
                "link rate must be a positive number of bytes per second, got {}",
                self.bytes_per_second
            )));
        }
        Ok(())
    }
}

/// When each rank's receive port is next free, shared by all interfaces.
#[derive(Debug)]
pub(crate) struct Ports {
    ingress_free: Vec<Mutex<Instant>>,
}

impl Ports {
    pub(crate) fn new(size: usize) -> Arc<Ports> {
        let now = Instant::now();
        Arc::new(Ports { ingress_free: (0..size).map(|_| Mutex::new(now)).collect() })
    }

    /// Books `to`'s receive port for `len` transfer time, starting no earlier than `earliest`;
    /// returns when the transfer ends.
    fn book(&self, to: usize, earliest: Instant, transfer: Duration) -> Instant {
        let mut free = self.ingress_free[to].lock().unwrap_or_else(|p| p.into_inner());
        let end = earliest.max(*free) + transfer;
        *free = end;
        end
    }
}

/// A queued message.
#[derive(Debug)]
struct Job {
    to: usize,
    tag: Tag,
    bytes: Vec<u8>,
    queued: Instant,
}

/// Messages an interface queues besides the one it is sending.
const QUEUED_MESSAGES: usize = 2;

/// Why a message could not be queued.
#[derive(Debug)]
pub(crate) enum QueueError {
    /// The queue stayed full for the whole timeout.
    Full,
    /// The interface thread is gone.
    Stopped,
}

/// One rank's shaped network interface: a thread sending queued messages one at a time.
#[derive(Debug)]
pub(crate) struct Nic {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Nic {
    /// Starts the interface of `rank`.
    pub(crate) fn spawn(
        rank: usize,
        shaping: LinkShaping,
        ports: Arc<Ports>,
        inboxes: Vec<Sender<Delivery>>,
    ) -> Nic {
        // A short queue, like a socket buffer: a sender blocks while its interface is busy,
        // so a plain broadcast does not hold a copy per receiver in memory at once.
        let (jobs, queue) = bounded(QUEUED_MESSAGES);
        let thread = thread::Builder::new()
            .name(format!("nic-{rank}"))
            .spawn(move || run_interface(rank, shaping, &ports, &queue, inboxes))
            .ok();
        Nic { jobs: Some(jobs), thread }
    }

    /// Queues a message sent at `queued` on the sender's clock, waiting up to `timeout` for
    /// room in the queue.
    pub(crate) fn send(
        &self,
        to: usize,
        tag: Tag,
        bytes: Vec<u8>,
        queued: Instant,
        timeout: Duration,
    ) -> Result<(), QueueError> {
        let job = Job { to, tag, bytes, queued };
        match self.jobs.as_ref().map(|jobs| jobs.send_timeout(job, timeout)) {
            Some(Ok(())) => Ok(()),
            Some(Err(SendTimeoutError::Timeout(_))) => Err(QueueError::Full),
            _ => Err(QueueError::Stopped),
        }
    }
}

impl Drop for Nic {
    /// Sends what is queued, tells the peers this rank is gone, and stops the thread.
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sleeps until `at`. (It overshoots by tens of microseconds; the schedule, not the wake-up,
/// decides the next transfer, so the error does not add up.)
fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        thread::sleep(at - now);
    }
}

fn run_interface(
    rank: usize,
    shaping: LinkShaping,
    ports: &Ports,
    queue: &Receiver<Job>,
    inboxes: Vec<Sender<Delivery>>,
) {
    let (wire, wire_thread) = if shaping.latency.is_zero() {
        (None, None)
    } else {
        let (tx, rx) = unbounded::<(Instant, usize, Delivery)>();
        let inboxes = inboxes.clone();
        let t = thread::Builder::new()
            .name(format!("wire-{rank}"))
            .spawn(move || {
                for (at, to, d) in rx {
                    sleep_until(at);
                    let _ = inboxes[to].send(d);
                }
            })
            .ok();
        (Some(tx), t)
    };
    let deliver = |at: Instant, to: usize, d: Delivery| match &wire {
        Some(w) => {
            let _ = w.send((at, to, d));
        }
        None => {
            let _ = inboxes[to].send(d);
        }
    };
    let mut egress_free = Instant::now();
    for job in queue {
        let transfer = shaping.transfer_time(job.bytes.len());
        let end = ports.book(job.to, job.queued.max(egress_free), transfer);
        egress_free = end;
        sleep_until(end);
        deliver(
            end + shaping.latency,
            job.to,
            Delivery::Message {
                from: rank,
                tag: job.tag,
                bytes: job.bytes,
                arrival: Some(end + shaping.latency),
            },
        );
    }
    let at = egress_free + shaping.latency;
    for to in (0..inboxes.len()).filter(|&p| p != rank) {
        let detail = format!("rank {rank} left (endpoint dropped)");
        deliver(at, to, Delivery::Gone { from: rank, detail });
    }
    drop(wire);
    if let Some(t) = wire_thread {
        let _ = t.join();
    }
}
