//! `ubershuffle plan`: plan one epoch with a scheme, verify it, and report the counts.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;
use ubershuffle_core::theory::theorem1_coded_transmissions;
use ubershuffle_core::{
    Plan, PlannerOptions, ShuffleInstance, ShufflePlanner, Tried, VerifyReport, rng::seeded_stream, verify,
};
use ubershuffle_planners::bounds::{SEARCH_WORK_PER_SECOND, best_lower_bound, clique_family};
use ubershuffle_planners::planner_by_name;
use ubershuffle_plugin_host::PluginLibrary;

use crate::cli::PlanArgs;
use crate::commands::instance_source::load_instance;
use crate::commands::{plan_no_excess, plan_pliable, plan_policy};
use ubershuffle_runtime::write_atomically;

use crate::output::{print_json, print_table};

/// The stream of the run's seed that planners draw their tie-breaks from (the instance uses
/// the seed's default stream).
const PLANNER_STREAM: u64 = 1;

/// The scheme `plan` uses when `--scheme` is not given (and no plugin is).
const DEFAULT_SCHEME: &str = "coded";

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

/// What was planned: the instance, its plan, and who made it.
struct Outcome<'a> {
    inst: &'a ShuffleInstance,
    plan: &'a Plan,
    made_by: &'a str,
    tried: &'a [Tried],
    plan_seconds: f64,
    verify_seconds: f64,
    /// Work units for the clique family's bound (`--clique-search`).
    search_work: u64,
}

/// Plans, verifies, prints; exits non-zero if the plan does not decode.
pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let budget = super::master::seconds("--time-budget", args.time_budget)?;
    let search_work = clique_search_work(args.clique_search)?;
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
    let mut chain = plan_policy::start(&args.source, &args.policy)?;
    let drawn = chain.as_ref().map(plan_policy::first).transpose()?;
    let loaded = if drawn.is_none() { Some(load_instance(&args.source)?) } else { None };
    let started = Instant::now();
    // Under a policy, epoch 1 of the run's chain (with the chain's planner stream).
    let epoch = drawn.map(|d| d.plan(planner.as_ref(), None)).transpose()?;
    let fixed = match &loaded {
        Some(inst) => {
            Some(planner.plan_explained(inst, &mut seeded_stream(args.source.seed, PLANNER_STREAM))?)
        }
        None => None,
    };
    let plan_seconds = started.elapsed().as_secs_f64();
    let (inst, plan, made_by, tried) = match (&epoch, &loaded, &fixed) {
        (Some(e), _, _) => (&e.instance, &e.plan, &e.made_by, &e.tried),
        (None, Some(inst), Some(p)) => (inst, &p.plan, &p.made_by, &p.tried),
        _ => bail!("no instance to plan"),
    };
    let started = Instant::now();
    let report =
        verify(inst, plan).with_context(|| format!("scheme {} returned a malformed plan", planner.name()))?;
    let verify_seconds = started.elapsed().as_secs_f64();
    let outcome = Outcome { inst, plan, made_by, tried, plan_seconds, verify_seconds, search_work };
    let mut extra = plan_no_excess::fields(outcome.inst);
    if let (Some(chain), Some(first)) = (chain.as_mut(), &epoch) {
        report.ensure_valid()?;
        extra.extend(plan_policy::fields(chain, first, planner.as_ref(), &args.policy)?);
    }
    print_outcome(args, planner.name(), &outcome, &report, extra)
}

