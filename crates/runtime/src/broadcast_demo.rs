//! The broadcast demo that `ubershuffle master` / `ubershuffle worker` run over TCP and the
//! `broadcast` experiment runs over every transport: the master sends each worker the job
//! (rounds, bytes, seed), then for each round all ranks meet at a barrier, the master
//! broadcasts a seeded pseudo-random payload, and every worker checks it byte for byte against
//! the same stream and reports back. The master times each broadcast from the barrier to its
//! return (which waits until every worker holds the whole payload), on the transport's clock
//! ([`Transport::now`]: emulated time on shaped in-process links) and on the wall clock.

use std::time::Instant;

use ubershuffle_core::rng::{fill_bytes, seeded_stream};
use ubershuffle_transport::{Tag, Transport, TransportError};

/// The master's job message.
const TAG_JOB: Tag = 1;
/// A worker's check of one round.
const TAG_CHECK: Tag = 2;
/// Bytes regenerated at a time when checking a payload.
const CHECK_CHUNK: usize = 1 << 20;

/// What the master asks of the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DemoJob {
    /// Number of broadcasts.
    pub rounds: u32,
    /// Bytes per broadcast.
    pub bytes: u64,
    /// Seed of the payloads (round `r` uses stream `r` of the seed).
    pub seed: u64,
}

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The transport failed.
    #[error("{step}: {error}")]
    Transport {
        /// What was being done.
        step: String,
        /// The failure (in the message, not a separate cause, so it is printed once).
        error: TransportError,
    },
    /// A worker received other bytes than the master sent.
    #[error("rank {rank} received a corrupt payload in round {round}: {detail}")]
    Corrupt {
        /// The worker.
        rank: usize,
        /// The round.
        round: u32,
        /// What differed.
        detail: String,
    },
    /// A malformed demo message.
    #[error("rank {rank} sent a malformed {what}")]
    Malformed {
        /// The sender.
        rank: usize,
        /// Which message.
        what: &'static str,
    },
    /// The job cannot run on this machine.
    #[error("{0}")]
    Job(String),
}

fn step(what: impl Into<String>) -> impl FnOnce(TransportError) -> DemoError {
    let step = what.into();
    move |error| DemoError::Transport { step, error }
}

impl DemoJob {
    /// `rounds` broadcasts of `bytes` bytes, payloads drawn from `seed`.
    pub const fn new(rounds: u32, bytes: u64, seed: u64) -> Self {
        DemoJob { rounds, bytes, seed }
    }

    fn to_bytes(self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[..4].copy_from_slice(&self.rounds.to_le_bytes());
        b[4..12].copy_from_slice(&self.bytes.to_le_bytes());
        b[12..].copy_from_slice(&self.seed.to_le_bytes());
        b
    }

    fn parse(b: &[u8]) -> Option<DemoJob> {
        let b: &[u8; 20] = b.try_into().ok()?;
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Some(DemoJob {
            rounds: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            bytes: u64_at(4),
            seed: u64_at(12),
        })
    }

    fn len(&self) -> Result<usize, DemoError> {
        usize::try_from(self.bytes)
            .map_err(|_| DemoError::Job(format!("{} bytes do not fit in memory", self.bytes)))
    }
}

/// The payload of `round`.
pub fn payload(job: &DemoJob, round: u32) -> Result<Vec<u8>, DemoError> {
    let mut bytes = vec![0u8; job.len()?];
    fill_bytes(&mut seeded_stream(job.seed, u64::from(round)), &mut bytes);
    Ok(bytes)
}

/// Compares `got` with the payload of `round`, regenerating it a chunk at a time.
fn check_payload(job: &DemoJob, round: u32, got: &[u8]) -> Result<(), String> {
    if got.len() as u64 != job.bytes {
        return Err(format!("{} bytes instead of {}", got.len(), job.bytes));
    }
    let mut rng = seeded_stream(job.seed, u64::from(round));
    let mut want = vec![0u8; CHECK_CHUNK.min(got.len())];
    for (k, chunk) in got.chunks(CHECK_CHUNK).enumerate() {
        let want = &mut want[..chunk.len()];
        fill_bytes(&mut rng, want);
        if let Some(i) = chunk.iter().zip(want.iter()).position(|(a, b)| a != b) {
            return Err(format!("first difference at byte {}", k * CHECK_CHUNK + i));
        }
    }
    Ok(())
}

/// The time of one broadcast.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundTime {
    /// Seconds on the transport's clock ([`Transport::now`]).
    pub seconds: f64,
    /// Seconds on the wall clock.
    pub wall_seconds: f64,
}

