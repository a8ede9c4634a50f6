//! The conformance suite on the in-process and TCP transports (MPI's runs under mpirun:
//! `cargo xtask mpi-test`).

#![allow(clippy::unwrap_used)]

use std::thread;

use ubershuffle_transport::conformance::run_on_threads;
use ubershuffle_transport::in_process::{self, ComputeTime, InProcessConfig, LinkShaping};
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, TcpTransport, connect_worker};
use ubershuffle_transport::{BroadcastMethod, Transport};

fn report(result: Result<(), Vec<ubershuffle_transport::conformance::Failure>>) {
    if let Err(failures) = result {
        let lines: Vec<String> = failures.iter().map(ToString::to_string).collect();
        panic!("conformance failed:\n{}", lines.join("\n"));
    }
}

#[test]
fn in_process_pseudo_broadcast() {
    let config = InProcessConfig::default();
    report(run_on_threads(in_process::cluster(4, &config).unwrap()));
}

#[test]
fn in_process_plain_broadcast() {
    let config = InProcessConfig::default().with_broadcast(BroadcastMethod::Plain);
    report(run_on_threads(in_process::cluster(5, &config).unwrap()));
}

#[test]
fn in_process_emulated() {
    let shaping = LinkShaping::new(4e9, std::time::Duration::from_micros(50));
    let config = InProcessConfig::default().with_shaping(Some(shaping));
    report(run_on_threads(in_process::cluster(3, &config).unwrap()));
}

#[test]
fn in_process_emulated_charged() {
    let shaping = LinkShaping::gbit_per_second(1.0);
    let config = InProcessConfig::default()
        .with_shaping(Some(shaping))
        .with_compute_time(ComputeTime::Charged)
        .with_broadcast(BroadcastMethod::Plain);
    report(run_on_threads(in_process::cluster(4, &config).unwrap()));
}

/// A master and `workers` workers on 127.0.0.1, each on its own thread.
pub fn tcp_cluster(workers: usize, config: &TcpConfig) -> Vec<TcpTransport> {
    let listener = MasterListener::bind("127.0.0.1:0", config.clone()).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let joins: Vec<_> = (0..workers)
        .map(|_| {
            let (addr, config) = (addr.clone(), config.clone());
            thread::spawn(move || connect_worker(&addr, &config).unwrap())
        })
        .collect();
    let master = listener.accept_workers(workers, |r| panic!("refused {r:?}")).unwrap();
    let mut all = vec![master];
    all.extend(joins.into_iter().map(|j| j.join().unwrap()));
    all.sort_by_key(|t| t.rank());
    all
}

#[test]
fn tcp_pseudo_broadcast() {
    report(run_on_threads(tcp_cluster(3, &TcpConfig::new("conformance"))));
}

#[test]
fn tcp_plain_broadcast() {
    let config = TcpConfig::new("conformance").with_broadcast(BroadcastMethod::Plain);
    report(run_on_threads(tcp_cluster(3, &config)));
}
