//! Link shaping for the in-process transport: each rank has a network interface thread that
//! sends one message at a time at the link rate, and each rank receives one message at a time
//! (single-ported nodes, as the UberShuffle paper assumes in Section 3.1).
//!
//! A message of `b` bytes from `a` to `c` occupies `a`'s send port and `c`'s receive port for
//! `b / rate` seconds, starting when both are free and the message was queued; it is delivered
//! `latency` after its last byte left. Port times are kept on a virtual schedule (the end of
//! the previous transfer, not the moment a sleeping thread woke), so sleep overshoot does not
//! accumulate over a run of messages.

use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, SendError, Sender, unbounded};

use crate::mailbox::Delivery;
use crate::{Tag, TransportError};

/// The shape of every link of an in-process cluster.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkShaping {
    /// Bytes per second through each node's send port and each node's receive port.
    pub bytes_per_second: f64,
    /// Delay between a message's last byte leaving and its arrival.
    pub latency: Duration,
}

impl LinkShaping {
    /// Links of `gbit` gigabits per second (1 Gbit/s = 125 000 000 bytes/s), no latency.
    pub fn gbit_per_second(gbit: f64) -> LinkShaping {
        LinkShaping { bytes_per_second: gbit * 1e9 / 8.0, latency: Duration::ZERO }
    }

    /// The time a message of `len` bytes occupies a port.
    pub fn transfer_time(&self, len: usize) -> Duration {
        Duration::from_secs_f64(len as f64 / self.bytes_per_second)
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
        let (jobs, queue) = unbounded();
        let thread = thread::Builder::new()
            .name(format!("nic-{rank}"))
            .spawn(move || run_interface(rank, shaping, &ports, &queue, inboxes))
            .ok();
        Nic { jobs: Some(jobs), thread }
    }

    /// Queues a message.
    pub(crate) fn send(&self, to: usize, tag: Tag, bytes: Vec<u8>) -> Result<(), SendError<()>> {
        let job = Job { to, tag, bytes, queued: Instant::now() };
        match &self.jobs {
            Some(jobs) => jobs.send(job).map_err(|_| SendError(())),
            None => Err(SendError(())),
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

/// Sleeps until `at`: a coarse sleep, then yielding for the last stretch, which thread::sleep
/// overshoots by tens of microseconds.
fn sleep_until(at: Instant) {
    const SPIN: Duration = Duration::from_micros(200);
    let now = Instant::now();
    if at > now + SPIN {
        thread::sleep(at - now - SPIN);
    }
    while Instant::now() < at {
        thread::yield_now();
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
            Delivery::Message { from: rank, tag: job.tag, bytes: job.bytes },
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
