//! Planning from Python: the same instances, planners, seed streams and checks as
//! `ubershuffle plan`, so the counts agree with `ubershuffle plan ... --json`.

use std::str::FromStr;
use std::time::{Duration, Instant};

use ubershuffle_core::epoch_chain::{ChainParams, EpochChain};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::limits::{Limits, instance_bytes};
use ubershuffle_core::pliable::{PliableRequest, Randomness, verify_pliable};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::theory::theorem1_coded_transmissions;
use ubershuffle_core::{
    GeneratorParams, Part, Plan, PlannerOptions, ShuffleInstance, ShufflePlanner, Tried, cache_size_for,
    seeded, verify,
};
use ubershuffle_planners::bounds::{LowerBound, best_lower_bound};
use ubershuffle_planners::no_excess::random_no_excess_instance;
use ubershuffle_planners::{builtin_planners, planner_by_name};
use ubershuffle_plugin_host::PluginLibrary;

use crate::errors::{Failure, Outcome, bad, bad_error};

/// The stream of the seed planners draw their tie-breaks from (as the command line).
pub const PLANNER_STREAM: u64 = 1;
/// The stream of the seed pliable candidates are drawn from (as the command line).
pub const CANDIDATES_STREAM: u64 = 2;
/// The command line's default `--time-budget`, in seconds.
pub const DEFAULT_TIME_BUDGET: f64 = 10.0;

/// Every scheme: the built-ins, or a plugin's, as `(name, description)`.
pub fn schemes(plugin: Option<&str>) -> Outcome<Vec<(String, String)>> {
    match plugin {
        Some(path) => {
            let lib = PluginLibrary::load(path).map_err(bad_error)?;
            Ok(lib.schemes().iter().map(|s| (s.name.clone(), s.description.clone())).collect())
        }
        None => {
            Ok(builtin_planners().iter().map(|e| (e.name.to_string(), e.description.to_string())).collect())
        }
    }
}

/// The planner options for a budget in seconds (`None`: the command line's default), checked
/// as `--time-budget` is.
pub fn options(time_budget: Option<f64>) -> Outcome<PlannerOptions> {
    let value = time_budget.unwrap_or(DEFAULT_TIME_BUDGET);
    if !(value > 0.0 && value.is_finite() && value < 1e9) {
        let shown = if value.abs() < 1e15 { format!("{value}") } else { format!("{value:e}") };
        return Err(bad(format!(
            "--time-budget must be a positive number of seconds below 1e9, got {shown}"
        )));
    }
    Ok(PlannerOptions::default().with_time_budget(Duration::from_secs_f64(value)))
}

/// The scheme named `scheme`: a built-in, or one of the plugin's (with a plugin, `auto` means
/// its only scheme unless it exports one called `auto`).
pub fn choose_planner(
    scheme: &str,
    plugin: Option<&str>,
    options: &PlannerOptions,
) -> Outcome<Box<dyn ShufflePlanner>> {
    if let Some(path) = plugin {
        let lib = PluginLibrary::load(path).map_err(bad_error)?;
        let name = (scheme != "auto" || lib.scheme_names().contains(&"auto")).then_some(scheme);
        return Ok(Box::new(lib.planner(name).map_err(bad_error)?));
    }
    planner_by_name(scheme, options).map_err(|e| {
        bad(format!("invalid value '{scheme}' for '--scheme': known schemes are {}", e.known.join(", ")))
    })
}

/// `candidates` as the command line reads `--candidates` (`4`, `all`).
pub fn randomness(candidates: Option<&str>) -> Outcome<Option<Randomness>> {
    candidates
        .map(|text| {
            Randomness::from_str(text)
                .map_err(|e| bad(format!("invalid value '{text}' for '--candidates': {}", e.0)))
        })
        .transpose()
}

