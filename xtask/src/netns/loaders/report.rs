//! The report of `cargo xtask netns-loaders`: the ranks' logs and the object store's request
//! log turned into rows (per arm, run and epoch, and per rank), the byte counts checked, the
//! issue's goals measured, and the CSVs, the charts (bytes from the object store per epoch;
//! held-out accuracy against wall time), results/README.md's section and README's headline row.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Serialize;
use ubershuffle_bench::report::chart::{LineChart, Series};
use ubershuffle_bench::report::headline::HeadlineRecord;

use super::object_store::BUCKET;
use super::store_reads;
use super::types::{Arm, Job, Setting};
use crate::netns::goal::{Goal, cited, goal_value, median};
use crate::netns::{beside, write_csv};

/// Where the report writes.
pub struct Options<'a> {
    /// The CSV.
    pub out: &'a Path,
    /// Whether results/README.md's section and README's headline are written (default out).
    pub readme: bool,
    /// The short form (its times are not the experiment's).
    pub short: bool,
}

/// One training rank's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    arm: &'static str,
    repeat: usize,
    epoch: usize,
    /// The training rank (0-based among the training ranks).
    place: usize,
    samples: usize,
    epoch_s: f64,
    exposed_s: f64,
    /// The most the node's cache held during the epoch.
    storage_bytes: u64,
    /// The cache limit the arm was given (S, or half a share).
    cache_limit_bytes: u64,
    /// Bytes the object store sent this rank in the epoch (its request log).
    object_store_bytes: u64,
    object_store_requests: usize,
    /// The rank's interface counters over the epoch.
    rx_bytes: u64,
    tx_bytes: u64,
    /// Share of the epoch's samples the rank did not read the epoch before (NaN in epoch 0).
    not_read_before: f64,
    /// Share of the epoch's samples another rank read the epoch before and this one did not.
    from_other_nodes: f64,
}

/// One arm's epoch in one run: what the job did, over its ranks.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    arm: &'static str,
    repeat: usize,
    epoch: usize,
    /// The slowest training rank's epoch time (DDP keeps them in step).
    epoch_s: f64,
    /// The median training rank's exposed data time.
    exposed_s: f64,
    /// Seconds from the job's start to the epoch's end (first training rank).
    wall_s: f64,
    /// Bytes the object store sent in the epoch, to every client.
    object_store_bytes: u64,
    object_store_requests: usize,
    /// The most any node's cache held.
    storage_bytes: u64,
    cache_limit_bytes: u64,
    /// The busiest training rank's received bytes.
    busiest_rx_bytes: u64,
    /// Mean over the ranks.
    not_read_before: f64,
    /// Mean over the ranks.
    from_other_nodes: f64,
    held_out_accuracy: f64,
    /// The most times one record's object was read in the job so far (ShuffleGroup's layout).
    max_object_reads: u64,
    /// Why the job stopped early ("" when it did not).
    error: String,
}

/// The bytes and requests of `requests` from `client` (all when None) within `[from, to)`.
fn served(job: &Job, client: Option<&str>, from: f64, to: f64) -> (u64, usize) {
    job.requests
        .iter()
        .filter(|q| q.method == "GET" || q.method == "HEAD")
        .filter(|q| client.is_none_or(|c| q.client == c) && q.t >= from && q.t < to)
        .fold((0, 0), |(b, n), q| (b + q.bytes, n + 1))
}

/// The epochs' windows on the host clock: epoch e from its first rank's start to the next
/// epoch's (epoch 0 from the job's start, the set-up with it; the last to the job's end), and
/// when the job stopped early, one more: from the last finished epoch's end to the job's end.
fn windows(job: &Job, epochs: usize) -> Vec<(f64, f64)> {
    let over = |e: usize, t: fn(&super::types::EpochLog) -> f64, fold: fn(f64, f64) -> f64, init: f64| {
        job.ranks.iter().filter_map(|r| r.epochs.get(e)).map(t).fold(init, fold)
    };
    let starts: Vec<f64> = (0..epochs).map(|e| over(e, |x| x.t_start, f64::min, f64::INFINITY)).collect();
    let stopped = job.error.is_some();
    let mut out: Vec<(f64, f64)> = (0..epochs)
        .map(|e| {
            let from = if e == 0 { f64::NEG_INFINITY } else { starts[e] };
            let to = if e + 1 < epochs {
                starts[e + 1]
            } else if stopped {
                over(e, |x| x.t_end, f64::max, f64::NEG_INFINITY)
            } else {
                f64::INFINITY
            };
            (from, to)
        })
        .collect();
    if stopped {
        out.push((out.last().map_or(f64::NEG_INFINITY, |w| w.1), f64::INFINITY));
    }
    out
}

