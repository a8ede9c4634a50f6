//! The epoch loop over real TCP sockets (master and workers on threads of this process), with
//! a worker that leaves mid-run: its connections close as a killed process's would, so the
//! pseudo-broadcast ring among the survivors breaks and they must recover.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::thread;
use std::time::{Duration, Instant};

use ubershuffle_core::PlannerOptions;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_learners::data::synthetic::linear_regression;
use ubershuffle_learners::straggler::NoStragglers;
use ubershuffle_planners::planner_by_name;
use ubershuffle_runtime::{
    LearnerSpec, Master, RunConfig, RunData, RunReport, WorkerExit, WorkerOptions, WorkerSummary, run_worker,
};
use ubershuffle_transport::Transport;
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, connect_worker};

const POINTS: usize = 600;
const FEATURES: usize = 4;

fn data() -> RunData {
    let (all, _) = linear_regression(POINTS + 100, FEATURES, 0.05, 3).unwrap();
    let (train, held_out) = all.split(100.0 / (POINTS + 100) as f64, 4);
    RunData { train: train.to_records().unwrap().into(), held_out: held_out.to_records().unwrap() }
}

fn config(workers: usize, epochs: usize) -> RunConfig {
    let learner = LearnerSpec::LinearRegression { features: FEATURES, step_size: 0.01, local_passes: 2 };
    RunConfig::new(workers, POINTS / 2, learner)
        .with_epochs(epochs)
        .with_seed(5)
        .with_policy(ExchangePolicy::Global)
        // Small chunks: several broadcasts per epoch, so a failure lands inside the ring.
        .with_chunk_bytes(1024)
}

/// Runs a TCP cluster on threads; `faults` makes workers (by index) leave at an epoch (at
/// epoch 0: right after joining, before the master sends their starting caches).
fn run_tcp(workers: usize, epochs: usize, faults: &[(usize, u32)], timeout: Duration) -> RunReport {
    let tcp = TcpConfig::new("t").with_timeout(timeout).with_join_timeout(Duration::from_secs(20));
    let listener = MasterListener::bind("127.0.0.1:0", tcp.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let (addr, tcp, faults) = (addr.clone(), tcp.clone(), faults.to_vec());
            thread::spawn(move || {
                let t = connect_worker(&addr, &tcp).unwrap();
                let worker = t.rank() - 1;
                let exit_at_epoch = faults.iter().find(|f| f.0 == worker).map(|f| f.1);
                if exit_at_epoch == Some(0) {
                    drop(t);
                    return (
                        worker,
                        Ok(WorkerSummary { worker, epochs: 0, exit: WorkerExit::InjectedFailure }),
                    );
                }
                let options = WorkerOptions::default().with_exit_at_epoch(exit_at_epoch);
                (worker, run_worker(t, &options).map_err(|e| e.to_string()))
            })
        })
        .collect();
    let master = listener.accept_workers(workers, |r| panic!("refused {r:?}")).unwrap();
    if faults.iter().any(|f| f.1 == 0) {
        thread::sleep(Duration::from_millis(200)); // until the master's links see it gone
    }
    let data = data();
    let config = config(workers, epochs).check(data.train.len()).unwrap();
    let planner = planner_by_name("coded", &PlannerOptions::default()).unwrap();
    let mut none = NoStragglers::new(workers).unwrap();
    let report = Master::new(master, &config, planner.as_ref(), &mut none, &data)
        .and_then(|m| m.run(&mut |_| {}))
        .unwrap();
    for h in handles {
        let (worker, summary) = h.join().unwrap();
        let summary = summary.unwrap();
        let injected = faults.iter().any(|f| f.0 == worker);
        assert_eq!(summary.exit == WorkerExit::InjectedFailure, injected, "worker {worker}: {summary:?}");
    }
    report
}

#[test]
fn tcp_runs_give_the_numbers_of_in_process_runs() {
    let report = run_tcp(3, 3, &[], Duration::from_secs(5));
    assert_eq!(report.epochs.len(), 3);
    assert!(report.epochs.iter().all(|e| e.broadcast_packets > 0 && e.updates == 3 && e.attempts == 1));
    assert!(report.epochs[2].loss < report.initial_loss / 2.0);
}

#[test]
fn a_worker_leaving_in_the_broadcast_ring_is_survived() {
    // Worker 1 leaves when epoch 2's order reaches it: the master's broadcast fails, so do the
    // survivors' (at once if they saw it gone before the broadcast began, else after waiting
    // out a timeout in the ring), and the epoch restarts without it.
    let timeout = Duration::from_millis(800);
    let started = Instant::now();
    let report = run_tcp(4, 4, &[(1, 2)], timeout);
    assert_eq!(report.lost_workers, vec![1]);
    let e2 = &report.epochs[1];
    assert_eq!((e2.workers, e2.updates, e2.lost_workers.clone()), (3, 3, vec![1]), "{e2:?}");
    for e in &report.epochs[2..] {
        assert_eq!((e.workers, e.updates, e.attempts, e.lost_workers.len()), (3, 3, 1, 0), "{e:?}");
    }
    assert!(report.epochs[3].loss < report.initial_loss / 2.0);
    assert!(started.elapsed() < timeout * 5, "took {:?}", started.elapsed());
}

#[test]
fn a_worker_lost_before_the_first_epoch_is_reported() {
    let report = run_tcp(3, 2, &[(2, 0)], Duration::from_secs(2));
    assert_eq!(report.lost_workers, vec![2]);
    assert_eq!(report.epochs[0].lost_workers, vec![2]);
    assert!(report.epochs.iter().all(|e| e.workers == 2 && e.updates == 2), "{:?}", report.epochs);
}
