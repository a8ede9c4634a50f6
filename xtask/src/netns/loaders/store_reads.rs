//! Arm s's reads from the object store, checked against its request log: the store reads each
//! record's object at most once in the job, and whole; no training rank reads the object store;
//! every record a training rank trained on was read by the store; and the store's own counts
//! (its served epochs' `source_records` and `source_bytes`, its client's `bytes_read`) are the
//! object store's.

use std::collections::{BTreeMap, BTreeSet};

use super::object_store::BUCKET;
use super::types::{Job, Request, Setting};

/// The record whose object `path` is (`/BUCKET/objects/NNNNN.jpg`), or None for another path.
fn record_of(path: &str) -> Option<Result<u64, String>> {
    let key = path.strip_prefix(&format!("/{BUCKET}/objects/"))?;
    Some(
        key.strip_suffix(".jpg")
            .and_then(|stem| stem.parse().ok())
            .ok_or_else(|| format!("an object of no record was read: {path}")),
    )
}

/// The failures of `job`'s store reads (arm s), one line each (empty: all checked out).
pub fn check(job: &Job, setting: &Setting) -> Vec<String> {
    let mut failed = Vec::new();
    let Some((store_rank, store)) = job.ranks.iter().enumerate().find(|(_, r)| r.role == "store") else {
        return vec!["no store rank logged".into()];
    };
    let store_address = job.addresses.get(store_rank).map_or("", String::as_str);
    // Every read of a record's object: by record, its requests.
    let mut reads: BTreeMap<u64, Vec<&Request>> = BTreeMap::new();
    for q in job.requests.iter().filter(|q| q.method == "GET") {
        match record_of(&q.path) {
            None => {}
            Some(Err(e)) => failed.push(e),
            Some(Ok(id)) => reads.entry(id).or_default().push(q),
        }
    }
    let twice: Vec<(&u64, usize)> =
        reads.iter().map(|(id, q)| (id, q.len())).filter(|(_, n)| *n > 1).collect();
    if let Some((id, n)) = twice.first() {
        failed.push(format!(
            "the object store sent record {id}'s object {n} times ({} objects more than once)",
            twice.len()
        ));
    }
    for (id, q) in reads.iter().flat_map(|(id, qs)| qs.iter().map(move |q| (id, q))) {
        if q.client != store_address {
            failed.push(format!("{} (not the store) read record {id}'s object", q.client));
            break;
        }
    }
    for (id, q) in reads.iter().flat_map(|(id, qs)| qs.iter().map(move |q| (id, q))) {
        let size = setting.sizes.get(*id as usize).copied();
        if size != Some(q.bytes) {
            failed.push(format!(
                "the object store sent {} bytes of record {id}'s object, which has {}",
                q.bytes,
                size.map_or("no size in the manifest".to_string(), |s| s.to_string())
            ));
            break;
        }
    }
    let trained: BTreeSet<u64> =
        job.ranks.iter().flat_map(|r| &r.epochs).flat_map(|e| e.ids.iter().copied()).collect();
    if let Some(id) = trained.iter().find(|id| !reads.contains_key(id)) {
        failed.push(format!("a rank trained on record {id}, whose object the store never read"));
    }
    if trained.is_empty() {
        failed.push("no training rank trained on a record".into());
    }
    // The store's own counts against the object store's.
    let logged_records = reads.len() as u64;
    let logged_bytes: u64 = reads.values().flatten().map(|q| q.bytes).sum();
    let counted_records: u64 = store.served.iter().map(|s| s.source_records).sum();
    let counted_bytes: u64 = store.served.iter().map(|s| s.source_bytes).sum();
    if (counted_records, counted_bytes) != (logged_records, logged_bytes) {
        failed.push(format!(
            "the store counts {counted_records} records ({counted_bytes} bytes) read from the source, the object store's log {logged_records} ({logged_bytes} bytes)"
        ));
    }
    match store.object_store {
        Some(c) if c.bytes_read == logged_bytes => {}
        Some(c) => failed.push(format!(
            "the store's client read {} bytes, the object store's log sent it {logged_bytes} of records",
            c.bytes_read
        )),
        None => failed.push("the store logged no count of its object store client".into()),
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::loaders::types::{Arm, ClientCount, EpochLog, RankLog, Served};

    fn get(client: &str, id: u64, bytes: u64) -> Request {
        Request {
            t: 1.0,
            client: client.into(),
            method: "GET".into(),
            path: format!("/{BUCKET}/objects/{id:05}.jpg"),
            bytes,
        }
    }

    /// A store that read records 0..4 (100 bytes each) once, counting them, and two training
    /// ranks that trained on them.
    fn store_job() -> (Job, Setting) {
        let setting = Setting { sizes: vec![100; 4], ..Setting::default() };
        let store = RankLog {
            rank: 0,
            role: "store".into(),
            served: vec![
                Served { epoch: 0, source_records: 3, source_bytes: 300 },
                Served { epoch: 1, source_records: 1, source_bytes: 100 },
            ],
            object_store: Some(ClientCount { requests: 5, bytes_read: 400 }),
            ..RankLog::default()
        };
        let trainer = |rank, ids: &[u64]| RankLog {
            rank,
            role: "trainer".into(),
            epochs: vec![EpochLog { ids: ids.to_vec(), ..EpochLog::default() }],
            ..RankLog::default()
        };
        let mut requests: Vec<Request> = (0..4).map(|i| get("s", i, 100)).collect();
        requests.push(Request {
            method: "GET".into(),
            path: format!("/{BUCKET}"),
            bytes: 999,
            ..get("s", 0, 0)
        });
        let job = Job {
            arm: Arm::S,
            repeat: 0,
            ranks: vec![store, trainer(1, &[0, 1]), trainer(2, &[2, 3])],
            addresses: vec!["s".into(), "a".into(), "b".into()],
            requests,
            t0: 0.0,
            error: None,
        };
        (job, setting)
    }

    #[test]
    fn a_store_that_read_every_record_once_passes() {
        let (job, setting) = store_job();
        assert_eq!(check(&job, &setting), Vec::<String>::new());
    }

    #[test]
    fn a_record_read_twice_fails_on_the_log_and_on_the_store_s_count() {
        let (mut job, setting) = store_job();
        job.requests.push(get("s", 2, 100));
        let failed = check(&job, &setting);
        assert_eq!(failed[0], "the object store sent record 2's object 2 times (1 objects more than once)");
        assert!(failed[1].starts_with("the store counts 4 records (400 bytes) read from the source, the object store's log 4 (500 bytes)"), "{failed:?}");
        assert!(failed[2].starts_with("the store's client read 400 bytes"), "{failed:?}");
    }

    #[test]
    fn reads_by_a_trainer_part_reads_and_unread_records_fail() {
        let (mut job, setting) = store_job();
        job.requests[1].client = "a".into();
        job.requests[2].bytes = 50;
        job.ranks[2].epochs[0].ids.push(7);
        let failed = check(&job, &setting);
        for wanted in [
            "a (not the store) read record 1's object",
            "the object store sent 50 bytes of record 2's object, which has 100",
            "a rank trained on record 7, whose object the store never read",
        ] {
            assert!(failed.iter().any(|f| f == wanted), "{wanted}: {failed:?}");
        }
        // A store that read nothing, and counts nothing, trained on nothing: still a failure.
        let (mut job, setting) = store_job();
        job.requests.clear();
        job.ranks[0].served.clear();
        job.ranks[0].object_store = Some(ClientCount::default());
        job.ranks.iter_mut().for_each(|r| r.epochs.clear());
        assert_eq!(check(&job, &setting), ["no training rank trained on a record"]);
    }
}
