//! `broadcast`: the UberShuffle paper's pseudo-broadcast (Section 3.1, scatter + ring) against
//! the plain "master sends to each worker" broadcast.
//!
//! Two settings: the in-process transport shaped to 1 Gbit/s single-ported links (an emulated
//! cluster: every node sends one message at a time and receives one at a time at the link
//! rate, no latency), where each time stands next to the paper's ideal, `(2n-1)/n * size/B`
//! for pseudo-broadcast and `n * size/B` for plain; and TCP on loopback (unshaped, all ranks as
//! threads of this process on this machine's cores). Every broadcast is the demo of
//! `ubershuffle master`: seeded payloads, each worker checks every byte. Times are the median
//! of 5 rounds (over TCP, of 30: six sealed clusters and six plain-text ones, measured in
//! turn), measured at the master from a barrier to the return of its broadcast (which
//! waits for every worker's acknowledgement), on the transport's clock: emulated time on the
//! shaped links (so that 17 emulated nodes on 2 cores measure the modelled network, not the
//! emulator's copies and thread wake-ups; see `ubershuffle_transport::in_process`), real time over TCP.
//! Rows with one worker are single unicasts: they show how exactly the shaping holds `size/B`.
//!
//! Every measured time is a machine column: the emulated nodes count their computing (the
//! demo's checks between rounds) in their threads' CPU time, which varies a little from run to
//! run (see `ubershuffle_transport::in_process`).

use std::thread;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use serde::Serialize;
use ubershuffle_runtime::broadcast_demo::{DemoError, DemoJob, RoundTime, run_master, run_worker};
use ubershuffle_transport::BroadcastMethod;
use ubershuffle_transport::in_process::{self, InProcessConfig, LinkShaping};
use ubershuffle_transport::tcp::{MasterListener, TcpConfig, connect_worker};

use super::Context;
use crate::report::citation::cited;
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "broadcast";
/// What it shows.
pub const ABOUT: &str = "Pseudo-broadcast (scatter + ring, UberShuffle Section 3.1) against plain broadcast on emulated 1 Gbit/s links and TCP loopback";

const MIB: usize = 1 << 20;
const WORKERS: [usize; 3] = [4, 8, 16];
const ROUNDS: u32 = 5;
const GBIT: f64 = 1.0;
const METHODS: [BroadcastMethod; 2] = [BroadcastMethod::PseudoBroadcast, BroadcastMethod::Plain];
/// The efficiency (ideal / measured) pseudo-broadcast aims at on the shaped links.
const GOAL: f64 = 0.9;
const SHAPED: &str = "in-process-1gbit";
/// TCP on loopback, sealed (the default).
const LOOPBACK: &str = "tcp-loopback";
/// Whose AEAD seals the links in this build.
const CRYPTO: &str = ubershuffle_transport::seal::AEAD_BACKEND;
/// TCP on loopback with `--insecure-plaintext`: what sealing costs.
const PLAINTEXT: &str = "tcp-loopback-plaintext";
const UNICAST: &str = "unicast";

/// The two settings.
#[derive(Clone, Copy, PartialEq)]
enum Setting {
    Shaped,
    Loopback,
    LoopbackPlaintext,
}

impl Setting {
    fn name(self) -> &'static str {
        match self {
            Setting::Shaped => SHAPED,
            Setting::Loopback => LOOPBACK,
            Setting::LoopbackPlaintext => PLAINTEXT,
        }
    }
}

/// One measured configuration: the median of [`ROUNDS`] broadcasts ([`LOOPBACK_TURNS`] times as
/// many over TCP).
#[derive(Clone, Debug, Serialize)]
struct Measured {
    transport: &'static str,
    method: &'static str,
    workers: usize,
    bytes: usize,
    median_seconds: f64,
    median_wall_seconds: f64,
    ideal_seconds: Option<f64>,
    ideal_over_measured: Option<f64>,
}

impl Row for Measured {
    const MACHINE_COLUMNS: &'static [&'static str] =
        &["median_seconds", "median_wall_seconds", "ideal_over_measured"];
}

