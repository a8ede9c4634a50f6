//! The emulated in-process cluster: per-rank clocks driven by the link model and by charged
//! computing, any-source receives in emulated arrival order whatever the host ran first, and
//! identical times from run to run in charged mode.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::thread;
use std::time::Duration;

use ubershuffle_transport::in_process::{
    self, ComputeTime, InProcessConfig, InProcessTransport, LinkShaping,
};
use ubershuffle_transport::{Transport, TransportError};

const RATE: f64 = 1e6; // 1 byte per microsecond
const US: Duration = Duration::from_micros(1);

fn emulated(size: usize) -> Vec<InProcessTransport> {
    let config = InProcessConfig::default()
        .with_shaping(Some(LinkShaping::new(RATE, Duration::ZERO)))
        .with_compute_time(ComputeTime::Charged);
    in_process::cluster(size, &config).unwrap()
}

/// Runs `body` at every rank on its own thread; returns each rank's result in rank order.
fn on_threads<R: Send + 'static>(
    ranks: Vec<InProcessTransport>,
    body: fn(&mut InProcessTransport) -> R,
) -> Vec<R> {
    let handles: Vec<_> = ranks.into_iter().map(|mut t| thread::spawn(move || body(&mut t))).collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn a_message_costs_its_bytes_on_both_ports_and_the_receiver_waits_for_it() {
    let times = on_threads(emulated(2), |t| {
        if t.rank() == 1 {
            t.charge(Duration::from_millis(2)); // computing before the send
            t.send(0, 1, &[7; 1000]).unwrap();
        } else {
            t.recv(1, 1).unwrap();
        }
        t.emulated_time().unwrap()
    });
    // The sender's port is busy for 1000 bytes after its 2 ms of computing; the receiver's
    // clock becomes the arrival.
    assert_eq!(times, vec![Duration::from_millis(2) + 1000 * US, Duration::from_millis(2) + 1000 * US]);
}

#[test]
fn a_busy_downlink_queues_messages_from_several_senders() {
    let times = on_threads(emulated(3), |t| {
        if t.rank() == 0 {
            let mut arrivals = Vec::new();
            let mut waiting = vec![1, 2];
            while !waiting.is_empty() {
                let (from, _) = t.recv_any(&waiting, 1).unwrap();
                waiting.retain(|&r| r != from);
                arrivals.push(t.emulated_time().unwrap());
            }
            arrivals
        } else {
            t.send(0, 1, &[1; 500]).unwrap();
            vec![t.emulated_time().unwrap()]
        }
    });
    assert_eq!(times[0], vec![500 * US, 1000 * US], "the second waits for the first on the downlink");
    assert_eq!(times[1], vec![500 * US]);
}

#[test]
fn any_source_receives_take_the_earliest_emulated_arrival_not_the_first_delivered() {
    let order = on_threads(emulated(3), |t| match t.rank() {
        0 => {
            let (first, _) = t.recv_any(&[1, 2], 1).unwrap();
            let (second, _) = t.recv_any(&[3 - first], 1).unwrap();
            vec![first, second]
        }
        1 => {
            // Delivered last in real time, but sent at emulated time 0.
            thread::sleep(Duration::from_millis(100));
            t.send(0, 1, b"early").unwrap();
            vec![]
        }
        _ => {
            t.pass(Duration::from_secs(1));
            t.send(0, 1, b"late").unwrap();
            vec![]
        }
    });
    assert_eq!(order[0], vec![1, 2]);
}

#[test]
fn a_bound_on_the_emulated_clock_times_out_without_losing_the_message() {
    let outcome = on_threads(emulated(2), |t| {
        if t.rank() == 1 {
            t.pass(Duration::from_millis(50));
            t.send(0, 1, b"x").unwrap();
            return (Duration::ZERO, Duration::ZERO);
        }
        let early = t.recv_within(1, 1, Duration::from_millis(10));
        assert!(matches!(early, Err(TransportError::Timeout { peer: 1, .. })), "{early:?}");
        let after_timeout = t.emulated_time().unwrap();
        t.recv_within(1, 1, Duration::from_millis(100)).unwrap();
        (after_timeout, t.emulated_time().unwrap())
    });
    assert_eq!(outcome[0], (Duration::from_millis(10), Duration::from_millis(50) + US));
}

#[test]
fn charged_runs_repeat_exactly_and_broadcasts_follow_the_ring_model() {
    fn run() -> Vec<Duration> {
        on_threads(emulated(5), |t| {
            t.charge(Duration::from_micros(30 * t.rank() as u64));
            let mut buf = if t.rank() == 0 { vec![3u8; 40_000] } else { Vec::new() };
            t.broadcast(0, &mut buf).unwrap();
            assert_eq!(buf.len(), 40_000);
            t.barrier().unwrap();
            t.emulated_time().unwrap()
        })
    }
    let first = run();
    assert_eq!(first, run());
    // Pseudo-broadcast of 40 000 bytes to 4 receivers: at least (2m - 1)/m of the bytes' time.
    let ideal = Duration::from_secs_f64(7.0 / 4.0 * 40_000.0 / RATE);
    assert!(first[0] >= ideal && first[0] < ideal + Duration::from_millis(1), "{first:?}");
}
