//! The small languages of `ubershuffle run`'s flags (`--bandwidth 1gbit`, `--stragglers
//! iid:0.2`, `--kill-worker 2@3`) and the data sets its learners train on.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use ubershuffle_codes::Records;
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_learners::data::synthetic::{linear_regression, low_rank};
use ubershuffle_learners::straggler::{
    HeterogeneousParams, HeterogeneousStragglers, IidStragglers, NoStragglers, TwoStateMarkov,
};
use ubershuffle_learners::{LearnerError, StragglerModel};
use ubershuffle_runtime::RunData;
use ubershuffle_transport::in_process::LinkShaping;

/// Stream of the run's seed that draws the heterogeneous model's slow workers (the runtime
/// draws the per-epoch straggling from its own stream).
const SLOW_WORKERS_STREAM: u64 = 0x736c_6f77;

/// `--bandwidth`: the emulated rate of every in-process link, or none (unshaped).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidth(pub Option<LinkShaping>);

impl Bandwidth {
    /// Parses the flag's value ([`parse_bandwidth`]).
    pub fn parse(text: &str) -> Result<Bandwidth, String> {
        parse_bandwidth(text).map(Bandwidth)
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("none"),
            Some(link) => {
                let bits = link.bytes_per_second * 8.0;
                if bits >= 1e9 { write!(f, "{}gbit", bits / 1e9) } else { write!(f, "{}mbit", bits / 1e6) }
            }
        }
    }
}

impl Serialize for Bandwidth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `--bandwidth`: `none`, or a rate such as `1gbit`, `2.5Gbit/s`, `500mbit`, `100kbit`.
pub fn parse_bandwidth(text: &str) -> Result<Option<LinkShaping>, String> {
    let bad = || format!("invalid --bandwidth '{text}': use a rate like 1gbit, 10gbit, 500mbit, or none");
    let lower = text.trim().to_ascii_lowercase();
    if lower == "none" {
        return Ok(None);
    }
    let rate = lower.strip_suffix("/s").unwrap_or(&lower);
    let (number, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)]
        .iter()
        .find_map(|(unit, scale)| rate.strip_suffix(unit).map(|n| (n, *scale)))
        .ok_or_else(bad)?;
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    if !(value > 0.0 && value.is_finite()) {
        return Err(format!("invalid --bandwidth '{text}': the rate must be positive"));
    }
    Ok(Some(LinkShaping::new(value * scale / 8.0, Duration::ZERO)))
}

/// `--stragglers`: which workers hold their updates past the deadline, epoch by epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StragglerSpec {
    /// Nobody straggles on purpose.
    None,
    /// Each worker independently with probability `p` (`iid:P`).
    Iid(f64),
    /// Slow and active classes (`heterogeneous:P_SLOW,P_SS,P_AS`, Johri et al.).
    Heterogeneous(HeterogeneousParams),
    /// A two-state Markov chain per worker (`markov:P_FALL,P_RECOVER`).
    Markov {
        /// Good to bad.
        p_fall: f64,
        /// Bad to good.
        p_recover: f64,
    },
}

impl StragglerSpec {
    /// Parses the flag's value.
    pub fn parse(text: &str) -> Result<StragglerSpec, String> {
        let usage = "use none, iid:P, heterogeneous:P_SLOW,P_SS,P_AS or markov:P_FALL,P_RECOVER";
        let (kind, args) = text.split_once(':').unwrap_or((text, ""));
        let numbers: Result<Vec<f64>, _> = if args.is_empty() {
            Ok(Vec::new())
        } else {
            args.split(',').map(|a| a.trim().parse()).collect()
        };
        let numbers = numbers.map_err(|_| format!("invalid --stragglers '{text}': {usage}"))?;
        match (kind, numbers.as_slice()) {
            ("none", []) => Ok(StragglerSpec::None),
            ("iid", &[p]) => Ok(StragglerSpec::Iid(p)),
            ("heterogeneous", &[p_slow, p_slow_straggle, p_active_straggle]) => {
                Ok(StragglerSpec::Heterogeneous(HeterogeneousParams::new(
                    p_slow,
                    p_slow_straggle,
                    p_active_straggle,
                )))
            }
            ("markov", &[p_fall, p_recover]) => Ok(StragglerSpec::Markov { p_fall, p_recover }),
            _ => Err(format!("invalid --stragglers '{text}': {usage}")),
        }
    }

