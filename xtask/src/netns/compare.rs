//! Measured against modelled: one row per broadcast round or epoch and phase, with the ratio
//! measured / model, and the medians a reader (and the goal) looks at.

use anyhow::bail;
use serde::Serialize;
use ubershuffle_runtime::EpochMetrics;

use super::measure::{BroadcastJob, EpochJob};

/// The goal: measured times within 10 % of the model.
pub const GOAL: f64 = 0.10;

/// What every row of one run shares.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// Worker nodes.
    pub workers: usize,
    /// Rate of every port.
    pub mbit: f64,
    /// The qdisc that shaped the ports.
    pub qdisc: &'static str,
    /// The links' MTU.
    pub mtu: u32,
    /// The cap on the master's TCP send buffers, if any.
    pub master_send_buffer: Option<u32>,
}

/// One row of results/netns.csv.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `broadcast` (`ubershuffle master`) or `epoch-loop` (`ubershuffle run`).
    pub experiment: &'static str,
    /// The broadcast method, or the shuffling scheme.
    pub name: String,
    /// Worker nodes.
    pub workers: usize,
    /// Rate of every port.
    pub mbit: f64,
    /// The qdisc.
    pub qdisc: &'static str,
    /// The links' MTU.
    pub mtu: u32,
    /// The cap on the master's TCP send buffers (empty: the kernel's own).
    pub master_send_buffer: Option<u32>,
    /// The round (broadcast) or epoch, from 1.
    pub round: usize,
    /// `broadcast`, or an epoch's `transmit`, `decode`, `shuffle`, `epoch`.
    pub phase: &'static str,
    /// Payload bytes the master sent (a broadcast counted once).
    pub bytes: u64,
    /// Seconds measured on the master's wall clock between the namespaces.
    pub measured_s: f64,
    /// Seconds of the emulator's model.
    pub model_s: f64,
    /// measured / model.
    pub ratio: f64,
}

/// measured / model (infinite when the model says no time at all).
pub fn ratio(measured: f64, model: f64) -> f64 {
    if model > 0.0 { measured / model } else { f64::INFINITY }
}

/// Whether a ratio meets [`GOAL`].
pub fn within_goal(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= GOAL
}

/// The rows of the broadcasts.
pub fn broadcast_rows(
    setting: &Setting,
    job: &BroadcastJob,
    measured: &[f64],
    model: &[f64],
) -> anyhow::Result<Vec<Row>> {
    if measured.len() != model.len() {
        bail!("{} measured broadcasts against {} modelled", measured.len(), model.len());
    }
    Ok(measured
        .iter()
        .zip(model)
        .enumerate()
        .map(|(k, (&m, &e))| Row {
            experiment: "broadcast",
            name: job.method.name().into(),
            workers: setting.workers,
            mbit: setting.mbit,
            qdisc: setting.qdisc,
            mtu: setting.mtu,
            master_send_buffer: setting.master_send_buffer,
            round: k + 1,
            phase: "broadcast",
            bytes: job.bytes,
            measured_s: m,
            model_s: e,
            ratio: ratio(m, e),
        })
        .collect())
}

/// How a phase's seconds are read from an epoch's metrics.
type PhaseSeconds = fn(&EpochMetrics) -> f64;

/// The phases of an epoch compared.
const EPOCH_PHASES: [(&str, PhaseSeconds); 4] = [
    ("transmit", |e| e.transmit_seconds),
    ("decode", |e| e.decode_seconds),
    ("shuffle", EpochMetrics::shuffle_seconds),
    ("epoch", |e| e.epoch_seconds),
];

/// The rows of the epochs; fails unless both runs sent the same plans (the same packets and
/// bytes epoch by epoch).
pub fn epoch_rows(
    setting: &Setting,
    job: &EpochJob,
    measured: &[EpochMetrics],
    model: &[EpochMetrics],
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    if measured.len() != model.len() {
        bail!("{} measured epochs against {} modelled", measured.len(), model.len());
    }
    for (m, e) in measured.iter().zip(model) {
        let shape =
            |x: &EpochMetrics| (x.transmissions, x.broadcast_packets, x.unicast_packets, x.payload_bytes);
        if shape(m) != shape(e) {
            bail!(
                "{} epoch {}: the measured run sent other plans than the emulated one ({:?} against {:?})",
                job.scheme,
                m.epoch,
                shape(m),
                shape(e)
            );
        }
        for (phase, seconds) in EPOCH_PHASES {
            let (ms, es) = (seconds(m), seconds(e));
            rows.push(Row {
                experiment: "epoch-loop",
                name: job.scheme.clone(),
                workers: setting.workers,
                mbit: setting.mbit,
                qdisc: setting.qdisc,
                mtu: setting.mtu,
                master_send_buffer: setting.master_send_buffer,
                round: m.epoch,
                phase,
                bytes: m.payload_bytes,
                measured_s: ms,
                model_s: es,
                ratio: ratio(ms, es),
            });
        }
    }
    Ok(rows)
}