/// Refuses an instance that would pass the memory cap (`UBERSHUFFLE_MAX_MEMORY`), as the
/// command line does.
pub fn check_generated(workers: usize, points: usize, cache: usize) -> Outcome<()> {
    let limits = Limits::from_env().map_err(bad_error)?;
    let what = format!("an instance of {workers} workers and {points} points");
    limits.check_memory(&what, instance_bytes(workers, points, cache)).map_err(bad_error)
}

/// A count given as a Python int (which may be negative): a negative one is refused as the
/// command line refuses `--{name} -1`; range checks (`at least 1`) are left to the checks
/// the command line runs, so the messages are the same.
pub fn count(name: &str, value: i64) -> Outcome<usize> {
    usize::try_from(value)
        .map_err(|_| bad(format!("invalid value '{value}' for '--{name}': must be a non-negative integer")))
}

/// A plan with its counts, as `plan --json` reports them.
pub struct Outcome1 {
    /// The scheme asked for.
    pub scheme: String,
    /// What made the plan (a portfolio's winner).
    pub made_by: String,
    /// The instance planned (for a pliable scheme, with the chosen assignment).
    pub instance: ShuffleInstance,
    /// The plan.
    pub plan: Plan,
    /// Whether every worker decodes its batch.
    pub verified: bool,
    /// Uncoded transmissions of the instance (pliable: of the chosen assignment).
    pub uncoded: usize,
    /// Pliable only: uncoded transmissions of the fully random assignment.
    pub fully_random_uncoded: Option<usize>,
    /// The largest lower bound that applies.
    pub bound: LowerBound,
    /// Theorem 1's coded count, where it applies.
    pub theorem1: Option<f64>,
    /// Seconds planning took.
    pub plan_seconds: f64,
    /// Seconds verifying took.
    pub verify_seconds: f64,
    /// Seconds the lower bound took.
    pub lower_bound_seconds: f64,
    /// What every member of a portfolio did.
    pub tried: Vec<Tried>,
}

/// Generates the instance `plan` describes: the paper's model with `alpha`, no excess storage
/// without it (as `ubershuffle plan --workers --points [--alpha]`).
pub fn generate(workers: usize, points: usize, alpha: Option<f64>, seed: u64) -> Outcome<ShuffleInstance> {
    match alpha {
        Some(alpha) => {
            let params = GeneratorParams { workers, points, alpha, seed }.check().map_err(bad_error)?;
            check_generated(workers, points, cache_size_for(alpha, points))?;
            Ok(params.generate())
        }
        None => {
            check_generated(workers, points, points.div_ceil(workers.max(1)))?;
            random_no_excess_instance(workers, points, &mut seeded(seed)).map_err(bad_error)
        }
    }
}

/// Plans `inst` with `planner` (its seed's planner stream), verifies it and counts.
pub fn plan_fixed(planner: &dyn ShufflePlanner, inst: ShuffleInstance, seed: u64) -> Outcome<Outcome1> {
    let started = Instant::now();
    let planned =
        planner.plan_explained(&inst, &mut seeded_stream(seed, PLANNER_STREAM)).map_err(bad_error)?;
    let plan_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let report = verify(&inst, &planned.plan)
        .map_err(|e| bad(format!("scheme {} returned a malformed plan: {}", planner.name(), e)))?;
    let verify_seconds = started.elapsed().as_secs_f64();
    if let Err(e) = report.ensure_valid() {
        return Err(Failure::Internal(format!(
            "scheme {} produced a plan that does not decode: {e}",
            planner.name()
        )));
    }
    let started = Instant::now();
    let bound = best_lower_bound(&inst);
    let lower_bound_seconds = started.elapsed().as_secs_f64();
    Ok(Outcome1 {
        scheme: planner.name().to_string(),
        made_by: planned.made_by,
        uncoded: inst.uncoded_transmissions(),
        fully_random_uncoded: None,
        theorem1: theorem1_coded_transmissions(inst.workers(), inst.points(), inst.cache_size()),
        instance: inst,
        plan: planned.plan,
        verified: report.is_valid(),
        bound,
        plan_seconds,
        verify_seconds,
        lower_bound_seconds,
        tried: planned.tried,
    })
}

