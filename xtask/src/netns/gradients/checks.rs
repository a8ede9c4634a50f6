//! The checks of `cargo xtask netns-gradients` (the short form's and the full run's): what the
//! plane delivered, byte for byte, and that the hook and the gate did their work. Times are
//! the experiment's, not checked.
//!
//! Per job and training rank, every epoch's digest of the records read (their ids, sizes and
//! bytes as the plane gave them) must equal the digest of the same records read from the
//! source's files; per arm and repeat (the same seed), every plane must give every rank the
//! same digests and the same received counts (the plane's figures) in every epoch; the
//! digests must cover some records the plane carried; every step's all-reduce must be timed;
//! and in the yielding plane the deliveries must have yielded at least once.

use std::collections::BTreeMap;

use super::types::{Job, Plane, RankLog, Received};

/// One rank's epoch as the planes are compared: its digest and the plane's counts.
type Seen = (Option<String>, Option<Received>);
/// One job's training ranks as the planes are compared: by rank, every epoch.
type Ranks = BTreeMap<usize, Vec<Seen>>;

/// The first 12 characters of a digest (enough to tell two apart in a message).
fn short(digest: Option<&str>) -> &str {
    digest.map_or("none", |d| d.get(..12).unwrap_or(d))
}

/// Whether the plane's counts are all there.
fn complete(r: Option<&Received>) -> bool {
    r.is_some_and(|r| {
        r.records_received.is_some() && r.record_bytes_received.is_some() && r.bytes_received.is_some()
    })
}

/// The training ranks' logs of `job`.
fn trainers(job: &Job) -> impl Iterator<Item = &RankLog> {
    job.ranks.iter().filter(|l| l.role == "trainer")
}

/// How often the deliveries of `job` yielded, over its training ranks and epochs.
pub fn yields(job: &Job) -> u64 {
    trainers(job).flat_map(|l| &l.epochs).filter_map(|e| e.yields).sum()
}

/// Records the plane brought the training ranks of `job` that they then read (the deliveries
/// behind every epoch but the last: the last one's records are not read).
pub fn records_checked(job: &Job) -> u64 {
    trainers(job)
        .flat_map(|l| l.epochs.iter().rev().skip(1))
        .filter_map(|e| e.delivery_received.and_then(|r| r.records_received))
        .sum()
}

/// One job's own checks (`epochs`: what every training rank must have logged).
fn job_checks(job: &Job, epochs: usize, failed: &mut Vec<String>) {
    let name = format!("arm {}, plane {}", job.arm, job.plane.name());
    if trainers(job).next().is_none() {
        failed.push(format!("{name}: no training rank logged anything"));
        return;
    }
    for l in trainers(job) {
        if l.epochs.len() != epochs {
            failed.push(format!("{name}: rank {} logged {} epochs of {epochs}", l.rank, l.epochs.len()));
        }
        for e in &l.epochs {
            let at = format!("{name}: rank {} in epoch {}", l.rank, e.epoch);
            if e.allreduce_step_seconds.len() != e.step_seconds.len() {
                failed.push(format!(
                    "{at} timed {} all-reduces of {} steps",
                    e.allreduce_step_seconds.len(),
                    e.step_seconds.len()
                ));
            }
            if e.records_read == 0 {
                failed.push(format!("{at} read no record"));
            }
            match (&e.digest, &e.source_digest) {
                (Some(read), Some(source)) if read == source => {}
                (read, source) => failed.push(format!(
                    "{at} read other bytes than the source's: digest {}, the source's {}",
                    short(read.as_deref()),
                    short(source.as_deref())
                )),
            }
            if !complete(e.delivery_received.as_ref()) {
                failed.push(format!("{at}: the plane's figures lack the received counts"));
            }
        }
    }
    if records_checked(job) == 0 {
        failed.push(format!("{name}: no rank read a record the plane carried: the digests checked none"));
    }
    if job.plane == Plane::Yield && yields(job) == 0 {
        failed.push(format!("{name}: the deliveries never yielded to an all-reduce (yields 0)"));
    }
}

