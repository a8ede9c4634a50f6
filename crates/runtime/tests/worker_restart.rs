//! A worker driven message by message: the master restarts an epoch the worker has already
//! finished (another worker was lost after this one replied). The restarted epoch's plan
//! assumes the cache from before the epoch, which the worker must still hold.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use ubershuffle_codes::Records;
use ubershuffle_core::epoch_chain::next_cache;
use ubershuffle_core::{Part, Plan};
use ubershuffle_learners::Model;
use ubershuffle_learners::data::synthetic::linear_regression;
use ubershuffle_runtime::protocol::{
    DataChunk, EpochAck, EpochOrder, JobSpec, MasterMessage, TAG_MASTER, TAG_RECEIVED, TAG_UPDATE,
    UpdateOutcome, UpdateReport, records_checksum,
};
use ubershuffle_runtime::{LearnerSpec, WorkerExit, WorkerOptions, run_worker};
use ubershuffle_transport::Transport;
use ubershuffle_transport::in_process::{InProcessConfig, InProcessTransport, cluster};

const SEED: u64 = 1;
const CAPACITY: usize = 4;

fn send(t: &mut InProcessTransport, m: &MasterMessage) {
    t.send(1, TAG_MASTER, &m.to_bytes().unwrap()).unwrap();
}

/// Sends epoch `epoch`'s order for `batch`, delivering `needs` point to point (uncoded), and
/// returns the worker's report once it has acknowledged the packets.
fn epoch(
    t: &mut InProcessTransport,
    records: &Records,
    model: &[u8],
    (epoch, attempt): (u32, u32),
    batch: &[u32],
    needs: &[u32],
) -> UpdateReport {
    let mut plan = Plan::new();
    for &p in needs {
        plan.push(&[Part::new(p, 0)]);
    }
    let order = EpochOrder {
        epoch,
        attempt,
        model: model.to_vec(),
        batch: batch.to_vec(),
        plan,
        seqs: (0..needs.len() as u32).collect(),
        broadcasts: 0,
        unicasts: 1,
        checksum: records_checksum(needs.iter().map(|&p| (p, records.get(p).unwrap()))),
        hold_seconds: 0.0,
    };
    send(t, &MasterMessage::Order(order));
    let payloads = needs.iter().flat_map(|&p| records.get(p).unwrap().to_vec()).collect();
    let chunk = DataChunk { epoch, attempt, seqs: (0..needs.len() as u32).collect(), payloads };
    send(t, &MasterMessage::Data(chunk));
    let ack = EpochAck::from_bytes(&t.recv(1, TAG_RECEIVED).unwrap()).unwrap();
    assert_eq!(ack, EpochAck { epoch, attempt });
    UpdateReport::from_bytes(&t.recv(1, TAG_UPDATE).unwrap()).unwrap()
}

fn assert_done(report: &UpdateReport, at: (u32, u32)) {
    assert_eq!((report.epoch, report.attempt), at);
    assert!(matches!(report.outcome, UpdateOutcome::Done { .. }), "{:?}", report.outcome);
}

#[test]
fn a_restarted_epoch_starts_from_the_cache_before_it() {
    let (data, _) = linear_regression(8, 1, 0.1, 2).unwrap();
    let records = data.to_records().unwrap();
    let learner = LearnerSpec::LinearRegression { features: 1, step_size: 0.01, local_passes: 1 };
    let mut ranks = cluster(2, &InProcessConfig::default()).unwrap().into_iter();
    let mut master = ranks.next().unwrap();
    let worker_end = ranks.next().unwrap();
    let worker = std::thread::spawn(move || run_worker(worker_end, &WorkerOptions::default()));

    let job = JobSpec {
        worker: 0,
        workers: 1,
        points: 8,
        record_width: records.width() as u32,
        cache_capacity: CAPACITY as u32,
        seed: SEED,
        chunk_bytes: 1 << 20,
        learner,
        uneven: None,
    };
    send(&mut master, &MasterMessage::Job(job));
    let cache: Vec<u32> = vec![0, 1, 2, 3];
    let bytes = cache.iter().flat_map(|&p| records.get(p).unwrap().to_vec()).collect();
    send(&mut master, &MasterMessage::Records { ids: cache.clone(), bytes });
    let model = Model::new(vec![0.0; 2]).to_bytes();

    // Epoch 1, attempt 0: the batch {2, 3, 4, 5}; the policy then keeps exactly the batch,
    // dropping points 0 and 1.
    let first = [2, 3, 4, 5];
    assert_eq!(next_cache(&cache, &first, CAPACITY, SEED, 1, 0), first);
    assert_done(&epoch(&mut master, &records, &model, (1, 0), &first, &[4, 5]), (1, 0));
    // The master restarts epoch 1 with another batch, planned against the cache before it:
    // points 0 and 1 are not sent, the worker must still hold them.
    let second = [0, 1, 6, 7];
    assert_done(&epoch(&mut master, &records, &model, (1, 1), &second, &[6, 7]), (1, 1));
    // Epoch 2 starts from the cache the policy kept after the restarted attempt.
    let kept = next_cache(&cache, &second, CAPACITY, SEED, 1, 0);
    assert_eq!(kept, second);
    assert_done(&epoch(&mut master, &records, &model, (2, 0), &[4, 5, 6, 7], &[4, 5]), (2, 0));

    send(&mut master, &MasterMessage::Stop);
    let summary = worker.join().unwrap().unwrap();
    assert_eq!((summary.epochs, summary.exit), (3, WorkerExit::Stopped));
}