/// Worker counts over TCP loopback: the quick run measures 4 (where the sealing cost is
/// quoted), the full run every count of [`WORKERS`].
fn loopback_workers(quick: bool) -> &'static [usize] {
    if quick { &WORKERS[..1] } else { &WORKERS }
}

/// Runs the sweep.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sizes_mib: &[usize] = if ctx.quick { &[1, 4, 16] } else { &[1, 4, 16, 64, 256] };
    let rows = measure_all(ctx, sizes_mib, loopback_workers(ctx.quick))?;
    let summary = summary(&rows, sizes_mib)
        + &ctx.quick_note(
            "sizes 1, 4 and 16 MiB, over TCP loopback to 4 workers; the full run adds 64 and 256 MiB, and 8 and 16 \
             workers over TCP",
        );
    Ok(Report::new(summary)
        .table(format!("{NAME}.csv"), &rows)?
        .figure("", shaped_chart(&rows, sizes_mib))
        .figure("tcp", loopback_chart(&rows, sizes_mib))
        .headlines(headline(&rows, ctx.results_dir())))
}

/// Sealed and plain-text loopback clusters of one configuration are measured in turn this many
/// times (a fresh cluster of [`ROUNDS`] broadcasts each) and their rounds pooled, so that the
/// two settings meet the same spells of a shared machine's load and their ratio (what sealing
/// costs) is not one cluster's luck.
const LOOPBACK_TURNS: usize = 6;

fn measure_all(ctx: &Context, sizes_mib: &[usize], loopback: &[usize]) -> anyhow::Result<Vec<Measured>> {
    let configs = 1 + METHODS.len() * (WORKERS.len() + loopback.len() * LOOPBACK_TURNS * 2);
    let bar = ctx.progress((sizes_mib.len() * configs) as u64, NAME);
    let mut rows = Vec::new();
    for &mib in sizes_mib {
        let bytes = mib * MIB;
        rows.push(row(
            Setting::Shaped,
            BroadcastMethod::PseudoBroadcast,
            1,
            bytes,
            &timed(Setting::Shaped, BroadcastMethod::PseudoBroadcast, 1, bytes)?,
        ));
        bar.inc(1);
        for &n in &WORKERS {
            for method in METHODS {
                rows.push(row(Setting::Shaped, method, n, bytes, &timed(Setting::Shaped, method, n, bytes)?));
                bar.inc(1);
            }
        }
        let mut plain_rows = Vec::new();
        for &n in loopback {
            for method in METHODS {
                let (mut sealed, mut plain) = (Vec::new(), Vec::new());
                for _ in 0..LOOPBACK_TURNS {
                    sealed.extend(timed(Setting::Loopback, method, n, bytes)?);
                    plain.extend(timed(Setting::LoopbackPlaintext, method, n, bytes)?);
                    bar.inc(2);
                }
                rows.push(row(Setting::Loopback, method, n, bytes, &sealed));
                plain_rows.push(row(Setting::LoopbackPlaintext, method, n, bytes, &plain));
            }
        }
        rows.extend(plain_rows);
    }
    bar.finish_and_clear();
    Ok(rows)
}

/// [`measure`], its error naming the configuration.
fn timed(
    setting: Setting,
    method: BroadcastMethod,
    workers: usize,
    bytes: usize,
) -> anyhow::Result<Vec<RoundTime>> {
    measure(setting, method, workers, bytes)
        .with_context(|| format!("{} {} to {workers} workers, {bytes} bytes", setting.name(), method.name()))
}

/// The row of one configuration: the medians of its rounds' times.
fn row(
    setting: Setting,
    method: BroadcastMethod,
    workers: usize,
    bytes: usize,
    times: &[RoundTime],
) -> Measured {
    let rate = GBIT * 1e9 / 8.0;
    let ideal = (setting == Setting::Shaped).then(|| method.ideal_seconds(bytes, workers, rate));
    let seconds = median(times.iter().map(|t| t.seconds));
    Measured {
        transport: setting.name(),
        method: if workers == 1 { UNICAST } else { method.name() },
        workers,
        bytes,
        median_seconds: seconds,
        median_wall_seconds: median(times.iter().map(|t| t.wall_seconds)),
        ideal_seconds: ideal,
        ideal_over_measured: ideal.map(|i| i / seconds),
    }
}

