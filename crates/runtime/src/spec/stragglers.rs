//! [`StragglerSpec`]: a straggler model named by a short text (`iid:0.2`), built for a run.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use ubershuffle_core::rng::seeded_stream;
use ubershuffle_learners::straggler::{
    HeterogeneousParams, HeterogeneousStragglers, IidStragglers, NoStragglers, TwoStateMarkov,
};
use ubershuffle_learners::{LearnerError, StragglerModel};

/// Stream of the run's seed that draws the heterogeneous model's slow workers (the runtime
/// draws the per-epoch straggling from its own stream).
const SLOW_WORKERS_STREAM: u64 = 0x736c_6f77;

/// Which workers hold their updates past the deadline, epoch by epoch (`none`, `iid:P`,
/// `heterogeneous:P_SLOW,P_SS,P_AS`, `markov:P_FALL,P_RECOVER`: the serde and command-line form).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum StragglerSpec {
    /// Nobody straggles on purpose.
    #[default]
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
    /// Parses the text form.
    pub fn parse(text: &str) -> Result<StragglerSpec, String> {
        let usage = "use none, iid:P, heterogeneous:P_SLOW,P_SS,P_AS or markov:P_FALL,P_RECOVER";
        let (kind, args) = text.split_once(':').unwrap_or((text, ""));
        let numbers: Result<Vec<f64>, _> = if args.is_empty() {
            Ok(Vec::new())
        } else {
            args.split(',').map(|a| a.trim().parse()).collect()
        };
        let numbers = numbers.map_err(|_| format!("invalid straggler model '{text}': {usage}"))?;
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
            _ => Err(format!("invalid straggler model '{text}': {usage}")),
        }
    }

    /// The text form of this model (what [`StragglerSpec::parse`] reads back).
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

impl<'de> Deserialize<'de> for StragglerSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        StragglerSpec::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn straggler_models_parse_and_check() {
        assert_eq!(StragglerSpec::parse("none"), Ok(StragglerSpec::None));
        assert_eq!(StragglerSpec::parse("iid:0.2"), Ok(StragglerSpec::Iid(0.2)));
        assert_eq!(
            StragglerSpec::parse("markov:0.1,0.5"),
            Ok(StragglerSpec::Markov { p_fall: 0.1, p_recover: 0.5 })
        );
        let h =
            StragglerSpec::parse("heterogeneous:0.3,0.8,0.01").map(|h| h.build(8, 1).map(|m| m.workers()));
        assert!(matches!(h, Ok(Ok(8))));
        for bad in ["iid", "iid:x", "iid:0.1,0.2", "markov:0.1", "bursty:0.1", "none:1"] {
            assert!(StragglerSpec::parse(bad).is_err(), "{bad}");
        }
        assert!(StragglerSpec::parse("iid:1.5").is_ok_and(|s| s.build(4, 0).is_err()));
    }

    #[test]
    fn models_print_as_they_parse() {
        for text in ["none", "iid:0.2", "heterogeneous:0.3,0.8,0.01", "markov:0.1,0.5"] {
            assert_eq!(StragglerSpec::parse(text).map(|s| s.to_string()).as_deref(), Ok(text));
        }
    }
}