/// Plans with a pliable scheme as `ubershuffle plan --scheme pliable-...` does: the request's
/// candidates from stream 2 of the seed, the planner's tie-breaks from stream 1.
pub fn plan_pliable(
    planner: &dyn ShufflePlanner,
    inst: ShuffleInstance,
    previous: Option<&[Vec<u32>]>,
    randomness: Randomness,
    seed: u64,
) -> Outcome<Outcome1> {
    let Some(pliable) = planner.as_pliable() else {
        return Err(bad(format!("scheme {} does not choose assignments", planner.name())));
    };
    let mut request = PliableRequest::new(inst, randomness, &mut seeded_stream(seed, CANDIDATES_STREAM))
        .map_err(bad_error)?;
    if let Some(batches) = previous {
        request = request.with_previous_batches(batches).map_err(bad_error)?;
    }
    let started = Instant::now();
    let planned =
        pliable.plan_pliable(&request, &mut seeded_stream(seed, PLANNER_STREAM)).map_err(bad_error)?;
    let plan_seconds = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let report = verify_pliable(&request, &planned)
        .map_err(|e| bad(format!("scheme {} returned an invalid choice: {e}", planner.name())))?;
    let verify_seconds = started.elapsed().as_secs_f64();
    if let Err(e) = report.ensure_valid() {
        return Err(Failure::Internal(format!(
            "scheme {} produced a plan that does not decode: {e}",
            planner.name()
        )));
    }
    let started = Instant::now();
    let bound = best_lower_bound(&planned.instance);
    let lower_bound_seconds = started.elapsed().as_secs_f64();
    let inst = planned.instance;
    Ok(Outcome1 {
        scheme: planner.name().to_string(),
        tried: vec![Tried::sent(&planned.made_by, planned.plan.len())],
        made_by: planned.made_by,
        theorem1: None,
        uncoded: report.uncoded_transmissions,
        fully_random_uncoded: Some(report.fully_random_uncoded_transmissions),
        instance: inst,
        plan: planned.plan,
        verified: report.is_valid(),
        bound,
        plan_seconds,
        verify_seconds,
        lower_bound_seconds,
    })
}

/// Arguments of [`plan_generated`].
pub struct PlanArgs {
    /// Workers `n`.
    pub workers: usize,
    /// Points `q`.
    pub points: usize,
    /// Storage ratio (`None`: no excess storage).
    pub alpha: Option<f64>,
    /// The scheme.
    pub scheme: String,
    /// The seed.
    pub seed: u64,
    /// Search budget in seconds.
    pub time_budget: Option<f64>,
    /// A plugin library.
    pub plugin: Option<String>,
    /// Pliable schemes: candidates per point.
    pub candidates: Option<String>,
}

/// `ubershuffle plan --workers --points [--alpha] --scheme --seed [--time-budget]`.
pub fn plan_generated(args: &PlanArgs) -> Outcome<Outcome1> {
    let options = options(args.time_budget)?;
    let planner = choose_planner(&args.scheme, args.plugin.as_deref(), &options)?;
    let randomness = randomness(args.candidates.as_deref())?;
    if planner.as_pliable().is_some() {
        let (workers, points, seed) = (args.workers, args.points, args.seed);
        return match args.alpha {
            Some(alpha) => {
                let params = GeneratorParams { workers, points, alpha, seed }.check().map_err(bad_error)?;
                check_generated(workers, points, cache_size_for(alpha, points))?;
                let (inst, previous) = params.generate_with_previous(&mut seeded(seed));
                plan_pliable(planner.as_ref(), inst, Some(&previous), randomness.unwrap_or_default(), seed)
            }
            None => {
                let inst = generate(workers, points, None, seed)?;
                plan_pliable(planner.as_ref(), inst, None, randomness.unwrap_or_default(), seed)
            }
        };
    }
    refuse_candidates(planner.as_ref(), randomness)?;
    let inst = generate(args.workers, args.points, args.alpha, args.seed)?;
    plan_fixed(planner.as_ref(), inst, args.seed)
}