    /// The flag's value for this model (what [`StragglerSpec::parse`] reads back).
    fn text(&self) -> String {
        match self {
            StragglerSpec::None => "none".into(),
            StragglerSpec::Iid(p) => format!("iid:{p}"),
            StragglerSpec::Heterogeneous(h) => {
                format!("heterogeneous:{},{},{}", h.p_slow, h.p_slow_straggle, h.p_active_straggle)
            }
            StragglerSpec::Markov { p_fall, p_recover } => format!("markov:{p_fall},{p_recover}"),
        }
    }

    /// Whether the model makes anyone straggle.
    pub fn is_none(&self) -> bool {
        *self == StragglerSpec::None
    }

    /// The model for `workers` workers (the heterogeneous model draws its slow workers from
    /// the run's seed).
    pub fn build(&self, workers: usize, seed: u64) -> Result<Box<dyn StragglerModel>, LearnerError> {
        Ok(match *self {
            StragglerSpec::None => Box::new(NoStragglers::new(workers)?),
            StragglerSpec::Iid(p) => Box::new(IidStragglers::new(workers, p)?),
            StragglerSpec::Heterogeneous(params) => Box::new(HeterogeneousStragglers::draw(
                workers,
                params,
                &mut seeded_stream(seed, SLOW_WORKERS_STREAM),
            )?),
            StragglerSpec::Markov { p_fall, p_recover } => {
                Box::new(TwoStateMarkov::new(workers, p_fall, p_recover)?)
            }
        })
    }
}

impl fmt::Display for StragglerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl Serialize for StragglerSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `--kill-worker W@E`: worker `W` (0-based) leaves when epoch `E`'s order reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KillSpec {
    /// The worker, 0-based.
    pub worker: usize,
    /// The epoch, from 1.
    pub epoch: u32,
}

impl KillSpec {
    /// Parses `W@E` (the worker's range is checked once the number of workers is known).
    pub fn parse(text: &str) -> Result<KillSpec, String> {
        let bad =
            || format!("invalid --kill-worker '{text}': use W@E, worker W (0-based) at epoch E (from 1)");
        let (w, e) = text.split_once('@').ok_or_else(bad)?;
        let worker: usize = w.trim().parse().map_err(|_| bad())?;
        let epoch: u32 = e.trim().parse().map_err(|_| bad())?;
        if epoch == 0 {
            return Err(bad());
        }
        Ok(KillSpec { worker, epoch })
    }

    /// The spec if its worker is one of `workers`.
    pub fn within(self, workers: usize) -> Result<KillSpec, String> {
        if self.worker >= workers {
            return Err(format!(
                "--kill-worker {self}: there are only workers 0..{}",
                workers.saturating_sub(1)
            ));
        }
        Ok(self)
    }
}

impl fmt::Display for KillSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.worker, self.epoch)
    }
}

impl Serialize for KillSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Fraction of the generated ratings held out for the loss (matrix completion).
const MATCOMP_HELD_OUT: f64 = 0.1;

/// The seeded synthetic data a run trains on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DataSpec {
    /// `points` training samples `y = w* . x + b* + noise` with `features` inputs, plus
    /// `points / 4` (at least one) held-out samples.
    LinearRegression {
        /// Training samples q.
        points: usize,
        /// Inputs per sample.
        features: usize,
        /// Label noise.
        noise: f64,
    },
    /// A rank-`rank` `rows x cols` matrix observed at `per_row` entries of every row; 10 % of
    /// the entries are held out.
    MatrixCompletion {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Rank.
        rank: usize,
        /// Observed entries per row.
        per_row: usize,
        /// Entry noise.
        noise: f64,
    },
}

impl DataSpec {
    /// Held-out records.
    pub fn held_out(&self) -> usize {
        match *self {
            DataSpec::LinearRegression { points, .. } => (points / 4).max(1),
            DataSpec::MatrixCompletion { rows, per_row, .. } => {
                let total = rows.saturating_mul(per_row);
                ((total as f64 * MATCOMP_HELD_OUT).round() as usize).min(total)
            }
        }
    }

    /// Training records: the data points q that are shuffled.
    pub fn training_points(&self) -> usize {
        match *self {
            DataSpec::LinearRegression { points, .. } => points,
            DataSpec::MatrixCompletion { rows, per_row, .. } => {
                rows.saturating_mul(per_row) - self.held_out()
            }
        }
    }