/// Reads per object of the record layout, over the requests before `to`.
fn object_reads(job: &Job, to: f64) -> u64 {
    let prefix = format!("/{BUCKET}/objects/");
    let mut count: BTreeMap<&str, u64> = BTreeMap::new();
    for q in job.requests.iter().filter(|q| q.method == "GET" && q.t < to && q.path.starts_with(&prefix)) {
        *count.entry(q.path.as_str()).or_default() += 1;
    }
    count.values().copied().max().unwrap_or(0)
}

fn mean(values: &[f64]) -> f64 {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 }
}

/// Every training rank's epochs of `job`, and the job's epochs.
pub fn job_rows(job: &Job, setting: &Setting) -> (Vec<Row>, Vec<RankRow>) {
    let trainers: Vec<(usize, &super::types::RankLog)> =
        job.ranks.iter().enumerate().filter(|(_, r)| r.role != "store").collect();
    let epochs = trainers.iter().map(|(_, r)| r.epochs.len()).max().unwrap_or(0);
    let wins = windows(job, epochs);
    let limit = setting.cache_bytes(job.arm);
    let mut ranks = Vec::new();
    for (place, (rank, log)) in trainers.iter().enumerate() {
        let address = job.addresses.get(*rank).map(String::as_str);
        for (e, x) in log.epochs.iter().enumerate() {
            let (bytes, requests) = served(job, address, wins[e].0, wins[e].1);
            let (not_before, from_others) = if e == 0 {
                (f64::NAN, f64::NAN)
            } else {
                let mine: BTreeSet<u64> = log.epochs[e - 1].ids.iter().copied().collect();
                let others: BTreeSet<u64> = trainers
                    .iter()
                    .filter(|(r, _)| r != rank)
                    .filter_map(|(_, l)| l.epochs.get(e - 1))
                    .flat_map(|p| p.ids.iter().copied())
                    .collect();
                let n = x.ids.len().max(1) as f64;
                let fresh = x.ids.iter().filter(|i| !mine.contains(i)).count() as f64;
                let moved = x.ids.iter().filter(|i| !mine.contains(i) && others.contains(i)).count() as f64;
                (fresh / n, moved / n)
            };
            ranks.push(RankRow {
                arm: job.arm.name(),
                repeat: job.repeat,
                epoch: e,
                place,
                samples: x.ids.len(),
                epoch_s: x.epoch_seconds,
                exposed_s: x.exposed_seconds,
                storage_bytes: x.storage_bytes,
                cache_limit_bytes: limit,
                object_store_bytes: bytes,
                object_store_requests: requests,
                rx_bytes: x.counters_end.1.saturating_sub(x.counters_start.1),
                tx_bytes: x.counters_end.0.saturating_sub(x.counters_start.0),
                not_read_before: not_before,
                from_other_nodes: from_others,
            });
        }
    }
    let first = trainers.first().map(|(_, l)| *l);
    let rows = (0..epochs)
        .map(|e| {
            let here: Vec<&RankRow> = ranks.iter().filter(|r| r.epoch == e).collect();
            let (bytes, requests) = served(job, None, wins[e].0, wins[e].1);
            let end = first.and_then(|l| l.epochs.get(e));
            Row {
                arm: job.arm.name(),
                repeat: job.repeat,
                epoch: e,
                epoch_s: here.iter().map(|r| r.epoch_s).fold(f64::NAN, f64::max),
                exposed_s: median(here.iter().map(|r| r.exposed_s).collect()),
                wall_s: end.map_or(f64::NAN, |x| x.t_end - job.t0),
                object_store_bytes: bytes,
                object_store_requests: requests,
                storage_bytes: here.iter().map(|r| r.storage_bytes).max().unwrap_or(0),
                cache_limit_bytes: limit,
                busiest_rx_bytes: here.iter().map(|r| r.rx_bytes).max().unwrap_or(0),
                not_read_before: mean(&here.iter().map(|r| r.not_read_before).collect::<Vec<_>>()),
                from_other_nodes: mean(&here.iter().map(|r| r.from_other_nodes).collect::<Vec<_>>()),
                held_out_accuracy: end.and_then(|x| x.held_out_accuracy).unwrap_or(f64::NAN),
                max_object_reads: object_reads(job, wins[e].1),
                error: String::new(),
            }
        })
        .collect();
    let mut rows: Vec<Row> = rows;
    if let Some(error) = &job.error {
        // The epoch it did not finish: what it read from the object store until it stopped.
        let (from, to) = wins[epochs];
        let (bytes, requests) = served(job, None, from, to);
        let end = job.requests.iter().map(|q| q.t).fold(f64::NAN, f64::max);
        rows.push(Row {
            arm: job.arm.name(),
            repeat: job.repeat,
            epoch: epochs,
            epoch_s: f64::NAN,
            exposed_s: f64::NAN,
            wall_s: end - job.t0,
            object_store_bytes: bytes,
            object_store_requests: requests,
            storage_bytes: 0,
            cache_limit_bytes: limit,
            busiest_rx_bytes: 0,
            not_read_before: f64::NAN,
            from_other_nodes: f64::NAN,
            held_out_accuracy: f64::NAN,
            max_object_reads: object_reads(job, to),
            error: error.clone(),
        });
    }
    (rows, ranks)
}

