//! `speed`: how fast the pieces run on this machine, each next to a baseline measured alongside:
//! XOR encoding and peeling decoding against `memcpy` of the same bytes, and planning, verifying
//! and bounding one Fig. 3 instance against the uncoded planner. Medians over repetitions.
//!
//! These are wall-clock figures of this machine (all machine columns); the criterion benches
//! (`cargo bench -p ubershuffle-codes --bench codec`, `-p ubershuffle-core --bench planners`)
//! measure the same operations with confidence intervals.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;
use ubershuffle_codes::{Decoder, Encoder, Records};
use ubershuffle_core::{GeneratorParams, PlannerOptions, rng::seeded_stream, verify};
use ubershuffle_planners::bounds::best_lower_bound;

use super::Context;
use crate::report::citation::cited;
use crate::report::{Headline, Report, Row, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "speed";
/// What it shows.
pub const ABOUT: &str = "Encode and decode throughput against memcpy of the same bytes, and plan, verify and lower-bound times against the uncoded planner, medians on this machine";

/// Record width of the codec measurements.
const WIDTH: usize = 4096;

/// One timed operation.
#[derive(Clone, Debug, Serialize)]
struct Timed {
    what: String,
    setting: String,
    /// The operation it is compared with.
    baseline: String,
    repetitions: usize,
    /// Bytes the operation reads (0 for planning).
    bytes: u64,
    median_seconds: f64,
    baseline_median_seconds: f64,
    /// Baseline time / this time: above 1, faster than the baseline.
    speed_vs_baseline: f64,
}

impl Row for Timed {
    const MACHINE_COLUMNS: &'static [&'static str] =
        &["median_seconds", "baseline_median_seconds", "speed_vs_baseline"];
}

/// The median seconds of `repetitions` runs of `f`.
fn time(repetitions: usize, mut f: impl FnMut()) -> f64 {
    median((0..repetitions).map(|_| {
        let started = Instant::now();
        f();
        started.elapsed().as_secs_f64()
    }))
}

/// Runs the measurements.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let (points, repetitions) = if ctx.quick { (100_000, 3) } else { (1_000_000, 7) };
    let mut rows = codec(ctx.quick)?;
    rows.extend(planning(points, repetitions)?);
    let summary = summary(&rows) + &ctx.quick_note("q = 1e5 for planning, 3 repetitions, 4 000 records; the full run has q = 1e6, 7 repetitions, 20 000 records");
    Ok(Report::new(summary)
        .table(format!("{NAME}.csv"), &rows)?
        .headlines(headlines(&rows, ctx.results_dir())))
}

/// Encoding every packet and decoding at worker 0, each against copying the same records.
fn codec(quick: bool) -> anyhow::Result<Vec<Timed>> {
    let (points, repetitions) = if quick { (4_000, 5) } else { (20_000, 11) };
    let inst = GeneratorParams { workers: 20, points, alpha: 0.4, seed: 1 }.check()?.generate();
    let plan = super::planner("coded", &PlannerOptions::default())?.plan(&inst, &mut seeded_stream(1, 1))?;
    let records = Records::random(inst.points(), WIDTH, 2)?;
    let encoder = Encoder::new(&plan, &records)?;
    let mut out = vec![0u8; WIDTH];
    let encode = time(repetitions, || {
        for seq in 0..plan.len() {
            encoder.encode_into(seq, &mut out);
            black_box(&out);
        }
    });
    let copy_parts = time(repetitions, || {
        for part in plan.iter().flatten() {
            out.copy_from_slice(records.get(part.point).unwrap_or(&[0; WIDTH]));
            black_box(&out);
        }
    });
    let packets: Vec<_> = encoder.packets().collect();
    let decoder = || -> anyhow::Result<Decoder> {
        Ok(Decoder::new(0, &plan, records.store_of(inst.cache(0))?, inst.needs(0))?)
    };
    let mut decode_runs = Vec::new();
    for _ in 0..repetitions {
        let mut d = decoder()?;
        let started = Instant::now();
        for p in &packets {
            d.receive_packet(p)?;
        }
        decode_runs.push(started.elapsed().as_secs_f64());
        black_box(d.finish()?);
    }
    let needed: Vec<_> = packets.iter().filter(|p| decoder().is_ok_and(|d| d.needs_packet(p.seq))).collect();
    let read = needed.iter().map(|p| (p.parts.len() * WIDTH) as u64).sum::<u64>();
    let copy_needed = time(repetitions, || {
        for p in &needed {
            for part in &p.parts {
                out.copy_from_slice(records.get(part.point).unwrap_or(&[0; WIDTH]));
                black_box(&out);
            }
        }
    });
    let setting = format!("n = 20, q = {points}, alpha = 0.4, {WIDTH} B records, coded plan");
    let row = |what: &str, baseline: &str, bytes, t, b| Timed {
        what: what.into(),
        setting: setting.clone(),
        baseline: baseline.into(),
        repetitions,
        bytes,
        median_seconds: t,
        baseline_median_seconds: b,
        speed_vs_baseline: b / t,
    };
    Ok(vec![
        row(
            "encode (XOR every packet)",
            "memcpy of the same records",
            (plan.total_parts() * WIDTH) as u64,
            encode,
            copy_parts,
        ),
        row("decode at worker 0 (peel)", "memcpy of the same bytes", read, median(decode_runs), copy_needed),
    ])
}

