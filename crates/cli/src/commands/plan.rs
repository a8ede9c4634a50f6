//! `ubershuffle plan`: plan one epoch with a scheme, verify it, and report the counts.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;
use ubershuffle_core::bounds::{best_lower_bound, clique_family};
use ubershuffle_core::exchange_policy::ExchangeRun;
use ubershuffle_core::limits::{Limits, instance_bytes};
use ubershuffle_core::no_excess::{ShuffleMatrix, random_no_excess_instance};
use ubershuffle_core::theory::theorem1_coded_transmissions;
use ubershuffle_core::{
    GeneratorParams, PlannerOptions, ShuffleInstance, ShufflePlanner, Tried, cache_size_for, planner_by_name,
    rng::seeded_stream, seeded, verify,
};
use ubershuffle_plugin_host::PluginLibrary;

use crate::cli::{InstanceSource, PlanArgs};
use crate::commands::{plan_no_excess, plan_pliable, plan_policy};
use ubershuffle_runtime::write_atomically;

use crate::output::{print_json, print_table};

/// The stream of the run's seed that planners draw their tie-breaks from (the instance uses
/// the seed's default stream).
const PLANNER_STREAM: u64 = 1;

/// The scheme `plan` uses when `--scheme` is not given (and no plugin is).
const DEFAULT_SCHEME: &str = "coded";

/// Refuses to generate an instance of `workers` caches of `cache` points over `points` points
/// when it would pass the memory cap ([`Limits`]).
pub fn check_generated(limits: &Limits, workers: usize, points: usize, cache: usize) -> anyhow::Result<()> {
    let what = format!("an instance of {workers} workers and {points} points");
    Ok(limits.check_memory(&what, instance_bytes(workers, points, cache))?)
}

/// Loads or generates the instance the flags describe. Files are read up to the input cap and
/// sizes checked against the memory cap before anything is generated ([`Limits`]).
pub fn load_instance(source: &InstanceSource) -> anyhow::Result<ShuffleInstance> {
    let limits = Limits::from_env()?;
    if let Some(path) = &source.instance {
        let text = limits.read_text(path)?;
        return ShuffleInstance::from_json(&text)
            .with_context(|| format!("instance file {}", path.display()));
    }
    if let Some(text) = &source.shuffle_matrix {
        let s = ShuffleMatrix::parse(text).context("invalid --shuffle-matrix")?;
        let batch = s.points() / s.workers().max(1);
        check_generated(&limits, s.workers(), s.points(), batch).context("--shuffle-matrix")?;
        return Ok(s.to_instance());
    }
    match (source.workers, source.points, source.alpha) {
        (Some(workers), Some(points), Some(alpha)) => {
            let params = GeneratorParams { workers, points, alpha, seed: source.seed }.check()?;
            check_generated(&limits, workers, points, cache_size_for(alpha, points))?;
            Ok(params.generate())
        }
        (Some(workers), Some(points), None) => {
            check_generated(&limits, workers, points, points.div_ceil(workers.max(1)))?;
            Ok(random_no_excess_instance(workers, points, &mut seeded(source.seed))?)
        }
        _ => bail!(
            "give an instance: --instance FILE, --shuffle-matrix S, or --workers N --points Q [--alpha A] [--seed S]"
        ),
    }
}

/// The scheme the flags name: a built-in, or a scheme of the `--plugin` library (whose plans
/// the plugin host verifies before handing them over).
fn choose_planner(args: &PlanArgs, options: &PlannerOptions) -> anyhow::Result<Box<dyn ShufflePlanner>> {
    if let Some(path) = &args.plugin {
        return Ok(Box::new(PluginLibrary::load(path)?.planner(args.scheme.as_deref())?));
    }
    let scheme = args.scheme.as_deref().unwrap_or(DEFAULT_SCHEME);
    planner_by_name(scheme, options).map_err(|e| {
        anyhow::anyhow!("invalid value '{scheme}' for '--scheme': known schemes are {}", e.known.join(", "))
    })
}