/// The checks of the byte counts, for every job that finished (a failed job of a loader is a
/// result, not a failed check); the first failure of each job.
pub fn checks(jobs: &[Job], setting: &Setting, rows: &[RankRow]) -> Vec<String> {
    let mut failed = Vec::new();
    for job in jobs {
        let name = format!("arm {} run {}", job.arm.name(), job.repeat);
        if let Some(e) = &job.error {
            if job.arm.is_ours() {
                failed.push(format!("{name} failed: {e}"));
            }
            continue;
        }
        let mine: Vec<&RankRow> =
            rows.iter().filter(|r| r.arm == job.arm.name() && r.repeat == job.repeat).collect();
        let trainers = job.ranks.iter().filter(|r| r.role != "store").count();
        if mine.iter().filter(|r| r.epoch + 1 == setting.epochs).count() != trainers {
            failed.push(format!("{name}: not every training rank logged {} epochs", setting.epochs));
            continue;
        }
        // Every byte the store sent went to a rank of the job.
        let total: u64 = served(job, None, f64::NEG_INFINITY, f64::INFINITY).0;
        let known: u64 =
            job.addresses.iter().map(|a| served(job, Some(a), f64::NEG_INFINITY, f64::INFINITY).0).sum();
        if total != known {
            failed.push(format!(
                "{name}: the object store sent {total} bytes, {known} of them to the job's ranks"
            ));
            continue;
        }
        // A rank that trains on a record in epoch 0 read it from the object store then (all
        // arms but s, whose store reads): at least those records' bytes.
        if !job.arm.has_store() {
            for log in job.ranks.iter().filter(|r| r.role != "store") {
                let Some(first) = log.epochs.first() else { continue };
                let ids: BTreeSet<u64> = first.ids.iter().copied().collect();
                let needed: u64 = ids.iter().filter_map(|&i| setting.sizes.get(i as usize)).sum();
                let place = job
                    .ranks
                    .iter()
                    .filter(|r| r.role != "store")
                    .position(|r| r.rank == log.rank)
                    .unwrap_or(0);
                let got = mine
                    .iter()
                    .find(|r| r.epoch == 0 && r.place == place)
                    .map_or(0, |r| r.object_store_bytes);
                if got < needed {
                    failed.push(format!(
                        "{name}: rank {} trained on {needed} bytes of records in epoch 0 but the object store sent it {got}",
                        log.rank
                    ));
                }
            }
        }
        if job.arm == Arm::P {
            let after: u64 = mine.iter().filter(|r| r.epoch > 0).map(|r| r.object_store_bytes).sum();
            if after != 0 {
                failed.push(format!(
                    "{name}: peer mode read {after} bytes from the object store after epoch 0"
                ));
            }
        }
        if job.arm == Arm::S {
            failed.extend(store_reads::check(job, setting).into_iter().map(|f| format!("{name}: {f}")));
        }
    }
    failed
}

/// The median over the runs and the epochs after the first of `f` of `arm`'s rows.
fn med(rows: &[Row], arm: Arm, f: impl Fn(&Row) -> f64) -> f64 {
    median(rows.iter().filter(|r| r.arm == arm.name() && r.epoch > 0 && r.error.is_empty()).map(f).collect())
}

/// Per run of `arm`, `f` of its last epoch.
fn last(rows: &[Row], arm: Arm, f: impl Fn(&Row) -> f64) -> Vec<f64> {
    let runs: BTreeSet<usize> = rows.iter().filter(|r| r.arm == arm.name()).map(|r| r.repeat).collect();
    runs.into_iter()
        .filter_map(|k| {
            rows.iter()
                .filter(|r| r.arm == arm.name() && r.repeat == k && r.error.is_empty())
                .max_by_key(|r| r.epoch)
        })
        .map(f)
        .collect()
}