/// Planning one Fig. 3 instance with each scheme, verifying and bounding it.
fn planning(points: usize, repetitions: usize) -> anyhow::Result<Vec<Timed>> {
    let inst = GeneratorParams { workers: 20, points, alpha: 0.55, seed: 1 }.check()?.generate();
    let plan_time = |scheme: &str| -> anyhow::Result<f64> {
        let planner = super::planner(scheme, &PlannerOptions::default())?;
        let mut failed = None;
        let t = time(repetitions, || {
            if let Err(e) = planner.plan(&inst, &mut seeded_stream(1, 1)) {
                failed = Some(e);
            }
        });
        failed.map_or(Ok(t), |e| Err(e.into()))
    };
    let uncoded = plan_time("uncoded")?;
    let coded_plan =
        super::planner("coded", &PlannerOptions::default())?.plan(&inst, &mut seeded_stream(1, 1))?;
    let setting = format!("n = 20, q = {points}, alpha = 0.55 (Fig. 3), seed 1");
    let row = |what: String, t: f64| Timed {
        what,
        setting: setting.clone(),
        baseline: "plan uncoded".into(),
        repetitions,
        bytes: 0,
        median_seconds: t,
        baseline_median_seconds: uncoded,
        speed_vs_baseline: uncoded / t,
    };
    let mut rows = Vec::new();
    for scheme in ["coded", "ubershuffle", "clique-cover"] {
        rows.push(row(format!("plan {scheme}"), plan_time(scheme)?));
    }
    rows.push(row(
        "verify the coded plan".into(),
        time(repetitions, || {
            let _ = black_box(verify(&inst, &coded_plan));
        }),
    ));
    rows.push(row(
        "lower bound".into(),
        time(repetitions, || {
            black_box(best_lower_bound(&inst));
        }),
    ));
    Ok(rows)
}

fn summary(rows: &[Timed]) -> String {
    let lines = rows.iter().map(|r| {
        let rate = |s: f64| {
            if r.bytes > 0 {
                format!(" ({:.1} GiB/s)", r.bytes as f64 / s / (1u64 << 30) as f64)
            } else {
                String::new()
            }
        };
        vec![
            r.what.clone(),
            r.setting.clone(),
            format!("{:.4} s{}", r.median_seconds, rate(r.median_seconds)),
            format!("{}: {:.4} s{}", r.baseline, r.baseline_median_seconds, rate(r.baseline_median_seconds)),
            format!("{:.0} %", 100.0 * r.speed_vs_baseline),
        ]
    });
    format!(
        "Medians over repetitions on this machine, each beside a baseline measured in the same run (speed = \
         baseline time / time).\n\n{}",
        markdown_table(&["what", "setting", "median", "baseline", "speed vs baseline"], lines)
    )
}

/// The headline row: times of this machine, so each figure is cited from `dir`'s CSV (README
/// shows it; docs_numbers checks it).
fn headlines(rows: &[Timed], dir: &str) -> Vec<Headline> {
    let codec: Vec<&Timed> = rows.iter().filter(|r| r.bytes > 0).collect();
    let [encode, decode] = codec.as_slice() else { return Vec::new() };
    let percent = |r: &Timed| {
        let expr = format!("100 * {dir}/{NAME}.csv[what={}].speed_vs_baseline", r.what);
        cited(format!("{:.0}", 100.0 * r.speed_vs_baseline), &expr)
    };
    vec![Headline {
        what: format!("encode / decode speed vs memcpy of the same bytes ({WIDTH} B records<!-- param -->)"),
        ours: format!("{} % / {} %", percent(encode), percent(decode)),
        paper: "".into(),
        table: format!("{NAME}.csv"),
        rows: "what=encode..., what=decode..., speed_vs_baseline".into(),
        machine: true,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_time_what_they_run() {
        let mut calls = 0;
        let t = time(3, || calls += 1);
        assert_eq!(calls, 3);
        assert!(t >= 0.0);
    }
}