/// Plans, verifies, prints; exits non-zero if the plan does not decode.
pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let budget = super::master::seconds("--time-budget", args.time_budget)?;
    let options = PlannerOptions::default().with_time_budget(budget);
    let planner = choose_planner(args, &options)?;
    if planner.as_pliable().is_some() {
        return plan_pliable::run(args, planner.as_ref(), PLANNER_STREAM);
    }
    if args.candidates.is_some() || args.chosen_out.is_some() {
        bail!(
            "--candidates and --chosen-out apply to the pliable schemes (pliable-greedy, pliable-hierarchical), not {}",
            planner.name()
        );
    }
    let mut exchange = plan_policy::start(&args.source, &args.policy)?;
    let first_epoch = exchange.as_mut().map(ExchangeRun::next_epoch);
    let inst = match &first_epoch {
        Some(epoch) => epoch.instance.clone(),
        None => load_instance(&args.source)?,
    };

    let started = Instant::now();
    let planned = planner.plan_explained(&inst, &mut seeded_stream(args.source.seed, PLANNER_STREAM))?;
    let plan_seconds = started.elapsed().as_secs_f64();
    let plan = &planned.plan;
    let started = Instant::now();
    let report = verify(&inst, plan)
        .with_context(|| format!("scheme {} returned a malformed plan", planner.name()))?;
    let verify_seconds = started.elapsed().as_secs_f64();

    if let Some(path) = &args.plan_out {
        write_atomically(path, format!("{}\n", plan.to_json()).as_bytes())?;
    }
    let uncoded = inst.uncoded_transmissions();
    let started = Instant::now();
    let bound = best_lower_bound(&inst);
    let bound_seconds = started.elapsed().as_secs_f64();
    let family = clique_family(&inst, &bound);
    let theorem1 = theorem1_coded_transmissions(inst.workers(), inst.points(), inst.cache_size());
    let mut extra = plan_no_excess::fields(&inst);
    if let (Some(run), Some(first)) = (exchange.as_mut(), &first_epoch) {
        extra.extend(plan_policy::fields(
            run,
            first,
            plan.len(),
            planner.as_ref(),
            &args.policy,
            args.source.seed,
        )?);
    }
    if args.json {
        let mut out = json!({
            "scheme": planner.name(),
            "workers": inst.workers(),
            "points": inst.points(),
            "cache_size": inst.cache_size(),
            "seed": args.source.seed,
            "transmissions": plan.len(),
            "parts": plan.total_parts(),
            "uncoded_transmissions": uncoded,
            "lower_bound": bound.value,
            "lower_bound_kind": bound.kind,
            "clique_family_bound": family.bound,
            "clique_family_estimate": family.estimate,
            "theorem1_transmissions": theorem1,
            "verified": report.is_valid(),
            "plan_seconds": plan_seconds,
            "verify_seconds": verify_seconds,
            "lower_bound_seconds": bound_seconds,
            "instance_bytes": inst.heap_bytes(),
            "max_rss_bytes": ubershuffle_core::limits::peak_rss_bytes(),
        });
        if planned.tried.len() > 1 {
            out["auto_winner"] = json!(planned.made_by);
            out["auto_tried"] = tried_json(&planned.tried);
        }
        if let Some(path) = &args.plugin {
            out["plugin"] = json!(path.display().to_string());
        }
        for (key, value) in extra {
            out[key] = value;
        }
        print_json(&out)?;
    } else {
        let ratio =
            |x: usize| if x == 0 { "-".to_string() } else { format!("{:.2}x", uncoded as f64 / x as f64) };
        let extra_rows = extra_table_rows(&extra);
        let mut tried_rows: Vec<(String, String)> = Vec::new();
        let mut rows = vec![
            ("scheme", planner.name().to_string()),
            ("workers", inst.workers().to_string()),
            ("points", inst.points().to_string()),
            ("cache size", inst.cache_size().to_string()),
            ("transmissions", format!("{} ({} fewer than uncoded)", plan.len(), ratio(plan.len()))),
            ("uncoded", uncoded.to_string()),
            ("lower bound", format!("{} ({})", bound.value, bound.kind)),
            ("clique family: bound", family.bound.to_string()),
            ("clique family: estimate", format!("{} (expected clique counts, not a bound)", family.estimate)),
            ("Theorem 1 (coded, q -> inf)", theorem1.map_or("-".into(), |r| format!("{r:.1}"))),
            (
                "verified",
                if report.is_valid() { "yes: every worker decodes by peeling".into() } else { "NO".into() },
            ),
            ("plan time", format!("{plan_seconds:.3} s")),
            ("lower bound time", format!("{bound_seconds:.3} s")),
            ("verify time", format!("{verify_seconds:.3} s")),
        ];
        if planned.tried.len() > 1 {
            rows.insert(1, ("winner", planned.made_by.clone()));
            for t in &planned.tried {
                let outcome = match &t.outcome {
                    Ok(n) => format!("{n} transmissions"),
                    Err(reason) => format!("skipped: {reason}"),
                };
                tried_rows.push((format!("  {}", t.scheme), outcome));
            }
        }
        rows.extend(tried_rows.iter().map(|(k, v)| (k.as_str(), v.clone())));
        rows.extend(extra_rows.iter().map(|(k, v)| (k.as_str(), v.clone())));
        print_table(&rows)?;
    }
    if let Err(e) = report.ensure_valid() {
        bail!("scheme {} produced a plan that does not decode: {e}", planner.name());
    }
    Ok(ExitCode::SUCCESS)
}

/// What every member of a portfolio did, in the order tried:
/// `[{"scheme": s, "transmissions": n} or {"scheme": s, "skipped": reason}, ...]`.
fn tried_json(tried: &[Tried]) -> serde_json::Value {
    tried
        .iter()
        .map(|t| match &t.outcome {
            Ok(n) => json!({"scheme": t.scheme, "transmissions": n}),
            Err(reason) => json!({"scheme": t.scheme, "skipped": reason}),
        })
        .collect()
}

/// The extra fields as table rows: `achievable_bound` as "achievable bound", one row per epoch.
fn extra_table_rows(extra: &[(&str, serde_json::Value)]) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    for (key, value) in extra {
        match value.as_array() {
            Some(epochs) => rows.extend(epochs.iter().map(|e| {
                (
                    format!("epoch {}", e["epoch"]),
                    format!(
                        "{} points moved, {} transmissions (uncoded {})",
                        e["points_moved"], e["transmissions"], e["uncoded_transmissions"]
                    ),
                )
            })),
            None => rows.push((key.replace('_', " "), value.to_string().trim_matches('"').to_string())),
        }
    }
    rows
}
