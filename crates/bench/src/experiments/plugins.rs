//! `plugins`: schemes loaded from plugin libraries against the built-in ones, on the same
//! instances.
//!
//! The libraries come from `--plugin PATH` (repeatable); `cargo xtask experiments plugins`
//! builds the example plugin (`examples/plugins/pairwise-xor`) in release mode and passes it.
//! n = 20 as in the UberShuffle paper's Fig. 3, alpha from 0.1 to 0.55, q = 1e5 (1e4 in the
//! quick run), three seeds. Every plan, built-in or plugin, passes `verify` before it is counted.

use std::time::Instant;

use anyhow::bail;
use ubershuffle_core::{
    GeneratorParams, PlannerOptions, ShufflePlanner, planner_by_name, rng::seeded_stream, verify,
};
use ubershuffle_plugin_host::PluginLibrary;

use super::theorem1::median;
use super::{Context, Outcome};
use crate::csv_table::{CsvTable, cell};
use crate::svg_chart::{LineChart, Series};

const WORKERS: usize = 20;
const ALPHAS: [f64; 5] = [0.1, 0.2, 0.325, 0.45, 0.55];
const SEEDS: [u64; 3] = [1, 2, 3];
/// The built-in schemes compared (those of them this build registers).
const BUILTINS: [&str; 3] = ["uncoded", "coded", "ubershuffle"];

/// A scheme in the comparison and where it comes from.
struct Contender {
    planner: Box<dyn ShufflePlanner>,
    source: String,
}

/// Runs the comparison.
pub fn run(ctx: &Context) -> anyhow::Result<Outcome> {
    if ctx.plugins.is_empty() {
        bail!(
            "no plugin given: run `cargo xtask experiments plugins` (which builds the example plugin) \
             or pass --plugin PATH"
        );
    }
    let mut contenders: Vec<Contender> = BUILTINS
        .iter()
        .filter_map(|name| planner_by_name(name, &PlannerOptions::default()).ok())
        .map(|planner| Contender { planner, source: "built-in".into() })
        .collect();
    for path in &ctx.plugins {
        let plugin = PluginLibrary::load(path)?;
        for planner in plugin.planners() {
            contenders.push(Contender { planner: Box::new(planner), source: path.display().to_string() });
        }
    }
    let points = if ctx.quick { 10_000 } else { 100_000 };
    let mut table = CsvTable::new(&[
        "scheme",
        "source",
        "alpha",
        "points",
        "seed",
        "transmissions",
        "uncoded",
        "over_uncoded",
        "plan_seconds",
    ]);
    let bar = ctx.progress((ALPHAS.len() * SEEDS.len() * contenders.len()) as u64, "plugins");
    // Per contender: (alpha, median transmissions / uncoded) and every plan time.
    let mut curves: Vec<Vec<(f64, f64)>> = vec![Vec::new(); contenders.len()];
    let mut seconds: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    for alpha in ALPHAS {
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        for seed in SEEDS {
            let inst = GeneratorParams { workers: WORKERS, points, alpha, seed }.check()?.generate();
            let uncoded = inst.uncoded_transmissions();
            for (c, contender) in contenders.iter().enumerate() {
                let started = Instant::now();
                let plan = contender.planner.plan(&inst, &mut seeded_stream(seed, 1))?;
                let elapsed = started.elapsed().as_secs_f64();
                verify(&inst, &plan)?.ensure_valid()?;
                let ratio = plan.len() as f64 / uncoded as f64;
                ratios[c].push(ratio);
                seconds[c].push(elapsed);
                table.push(vec![
                    cell(contender.planner.name()),
                    cell(&contender.source),
                    cell(alpha),
                    cell(points),
                    cell(seed),
                    cell(plan.len()),
                    cell(uncoded),
                    cell(format!("{ratio:.4}")),
                    cell(format!("{elapsed:.4}")),
                ]);
                bar.inc(1);
            }
        }
        for (c, r) in ratios.iter_mut().enumerate() {
            curves[c].push((alpha, median(r)));
        }
    }
    bar.finish_and_clear();

    let mut chart = LineChart {
        title: format!("Plugin and built-in schemes (n = {WORKERS}, q = {points})"),
        x_label: "storage ratio alpha".into(),
        y_label: "transmissions / uncoded".into(),
        ..Default::default()
    };
    let mut rows = Vec::new();
    for (c, contender) in contenders.iter().enumerate() {
        let name = contender.planner.name();
        let label =
            if contender.source == "built-in" { name.to_string() } else { format!("{name} (plugin)") };
        let ratios: Vec<String> = curves[c].iter().map(|&(_, r)| format!("{r:.3}")).collect();
        rows.push(format!("| {label} | {} | {:.3} |", ratios.join(" | "), median(&mut seconds[c])));
        chart.series.push(if contender.source == "built-in" {
            Series::dashed(label, curves[c].clone())
        } else {
            Series::solid(label, curves[c].clone())
        });
    }
    let findings = findings(&contenders, &curves);
    let alphas: Vec<String> = ALPHAS.iter().map(|a| format!("alpha = {a}")).collect();
    let summary = format!(
        "Median over seeds of each scheme's transmissions divided by uncoded's, on the same generated \
         instances (n = {WORKERS}, q = {points}); the last column is the median plan time in seconds, \
         which for a plugin includes passing the instance and plan across the plugin boundary as bytes \
         and verifying the plan on the host side. Plugins: {}.\n\n\
         | scheme | {} | plan s |\n| --- |{} --- |\n{}\n\n{findings}",
        ctx.plugins.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", "),
        alphas.join(" | "),
        " --- |".repeat(ALPHAS.len()),
        rows.join("\n")
    );
    let summary = summary + &super::quick_note(ctx, "q = 10 000; the full run has q = 100 000");
    Ok(Outcome { table, figures: vec![(String::new(), chart)], summary })
}

/// One sentence per plugin scheme: its range of ratios, and at how many alphas it sends fewer
/// transmissions than every built-in compared.
fn findings(contenders: &[Contender], curves: &[Vec<(f64, f64)>]) -> String {
    let builtin: Vec<usize> = (0..contenders.len()).filter(|&c| contenders[c].source == "built-in").collect();
    let mut sentences = Vec::new();
    for (c, contender) in contenders.iter().enumerate().filter(|(_, c)| c.source != "built-in") {
        let ratios: Vec<f64> = curves[c].iter().map(|&(_, r)| r).collect();
        let (low, high) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
        let wins = (0..ALPHAS.len()).filter(|&a| builtin.iter().all(|&b| ratios[a] < curves[b][a].1)).count();
        sentences.push(format!(
            "`{}` (plugin) sends {low:.3} to {high:.3} of uncoded's transmissions, and fewer than every \
             built-in compared at {wins} of {} storage ratios.",
            contender.planner.name(),
            ALPHAS.len()
        ));
    }
    sentences.join(" ")
}
