//! `ubershuffle plan --scheme pliable-...`: the planner chooses the assignment within
//! `--candidates` as well as the code; the plan is verified against the constraint.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::json;
use ubershuffle_core::pliable::{PliablePlan, PliableReport, PliableRequest, Randomness, verify_pliable};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::{GeneratorParams, ShuffleInstance, ShufflePlanner, cache_size_for, seeded};
use ubershuffle_planners::bounds::{LowerBound, best_lower_bound};
use ubershuffle_runtime::write_atomically;

use super::instance_source::{check_generated, load_instance};
use crate::cli::{InstanceSource, PlanArgs};
use crate::output::{print_json, print_table};
use ubershuffle_core::limits::Limits;

/// The stream of the seed the candidates are drawn from (the instance uses stream 0, the
/// planner's tie-breaks stream 1).
const CANDIDATES_STREAM: u64 = 2;

/// The instance and, when generated, the previous batches its caches were drawn around.
fn load(source: &InstanceSource) -> anyhow::Result<(ShuffleInstance, Option<Vec<Vec<u32>>>)> {
    if let (Some(workers), Some(points), Some(alpha)) = (source.workers, source.points, source.alpha) {
        let params = GeneratorParams { workers, points, alpha, seed: source.seed }.check()?;
        check_generated(&Limits::from_env()?, workers, points, cache_size_for(alpha, points))?;
        let (inst, previous) = params.generate_with_previous(&mut seeded(source.seed));
        return Ok((inst, Some(previous)));
    }
    Ok((load_instance(source)?, None))
}

/// Plans with a pliable scheme, verifies, prints; exits non-zero if the plan does not decode.
pub fn run(args: &PlanArgs, planner: &dyn ShufflePlanner, plan_stream: u64) -> anyhow::Result<ExitCode> {
    let Some(pliable) = planner.as_pliable() else {
        bail!("scheme {} does not choose assignments", planner.name())
    };
    if args.policy.policy.is_some() {
        bail!(
            "--policy does not apply to {}: a pliable scheme chooses the next assignment itself",
            planner.name()
        );
    }
    let randomness = args.candidates.unwrap_or_default();
    let (inst, previous) = load(&args.source)?;
    let seed = args.source.seed;
    let mut request = PliableRequest::new(inst, randomness, &mut seeded_stream(seed, CANDIDATES_STREAM))?;
    if let Some(batches) = &previous {
        request = request.with_previous_batches(batches)?;
    }

    let started = Instant::now();
    let planned = pliable.plan_pliable(&request, &mut seeded_stream(seed, plan_stream))?;
    let plan_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let report = verify_pliable(&request, &planned)
        .with_context(|| format!("scheme {} returned an invalid choice", planner.name()))?;
    let verify_seconds = started.elapsed().as_secs_f64();
    if let Some(path) = &args.plan_out {
        write_atomically(path, format!("{}\n", planned.plan.to_json()).as_bytes())?;
    }
    if let Some(path) = &args.chosen_out {
        write_atomically(path, format!("{}\n", planned.instance.to_json()).as_bytes())?;
    }
    let inst = &planned.instance;
    let bound = best_lower_bound(inst);
    let transmissions = planned.plan.len();
    let randomness_json = report.randomness_json(&request);
    if args.json {
        print_json(&json!({
            "scheme": planner.name(),
            "made_by": planned.made_by,
            "workers": inst.workers(),
            "points": inst.points(),
            "cache_size": inst.cache_size(),
            "seed": seed,
            "transmissions": transmissions,
            "parts": planned.plan.total_parts(),
            "uncoded_transmissions": report.uncoded_transmissions,
            "fully_random_uncoded_transmissions": report.fully_random_uncoded_transmissions,
            "lower_bound": bound.value,
            "lower_bound_kind": bound.kind,
            "verified": report.is_valid(),
            "randomness": randomness_json,
            "plan_seconds": plan_seconds,
            "verify_seconds": verify_seconds,
        }))?;
    } else {
        print_table(&table(
            planner.name(),
            &planned,
            &report,
            randomness,
            bound,
            [plan_seconds, verify_seconds],
        ))?;
    }
    if let Err(e) = report.ensure_valid() {
        bail!("scheme {} produced a plan that does not decode: {e}", planner.name());
    }
    Ok(ExitCode::SUCCESS)
}

/// The human-readable table of a pliable plan.
fn table(
    scheme: &str,
    planned: &PliablePlan,
    report: &PliableReport,
    randomness: Randomness,
    bound: LowerBound,
    [plan_seconds, verify_seconds]: [f64; 2],
) -> Vec<(&'static str, String)> {
    let inst = &planned.instance;
    let bits = |h: Option<f64>| h.map_or("-".to_string(), |h| format!("{h:.3} bits"));
    let share = |f: Option<f64>| f.map_or("-".to_string(), |f| format!("{:.1} %", 100.0 * f));
    let (chosen, random) = (&report.chosen, &report.fully_random);
    let (uncoded, random_uncoded) = (report.uncoded_transmissions, report.fully_random_uncoded_transmissions);
    let verified = if report.is_valid() {
        "yes: within the candidates, full batches, every worker decodes".into()
    } else {
        "NO".into()
    };
    let entropy = format!(
        "{} chosen, {} fully random (H(next | previous owner); uniform {:.3} bits; guaranteed min-entropy {:.3} bits)",
        bits(chosen.owner_entropy_bits),
        bits(random.owner_entropy_bits),
        chosen.uniform_entropy_bits,
        report.guaranteed_min_entropy_bits
    );
    let cached = (share(Some(chosen.cached_fraction)), share(Some(random.cached_fraction)));
    vec![
        ("scheme", scheme.to_string()),
        ("made by", planned.made_by.clone()),
        ("workers", inst.workers().to_string()),
        ("points", inst.points().to_string()),
        ("candidates per point", randomness_label(randomness, inst.workers())),
        ("transmissions", planned.plan.len().to_string()),
        (
            "uncoded",
            format!("{uncoded} for the chosen assignment, {random_uncoded} for the fully random one"),
        ),
        ("lower bound", format!("{} ({}, for the chosen assignment)", bound.value, bound.kind)),
        ("verified", verified),
        ("owner entropy", entropy),
        (
            "points that stay",
            format!("{} chosen, {} fully random", share(chosen.stay_fraction), share(random.stay_fraction)),
        ),
        ("points given to a cacher", format!("{} chosen, {} fully random", cached.0, cached.1)),
        ("plan time", format!("{plan_seconds:.3} s")),
        ("verify time", format!("{verify_seconds:.3} s")),
    ]
}

/// `3 (each point's next owner is one of 3 uniformly random workers)`.
fn randomness_label(randomness: Randomness, workers: usize) -> String {
    match randomness {
        Randomness::All => "all (any balanced assignment)".to_string(),
        Randomness::Candidates(r) => {
            format!("{} (each point's next owner is one of {} uniformly random workers)", r, r.min(workers))
        }
    }
}