/// The median of one experiment, name and phase over its rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Median {
    /// The experiment.
    pub experiment: &'static str,
    /// Method or scheme.
    pub name: String,
    /// The phase.
    pub phase: &'static str,
    /// Rounds or epochs.
    pub samples: usize,
    /// Median measured seconds.
    pub measured_s: f64,
    /// Median modelled seconds.
    pub model_s: f64,
    /// Median of the rounds' ratios.
    pub ratio: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The medians of `rows`, in the order their groups first appear.
pub fn medians(rows: &[Row]) -> Vec<Median> {
    let mut groups: Vec<(&'static str, &str, &'static str)> = Vec::new();
    for r in rows {
        let key = (r.experiment, r.name.as_str(), r.phase);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    groups
        .into_iter()
        .map(|(experiment, name, phase)| {
            let of: Vec<&Row> = rows
                .iter()
                .filter(|r| (r.experiment, r.name.as_str(), r.phase) == (experiment, name, phase))
                .collect();
            Median {
                experiment,
                name: name.to_string(),
                phase,
                samples: of.len(),
                measured_s: median(of.iter().map(|r| r.measured_s).collect()),
                model_s: median(of.iter().map(|r| r.model_s).collect()),
                ratio: median(of.iter().map(|r| r.ratio).collect()),
            }
        })
        .collect()
}

/// Whether the goal applies to a phase: the network's own work (a broadcast, an epoch's
/// transmission) and the shuffle. Decode and the whole epoch carry the workers' computing,
/// which the measured cluster runs on the host's shared cores and the model on a core per node.
pub fn goal_applies(phase: &str) -> bool {
    matches!(phase, "broadcast" | "transmit" | "shuffle")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ubershuffle_transport::BroadcastMethod;

    fn setting() -> Setting {
        Setting { workers: 4, mbit: 100.0, qdisc: "tbf", mtu: 9000, master_send_buffer: None }
    }

    #[test]
    fn ratios_and_the_goal() {
        assert_eq!(ratio(1.1, 1.0), 1.1);
        assert_eq!(ratio(1.0, 0.0), f64::INFINITY);
        assert!(within_goal(1.09) && within_goal(0.91) && within_goal(1.0));
        assert!(!within_goal(1.11) && !within_goal(0.89) && !within_goal(f64::INFINITY));
        assert!(goal_applies("transmit") && goal_applies("broadcast") && !goal_applies("epoch"));
    }

    #[test]
    fn broadcast_rows_pair_rounds_and_medians_take_the_middle() {
        let job = BroadcastJob { bytes: 1000, rounds: 3, method: BroadcastMethod::Plain, seed: 0 };
        let rows = broadcast_rows(&setting(), &job, &[1.2, 1.0, 3.0], &[1.0, 1.0, 2.0]).unwrap_or_default();
        let ratios: Vec<f64> = rows.iter().map(|r| r.ratio).collect();
        assert_eq!(ratios, [1.2, 1.0, 1.5]);
        assert_eq!(rows[2].round, 3);
        let m = medians(&rows);
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].samples, m[0].measured_s, m[0].model_s, m[0].ratio), (3, 1.2, 1.0, 1.2));
        assert!(broadcast_rows(&setting(), &job, &[1.0], &[1.0, 2.0]).is_err());
    }

    #[test]
    fn epochs_must_carry_the_same_plans() {
        let job =
            EpochJob { scheme: "coded".into(), epochs: 2, points: 10, features: 1, alpha: 0.5, seed: 0 };
        let epoch = |k: usize, transmit: f64, packets: usize| {
            let mut m = EpochMetrics::default();
            (m.epoch, m.transmissions, m.broadcast_packets, m.payload_bytes) = (k, packets, packets, 100);
            (m.plan_seconds, m.transmit_seconds, m.epoch_seconds) = (0.5, transmit, 4.0);
            m
        };
        let measured = [epoch(1, 2.0, 5), epoch(2, 3.0, 5)];
        let model = [epoch(1, 1.0, 5), epoch(2, 2.0, 5)];
        let rows = epoch_rows(&setting(), &job, &measured, &model).unwrap_or_default();
        assert_eq!(rows.len(), 2 * EPOCH_PHASES.len());
        let shuffle: Vec<f64> = rows.iter().filter(|r| r.phase == "shuffle").map(|r| r.ratio).collect();
        assert_eq!(shuffle, [2.5 / 1.5, 3.5 / 2.5]);
        let transmit = medians(&rows).into_iter().find(|m| m.phase == "transmit").map(|m| m.ratio);
        assert_eq!(transmit, Some(1.75));
        let other_plan = [epoch(1, 2.0, 5), epoch(2, 3.0, 6)];
        let err = epoch_rows(&setting(), &job, &other_plan, &model).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("epoch 2") && err.contains("other plans"), "{err}");
    }
}
