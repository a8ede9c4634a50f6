//! The hostile harness: a TCP cluster on loopback (master and workers on threads of this
//! process, real sockets) in which one worker that holds the token misbehaves, and the
//! reference run in which it departs at the same point instead. A misbehaving worker must cost
//! that worker only: the run finishes with the honest workers, epoch by epoch as the reference.

#![allow(dead_code)] // each test binary uses part of the harness

use std::thread;
use std::time::Duration;

use ubershuffle_core::PlannerOptions;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_learners::Update;
use ubershuffle_learners::UpdateBody;
use ubershuffle_learners::data::synthetic::linear_regression;
use ubershuffle_learners::straggler::NoStragglers;
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::protocol::{EpochAck, TAG_RECEIVED, TAG_UPDATE, UpdateOutcome, UpdateReport};
use ubershuffle_runtime::{LearnerSpec, Master, RunConfig, RunData, RunReport, WorkerOptions, run_worker};
use ubershuffle_transport::insider::{self, Misbehaviour};
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, connect_worker};
use ubershuffle_transport::{InboxLimits, Tag, Transport, TransportError};

const POINTS: usize = 600;
const FEATURES: usize = 4;
/// A user tag no one waits for.
pub const FLOOD_TAG: Tag = 0x5a5a;

/// What a worker does in a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    /// Its part, honestly.
    Honest,
    /// Leaves when the order of this epoch reaches it (after the epoch's model broadcast).
    ExitAtEpoch(u32),
    /// Misbehaves in the collectives from the start.
    Collectives(Misbehaviour),
    /// Does this to its own messages to the master of this epoch ([`Insider`]).
    Wire(Wire, u32),
}

/// What a worker does to its messages to the master in one epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wire {
    /// An acknowledgement that does not parse.
    MalformedAck,
    /// `frames` messages of `bytes` bytes with a tag no one waits for, then its acknowledgement.
    Flood {
        /// How many.
        frames: usize,
        /// Bytes each.
        bytes: usize,
    },
    /// Leaves instead of acknowledging (the reference of the two above).
    LeaveBeforeAck,
    /// Its update with a value NaN.
    NanUpdate,
    /// Its update claiming one point more than its batch.
    PointsUpdate,
    /// A `Failed` report instead of its update.
    FailedUpdate,
    /// An update whose bytes do not parse.
    MalformedUpdate,
    /// Leaves instead of sending its update (the reference of the four above).
    LeaveBeforeUpdate,
    /// Sends its update report twice.
    RepeatUpdate,
}

/// A worker's transport that does [`Wire`] to its messages to the master in one epoch; once it
/// has left, every call fails as if the master were gone.
pub struct Insider<T: Transport> {
    inner: Option<T>,
    wire: Wire,
    epoch: u32,
}

impl<T: Transport> Insider<T> {
    fn new(inner: T, wire: Wire, epoch: u32) -> Self {
        Insider { inner: Some(inner), wire, epoch }
    }

    fn t(&mut self) -> Result<&mut T, TransportError> {
        self.inner.as_mut().ok_or(TransportError::PeerGone { peer: 0, op: "insider", detail: "left".into() })
    }

    /// Leaves: drops the transport (its links close, as a killed process's would).
    fn leave(&mut self) -> Result<(), TransportError> {
        self.inner = None;
        self.t().map(|_| ())
    }

    /// The bytes to send instead of `bytes` (an update report of this epoch), or `None` to leave.
    fn altered_update(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let Ok(mut report) = UpdateReport::from_bytes(bytes) else { return Some(bytes.to_vec()) };
        if report.epoch != self.epoch {
            return Some(bytes.to_vec());
        }
        if let UpdateOutcome::Done { update, .. } = &mut report.outcome {
            let mut u = Update::from_bytes(update).unwrap();
            match self.wire {
                Wire::NanUpdate => {
                    if let UpdateBody::Dense(v) = &mut u.body {
                        v[0] = f64::NAN;
                    }
                }
                Wire::PointsUpdate => u.points += 1,
                Wire::MalformedUpdate => {
                    *update = vec![9; 5];
                    return Some(report.to_bytes());
                }
                Wire::FailedUpdate => report.outcome = UpdateOutcome::Failed("forged".into()),
                Wire::LeaveBeforeUpdate => return None,
                _ => {}
            }
            if let UpdateOutcome::Done { update, .. } = &mut report.outcome {
                *update = u.to_bytes();
            }
        }
        Some(report.to_bytes())
    }
}