/// The goals and the figures beside them (medians over the runs and the epochs after
/// the first; accuracy after the last epoch).
pub fn goals(rows: &[Row], jobs: &[Job], setting: &Setting) -> Vec<Goal> {
    let mut out = Vec::new();
    let mut add = |key: String, measure: String, value: f64, goal: &str, met: bool| {
        out.push(Goal { key, measure, value, goal: goal.into(), met });
    };
    let arms: Vec<Arm> = Arm::ALL.into_iter().filter(|a| rows.iter().any(|r| r.arm == a.name())).collect();
    let mb = 1e6;
    for &arm in &arms {
        let a = arm.name();
        let key = a.replace('-', "_");
        let failed = jobs.iter().filter(|j| j.arm == arm && j.error.is_some()).count();
        add(
            format!("{key}_failed_runs"),
            format!("({a}) runs that failed or hung"),
            failed as f64,
            "(information)",
            true,
        );
        let stopped: Vec<&Row> = rows.iter().filter(|r| r.arm == a && !r.error.is_empty()).collect();
        if !stopped.is_empty() {
            add(
                format!("{key}_stopped_after_epochs"),
                format!("({a}) epochs finished before a run stopped (median)"),
                median(stopped.iter().map(|r| r.epoch as f64).collect()),
                "(information)",
                true,
            );
            add(
                format!("{key}_stopped_mb"),
                format!("({a}) MB from the object store in the epoch a run did not finish (median)"),
                median(stopped.iter().map(|r| r.object_store_bytes as f64 / mb).collect()),
                "(information)",
                true,
            );
        }
        add(
            format!("{key}_epoch_s"),
            format!("({a}) epoch time (s)"),
            med(rows, arm, |r| r.epoch_s),
            "(information)",
            true,
        );
        add(
            format!("{key}_exposed_s"),
            format!("({a}) exposed data time per epoch (s)"),
            med(rows, arm, |r| r.exposed_s),
            "(information)",
            true,
        );
        let first = median(
            rows.iter()
                .filter(|r| r.arm == a && r.epoch == 0 && r.error.is_empty())
                .map(|r| r.object_store_bytes as f64 / mb)
                .collect(),
        );
        add(
            format!("{key}_object_store_mb_epoch0"),
            format!("({a}) MB from the object store in epoch 0"),
            first,
            "(information)",
            true,
        );
        let epoch0 = median(
            rows.iter()
                .filter(|r| r.arm == a && r.epoch == 0 && r.error.is_empty())
                .map(|r| r.epoch_s)
                .collect(),
        );
        add(format!("{key}_epoch0_s"), format!("({a}) epoch 0's time (s)"), epoch0, "(information)", true);
        add(
            format!("{key}_epoch0_floor_s"),
            format!("({a}) epoch 0's floor: its bytes from the object store over the store's port (s)"),
            first * mb / setting.rate(),
            "(information)",
            true,
        );
        add(
            format!("{key}_object_store_mb"),
            format!("({a}) MB from the object store per epoch after the first"),
            med(rows, arm, |r| r.object_store_bytes as f64 / mb),
            "(information)",
            true,
        );
        add(
            format!("{key}_storage_mb"),
            format!("({a}) most storage of a node (MB; limit {:.1})", setting.cache_bytes(arm) as f64 / mb),
            med(rows, arm, |r| r.storage_bytes as f64 / mb),
            "(information)",
            true,
        );
        add(
            format!("{key}_from_other_nodes"),
            format!("({a}) share of a rank's samples from other nodes"),
            med(rows, arm, |r| r.from_other_nodes),
            "(information)",
            true,
        );
        add(
            format!("{key}_not_read_before"),
            format!("({a}) share of a rank's samples it did not read the epoch before"),
            med(rows, arm, |r| r.not_read_before),
            "(information)",
            true,
        );
        add(
            format!("{key}_busiest_rx_mb"),
            format!("({a}) busiest training rank's received MB per epoch"),
            med(rows, arm, |r| r.busiest_rx_bytes as f64 / mb),
            "(information)",
            true,
        );
        add(
            format!("{key}_accuracy"),
            format!("({a}) held-out accuracy after the last epoch"),
            median(last(rows, arm, |r| r.held_out_accuracy)),
            "(information)",
            true,
        );
    }
    let g = |key: &str| goal_value(&out, key);
    let p_after = rows
        .iter()
        .filter(|r| r.arm == "p" && r.epoch > 0)
        .map(|r| r.object_store_bytes as f64)
        .fold(f64::NAN, f64::max);
    let p_other_min = rows
        .iter()
        .filter(|r| r.arm == "p" && r.epoch > 0)
        .map(|r| r.from_other_nodes)
        .fold(f64::NAN, f64::min);
    let vs_m = g("p_epoch_s") / g("m_epoch_s");
    let s_reads =
        rows.iter().filter(|r| r.arm == "s").map(|r| r.max_object_reads as f64).fold(f64::NAN, f64::max);
    let finished: Vec<Arm> = arms.iter().copied().filter(|a| !a.is_half()).collect();
    let best = finished.iter().map(|a| g(&format!("{}_accuracy", a.name()))).fold(f64::NAN, f64::max);
    let mut more = vec![
        (
            "p_object_store_bytes_after_first",
            "(p) most bytes from the object store in an epoch after the first".to_string(),
            p_after,
            "= 0",
            p_after == 0.0,
        ),
        (
            "p_from_other_nodes_min",
            "(p) least share of a rank's samples from other nodes in an epoch".to_string(),
            p_other_min,
            "at least Q",
            p_other_min >= setting.fraction - 1e-9,
        ),
        ("p_epoch_vs_m", "(p) epoch time over (m)'s".to_string(), vs_m, "at most 1.05", vs_m <= 1.05),
        (
            "s_max_reads_per_record",
            "(s) most reads of one record from the object store".to_string(),
            s_reads,
            "at most 1",
            s_reads <= 1.0,
        ),
    ];
    for a in &finished {
        let gap = best - g(&format!("{}_accuracy", a.name()));
        more.push((
            match a {
                Arm::M => "m_accuracy_gap",
                Arm::L => "l_accuracy_gap",
                Arm::P => "p_accuracy_gap",
                _ => "s_accuracy_gap",
            },
            format!("({}) held-out accuracy below the best arm's (points)", a.name()),
            gap * 100.0,
            "at most 1",
            gap * 100.0 <= 1.0 + 1e-9,
        ));
    }
    for (key, measure, value, goal, met) in more {
        out.push(Goal { key: key.into(), measure, value, goal: goal.into(), met });
    }
    out.retain(|g| g.value.is_finite());
    out
}