/// Rank 0's side: sends the job, runs the rounds, returns the time of each broadcast.
pub fn run_master<T: Transport + ?Sized>(t: &mut T, job: &DemoJob) -> Result<Vec<RoundTime>, DemoError> {
    let workers: Vec<usize> = (1..t.size()).collect();
    for &w in &workers {
        t.send(w, TAG_JOB, &job.to_bytes()).map_err(step(format!("sending the job to rank {w}")))?;
    }
    let mut seconds = Vec::with_capacity(job.rounds as usize);
    for round in 0..job.rounds {
        let mut buf = payload(job, round)?;
        t.barrier().map_err(step(format!("round {round}: barrier")))?;
        let (started, wall) = (t.now(), Instant::now());
        t.broadcast(0, &mut buf).map_err(step(format!("round {round}: broadcast")))?;
        let seconds_now = t.now().saturating_duration_since(started).as_secs_f64();
        seconds.push(RoundTime { seconds: seconds_now, wall_seconds: wall.elapsed().as_secs_f64() });
        drop(buf);
        let mut waiting = workers.clone();
        while !waiting.is_empty() {
            let (from, report) =
                t.recv_any(&waiting, TAG_CHECK).map_err(step(format!("round {round}: collecting checks")))?;
            waiting.retain(|&r| r != from);
            match report.split_first() {
                Some((0, [])) => {}
                Some((1, detail)) => {
                    let detail = String::from_utf8_lossy(detail).into_owned();
                    return Err(DemoError::Corrupt { rank: from, round, detail });
                }
                _ => return Err(DemoError::Malformed { rank: from, what: "check report" }),
            }
        }
    }
    Ok(seconds)
}

/// A worker's side: receives the job, takes part in every round and checks every payload.
pub fn run_worker<T: Transport + ?Sized>(t: &mut T) -> Result<DemoJob, DemoError> {
    let rank = t.rank();
    let raw = t.recv(0, TAG_JOB).map_err(step("waiting for the job"))?;
    let job = DemoJob::parse(&raw).ok_or(DemoError::Malformed { rank: 0, what: "job" })?;
    // Before the first barrier, which no peer passes before this rank enters it: no piece of
    // a broadcast arrives under the join window's bounds.
    let peers: Vec<usize> = (1..t.size()).filter(|&r| r != rank).collect();
    t.limit_inbox(&peers, crate::inbox::for_broadcasts(usize::try_from(job.bytes).unwrap_or(usize::MAX)));
    for round in 0..job.rounds {
        t.barrier().map_err(step(format!("round {round}: barrier")))?;
        let mut buf = Vec::new();
        t.broadcast(0, &mut buf).map_err(step(format!("round {round}: broadcast")))?;
        let checked = check_payload(&job, round, &buf);
        drop(buf);
        let report = match &checked {
            Ok(()) => vec![0],
            Err(detail) => [&[1u8][..], detail.as_bytes()].concat(),
        };
        t.send(0, TAG_CHECK, &report).map_err(step(format!("round {round}: reporting")))?;
        if let Err(detail) = checked {
            return Err(DemoError::Corrupt { rank, round, detail });
        }
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_transport::in_process::{InProcessConfig, cluster};

    #[test]
    fn the_demo_runs_and_checks_bytes_in_process() {
        let job = DemoJob::new(2, 3 * CHECK_CHUNK as u64 + 5, 9);
        assert_eq!(DemoJob::parse(&job.to_bytes()), Some(job));
        let mut ranks = cluster(4, &InProcessConfig::default()).unwrap().into_iter();
        let mut master = ranks.next().unwrap();
        let workers: Vec<_> = ranks
            .map(|mut t| std::thread::spawn(move || run_worker(&mut t).map_err(|e| e.to_string())))
            .collect();
        let seconds = run_master(&mut master, &job).unwrap();
        assert_eq!(seconds.len(), 2);
        for w in workers {
            assert_eq!(w.join().unwrap(), Ok(job));
        }
    }

    #[test]
    fn corrupt_payloads_are_caught() {
        let job = DemoJob::new(1, 100, 1);
        let mut p = payload(&job, 0).unwrap();
        assert!(check_payload(&job, 0, &p).is_ok());
        p[77] ^= 1;
        assert_eq!(check_payload(&job, 0, &p), Err("first difference at byte 77".into()));
        assert!(check_payload(&job, 0, &p[..99]).is_err());
        assert!(check_payload(&job, 1, &payload(&job, 0).unwrap()).is_err());
    }
}