impl<T: Transport> Transport for Insider<T> {
    fn rank(&self) -> usize {
        self.inner.as_ref().map_or(usize::MAX, Transport::rank)
    }
    fn size(&self) -> usize {
        self.inner.as_ref().map_or(0, Transport::size)
    }
    fn timeout(&self) -> Duration {
        self.inner.as_ref().map_or(Duration::ZERO, Transport::timeout)
    }
    fn set_timeout(&mut self, timeout: Duration) {
        if let Some(t) = self.inner.as_mut() {
            t.set_timeout(timeout);
        }
    }
    fn send(&mut self, to: usize, tag: Tag, bytes: &[u8]) -> Result<(), TransportError> {
        let this_epoch = |b: &[u8]| EpochAck::from_bytes(b).is_ok_and(|a| a.epoch == self.epoch);
        if to == 0 && tag == TAG_RECEIVED && this_epoch(bytes) {
            match self.wire {
                Wire::MalformedAck => return self.t()?.send(0, tag, &[1, 2, 3]),
                Wire::Flood { frames, bytes: n } => {
                    let junk = vec![0x5a; n];
                    for _ in 0..frames {
                        if self.t()?.send(0, FLOOD_TAG, &junk).is_err() {
                            break; // the master ended the link
                        }
                    }
                }
                Wire::LeaveBeforeAck => return self.leave(),
                _ => {}
            }
        }
        if to == 0 && tag == TAG_UPDATE {
            if self.wire == Wire::RepeatUpdate
                && UpdateReport::from_bytes(bytes).is_ok_and(|r| r.epoch == self.epoch)
            {
                self.t()?.send(0, tag, bytes)?;
            }
            return match self.altered_update(bytes) {
                Some(b) => self.t()?.send(0, tag, &b),
                None => self.leave(),
            };
        }
        self.t()?.send(to, tag, bytes)
    }
    fn recv_within(&mut self, from: usize, tag: Tag, timeout: Duration) -> Result<Vec<u8>, TransportError> {
        self.t()?.recv_within(from, tag, timeout)
    }
    fn recv_any_within(
        &mut self,
        from: &[usize],
        tag: Tag,
        timeout: Duration,
    ) -> Result<(usize, Vec<u8>), TransportError> {
        self.t()?.recv_any_within(from, tag, timeout)
    }
    fn broadcast(&mut self, root: usize, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        self.t()?.broadcast(root, buf)
    }
    fn broadcast_among(
        &mut self,
        root: usize,
        group: &[usize],
        id: u64,
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        self.t()?.broadcast_among(root, group, id, buf)
    }
    fn broadcast_turned(
        &mut self,
        root: usize,
        group: &[usize],
        named: (u64, u32),
        buf: &mut Vec<u8>,
    ) -> Result<(), TransportError> {
        self.t()?.broadcast_turned(root, group, named, buf)
    }
    fn barrier(&mut self) -> Result<(), TransportError> {
        self.t()?.barrier()
    }
    fn limit_inbox(&mut self, peers: &[usize], limits: InboxLimits) {
        if let Some(t) = self.inner.as_mut() {
            t.limit_inbox(peers, limits);
        }
    }
}

/// The run's data: linear regression on synthetic points (seeded).
pub fn data() -> RunData {
    let (all, _) = linear_regression(POINTS + 100, FEATURES, 0.05, 3).unwrap();
    let (train, held_out) = all.split(100.0 / (POINTS + 100) as f64, 4);
    RunData { train: train.to_records().unwrap().into(), held_out: held_out.to_records().unwrap() }
}