/// Runs the demo on a fresh cluster of `workers` workers; returns the rounds' times.
fn measure(
    setting: Setting,
    method: BroadcastMethod,
    workers: usize,
    bytes: usize,
) -> anyhow::Result<Vec<RoundTime>> {
    let job = DemoJob::new(ROUNDS, bytes as u64, bytes as u64 ^ workers as u64);
    // One wait may be a whole plain broadcast at 1 Gbit/s (16 x 256 MiB = 34 s).
    let timeout = Duration::from_secs(300);
    match setting {
        Setting::Shaped => {
            let config = InProcessConfig::default()
                .with_timeout(timeout)
                .with_broadcast(method)
                .with_shaping(Some(LinkShaping::gbit_per_second(GBIT)));
            let mut ranks = in_process::cluster(workers + 1, &config)?.into_iter();
            let mut master = ranks.next().ok_or_else(|| anyhow!("empty cluster"))?;
            let handles: Vec<_> = ranks.map(|mut t| thread::spawn(move || run_worker(&mut t))).collect();
            finish(run_master(&mut master, &job), handles)
        }
        Setting::Loopback | Setting::LoopbackPlaintext => {
            let sealed = setting == Setting::Loopback;
            let config = TcpConfig::new("broadcast-experiment")
                .with_timeout(timeout)
                .with_broadcast(method)
                .with_sealed(sealed);
            let listener = MasterListener::bind("127.0.0.1:0", config.clone())?;
            let addr = listener.local_addr()?.to_string();
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let (addr, config) = (addr.clone(), config.clone());
                    thread::spawn(move || -> Result<DemoJob, DemoError> {
                        let mut t =
                            connect_worker(&addr, &config).map_err(|e| DemoError::Job(e.to_string()))?;
                        run_worker(&mut t)
                    })
                })
                .collect();
            let mut master = listener.accept_workers(workers, |_| {})?;
            finish(run_master(&mut master, &job), handles)
        }
    }
}

/// Joins the workers; the master's error, else the first worker's.
fn finish(
    master: Result<Vec<RoundTime>, DemoError>,
    workers: Vec<thread::JoinHandle<Result<DemoJob, DemoError>>>,
) -> anyhow::Result<Vec<RoundTime>> {
    let seconds = master.context("master")?;
    for (k, h) in workers.into_iter().enumerate() {
        h.join()
            .map_err(|_| anyhow!("worker thread {k} panicked"))?
            .with_context(|| format!("worker {k}"))?;
    }
    Ok(seconds)
}

/// The row of (`transport`, `method`, `workers`, `mib`).
fn find<'a>(
    rows: &'a [Measured],
    transport: &str,
    method: &str,
    workers: usize,
    mib: usize,
) -> Option<&'a Measured> {
    rows.iter().find(|r| {
        r.transport == transport && r.method == method && r.workers == workers && r.bytes == mib * MIB
    })
}

/// Pseudo-broadcast's efficiency (ideal / measured) on the shaped links, one per (n, size).
fn pseudo_efficiencies(rows: &[Measured]) -> Vec<f64> {
    rows.iter()
        .filter(|r| r.transport == SHAPED && r.method == BroadcastMethod::PseudoBroadcast.name())
        .filter_map(|r| r.ideal_over_measured)
        .collect()
}