/// `candidates` given to a scheme that does not choose assignments: the command line's error.
pub fn refuse_candidates(planner: &dyn ShufflePlanner, randomness: Option<Randomness>) -> Outcome<()> {
    if randomness.is_some() {
        return Err(bad(format!(
            "--candidates and --chosen-out apply to the pliable schemes (pliable-greedy, pliable-hierarchical), not {}",
            planner.name()
        )));
    }
    Ok(())
}

/// Integer ids from Python (any sign) as points below `points`, or `ValueError` naming where.
pub fn to_points(field: &str, worker: usize, ids: &[i64], points: usize) -> Outcome<Vec<u32>> {
    ids.iter()
        .map(|&p| {
            if p < 0 || p as u64 >= points as u64 {
                Err(bad(format!(
                    "\"{field}\" of worker {worker} names point {p}, but ids run from 0 to {}",
                    points.saturating_sub(1)
                )))
            } else {
                Ok(p as u32)
            }
        })
        .collect()
}

/// The instance of the caches and assignment given from Python (`points`: the number of
/// points, by default the assignment's total size).
pub fn instance_from(
    caches: &[Vec<i64>],
    assignment: &[Vec<i64>],
    points: Option<usize>,
) -> Outcome<ShuffleInstance> {
    let workers = assignment.len();
    let points = points.unwrap_or_else(|| assignment.iter().map(Vec::len).sum());
    if caches.len() != workers {
        return Err(bad(format!(
            "\"cache\" has {} lists but there are {workers} workers (one assignment list per worker)",
            caches.len()
        )));
    }
    if u32::try_from(points).is_err() {
        return Err(bad(format!("{points} points is more than this build supports (ids are 32-bit)")));
    }
    let cache = caches
        .iter()
        .enumerate()
        .map(|(w, c)| to_points("cache", w, c, points))
        .collect::<Outcome<Vec<_>>>()?;
    let batches = assignment
        .iter()
        .enumerate()
        .map(|(w, b)| to_points("assignment", w, b, points))
        .collect::<Outcome<Vec<_>>>()?;
    check_generated(workers, points, caches.iter().map(Vec::len).max().unwrap_or(0))?;
    ShuffleInstance::new(workers, points, cache, batches).map_err(bad_error)
}

/// A plan given from Python as flat arrays: transmission `t` is the parts
/// `offsets[t]..offsets[t + 1]` of `points` and `workers`.
pub fn plan_from(offsets: &[i64], points: &[i64], workers: &[i64]) -> Outcome<Plan> {
    if points.len() != workers.len() {
        return Err(bad(format!(
            "a plan's points and workers must have the same length, got {} and {}",
            points.len(),
            workers.len()
        )));
    }
    if offsets.first().is_some_and(|&o| o != 0) || offsets.last().is_some_and(|&o| o as usize != points.len())
    {
        return Err(bad("a plan's offsets must start at 0 and end at the number of parts"));
    }
    let mut plan = Plan::new();
    for pair in offsets.windows(2) {
        let (start, end) = (pair[0], pair[1]);
        if start < 0 || end < start || end as usize > points.len() {
            return Err(bad("a plan's offsets must not decrease"));
        }
        let mut parts = Vec::with_capacity((end - start) as usize);
        for i in start as usize..end as usize {
            let (p, w) = (points[i], workers[i]);
            if p < 0 || w < 0 || p > i64::from(u32::MAX) {
                return Err(bad(format!("transmission part ({p}, {w}) has a negative or too large id")));
            }
            parts.push(Part::new(p as u32, w as usize));
        }
        plan.push(&parts);
    }
    Ok(plan)
}