/// MB from the object store per epoch, per arm (the median over the runs).
fn bytes_chart(rows: &[Row], setting: &Setting) -> LineChart {
    let series = Arm::ALL
        .into_iter()
        .filter(|a| rows.iter().any(|r| r.arm == a.name()))
        .map(|a| {
            let points = (0..setting.epochs)
                .map(|e| {
                    let v = median(
                        rows.iter()
                            .filter(|r| r.arm == a.name() && r.epoch == e)
                            .map(|r| r.object_store_bytes as f64 / 1e6)
                            .collect(),
                    );
                    (e as f64, v)
                })
                .collect();
            let name = format!("({}) {}", a.name(), a.describe(setting.fraction));
            if a.is_half() { Series::dashed(name, points) } else { Series::solid(name, points) }
        })
        .collect();
    LineChart {
        title: format!(
            "Bytes from the object store per epoch, {} nodes at {} Mbit/s",
            setting.ranks, setting.mbit
        ),
        x_label: "epoch".into(),
        y_label: "MB from the object store".into(),
        log_x: false,
        log_y: false,
        series,
    }
}

/// Held-out accuracy against wall time, the first run of every arm.
fn accuracy_chart(rows: &[Row], setting: &Setting) -> LineChart {
    let series = Arm::ALL
        .into_iter()
        .filter(|a| rows.iter().any(|r| r.arm == a.name()))
        .map(|a| {
            let points = rows
                .iter()
                .filter(|r| r.arm == a.name() && r.repeat == 0)
                .map(|r| (r.wall_s, r.held_out_accuracy))
                .collect();
            let name = format!("({}) {}", a.name(), a.describe(setting.fraction));
            if a.is_half() { Series::dashed(name, points) } else { Series::solid(name, points) }
        })
        .collect();
    LineChart {
        title: format!(
            "Held-out accuracy against wall time, {} nodes at {} Mbit/s",
            setting.ranks, setting.mbit
        ),
        x_label: "seconds since the job started".into(),
        y_label: "held-out accuracy".into(),
        log_x: false,
        log_y: false,
        series,
    }
}