fn shaped_chart(rows: &[Measured], sizes_mib: &[usize]) -> LineChart {
    let curve = |method: &str, n: usize| -> Vec<(f64, f64)> {
        sizes_mib
            .iter()
            .filter_map(|&mib| find(rows, SHAPED, method, n, mib))
            .map(|r| ((r.bytes / MIB) as f64, r.median_seconds / r.ideal_seconds.unwrap_or(f64::NAN)))
            .collect()
    };
    let mut series: Vec<Series> = METHODS
        .iter()
        .flat_map(|m| WORKERS.iter().map(move |&n| (m.name(), n)))
        .map(|(method, n)| Series::solid(format!("{method} n={n}"), curve(method, n)))
        .collect();
    series.push(Series::solid("unicast (shaping check)", curve(UNICAST, 1)));
    series.push(Series::dashed("ideal", sizes_mib.iter().map(|&m| (m as f64, 1.0)).collect()));
    LineChart {
        title: "Broadcast on emulated 1 Gbit/s single-ported links: measured / ideal".into(),
        x_label: "bytes broadcast (MiB)".into(),
        y_label: "measured time / ideal time".into(),
        log_x: true,
        series,
        ..Default::default()
    }
}

fn loopback_chart(rows: &[Measured], sizes_mib: &[usize]) -> LineChart {
    let series = METHODS
        .iter()
        .flat_map(|m| WORKERS.iter().map(move |&n| (m.name(), n)))
        .filter(|&(method, n)| {
            rows.iter().any(|r| r.transport == LOOPBACK && r.method == method && r.workers == n)
        })
        .map(|(method, n)| {
            let points = sizes_mib
                .iter()
                .filter_map(|&mib| find(rows, LOOPBACK, method, n, mib))
                .map(|r| ((r.bytes / MIB) as f64, r.median_seconds))
                .collect();
            Series::solid(format!("{method} n={n}"), points)
        })
        .collect();
    LineChart {
        title: "Broadcast over TCP on loopback (unshaped)".into(),
        x_label: "bytes broadcast (MiB)".into(),
        y_label: format!("seconds (median of {})", ROUNDS as usize * LOOPBACK_TURNS),
        log_x: true,
        log_y: true,
        series,
    }
}

fn summary(rows: &[Measured], sizes_mib: &[usize]) -> String {
    let efficiencies = pseudo_efficiencies(rows);
    let worst = efficiencies.iter().copied().fold(f64::INFINITY, f64::min);
    let met = efficiencies.iter().filter(|&&e| e >= GOAL).count();
    let unicast_worst = rows
        .iter()
        .filter(|r| r.transport == SHAPED && r.method == UNICAST)
        .filter_map(|r| r.ideal_over_measured)
        .map(|e| (1.0 / e - 1.0).abs())
        .fold(0.0, f64::max);
    format!(
        "Sizes {} MiB. Shaped times are emulated time (wall-clock times are in the CSV but do not measure the \
         modelled network: every node keeps its own emulated clock, advanced by the link model and by its thread's \
         CPU time, never by the emulator's copies and wake-ups, and nothing sleeps). On the shaped links pseudo-broadcast reaches a median {:.0} % of its ideal \
         `(2n-1)/n * size/B` (efficiency = ideal / measured), at worst {:.0} %, and {:.0} % or more in {met} of {} \
         cases. {} A single shaped unicast stays within {:.1} % of `size/B`. Over loopback TCP nothing is shaped: every \
         rank is a thread on this machine's cores, so those times measure memory and CPU (CRC32C, copies), not a \
         network; there pseudo-broadcast was faster than plain in {}. {}\n\n{}",
        sizes_mib.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        100.0 * median(efficiencies.iter().copied()),
        100.0 * worst,
        100.0 * GOAL,
        efficiencies.len(),
        speedup_sentence(rows),
        100.0 * unicast_worst,
        loopback_wins(rows),
        sealing_cost(rows),
        table(rows, sizes_mib),
    )
}

