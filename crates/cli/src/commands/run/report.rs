//! What `ubershuffle run` shows and writes: a progress bar on stderr (a line per epoch when
//! stderr is not a terminal), `DIR/epochs.csv` and `DIR/summary.json` after every epoch (each
//! written atomically; the runtime writes `DIR/checkpoint.json`), and at the end a summary
//! table or one JSON object on stdout.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use ubershuffle_runtime::write_atomically;
use ubershuffle_runtime::{EpochMetrics, RunFingerprint, RunReport, metrics_csv};

use super::settings::Resolved;
use crate::output::{print_json, print_line, print_table};

/// The `--out` directory's files.
const CSV: &str = "epochs.csv";
const SUMMARY: &str = "summary.json";

/// The checkpoint's name in `--out DIR` (written by the runtime).
const CHECKPOINT: &str = "checkpoint.json";

/// Prepares `--out DIR`: creates it; refuses a DIR that holds an earlier run unless
/// `--resume` (continue it: the runtime matched its checkpoint to this run when preparing) or
/// `--force` (its files are removed first).
pub fn prepare_out(r: &Resolved) -> anyhow::Result<()> {
    let Some(dir) = &r.out else { return Ok(()) };
    if !r.run.spec.resume {
        let earlier: Vec<&str> =
            [CSV, SUMMARY, CHECKPOINT].into_iter().filter(|f| dir.join(f).exists()).collect();
        match (earlier.is_empty(), r.force) {
            (true, _) => {}
            (false, false) => bail!(
                "--out {} holds an earlier run ({}): give --resume to continue it, --force to replace it, or another folder",
                dir.display(),
                earlier.join(", ")
            ),
            (false, true) => {
                for f in earlier {
                    let path = dir.join(f);
                    std::fs::remove_file(&path)
                        .with_context(|| format!("--force: cannot remove {}", path.display()))?;
                }
            }
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Follows a run epoch by epoch.
pub struct Recorder {
    bar: ProgressBar,
    lines: bool,
    total: usize,
    epochs: Vec<EpochMetrics>,
    out: Option<PathBuf>,
    echo: Value,
    fingerprint: Value,
    json: bool,
    failure: Option<anyhow::Error>,
}

impl Recorder {
    /// A recorder for `r`, the run of `fingerprint`, after the `earlier` epochs of a resumed
    /// run.
    pub fn new(r: &Resolved, fingerprint: &RunFingerprint, earlier: Vec<EpochMetrics>) -> Recorder {
        let bar = ProgressBar::new(r.run.config.epochs as u64);
        if let Ok(style) = ProgressStyle::with_template("epoch {pos}/{len} [{bar:40}] {msg} ({elapsed})") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_position(earlier.len() as u64);
        Recorder {
            lines: bar.is_hidden(),
            bar,
            total: r.run.config.epochs,
            epochs: earlier,
            out: r.out.clone(),
            echo: r.echo.clone(),
            fingerprint: serde_json::to_value(fingerprint).unwrap_or(Value::Null),
            json: r.json,
            failure: None,
        }
    }

    /// Records a finished epoch: the bar (or a line), then the files.
    pub fn on_epoch(&mut self, m: &EpochMetrics) {
        self.epochs.push(m.clone());
        self.bar.inc(1);
        self.bar.set_message(format!("loss {}", number(m.loss)));
        if self.lines {
            let mut lost = if m.lost_workers.is_empty() {
                String::new()
            } else {
                format!(", lost workers {}", list(&m.lost_workers))
            };
            if !m.rejoined_workers.is_empty() {
                lost += &format!(", rejoined workers {}", list(&m.rejoined_workers));
            }
            eprintln!(
                "epoch {}/{} done: {} transmissions (uncoded {}) sent as {} broadcast + {} point-to-point packets, shuffle {:.4} s, epoch {:.4} s, {} updates, {} stragglers, loss {}{lost}",
                m.epoch,
                self.total,
                m.transmissions,
                m.uncoded_transmissions,
                m.broadcast_packets,
                m.unicast_packets,
                m.shuffle_seconds(),
                m.epoch_seconds,
                m.updates,
                m.stragglers,
                number(m.loss)
            );
        }
        if let (Some(dir), None) = (&self.out, &self.failure) {
            let doc = document(&self.echo, &self.fingerprint, &self.epochs, None);
            if let Err(e) = write_files(dir, &self.epochs, &doc) {
                self.failure = Some(e);
            }
        }
    }

    /// Ends the run: the final files, then the table or the JSON object.
    pub fn finish(mut self, report: &RunReport) -> anyhow::Result<ExitCode> {
        self.bar.finish_and_clear();
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        let doc = document(&self.echo, &self.fingerprint, &report.epochs, Some(report));
        if let Some(dir) = &self.out {
            write_files(dir, &report.epochs, &doc)?;
        }
        if self.json {
            print_json(&doc)?;
        } else {
            print_summary(&self.echo, report)?;
        }
        Ok(ExitCode::SUCCESS)
    }

    /// Ends a run that failed: the bar goes; the files keep the completed epochs.
    pub fn abandon(self) {
        self.bar.finish_and_clear();
    }
}

fn write_files(dir: &Path, epochs: &[EpochMetrics], doc: &Value) -> anyhow::Result<()> {
    write_atomically(&dir.join(CSV), metrics_csv(epochs)?.as_bytes())?;
    let text = serde_json::to_string_pretty(doc)? + "\n";
    Ok(write_atomically(&dir.join(SUMMARY), text.as_bytes())?)
}

fn mean(epochs: &[EpochMetrics], f: impl Fn(&EpochMetrics) -> f64) -> f64 {
    epochs.iter().map(f).sum::<f64>() / epochs.len().max(1) as f64
}

/// The JSON document of a run (`--json`, `DIR/summary.json`): the configuration, every epoch,
/// and totals; `end` is the finished run's report (`None` while it runs).
fn document(echo: &Value, fingerprint: &Value, epochs: &[EpochMetrics], end: Option<&RunReport>) -> Value {
    let rows: Vec<Value> = epochs
        .iter()
        .map(|m| {
            let mut row = serde_json::to_value(m).unwrap_or(Value::Null);
            row["shuffle_seconds"] = json!(m.shuffle_seconds());
            row["packets_sent"] = json!(m.packets_sent());
            row
        })
        .collect();
    let sum = |f: fn(&EpochMetrics) -> u64| epochs.iter().map(f).sum::<u64>();
    let lost: Vec<usize> = epochs.iter().flat_map(|m| m.lost_workers.iter().copied()).collect();
    json!({
        "config": echo,
        "fingerprint": fingerprint,
        "complete": end.is_some(),
        "epochs": rows,
        "totals": {
            "epochs": epochs.len(),
            "mean_shuffle_seconds": mean(epochs, EpochMetrics::shuffle_seconds),
            "mean_epoch_seconds": mean(epochs, |m| m.epoch_seconds),
            "mean_transmit_seconds": mean(epochs, |m| m.transmit_seconds),
            "mean_train_seconds": mean(epochs, |m| m.train_seconds),
            "transmissions": sum(|m| m.transmissions as u64),
            "uncoded_transmissions": sum(|m| m.uncoded_transmissions as u64),
            "broadcast_packets": sum(|m| m.broadcast_packets as u64),
            "unicast_packets": sum(|m| m.unicast_packets as u64),
            "packets_sent": sum(|m| m.packets_sent() as u64),
            "payload_bytes": sum(|m| m.payload_bytes),
            "broadcast_bytes": sum(|m| m.broadcast_bytes),
            "unicast_bytes": sum(|m| m.unicast_bytes),
            "epochs_without_coding_gain": epochs.iter().filter(|m| lost_the_gain(m)).count(),
            "updates": sum(|m| m.updates as u64),
            "stragglers": sum(|m| m.stragglers as u64),
            "initial_loss": end.map(|r| r.initial_loss),
            "final_loss": epochs.last().map(|m| m.loss),
            "lost_workers": lost,
            "mean_owner_entropy_bits": mean(epochs, |m| m.owner_entropy_bits),
            "mean_stay_fraction": mean(epochs, |m| m.stay_fraction),
            "owner_chi_square_per_df": epochs.last().and_then(|m| m.owner_chi_square_per_df),
        },
    })
}

/// Whether an epoch's plan was coded but what went on the wire was not: every packet sent point
/// to point, as many as uncoded shuffling would send, or more.
fn lost_the_gain(m: &EpochMetrics) -> bool {
    m.transmissions < m.uncoded_transmissions && m.packets_sent() >= m.uncoded_transmissions
}

/// A loss or time in a readable width.
fn number(x: f64) -> String {
    if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e5) { format!("{x:.3e}") } else { format!("{x:.5}") }
}

fn list(items: &[usize]) -> String {
    items.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}

/// The per-epoch table and the totals.
fn print_summary(echo: &Value, report: &RunReport) -> anyhow::Result<()> {
    print_line(&epoch_table(&report.epochs))?;
    print_line("")?;
    print_table(&totals(echo, report))
}

/// One row per epoch, right-aligned but the last column (the loss and any lost or rejoined
/// workers).
fn epoch_table(epochs: &[EpochMetrics]) -> String {
    let header = [
        "epoch",
        "transmissions",
        "uncoded",
        "broadcast",
        "unicast",
        "shuffle s",
        "transmit s",
        "train s",
        "updates",
        "stragglers",
        "loss",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for m in epochs {
        let mut loss = number(m.loss);
        if !m.rejoined_workers.is_empty() {
            loss += &format!("  (rejoined worker {})", list(&m.rejoined_workers));
        }
        if !m.lost_workers.is_empty() {
            loss += &format!("  (lost worker {})", list(&m.lost_workers));
        }
        rows.push(vec![
            m.epoch.to_string(),
            m.transmissions.to_string(),
            m.uncoded_transmissions.to_string(),
            m.broadcast_packets.to_string(),
            m.unicast_packets.to_string(),
            format!("{:.4}", m.shuffle_seconds()),
            format!("{:.4}", m.transmit_seconds),
            format!("{:.4}", m.train_seconds),
            m.updates.to_string(),
            m.stragglers.to_string(),
            loss,
        ]);
    }
    let widths: Vec<usize> =
        (0..header.len()).map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0)).collect();
    let line = |r: &Vec<String>| {
        let last = r.len() - 1;
        let cells = r.iter().zip(&widths).enumerate();
        cells
            .map(|(c, (cell, &w))| if c == last { cell.clone() } else { format!("{cell:>w$}") })
            .collect::<Vec<_>>()
    };
    rows.iter().map(|r| line(r).join("  ")).collect::<Vec<_>>().join("\n")
}

/// The run's totals as (label, value) rows.
fn totals(echo: &Value, report: &RunReport) -> Vec<(&'static str, String)> {
    let e = &report.epochs;
    let text = |k: &str| echo[k].as_str().map_or_else(|| echo[k].to_string(), str::to_string);
    let transmissions: usize = e.iter().map(|m| m.transmissions).sum();
    let uncoded: usize = e.iter().map(|m| m.uncoded_transmissions).sum();
    let share = |count: usize| {
        if uncoded > 0 {
            format!(" ({:.1} % of uncoded {uncoded})", 100.0 * count as f64 / uncoded as f64)
        } else {
            String::new()
        }
    };
    let (broadcasts, unicasts): (usize, usize) =
        e.iter().fold((0, 0), |(b, u), m| (b + m.broadcast_packets, u + m.unicast_packets));
    let (broadcast_bytes, unicast_bytes): (u64, u64) =
        e.iter().fold((0, 0), |(b, u), m| (b + m.broadcast_bytes, u + m.unicast_bytes));
    let without_gain: Vec<usize> = e.iter().filter(|m| lost_the_gain(m)).map(|m| m.epoch).collect();
    let fallback = if without_gain.is_empty() {
        String::new()
    } else {
        format!("; epochs {} sent every packet point to point (no coding gain)", list(&without_gain))
    };
    let (workers, cache, transport) = (text("workers"), text("cache-capacity"), text("transport"));
    let last_loss = e.last().map_or_else(|| "-".into(), |m| number(m.loss));
    let sent = format!(
        "{broadcasts} broadcast + {unicasts} point-to-point packets{}{fallback}",
        share(broadcasts + unicasts)
    );
    let mut rows = vec![
        ("scheme", format!("{} ({} policy)", text("scheme"), text("policy"))),
        ("learner", format!("{} on {} training points", text("learner"), text("training-points"))),
        ("cluster", format!("{workers} workers, cache {cache} points each, {transport} transport")),
        ("epochs", e.len().to_string()),
        ("mean shuffle", format!("{:.4} s", mean(e, EpochMetrics::shuffle_seconds))),
        ("mean epoch", format!("{:.4} s", mean(e, |m| m.epoch_seconds))),
        ("planned transmissions", format!("{transmissions}{}", share(transmissions))),
        ("sent on the wire", sent),
        ("payload bytes", format!("{broadcast_bytes} broadcast, {unicast_bytes} point to point")),
        ("loss", format!("{} -> {last_loss}", number(report.initial_loss))),
        ("randomness", randomness(e)),
        (
            "lost workers",
            if report.lost_workers.is_empty() { "none".into() } else { list(&report.lost_workers) },
        ),
    ];
    if let Some(chosen) = echo["chosen"].as_str() {
        rows.push(("chosen", chosen.to_string()));
    }
    rows
}

/// The randomness statistics of the run's assignments, in a line.
fn randomness(e: &[EpochMetrics]) -> String {
    format!(
        "H(next | previous owner) {:.3} bits (uniform: {:.3}), {:.1} % of points stay, chi-square/df over epochs {}",
        mean(e, |m| m.owner_entropy_bits),
        (e.first().map_or(1, |m| m.workers).max(1) as f64).log2(),
        100.0 * mean(e, |m| m.stay_fraction),
        e.last().and_then(|m| m.owner_chi_square_per_df).map_or_else(|| "-".into(), |c| format!("{c:.2}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coded_plan_sent_point_to_point_shows_as_lost_gain() {
        let mut coded = EpochMetrics::default();
        (coded.transmissions, coded.uncoded_transmissions) = (40, 100);
        (coded.broadcast_packets, coded.unicast_packets) = (35, 5);
        let mut fell_back = coded.clone();
        (fell_back.broadcast_packets, fell_back.unicast_packets) = (0, 100);
        let mut uncoded = fell_back.clone();
        uncoded.transmissions = 100;
        assert!(!lost_the_gain(&coded) && lost_the_gain(&fell_back) && !lost_the_gain(&uncoded));
        let doc = document(&Value::Null, &Value::Null, &[coded, fell_back], None);
        assert_eq!(doc["totals"]["epochs_without_coding_gain"], 1);
        assert_eq!(doc["totals"]["packets_sent"], 140);
        assert_eq!(doc["totals"]["broadcast_packets"], 35);
    }
}