/// Whether a plan decodes, and each worker that cannot with the points it lacks.
pub type Verdict = (bool, Vec<(usize, Vec<u32>)>);

/// `verify`: whether every worker decodes its batch, and what each missing worker lacks.
pub fn verify_plan(inst: &ShuffleInstance, plan: &Plan) -> Outcome<Verdict> {
    let report = verify(inst, plan).map_err(bad_error)?;
    let missing = report.shortfalls.iter().map(|s| (s.worker, s.missing.clone())).collect();
    Ok((report.is_valid(), missing))
}

/// One epoch of `plan --policy ... --epochs`, as its `per_epoch` JSON.
#[derive(Clone, Debug, serde::Serialize)]
pub struct EpochRecord {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Points put into the exchange.
    pub points_exchanged: usize,
    /// Points whose worker changed.
    pub points_moved: usize,
    /// Transmissions of the verified plan.
    pub transmissions: usize,
    /// Uncoded transmissions of the epoch.
    pub uncoded_transmissions: usize,
    /// Always true: a plan that does not decode is an error.
    pub verified: bool,
}

/// Arguments of [`plan_epochs`].
pub struct EpochsArgs {
    /// Workers.
    pub workers: usize,
    /// Points.
    pub points: usize,
    /// The policy name.
    pub policy: String,
    /// partial-local's fraction.
    pub fraction: Option<f64>,
    /// Storage ratio.
    pub alpha: Option<f64>,
    /// The scheme.
    pub scheme: String,
    /// Epochs to plan.
    pub epochs: usize,
    /// The seed.
    pub seed: u64,
    /// Search budget.
    pub time_budget: Option<f64>,
    /// A plugin library.
    pub plugin: Option<String>,
}

/// `ubershuffle plan --policy P [--fraction Q] --epochs E`: the epochs of the run's
/// [`EpochChain`] (the one `ubershuffle run` and the sampler step), each planned with the
/// chain's planner stream, verified and committed, as the command line does.
pub fn plan_epochs(args: &EpochsArgs) -> Outcome<Vec<EpochRecord>> {
    let options = options(args.time_budget)?;
    let planner = choose_planner(&args.scheme, args.plugin.as_deref(), &options)?;
    if planner.as_pliable().is_some() {
        return Err(bad(format!(
            "--policy does not apply to {}: a pliable scheme chooses the next assignment itself",
            planner.name()
        )));
    }
    let policy = ExchangePolicy::new(&args.policy, args.fraction).map_err(bad_error)?;
    if args.epochs == 0 {
        return Err(bad("--epochs must be at least 1"));
    }
    let (workers, points) = (args.workers, args.points);
    let cache = args.alpha.map_or(points.div_ceil(workers.max(1)), |a| cache_size_for(a, points));
    check_generated(workers, points, cache)?;
    let params = ChainParams::new(workers, points, policy, args.seed);
    let params = match args.alpha {
        Some(alpha) => params.with_alpha(alpha).map_err(bad_error)?,
        None => params,
    };
    let mut chain = EpochChain::new(params).map_err(bad_error)?;
    let mut records = Vec::with_capacity(args.epochs);
    for _ in 0..args.epochs {
        let drawn = chain.draw(&chain.all_workers(), 0).map_err(bad_error)?;
        let epoch = drawn.plan(planner.as_ref(), None).map_err(bad_error)?;
        epoch.verify().map_err(|e| {
            Failure::Internal(format!(
                "epoch {}: scheme {} produced a plan that does not decode: {}",
                epoch.epoch,
                planner.name(),
                crate::errors::one_line(&e)
            ))
        })?;
        chain.commit(&epoch);
        records.push(EpochRecord {
            epoch: epoch.epoch,
            points_exchanged: epoch.points_exchanged,
            points_moved: epoch.points_moved,
            transmissions: epoch.plan.len(),
            uncoded_transmissions: epoch.instance.uncoded_transmissions(),
            verified: true,
        });
    }
    Ok(records)
}
