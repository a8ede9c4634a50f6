//! A store delivery replayed on the emulator: the plane's own rounds ([`Rounds`]) sent over the
//! in-process transport with [`LinkShaping`] (single-ported nodes, bytes / rate, no latency)
//! on clocks that count only the links ([`ComputeTime::Charged`], nothing charged), so the
//! prediction is the emulator's link model applied to exactly what the plane sent.
//!
//! Node 0 is the store, node `i + 1` training place `i`. The store sends, round after round,
//! each place its bytes (places in order); each place, per round, receives its store message,
//! sends its relay messages (to `i + 1`, `i + 2`, ... mod n), then receives the relay
//! messages addressed to it, earliest sent first.

use std::thread;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use ubershuffle_transport::in_process::{
    self, ComputeTime, InProcessConfig, InProcessTransport, LinkShaping,
};
use ubershuffle_transport::{Tag, Transport};

use super::model::bytes_per_second;
use super::rounds::Rounds;

/// The store's messages to a place.
const TAG_STORE: Tag = 1;
/// The places' relay messages.
const TAG_RELAY: Tag = 2;
/// The longest wait for one message, on the emulated clock and in real time: beyond any
/// delivery the report replays (a node that fails drops its endpoint, so its peers' waits end
/// at once).
const WAIT: Duration = Duration::from_secs(3600);
/// The largest message replayed: real buffers of this size are sent.
const MAX_MESSAGE: u64 = 1 << 30;

/// The emulated seconds one delivery takes between `ranks` training places at `mbit` Mbit/s:
/// `rounds_store[k][i]` the store's bytes to place `i` in round `k`, `rounds_relay[k][i][j]`
/// place `i`'s to place `j` (missing relay rounds relay nothing). The latest clock over the
/// nodes when each has done its part.
pub fn plane(
    ranks: usize,
    mbit: f64,
    rounds_store: &[Vec<u64>],
    rounds_relay: &[Vec<Vec<u64>>],
) -> anyhow::Result<f64> {
    let rounds = Rounds::new(ranks, rounds_store, rounds_relay)?;
    let largest = rounds.largest_message();
    if largest > MAX_MESSAGE {
        bail!("a message of {largest} bytes, more than the replay sends ({MAX_MESSAGE})");
    }
    let zeros = vec![0u8; usize::try_from(largest).context("a message larger than memory")?];
    let config = InProcessConfig::default()
        .with_timeout(WAIT)
        .with_shaping(Some(LinkShaping::new(bytes_per_second(mbit), Duration::ZERO)))
        .with_compute_time(ComputeTime::Charged);
    let nodes = in_process::cluster(ranks + 1, &config)?;
    let clocks: Vec<anyhow::Result<f64>> = thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .into_iter()
            .enumerate()
            .map(|(node, t)| {
                let (rounds, zeros) = (&rounds, zeros.as_slice());
                scope.spawn(move || node_part(t, node, rounds, zeros))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("an emulated node panicked"))))
            .collect()
    });
    clocks.into_iter().try_fold(0.0, |latest: f64, c| Ok(latest.max(c?)))
}

/// Node `node`'s part of the delivery; returns its clock at the end.
fn node_part(
    mut t: InProcessTransport,
    node: usize,
    rounds: &Rounds<'_>,
    zeros: &[u8],
) -> anyhow::Result<f64> {
    let begun = t.now();
    match node {
        0 => store_part(&mut t, rounds, zeros)?,
        _ => place_part(&mut t, node - 1, rounds, zeros)?,
    }
    Ok(t.now().duration_since(begun).as_secs_f64())
}

/// `len` bytes of `zeros` (at most [`MAX_MESSAGE`], checked before).
fn bytes(zeros: &[u8], len: u64) -> &[u8] {
    &zeros[..usize::try_from(len).unwrap_or(zeros.len()).min(zeros.len())]
}

/// The store: each round, each place its bytes.
fn store_part(t: &mut InProcessTransport, rounds: &Rounds<'_>, zeros: &[u8]) -> anyhow::Result<()> {
    for k in 0..rounds.count() {
        for i in 0..rounds.places() {
            let len = rounds.store(k, i);
            if len > 0 {
                t.send(i + 1, TAG_STORE, bytes(zeros, len))
                    .with_context(|| format!("round {k}: the store"))?;
            }
        }
    }
    Ok(())
}

/// Place `i`: each round, its store message, then its relay out and in.
fn place_part(t: &mut InProcessTransport, i: usize, rounds: &Rounds<'_>, zeros: &[u8]) -> anyhow::Result<()> {
    let n = rounds.places();
    for k in 0..rounds.count() {
        let what = || format!("round {k}: place {i}");
        if rounds.store(k, i) > 0 {
            t.recv(0, TAG_STORE).with_context(what)?;
        }
        for j in (1..n).map(|s| (i + s) % n) {
            let len = rounds.relay(k, i, j);
            if len > 0 {
                t.send(j + 1, TAG_RELAY, bytes(zeros, len)).with_context(what)?;
            }
        }
        // Messages between two nodes with one tag arrive in order, so each sender's first
        // waiting relay message is this round's.
        let mut senders: Vec<usize> = (0..n).filter(|&j| rounds.relay(k, j, i) > 0).map(|j| j + 1).collect();
        while !senders.is_empty() {
            let (from, _) = t.recv_any(&senders, TAG_RELAY).with_context(what)?;
            senders.retain(|&s| s != from);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::measure::BroadcastJob;
    use crate::netns::model;
    use ubershuffle_transport::BroadcastMethod;

    const MBIT: f64 = 100.0;

    #[test]
    fn unicasts_from_the_store_take_their_bytes_over_its_uplink() {
        let store = vec![vec![100_000, 50_000, 0, 25_000], vec![0, 60_000, 70_000, 10_000]];
        let total: u64 = store.iter().flatten().sum();
        let seconds = plane(4, MBIT, &store, &[]).unwrap();
        let ideal = total as f64 / model::bytes_per_second(MBIT);
        assert!((seconds / ideal - 1.0).abs() < 0.01, "{seconds} s against {ideal} s");
    }

    #[test]
    fn a_pseudo_broadcast_pattern_takes_what_the_emulated_pseudo_broadcast_takes() {
        let (m, bytes) = (4usize, 400_000u64);
        let piece = bytes / m as u64;
        let store = vec![vec![piece; m]];
        let relay = vec![vec![vec![piece; m]; m]];
        let replayed = plane(m, MBIT, &store, &relay).unwrap();
        let job = BroadcastJob { bytes, rounds: 1, method: BroadcastMethod::PseudoBroadcast, seed: 1 };
        let emulated = model::broadcast(m, MBIT, &job).unwrap()[0];
        // The pseudo-broadcast's ring and the relay move the same bytes over the same
        // ports: (2m - 1)/m of the buffer's time; the broadcast adds its headers and
        // acknowledgements.
        let ideal =
            BroadcastMethod::PseudoBroadcast.ideal_seconds(bytes as usize, m, model::bytes_per_second(MBIT));
        assert!((replayed / ideal - 1.0).abs() < 0.01, "{replayed} s against the ideal {ideal} s");
        assert!(
            (replayed / emulated - 1.0).abs() < 0.01,
            "{replayed} s against the broadcast's {emulated} s"
        );
    }

    #[test]
    fn rounds_of_the_wrong_width_fail_before_anything_runs() {
        let err = plane(2, MBIT, &[vec![1, 2, 3]], &[]).unwrap_err().to_string();
        assert!(err.starts_with("round 0:"), "{err}");
        assert_eq!(plane(3, MBIT, &[], &[]).unwrap(), 0.0);
    }
}