/// Builds the rows, checks, goals; writes everything; fails (after writing) when a check failed.
pub fn report(options: &Options<'_>, setting: &Setting, jobs: &[Job], root: &Path) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut ranks = Vec::new();
    for job in jobs {
        let (r, k) = job_rows(job, setting);
        rows.extend(r);
        ranks.extend(k);
    }
    let failed = checks(jobs, setting, &ranks);
    let goals = goals(&rows, jobs, setting);
    let out = options.out;
    write_csv(out, &rows)?;
    write_csv(&beside(out, "-ranks.csv"), &ranks)?;
    write_csv(&beside(out, "-summary.csv"), &goals)?;
    for (tail, chart) in
        [("-bytes.svg", bytes_chart(&rows, setting)), ("-accuracy.svg", accuracy_chart(&rows, setting))]
    {
        let svg = chart.to_svg().map_err(|e| anyhow::anyhow!("the chart: {e}"))?;
        std::fs::write(beside(out, tail), svg)
            .with_context(|| format!("cannot write {}", beside(out, tail).display()))?;
    }
    if options.readme {
        write_section(root, setting, &goals, jobs, &rows)?;
        if setting.is_main() {
            publish_headline(root, &goals)?;
        }
    }
    eprintln!("netns-loaders: medians over the runs and the epochs after the first:");
    crate::netns::goal::print_goals(&goals);
    for job in jobs {
        if let Some(e) = &job.error {
            eprintln!("netns-loaders: arm {} run {} stopped: {e}", job.arm.name(), job.repeat);
        }
    }
    if options.short {
        eprintln!(
            "netns-loaders: the short form checks the object store's byte counts and the store's reads (arm s), not the times"
        );
    }
    let shown = out.strip_prefix(root).unwrap_or(out).display();
    eprintln!("xtask: wrote {shown} (and -ranks.csv, -summary.csv, -bytes.svg and -accuracy.svg beside it)");
    if let Some(first) = failed.first() {
        bail!("{} checks failed; the first: {first}", failed.len());
    }
    eprintln!(
        "netns-loaders: the object store's byte counts check out for every arm that finished{}",
        if jobs.iter().any(|j| j.arm == Arm::S) {
            "; arm s's store read every object it needed once, whole, and counted it as the object store did"
        } else {
            ""
        }
    );
    Ok(())
}

/// Replaces results/README.md's section of this run.
fn write_section(
    root: &Path,
    setting: &Setting,
    goals: &[Goal],
    jobs: &[Job],
    rows: &[Row],
) -> anyhow::Result<()> {
    let name = setting.name();
    let repeats = jobs.iter().map(|j| j.repeat + 1).max().unwrap_or(1);
    let mut s = String::new();
    let _ = writeln!(s, "## {name}\n");
    let _ = writeln!(
        s,
        "MosaicML Streaming and LitData beside ShuffleGroup, every arm reading the same {} JPEG records <!-- param --> ({:.1} MB <!-- param -->) from an S3 object store (moto's server in the store's namespace) and training the same CNN under DDP (gloo) for {} epochs <!-- param -->, batches of {} <!-- param -->, each step followed by {} s <!-- param --> of sleep (the compute of a larger model on a GPU, the CPU idle). {} nodes in network namespaces, every port shaped by {} at {} Mbit/s <!-- param -->, MTU {} <!-- param -->; {} interleaved runs <!-- param -->; medians over the runs and the epochs after the first. Every node keeps at most S = (1 + Q) N / M = {:.1} MB <!-- param --> (Q = {} <!-- param -->, what peer mode holds); the half arms {:.1} MB <!-- param -->, half a node's share. MDS shards and LitData chunks of at most {} KB <!-- param -->.",
        setting.records,
        setting.bytes as f64 / 1e6,
        setting.epochs,
        setting.batch,
        setting.compute,
        setting.ranks,
        setting.qdisc,
        setting.mbit,
        setting.mtu,
        repeats,
        setting.storage_bytes() as f64 / 1e6,
        setting.fraction,
        setting.half_bytes() as f64 / 1e6,
        setting.chunk_bytes / 1024
    );
    s.push_str("\nArms: (m) MosaicML Streaming, `cache_limit` S; (l) LitData, `max_cache_size` S; (p) ShuffleGroup peer mode, partial-local; (s) ShuffleGroup store mode, coded, each training rank caching S, the store reading the object store; (m-half), (l-half): m and l with half a node's share. Bytes from the object store are its request log's, per client address; \"from other nodes\": the share of a rank's samples that another rank read the epoch before and this one did not.\n\n");
    s.push_str(&crate::netns::goal::goals_table(&name, goals));
    let failures: Vec<String> = rows
        .iter()
        .filter(|r| !r.error.is_empty())
        .map(|r| {
            format!(
                "- ({}) run {}: `{}` after {} finished epochs, having read {:.1} MB from the object store in the epoch it did not finish",
                r.arm,
                r.repeat,
                r.error.replace('`', "'"),
                r.epoch,
                r.object_store_bytes as f64 / 1e6
            )
        })
        .collect();
    if !failures.is_empty() {
        let _ =
            writeln!(s, "\nRuns that failed or hung, as their ranks logged it:\n\n{}", failures.join("\n"));
    }
    let _ = writeln!(s, "\n![Bytes from the object store per epoch]({name}-bytes.svg)\n");
    let _ = writeln!(s, "![Held-out accuracy against wall time]({name}-accuracy.svg)\n");
    let _ = writeln!(
        s,
        "Data: [`{name}.csv`]({name}.csv) (per arm, run and epoch), [`{name}-ranks.csv`]({name}-ranks.csv) (per rank), [`{name}-summary.csv`]({name}-summary.csv) (the goals). Regenerate (Linux, root): `cargo xtask netns-loaders --repeats {repeats}{}`.",
        if setting.mbit != super::types::MAIN_MBIT {
            format!(" --mbit {}", setting.mbit)
        } else {
            String::new()
        }
    );
    crate::netns::publish::write_section(root, &name, &s)
}