    /// Generates the data from `seed` (the held-out split from the next seed).
    pub fn build(&self, seed: u64) -> Result<RunData, LearnerError> {
        let split_seed = seed.wrapping_add(1);
        let (train, held_out): (Records, Records) = match *self {
            DataSpec::LinearRegression { points, features, noise } => {
                let held = self.held_out();
                let (all, _) = linear_regression(points + held, features, noise, seed)?;
                let (train, held_out) = all.split(held as f64 / (points + held) as f64, split_seed);
                (train.to_records()?, held_out.to_records()?)
            }
            DataSpec::MatrixCompletion { rows, cols, rank, per_row, noise } => {
                let all = low_rank(rows, cols, rank, per_row, noise, seed)?;
                let (train, held_out) = all.split(MATCOMP_HELD_OUT, split_seed);
                (train.to_records()?, held_out.to_records()?)
            }
        };
        Ok(RunData { train, held_out })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bandwidths_parse_with_units() {
        assert_eq!(parse_bandwidth("none").unwrap(), None);
        let rate = |t: &str| parse_bandwidth(t).unwrap().unwrap().bytes_per_second;
        assert_eq!(rate("1gbit"), 125e6);
        assert_eq!(rate("10Gbit/s"), 1.25e9);
        assert_eq!(rate("500mbit"), 62.5e6);
        assert_eq!(rate("2.5gbit"), 312.5e6);
        for bad in ["1gb", "fast", "gbit", "-1gbit", "0mbit", ""] {
            let e = parse_bandwidth(bad).unwrap_err();
            assert!(e.starts_with("invalid --bandwidth") && !e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn straggler_models_parse_and_check() {
        assert_eq!(StragglerSpec::parse("none").unwrap(), StragglerSpec::None);
        assert_eq!(StragglerSpec::parse("iid:0.2").unwrap(), StragglerSpec::Iid(0.2));
        assert_eq!(
            StragglerSpec::parse("markov:0.1,0.5").unwrap(),
            StragglerSpec::Markov { p_fall: 0.1, p_recover: 0.5 }
        );
        let h = StragglerSpec::parse("heterogeneous:0.3,0.8,0.01").unwrap();
        assert_eq!(h.build(8, 1).unwrap().workers(), 8);
        for bad in ["iid", "iid:x", "iid:0.1,0.2", "markov:0.1", "bursty:0.1", "none:1"] {
            assert!(StragglerSpec::parse(bad).is_err(), "{bad}");
        }
        assert!(StragglerSpec::parse("iid:1.5").unwrap().build(4, 0).is_err());
    }

    #[test]
    fn kills_name_a_worker_and_an_epoch() {
        assert_eq!(KillSpec::parse("2@3").unwrap(), KillSpec { worker: 2, epoch: 3 });
        assert!(KillSpec::parse("4@1").unwrap().within(4).unwrap_err().contains("only workers 0..3"));
        for bad in ["2", "2@0", "a@1", "1@b"] {
            assert!(KillSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn specs_print_as_they_parse() {
        for text in ["none", "iid:0.2", "heterogeneous:0.3,0.8,0.01", "markov:0.1,0.5"] {
            assert_eq!(StragglerSpec::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Bandwidth::parse("1gbit").unwrap().to_string(), "1gbit");
        assert_eq!(Bandwidth::parse("500mbit").unwrap().to_string(), "500mbit");
        assert_eq!(KillSpec::parse("1@2").unwrap().to_string(), "1@2");
    }

    #[test]
    fn data_have_the_announced_sizes() {
        let lin = DataSpec::LinearRegression { points: 40, features: 3, noise: 0.1 };
        let data = lin.build(1).unwrap();
        assert_eq!((data.train.len(), data.held_out.len()), (40, 10));
        let mc = DataSpec::MatrixCompletion { rows: 10, cols: 8, rank: 2, per_row: 5, noise: 0.0 };
        let data = mc.build(1).unwrap();
        assert_eq!((data.train.len(), data.held_out.len()), (mc.training_points(), mc.held_out()));
        assert_eq!(mc.training_points() + mc.held_out(), 50);
        assert_eq!(lin.build(1).unwrap().train, lin.build(1).unwrap().train);
    }
}