/// Every check of `jobs`, each failure one line (empty: all passed).
pub fn checks(jobs: &[Job], epochs: usize) -> Vec<String> {
    let mut failed = Vec::new();
    // Per (arm, repeat): the first plane's, and per rank its epochs.
    let mut first: BTreeMap<(char, usize), (Plane, Ranks)> = BTreeMap::new();
    for job in jobs {
        job_checks(job, epochs, &mut failed);
        let seen: Ranks = trainers(job)
            .map(|l| (l.rank, l.epochs.iter().map(|e| (e.digest.clone(), e.delivery_received)).collect()))
            .collect();
        let Some((plane, theirs)) = first.get(&(job.arm, job.repeat)) else {
            first.insert((job.arm, job.repeat), (job.plane, seen));
            continue;
        };
        let planes = format!("arm {}: planes {} and {}", job.arm, plane.name(), job.plane.name());
        if theirs.keys().ne(seen.keys()) {
            failed.push(format!("{planes} have other training ranks"));
            continue;
        }
        for (rank, mine) in &seen {
            let Some(other) = theirs.get(rank) else { continue };
            if mine.len() != other.len() {
                failed.push(format!(
                    "{planes}: rank {rank} logged {} epochs and {}",
                    other.len(),
                    mine.len()
                ));
                continue;
            }
            for (e, ((d1, r1), (d2, r2))) in other.iter().zip(mine).enumerate() {
                if d1 != d2 {
                    failed.push(format!(
                        "{planes} gave rank {rank} other records in epoch {e}: digests {} and {}",
                        short(d1.as_deref()),
                        short(d2.as_deref())
                    ));
                }
                if r1 != r2 {
                    failed.push(format!(
                        "{planes}: the delivery behind epoch {e} brought rank {rank} {r1:?} and {r2:?}"
                    ));
                }
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::gradients::types::EpochLog;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn received(records: u64) -> Received {
        Received {
            records_received: Some(records),
            record_bytes_received: Some(records * 100),
            bytes_received: Some(records * 100),
        }
    }

    /// Two ranks of arm p, two epochs, each reading what the source gives, 5 records received
    /// per delivery, the deliveries yielding `yields` times per epoch.
    fn job(plane: Plane, yields: u64) -> Job {
        let epoch = |epoch| EpochLog {
            epoch,
            step_seconds: vec![0.3, 0.3],
            allreduce_step_seconds: vec![0.1, 0.1],
            records_read: 8,
            digest: Some(A.into()),
            source_digest: Some(A.into()),
            delivery_received: Some(received(5)),
            yields: Some(yields),
            ..EpochLog::default()
        };
        let rank = |r| RankLog {
            rank: r,
            role: "trainer".into(),
            place: r,
            epochs: vec![epoch(0), epoch(1)],
            ..RankLog::default()
        };
        Job { arm: 'p', plane, repeat: 0, ranks: vec![rank(0), rank(1)] }
    }

    #[test]
    fn the_same_bytes_as_the_source_with_and_without_yielding_pass() {
        let jobs = [job(Plane::Flight, 0), job(Plane::Yield, 2)];
        assert_eq!(checks(&jobs, 2), Vec::<String>::new());
        assert_eq!((yields(&jobs[1]), records_checked(&jobs[1])), (8, 10));
    }

    #[test]
    fn a_wrong_byte_another_record_set_or_other_counts_fail() {
        // A byte the plane got wrong: the rank's digest is not the source's (in both planes).
        let mut wrong = job(Plane::Yield, 1);
        wrong.ranks[1].epochs[1].digest = Some(B.into());
        let failed = checks(&[job(Plane::Flight, 0), wrong], 2);
        assert!(failed[0].starts_with("arm p, plane yield: rank 1 in epoch 1 read other bytes than the source's: digest bbbbbbbbbbbb, the source's aaaaaaaaaaaa"), "{failed:?}");
        assert!(
            failed[1].contains("planes flight and yield gave rank 1 other records in epoch 1"),
            "{failed:?}"
        );
        // Another record set, each plane faithful to the source: the planes differ.
        let mut other = job(Plane::Yield, 1);
        other.ranks[0].epochs[1].digest = Some(B.into());
        other.ranks[0].epochs[1].source_digest = Some(B.into());
        let failed = checks(&[job(Plane::Flight, 0), other], 2);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("gave rank 0 other records in epoch 1"), "{failed:?}");
        // Other counts from the plane.
        let mut counts = job(Plane::Yield, 1);
        counts.ranks[0].epochs[0].delivery_received = Some(received(6));
        let failed = checks(&[job(Plane::Flight, 0), counts], 2);
        assert!(failed[0].contains("the delivery behind epoch 0 brought rank 0"), "{failed:?}");
    }

    #[test]
    fn what_cannot_be_checked_fails() {
        // No digest, no counts, nothing received, no yield, an epoch missing.
        let mut blind = job(Plane::Yield, 0);
        blind.ranks[0].epochs[0].digest = None;
        blind.ranks[0].epochs[1].delivery_received = Some(Received { bytes_received: None, ..received(5) });
        for r in &mut blind.ranks {
            r.epochs[0].delivery_received = Some(received(0));
        }
        blind.ranks[1].epochs.pop();
        let failed = checks(&[blind], 2);
        let wanted = [
            "rank 0 in epoch 0 read other bytes than the source's: digest none",
            "rank 0 in epoch 1: the plane's figures lack the received counts",
            "rank 1 logged 1 epochs of 2",
            "no rank read a record the plane carried",
            "the deliveries never yielded",
        ];
        for w in wanted {
            assert!(failed.iter().any(|f| f.contains(w)), "{w}: {failed:?}");
        }
        // An untimed all-reduce, and a rank that read nothing.
        let mut untimed = job(Plane::Flight, 0);
        untimed.ranks[0].epochs[1].allreduce_step_seconds.pop();
        untimed.ranks[1].epochs[0].records_read = 0;
        let failed = checks(&[untimed], 2);
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].ends_with("rank 0 in epoch 1 timed 1 all-reduces of 2 steps"), "{failed:?}");
        assert!(failed[1].ends_with("rank 1 in epoch 0 read no record"), "{failed:?}");
    }
}