/// netns-loaders' row of `results/headline.csv` from the main run's goals (4 nodes,
/// 100 Mbit/s), each figure cited from `results/netns-loaders-summary.csv`.
pub fn headline_records(goals: &[Goal]) -> Vec<HeadlineRecord> {
    const NAME: &str = "netns-loaders";
    let v = |key: &str, d: usize| cited(NAME, goals, key, d);
    vec![HeadlineRecord {
        experiment: NAME.into(),
        run: "full".into(),
        what: "MosaicML Streaming and LitData beside ShuffleGroup from S3, 4 nodes at 100 Mbit/s<!-- param -->, the same storage per node".into(),
        ours: format!(
            "samples from other nodes per epoch: peer partial-local {}, Streaming {}, LitData {}; MB from the object store per epoch after the first: {} / {} / {}; epoch time over Streaming's {}x",
            v("p_from_other_nodes", 2),
            v("m_from_other_nodes", 2),
            v("l_from_other_nodes", 2),
            v("p_object_store_mb", 1),
            v("m_object_store_mb", 1),
            v("l_object_store_mb", 1),
            v("p_epoch_vs_m", 2)
        ),
        paper: "partial-local shuffling: (1+Q)N/M<!-- paper --> per node, the store read once".into(),
        source: format!("results/{NAME}-summary.csv: key=p_from_other_nodes, m_from_other_nodes, l_from_other_nodes, p_object_store_mb, m_object_store_mb, l_object_store_mb, p_epoch_vs_m"),
        command: format!("cargo xtask {NAME} --repeats 3"),
        machine: true,
    }]
}