/// Plain / pseudo on the shaped links per n, next to the ideals' ratio n^2 / (2n-1).
fn speedup_sentence(rows: &[Measured]) -> String {
    let per_n: Vec<String> = WORKERS
        .iter()
        .map(|&n| {
            let ratios = rows
                .iter()
                .filter(|p| {
                    p.transport == SHAPED
                        && p.workers == n
                        && p.method == BroadcastMethod::PseudoBroadcast.name()
                })
                .filter_map(|p| {
                    let plain = find(rows, SHAPED, BroadcastMethod::Plain.name(), n, p.bytes / MIB)?;
                    Some(plain.median_seconds / p.median_seconds)
                });
            let ideal = (n * n) as f64 / (2 * n - 1) as f64;
            format!("{:.2}x at n = {n} (ideal {ideal:.2}x)", median(ratios))
        })
        .collect();
    format!(
        "Plain broadcast takes (median over sizes) {} as long as pseudo-broadcast; Section 3.1's ideals give \
         n^2 / (2n-1), about n/2.",
        per_n.join(", ")
    )
}

/// What sealing the links costs over loopback TCP: sealed time / plain-text time - 1, at 16 MiB
/// to 4 workers by pseudo-broadcast and the median of all cases, and at 16 MiB the throughput
/// lost, 1 - plain-text time / sealed time (issue 27's goal: at most 10 %).
fn sealing_cost(rows: &[Measured]) -> String {
    let cost = |r: &Measured| {
        let plain = rows.iter().find(|p| {
            p.transport == PLAINTEXT && p.method == r.method && p.workers == r.workers && p.bytes == r.bytes
        })?;
        Some(r.median_seconds / plain.median_seconds - 1.0)
    };
    let pseudo = BroadcastMethod::PseudoBroadcast.name();
    let all: Vec<f64> = rows.iter().filter(|r| r.transport == LOOPBACK).filter_map(cost).collect();
    let goal = find(rows, LOOPBACK, pseudo, 4, 16).and_then(cost);
    format!(
        "Sealed links ({LOOPBACK}, AES-256-GCM by {CRYPTO}) took {} longer than plain text ({PLAINTEXT}) for 16 MiB to 4 workers by pseudo-broadcast (a throughput {}), and a median {:+.1} % over all {} loopback cases.",
        goal.map_or("-".into(), |c| format!("{:+.1} %", 100.0 * c)),
        goal.map_or("-".into(), |c| format!("{:.1} % lower", 100.0 * (1.0 - 1.0 / (1.0 + c)))),
        100.0 * median(all.iter().copied()),
        all.len()
    )
}

/// "k of m cases" where pseudo-broadcast beat plain over loopback TCP.
fn loopback_wins(rows: &[Measured]) -> String {
    let pairs: Vec<(f64, f64)> = rows
        .iter()
        .filter(|p| p.transport == LOOPBACK && p.method == BroadcastMethod::PseudoBroadcast.name())
        .filter_map(|p| {
            let plain = find(rows, LOOPBACK, BroadcastMethod::Plain.name(), p.workers, p.bytes / MIB)?;
            Some((p.median_seconds, plain.median_seconds))
        })
        .collect();
    let wins = pairs.iter().filter(|(p, q)| p < q).count();
    format!("{wins} of {} cases", pairs.len())
}

fn table(rows: &[Measured], sizes_mib: &[usize]) -> String {
    let lines = sizes_mib.iter().flat_map(|&mib| {
        WORKERS.iter().filter_map(move |&n| {
            let p = find(rows, SHAPED, BroadcastMethod::PseudoBroadcast.name(), n, mib)?;
            let q = find(rows, SHAPED, BroadcastMethod::Plain.name(), n, mib)?;
            let (pi, qi) = (p.ideal_seconds.unwrap_or(f64::NAN), q.ideal_seconds.unwrap_or(f64::NAN));
            let tcp = |method: BroadcastMethod| {
                find(rows, LOOPBACK, method.name(), n, mib)
                    .map_or("-".into(), |r| format!("{:.3} s", r.median_seconds))
            };
            Some(vec![
                mib.to_string(),
                n.to_string(),
                format!("{:.3} s", p.median_seconds),
                format!("{pi:.3} s"),
                format!("{:.0} %", 100.0 * pi / p.median_seconds),
                format!("{:.3} s", q.median_seconds),
                format!("{qi:.3} s"),
                format!("{:.0} %", 100.0 * qi / q.median_seconds),
                format!("{:.2}x", q.median_seconds / p.median_seconds),
                tcp(BroadcastMethod::PseudoBroadcast),
                tcp(BroadcastMethod::Plain),
            ])
        })
    });
    let header = [
        "MiB",
        "n",
        "pseudo",
        "ideal",
        "efficiency",
        "plain",
        "ideal",
        "efficiency",
        "plain / pseudo",
        "TCP pseudo",
        "TCP plain",
    ];
    markdown_table(&header, lines)
}

