//! The small languages of `ubershuffle run`'s own flags (`--bandwidth 1gbit`, `--kill-worker
//! 2@3`); the run's settings proper (`--stragglers iid:0.2`, the data) are the runtime's
//! [`RunSpec`](ubershuffle_runtime::RunSpec).

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use ubershuffle_transport::in_process::LinkShaping;

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
    fn kills_name_a_worker_and_an_epoch() {
        assert_eq!(KillSpec::parse("2@3").unwrap(), KillSpec { worker: 2, epoch: 3 });
        assert!(KillSpec::parse("4@1").unwrap().within(4).unwrap_err().contains("only workers 0..3"));
        for bad in ["2", "2@0", "a@1", "1@b"] {
            assert!(KillSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn specs_print_as_they_parse() {
        assert_eq!(Bandwidth::parse("1gbit").unwrap().to_string(), "1gbit");
        assert_eq!(Bandwidth::parse("500mbit").unwrap().to_string(), "500mbit");
        assert_eq!(KillSpec::parse("1@2").unwrap().to_string(), "1@2");
    }
}