/// Writes the plan if asked, prints the counts and bounds beside it (JSON or a table), and
/// fails if the plan does not decode.
fn print_outcome(
    args: &PlanArgs,
    scheme: &str,
    o: &Outcome<'_>,
    report: &VerifyReport,
    extra: Vec<(&'static str, serde_json::Value)>,
) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.plan_out {
        write_atomically(path, format!("{}\n", o.plan.to_json()).as_bytes())?;
    }
    let inst = o.inst;
    let started = Instant::now();
    let bound = best_lower_bound(inst);
    let bound_seconds = started.elapsed().as_secs_f64();
    let family = clique_family(inst, &bound, o.search_work);
    let theorem1 = theorem1_coded_transmissions(inst.workers(), inst.points(), inst.cache_size());
    if args.json {
        let mut out = json!({
            "scheme": scheme,
            "workers": inst.workers(),
            "points": inst.points(),
            "cache_size": inst.cache_size(),
            "seed": args.source.seed,
            "transmissions": o.plan.len(),
            "parts": o.plan.total_parts(),
            "uncoded_transmissions": inst.uncoded_transmissions(),
            "lower_bound": bound.value,
            "lower_bound_kind": bound.kind,
            "clique_family_bound": family.bound,
            "clique_family_bound_kind": family.bound_kind.name(),
            "clique_family_search_threshold": family.bound_kind.threshold(),
            "clique_family_estimate": family.estimate,
            "theorem1_transmissions": theorem1,
            "verified": report.is_valid(),
            "plan_seconds": o.plan_seconds,
            "verify_seconds": o.verify_seconds,
            "lower_bound_seconds": bound_seconds,
            "instance_bytes": inst.heap_bytes(),
            "max_rss_bytes": ubershuffle_core::limits::peak_rss_bytes(),
        });
        if o.tried.len() > 1 {
            out["auto_winner"] = json!(o.made_by);
            out["auto_tried"] = tried_json(o.tried);
        }
        if let Some(path) = &args.plugin {
            out["plugin"] = json!(path.display().to_string());
        }
        for (key, value) in extra {
            out[key] = value;
        }
        print_json(&out)?;
    } else {
        let bound = format!("{} ({})", bound.value, bound.kind);
        let times = [o.plan_seconds, bound_seconds, o.verify_seconds];
        let mut rows = table_rows(scheme, o, report.is_valid(), &bound, theorem1, times, &extra);
        let rests_on = match family.bound_kind.threshold() {
            0 => "each request's cachers".to_string(),
            k => format!("every clique of {k} or more found"),
        };
        rows.insert(7, ("clique family: bound".into(), format!("{} ({rests_on})", family.bound)));
        let estimate = format!("{} (expected clique counts, not a bound)", family.estimate);
        rows.insert(8, ("clique family: estimate".into(), estimate));
        print_table(&rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect::<Vec<_>>())?;
    }
    if let Err(e) = report.ensure_valid() {
        bail!("scheme {scheme} produced a plan that does not decode: {e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The work units of `--clique-search SECONDS`.
fn clique_search_work(seconds: f64) -> anyhow::Result<u64> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        bail!("--clique-search must be a number of seconds, 0 or more");
    }
    Ok((seconds * SEARCH_WORK_PER_SECOND as f64).min(u64::MAX as f64) as u64)
}

/// The human-readable table of [`print_outcome`].
fn table_rows(
    scheme: &str,
    o: &Outcome<'_>,
    valid: bool,
    bound: &str,
    theorem1: Option<f64>,
    [plan_s, bound_s, verify_s]: [f64; 3],
    extra: &[(&str, serde_json::Value)],
) -> Vec<(String, String)> {
    let (inst, uncoded) = (o.inst, o.inst.uncoded_transmissions());
    let ratio =
        |x: usize| if x == 0 { "-".to_string() } else { format!("{:.2}x", uncoded as f64 / x as f64) };
    let mut rows: Vec<(String, String)> = vec![
        ("scheme".into(), scheme.to_string()),
        ("workers".into(), inst.workers().to_string()),
        ("points".into(), inst.points().to_string()),
        ("cache size".into(), inst.cache_size().to_string()),
        ("transmissions".into(), format!("{} ({} fewer than uncoded)", o.plan.len(), ratio(o.plan.len()))),
        ("uncoded".into(), uncoded.to_string()),
        ("lower bound".into(), bound.to_string()),
        ("Theorem 1 (coded, q -> inf)".into(), theorem1.map_or("-".into(), |r| format!("{r:.1}"))),
        ("verified".into(), if valid { "yes: every worker decodes by peeling".into() } else { "NO".into() }),
        ("plan time".into(), format!("{plan_s:.3} s")),
        ("lower bound time".into(), format!("{bound_s:.3} s")),
        ("verify time".into(), format!("{verify_s:.3} s")),
    ];
    if o.tried.len() > 1 {
        rows.insert(1, ("winner".into(), o.made_by.to_string()));
        for t in o.tried {
            let outcome = match &t.outcome {
                Ok(n) => format!("{n} transmissions"),
                Err(reason) => format!("skipped: {reason}"),
            };
            rows.push((format!("  {}", t.scheme), outcome));
        }
    }
    rows.extend(extra_table_rows(extra));
    rows
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
