//! The data plane over TCP with records of uneven size: the master plans and codes every
//! epoch on the records' segments, each worker decodes into its own store and hands each epoch
//! to a sink that compares every new record with the data set; a worker that leaves loses its
//! batch, while every other worker's batch stays the chain's drawn over all workers (the
//! Python sampler's).

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::sync::mpsc::channel;
use std::time::Duration;

use ubershuffle_codes::UnevenRecords;
use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_runtime::cluster_job::ClusterJob;
use ubershuffle_runtime::exchange::{Delivery, RecordSink, ServeOptions, Serving, serve};
use ubershuffle_runtime::{RuntimeError, ShuffledRecords, SizedRecords, WorkerOptions, run_worker_with};
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, connect_worker};

const WORKERS: usize = 3;
const POINTS: usize = 90;
const ALPHA: f64 = 0.5;
const SEED: u64 = 4;
const EPOCHS: usize = 4;

/// What a worker took from each epoch: the epoch, its batch, and how many new records it got.
type Taken = Vec<(u32, Vec<u32>, usize)>;

struct Checking {
    truth: UnevenRecords,
    taken: Taken,
}

impl RecordSink for Checking {
    fn epoch(&mut self, d: Delivery<'_>) -> Result<(), RuntimeError> {
        assert_eq!(d.first_differing(&self.truth)?, None, "a record decoded wrong");
        assert!(d.figures.padding_bytes > 0 || d.figures.packets == 0);
        self.taken.push((d.epoch, d.batch.to_vec(), d.new_ids.len()));
        Ok(())
    }
}

/// Sizes from 0 to a few hundred bytes, some much larger.
fn data() -> UnevenRecords {
    let sizes: Vec<u64> =
        (0..POINTS as u64).map(|i| (i * 7919) % 300 + if i % 11 == 0 { 2000 } else { 0 }).collect();
    UnevenRecords::random(&sizes, SEED).unwrap()
}

/// Serves `data()` to `WORKERS` workers on threads; `leaving` leaves when that epoch's order
/// reaches it. Returns the master's epochs and each worker's rank and epochs taken.
fn run(leaving: Option<(usize, u32)>) -> (Vec<ubershuffle_runtime::EpochMetrics>, Vec<(usize, Taken)>) {
    let truth = data();
    let tcp = TcpConfig::new("uneven").with_timeout(Duration::from_secs(2));
    let listener = MasterListener::bind("127.0.0.1:0", tcp.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (done, taken) = channel();
    for _ in 0..WORKERS {
        let (addr, tcp, done, truth) = (addr.clone(), tcp.clone(), done.clone(), truth.clone());
        std::thread::spawn(move || {
            let mut t = connect_worker(&addr, &tcp).unwrap();
            if let ClusterJob::EpochLoop { timeout, .. } = ClusterJob::receive(&mut t).unwrap() {
                t.set_timeout(timeout);
            }
            let worker = t.rank() - 1;
            let exit = leaving.filter(|l| l.0 == worker).map(|l| l.1);
            let mut sink = Checking { truth, taken: Vec::new() };
            let _ = run_worker_with(t, &WorkerOptions::default().with_exit_at_epoch(exit), &mut sink);
            done.send((worker, sink.taken)).unwrap();
        });
    }
    drop(done);
    let mut options = ServeOptions::new(WORKERS, ALPHA);
    (options.seed, options.epochs, options.scheme, options.timeout) =
        (SEED, EPOCHS, "coded".into(), tcp.timeout);
    let records = SizedRecords::new(truth.index().clone(), std::sync::Arc::new(truth)).unwrap();
    let serving = Serving::prepare(ShuffledRecords::Sized(records), &options).unwrap();
    let mut metrics = Vec::new();
    serve(listener, serving, &mut |m| metrics.push(m.clone())).unwrap();
    (metrics, taken.iter().collect())
}

/// Every epoch's batches of the chain drawn over all workers (the sampler's).
fn chain_batches() -> Vec<Vec<Vec<u32>>> {
    let params = ChainParams::new(WORKERS, POINTS, ExchangePolicy::Global, SEED).with_alpha(ALPHA).unwrap();
    let mut chain = EpochChain::new(params).unwrap();
    (0..EPOCHS)
        .map(|_| {
            let drawn = chain.draw(&chain.all_workers(), 0).unwrap();
            chain.commit_drawn(&drawn);
            chain.state().batches.clone()
        })
        .collect()
}

#[test]
fn uneven_records_arrive_whole_and_in_step_with_the_chain() {
    let (metrics, workers) = run(None);
    let batches = chain_batches();
    assert_eq!(metrics.len(), EPOCHS);
    for m in &metrics {
        assert!(m.padding_bytes > 0 && m.transmissions < m.uncoded_transmissions, "{m:?}");
        assert_eq!(m.payload_bytes % m.transmissions as u64, 0, "packets of one segment size");
    }
    for (worker, taken) in workers {
        assert_eq!(taken.len(), EPOCHS, "worker {worker}");
        for (epoch, batch, _) in taken {
            assert_eq!(batch, batches[epoch as usize - 1][worker], "worker {worker}, epoch {epoch}");
        }
    }
}

#[test]
fn a_lost_worker_keeps_its_place_and_the_others_their_batches() {
    let (metrics, workers) = run(Some((1, 2)));
    let batches = chain_batches();
    assert_eq!(metrics.len(), EPOCHS);
    assert!(metrics[1].lost_workers.contains(&1), "{:?}", metrics[1]);
    for (worker, taken) in workers {
        let epochs: Vec<u32> = taken.iter().map(|t| t.0).collect();
        if worker == 1 {
            assert_eq!(epochs, vec![1]);
        } else {
            assert_eq!(epochs, (1..=EPOCHS as u32).collect::<Vec<_>>(), "worker {worker}");
        }
        for (epoch, batch, _) in taken {
            assert_eq!(batch, batches[epoch as usize - 1][worker], "worker {worker}, epoch {epoch}");
        }
    }
    // The lost worker's records go undelivered: the survivors' epochs send less.
    assert!(metrics[2].uncoded_transmissions < metrics[0].uncoded_transmissions);
}