/// Replaces netns-loaders' row of `results/headline.csv` and re-renders README's table.
fn publish_headline(root: &Path, goals: &[Goal]) -> anyhow::Result<()> {
    crate::netns::publish::publish_headlines(root, "netns-loaders", headline_records(goals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::loaders::types::{EpochLog, RankLog, Request};

    fn setting() -> Setting {
        Setting {
            ranks: 2,
            mbit: 100.0,
            epochs: 2,
            batch: 2,
            fraction: 0.5,
            sizes: vec![100; 8],
            bytes: 800,
            ..Setting::default()
        }
    }

    fn epoch(e: usize, ids: &[u64]) -> EpochLog {
        let t = 10.0 * (e as f64 + 1.0);
        EpochLog {
            epoch: e,
            t_start: t,
            t_end: t + 5.0,
            epoch_seconds: 5.0,
            ids: ids.to_vec(),
            ..EpochLog::default()
        }
    }

    fn get(t: f64, client: &str, id: u64) -> Request {
        Request {
            t,
            client: client.into(),
            method: "GET".into(),
            path: format!("/{BUCKET}/objects/{id:05}.jpg"),
            bytes: 100,
        }
    }

    /// Two ranks of arm `arm`: rank 0 trains on 0..4 then 2..6, rank 1 on 4..8 then 0..2 and
    /// 6..8; each reads its first epoch's records before epoch 0 ends, and `late` after.
    fn job(arm: Arm, late: Vec<Request>, error: Option<&str>) -> Job {
        let ranks = vec![
            RankLog {
                rank: 0,
                role: "trainer".into(),
                epochs: vec![epoch(0, &[0, 1, 2, 3]), epoch(1, &[2, 3, 4, 5])],
                ..RankLog::default()
            },
            RankLog {
                rank: 1,
                role: "trainer".into(),
                epochs: vec![epoch(0, &[4, 5, 6, 7]), epoch(1, &[0, 1, 6, 7])],
                ..RankLog::default()
            },
        ];
        let mut requests: Vec<Request> =
            (0..4).map(|i| get(5.0, "a0", i)).chain((4..8).map(|i| get(5.0, "a1", i))).collect();
        requests.extend(late);
        Job {
            arm,
            repeat: 0,
            ranks,
            addresses: vec!["a0".into(), "a1".into()],
            requests,
            t0: 0.0,
            error: error.map(String::from),
        }
    }

    fn run(jobs: &[Job]) -> (Vec<Row>, Vec<RankRow>, Vec<String>) {
        let (mut rows, mut ranks) = (Vec::new(), Vec::new());
        for j in jobs {
            let (r, k) = job_rows(j, &setting());
            rows.extend(r);
            ranks.extend(k);
        }
        let failed = checks(jobs, &setting(), &ranks);
        (rows, ranks, failed)
    }

    #[test]
    fn bytes_go_to_their_rank_and_epoch_and_the_mixing_counts_the_other_rank_s_records() {
        let (rows, ranks, failed) = run(&[job(Arm::P, vec![], None)]);
        assert!(failed.is_empty(), "{failed:?}");
        assert_eq!(rows.iter().map(|r| r.object_store_bytes).collect::<Vec<_>>(), [800, 0]);
        assert_eq!(ranks[0].object_store_bytes, 400);
        // Epoch 1: half of each rank's records are new, and they are the other rank's.
        assert_eq!((rows[1].not_read_before, rows[1].from_other_nodes), (0.5, 0.5));
        let goals = goals(&rows, &[job(Arm::P, vec![], None)], &setting());
        let met = |k: &str| goals.iter().find(|g| g.key == k).map(|g| g.met);
        assert_eq!(met("p_object_store_bytes_after_first"), Some(true));
        assert_eq!(met("p_from_other_nodes_min"), Some(true));
    }

    #[test]
    fn reads_after_epoch_0_in_peer_mode_and_a_record_read_twice_by_the_store_fail_the_checks() {
        let (_, _, failed) = run(&[job(Arm::P, vec![get(21.0, "a0", 4)], None)]);
        assert!(failed[0].contains("read 100 bytes from the object store after epoch 0"), "{failed:?}");
        let mut store = job(Arm::S, vec![get(21.0, "a0", 4)], None);
        store.ranks.insert(0, RankLog { rank: 0, role: "store".into(), ..RankLog::default() });
        store.addresses.insert(0, "store".into());
        let (_, _, failed) = run(&[store]);
        assert!(failed.iter().any(|f| f.contains("record 4's object 2 times")), "{failed:?}");
        // A request from outside the job is caught too.
        let (_, _, failed) = run(&[job(Arm::M, vec![get(21.0, "elsewhere", 1)], None)]);
        assert!(failed[0].contains("800 of them to the job's ranks"), "{failed:?}");
    }

    #[test]
    fn a_loader_that_stops_is_a_result_with_what_it_read_until_then() {
        let mut stopped = job(
            Arm::MHalf,
            vec![get(40.0, "a0", 1), get(41.0, "a1", 2)],
            Some("timeout: epoch 2 ran over 180 s"),
        );
        stopped.ranks.iter_mut().for_each(|r| r.error = Some("timeout: epoch 2 ran over 180 s".into()));
        let (rows, _, failed) = run(&[stopped.clone()]);
        assert!(failed.is_empty(), "a loader's failure is not a failed check: {failed:?}");
        let last = rows.last().map(|r| (r.epoch, r.object_store_bytes, r.error.clone()));
        assert_eq!(last, Some((2, 200, "timeout: epoch 2 ran over 180 s".to_string())));
        assert_eq!(rows[1].object_store_bytes, 0, "epoch 1 ends where the unfinished one starts");
        let goals = goals(&rows, &[stopped], &setting());
        assert_eq!(goal_value(&goals, "m_half_failed_runs"), 1.0);
        assert_eq!(goal_value(&goals, "m_half_stopped_mb"), 200.0 / 1e6);
        // Ours failing is a failed check.
        let (_, _, failed) = run(&[job(Arm::P, vec![], Some("ShuffleError: boom"))]);
        assert_eq!(failed, ["arm p run 0 failed: ShuffleError: boom"]);
    }
}