/// The headline row: a figure of the emulated clock of this run, so each number is cited from
/// `dir`'s CSV (README shows it; docs_numbers checks it).
fn headline(rows: &[Measured], dir: &str) -> Vec<Headline> {
    let efficiencies = pseudo_efficiencies(rows);
    let met = efficiencies.iter().filter(|&&e| e >= GOAL).count();
    let pseudo =
        format!("{dir}/{NAME}.csv[transport={SHAPED}, method={}", BroadcastMethod::PseudoBroadcast.name());
    vec![Headline {
        what: "pseudo-broadcast vs its ideal (2n-1)/n, emulated 1 Gbit/s<!-- param -->".into(),
        ours: format!(
            "median {} % ({} of {} at {:.0} %<!-- param --> or more)",
            cited(
                format!("{:.0}", 100.0 * median(efficiencies.iter().copied())),
                &format!("100 * median({pseudo}].ideal_over_measured)")
            ),
            cited(met, &format!("count({pseudo}, ideal_over_measured>={GOAL}])")),
            cited(efficiencies.len(), &format!("count({pseudo}].ideal_over_measured)")),
            100.0 * GOAL
        ),
        paper: "(2n-1)/n x size/B (Section 3.1)".into(),
        table: format!("{NAME}.csv"),
        rows: format!(
            "transport={SHAPED}, method=pseudo-broadcast, median of ideal_over_measured over workers and bytes"
        ),
        machine: true,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::citation;

    fn row(
        transport: &'static str,
        method: &'static str,
        workers: usize,
        seconds: f64,
        ideal: Option<f64>,
    ) -> Measured {
        Measured {
            transport,
            method,
            workers,
            bytes: MIB,
            median_seconds: seconds,
            median_wall_seconds: seconds,
            ideal_seconds: ideal,
            ideal_over_measured: ideal.map(|i| i / seconds),
        }
    }

    #[test]
    fn efficiencies_and_wins_are_counted_from_the_rows() {
        let pseudo = BroadcastMethod::PseudoBroadcast.name();
        let plain = BroadcastMethod::Plain.name();
        let rows = [
            row(SHAPED, pseudo, 4, 1.0, Some(0.8)),
            row(SHAPED, pseudo, 8, 1.0, Some(0.95)),
            row(SHAPED, pseudo, 16, 1.0, Some(1.0)),
            row(SHAPED, plain, 4, 2.0, Some(2.0)),
            row(LOOPBACK, pseudo, 4, 1.0, None),
            row(LOOPBACK, plain, 4, 2.0, None),
            row(LOOPBACK, pseudo, 8, 3.0, None),
            row(LOOPBACK, plain, 8, 2.0, None),
        ];
        let headline = headline(&rows, "results");
        assert_eq!(citation::plain(&headline[0].ours), "median 95 % (2 of 3 at 90 % or more)");
        assert!(headline[0].ours.contains(
            "3<!-- = count(results/broadcast.csv[transport=in-process-1gbit, method=pseudo-broadcast].ideal_over_measured) -->"
        ));
        assert!(headline[0].machine);
        assert_eq!(loopback_wins(&rows), "1 of 2 cases");
        assert!(
            speedup_sentence(&rows).contains("2.00x at n = 4 (ideal 2.29x)"),
            "{}",
            speedup_sentence(&rows)
        );
    }
}