/// Runs `workers` workers for `epochs` epochs over TCP on loopback, worker `w` doing what
/// `acts` says (honest when not listed); the run must finish.
pub fn run(workers: usize, epochs: usize, acts: &[(usize, Act)]) -> RunReport {
    run_with(workers, epochs, acts, true, &|master| master.to_string())
}

/// [`run`], sealed or in plain text, each worker connecting to the master at the address
/// `route` gives for the master's (a proxy's, say).
pub fn run_with(
    workers: usize,
    epochs: usize,
    acts: &[(usize, Act)],
    sealed: bool,
    route: &dyn Fn(&str) -> String,
) -> RunReport {
    let tcp = TcpConfig::new("insiders")
        .with_timeout(Duration::from_secs(1))
        .with_join_timeout(Duration::from_secs(20))
        .with_sealed(sealed)
        .with_join_limits(Some(ubershuffle_runtime::join_limits()));
    let listener = MasterListener::bind("127.0.0.1:0", tcp.clone()).unwrap();
    let master_addr = listener.local_addr().unwrap().to_string();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (addr, tcp, acts) = (route(&master_addr), tcp.clone(), acts.to_vec());
            thread::spawn(move || {
                let t = connect_worker(&addr, &tcp).unwrap();
                let w = t.rank() - 1;
                let act = acts.iter().find(|a| a.0 == w).map_or(Act::Honest, |a| a.1);
                // The workers' own outcomes do not matter: the hostile one and those dropped
                // with it end as they may.
                let _ = match act {
                    Act::Honest => run_worker(t, &WorkerOptions::default()),
                    Act::ExitAtEpoch(e) => {
                        run_worker(t, &WorkerOptions::default().with_exit_at_epoch(Some(e)))
                    }
                    Act::Collectives(m) => {
                        insider::set(m);
                        run_worker(t, &WorkerOptions::default())
                    }
                    Act::Wire(wire, e) => run_worker(Insider::new(t, wire, e), &WorkerOptions::default()),
                };
            })
        })
        .collect();
    let master = listener.accept_workers(workers, |r| panic!("refused {r:?}")).unwrap();
    let data = data();
    let learner = LearnerSpec::LinearRegression { features: FEATURES, step_size: 0.01, local_passes: 2 };
    let config = RunConfig::new(workers, POINTS / 2, learner)
        .with_epochs(epochs)
        .with_seed(5)
        .with_policy(ExchangePolicy::Global)
        .with_chunk_bytes(1024)
        .check(data.train.len())
        .unwrap();
    let planner = planner_by_name("coded", &PlannerOptions::default()).unwrap();
    let mut none = NoStragglers::new(workers).unwrap();
    let report = Master::new(master, &config, planner.as_ref(), &mut none, &data)
        .and_then(|m| m.run(&mut |_| {}))
        .unwrap();
    for h in handles {
        h.join().unwrap();
    }
    report
}

/// The hostile run went as the reference, epoch by epoch: the same workers lost (in any
/// order within an epoch), the same updates aggregated, the same losses to the bit.
pub fn assert_same_course(hostile: &RunReport, reference: &RunReport, dropped: &[usize]) {
    assert_eq!(hostile.epochs.len(), reference.epochs.len());
    let sorted = |v: &[usize]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    assert_eq!(sorted(&hostile.lost_workers), sorted(dropped), "{:?}", hostile.epochs);
    for (h, r) in hostile.epochs.iter().zip(&reference.epochs) {
        assert_eq!(sorted(&h.lost_workers), sorted(&r.lost_workers), "epoch {}", h.epoch);
        assert_eq!(h.updated_workers, r.updated_workers, "epoch {}", h.epoch);
        assert_eq!(h.loss.to_bits(), r.loss.to_bits(), "epoch {}: {} against {}", h.epoch, h.loss, r.loss);
    }
    assert_eq!(hostile.model, reference.model);
}
