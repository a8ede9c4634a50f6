//! `pliable`: what the master saves by choosing the next assignment as well as the code
//! (pliable shuffling, after Song, Fragouli and Zhao), against how random the assignment stays.
//!
//! 1. Transmissions against the randomness constraint (candidates per point, from 1 = fully
//!    random to all) at n = 20 and n = 100, q = 1e5, alpha = 0.325, for `pliable-greedy` and
//!    `pliable-hierarchical`, beside coded, UberShuffle and the best fixed-assignment planner
//!    (`auto`) on the fully random assignment, with the randomness of every chosen assignment.
//! 2. Training against epochs in the real epoch loop ([`super::pliable_training`]).
//! 3. The paper's own setting (every batch new to its worker, [`PaperSetting`]): the gain over
//!    index coding against `ns/m`, beside the one-step packing limit.
//!
//! Every plan passes `verify_pliable` (or `verify`) before it is counted.

use std::time::{Duration, Instant};

use serde::Serialize;
use ubershuffle_core::pliable::{PliableRequest, Randomness, verify_pliable};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_core::{GeneratorParams, PlanError, PlannerOptions, ShuffleInstance, ShufflePlanner, verify};
use ubershuffle_planners::PaperSetting;

use super::{Context, pliable_training};
use crate::report::{Headline, LineChart, Report, Row, Series, markdown_table, median};

/// The experiment's name.
pub const NAME: &str = "pliable";
/// What it shows.
pub const ABOUT: &str = "Pliable shuffling (the master chooses the assignment within r random candidates per point): transmissions against r at n = 20 and 100 beside coded, UberShuffle and auto; training loss and randomness per epoch; the paper's setting against its O(ns/m) claim";

/// The two cluster sizes: (workers, points, alpha).
const SETTINGS: [(usize, usize, f64); 2] = [(20, 100_000, 0.325), (100, 100_000, 0.325)];
/// The fixed-assignment schemes planned on the fully random assignment.
const FIXED: [&str; 3] = ["coded", "ubershuffle", "auto"];
/// The pliable schemes.
const PLIABLE: [&str; 2] = ["pliable-greedy", "pliable-hierarchical"];
/// Every planner's search budget (work units, so counts do not depend on the machine).
const BUDGET: Duration = Duration::from_secs(2);
/// The planners' search budget in the paper's (small) setting.
const PAPER_BUDGET: Duration = Duration::from_millis(250);
/// The best fixed-assignment planner, the baseline of the headline.
const BEST_FIXED: &str = "auto";

/// One planned instance.
#[derive(Clone, Debug, Serialize)]
struct Planned {
    workers: usize,
    points: usize,
    alpha: f64,
    seed: u64,
    scheme: &'static str,
    /// "1" .. "all".
    candidates: String,
    /// The candidates as a number (all: n).
    candidates_per_point: usize,
    /// Empty when the scheme refused the instance.
    transmissions: Option<usize>,
    uncoded_chosen: usize,
    uncoded_fully_random: usize,
    made_by: String,
    guaranteed_min_entropy_bits: f64,
    owner_entropy_bits: f64,
    uniform_entropy_bits: f64,
    stay_fraction: f64,
    cached_fraction: f64,
    plan_seconds: f64,
}

impl Row for Planned {
    const MACHINE_COLUMNS: &'static [&'static str] = &["plan_seconds"];
}

/// One plan of the paper's setting.
#[derive(Clone, Debug, Serialize)]
struct PaperPlanned {
    workers: usize,
    messages: usize,
    cache: usize,
    average_cachers: f64,
    seed: u64,
    scheme: &'static str,
    transmissions: usize,
    /// `sum_p 1 / (d_p + 1)`: no plan of one-step packets sends fewer.
    packing_limit: f64,
}

impl Row for PaperPlanned {}

/// The index-coding baseline's label in the paper table.
const INDEX_CODING: &str = "index coding (auto)";

/// What a run sweeps.
struct Sweep {
    /// Candidates per point at n = 20 and n = 100 (`usize::MAX`: all).
    levels: [&'static [usize]; 2],
    seeds: &'static [u64],
    paper_seeds: &'static [u64],
    /// How many of [`SETTINGS`] it plans (the first ones).
    settings: usize,
}

const ALL: usize = usize::MAX;

/// The quick sweep.
const QUICK: Sweep =
    Sweep { levels: [&[1, 2, 3, 4, ALL], &[1, 2, 4, ALL]], seeds: &[1], paper_seeds: &[1], settings: 2 };
/// The full sweep.
const FULL: Sweep = Sweep {
    levels: [&[1, 2, 3, 4, 5, 6, 8, 12, ALL], &[1, 2, 3, 4, 6, 8, 16, 32, ALL]],
    seeds: &[1, 2, 3],
    paper_seeds: &[1, 2, 3, 4, 5],
    settings: 2,
};

/// What `--check --sample` re-runs of the full run.
pub const SAMPLE: &str = "the whole full run (counts, training and the paper setting)";

impl Sweep {
    /// What the sweep measures, in words (for the quick note).
    fn describe(&self) -> String {
        let list = |xs: &[usize]| {
            xs.iter()
                .map(|&c| if c == ALL { "all".into() } else { c.to_string() })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let seeds = |xs: &[u64]| xs.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
        format!(
            "seeds {} (the paper's setting: {}); candidates {} at n = {} and {} at n = {}",
            seeds(self.seeds),
            seeds(self.paper_seeds),
            list(self.levels[0]),
            SETTINGS[0].0,
            list(self.levels[1]),
            SETTINGS[1].0
        )
    }
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> anyhow::Result<Report> {
    let sweep = if ctx.quick { &QUICK } else { &FULL };
    let steps = SETTINGS.len() * sweep.seeds.len() * 2 + pliable_training::RUNS;
    let bar = ctx.progress(steps as u64, NAME);
    let rows = measure(sweep, &|| bar.inc(1))?;
    let paper = paper_rows(sweep.paper_seeds)?;
    let goal = goal(&rows);
    let training = pliable_training::run(ctx.quick, goal.map(|g| g.0), &|| bar.inc(1))?;
    bar.finish_and_clear();
    let mut report = Report::new(
        summary(&rows, &paper, goal, &training)
            + &ctx.quick_note(&format!(
                "{}; training: {}; the full run: {}; training: {}",
                QUICK.describe(),
                pliable_training::describe(true),
                FULL.describe(),
                pliable_training::describe(false)
            )),
    )
    .table(format!("{NAME}.csv"), &rows)?
    .table(format!("{NAME}-training.csv"), &training.rows)?
    .table(format!("{NAME}-paper.csv"), &paper)?
    .headlines(headlines(&rows, &paper, goal, &training));
    for (workers, ..) in SETTINGS {
        let suffix = if workers == SETTINGS[0].0 { String::new() } else { format!("n{workers}") };
        report = report.figure(suffix, count_chart(&rows, workers));
    }
    report = report.figure("entropy", entropy_chart(&rows));
    for figure in training.figures {
        report = report.figure(figure.suffix, figure.chart);
    }
    Ok(report.figure("paper", paper_chart(&paper)))
}

/// One fixed-assignment planner's row on `inst` (the fully random assignment, `one`'s), or its
/// refusal past its reach.
fn fixed_row(
    name: &'static str,
    planner: &dyn ShufflePlanner,
    inst: &ShuffleInstance,
    one: &PliableRequest,
    seed: u64,
    base: &Planned,
) -> anyhow::Result<Planned> {
    let started = Instant::now();
    let outcome = planner.plan_explained(inst, &mut seeded_stream(seed, 1));
    let plan_seconds = started.elapsed().as_secs_f64();
    Ok(match outcome {
        Ok(planned) => {
            verify(inst, &planned.plan)?.ensure_valid()?;
            // The fully random assignment's randomness, measured as for the others.
            let report = verify_pliable(
                one,
                &ubershuffle_core::pliable::PliablePlan::new(inst.clone(), planned.plan.clone(), ""),
            )?;
            Planned {
                scheme: name,
                transmissions: Some(planned.plan.len()),
                made_by: planned.made_by,
                owner_entropy_bits: report.chosen.owner_entropy_bits.unwrap_or(f64::NAN),
                stay_fraction: report.chosen.stay_fraction.unwrap_or(f64::NAN),
                cached_fraction: report.chosen.cached_fraction,
                plan_seconds,
                ..base.clone()
            }
        }
        Err(e @ (PlanError::OverBudget { .. } | PlanError::TooManyWorkers { .. })) => {
            Planned { scheme: name, made_by: format!("refused: {}", refusal(&e)), ..base.clone() }
        }
        Err(e) => return Err(e.into()),
    })
}

fn level(candidates: usize) -> Randomness {
    if candidates == ALL { Randomness::All } else { Randomness::Candidates(candidates) }
}

fn measure(sweep: &Sweep, progress: &dyn Fn()) -> anyhow::Result<Vec<Planned>> {
    let options = PlannerOptions::default().with_time_budget(BUDGET);
    let fixed: Vec<Box<dyn ShufflePlanner>> =
        FIXED.iter().map(|s| super::planner(s, &options)).collect::<anyhow::Result<_>>()?;
    let pliable: Vec<Box<dyn ShufflePlanner>> =
        PLIABLE.iter().map(|s| super::planner(s, &options)).collect::<anyhow::Result<_>>()?;
    let mut rows = Vec::new();
    for (k, &(workers, points, alpha)) in SETTINGS.iter().enumerate().take(sweep.settings) {
        for &seed in sweep.seeds {
            let params = GeneratorParams { workers, points, alpha, seed }.check()?;
            let (inst, previous) = params.generate_with_previous(&mut ubershuffle_core::seeded(seed));
            let one =
                PliableRequest::new(inst.clone(), Randomness::FULLY_RANDOM, &mut seeded_stream(seed, 2))?
                    .with_previous_batches(&previous)?;
            let base = Planned {
                workers,
                points,
                alpha,
                seed,
                scheme: "",
                candidates: "1".into(),
                candidates_per_point: 1,
                transmissions: None,
                uncoded_chosen: inst.uncoded_transmissions(),
                uncoded_fully_random: inst.uncoded_transmissions(),
                made_by: String::new(),
                guaranteed_min_entropy_bits: Randomness::FULLY_RANDOM.guaranteed_min_entropy_bits(workers),
                owner_entropy_bits: f64::NAN,
                uniform_entropy_bits: (workers as f64).log2(),
                stay_fraction: f64::NAN,
                cached_fraction: f64::NAN,
                plan_seconds: 0.0,
            };
            for (name, planner) in FIXED.iter().zip(&fixed) {
                rows.push(fixed_row(name, planner.as_ref(), &inst, &one, seed, &base)?);
            }
            progress();
            for &candidates in sweep.levels[k] {
                let randomness = level(candidates);
                let request = PliableRequest::new(inst.clone(), randomness, &mut seeded_stream(seed, 2))?
                    .with_previous_batches(&previous)?;
                for (name, planner) in PLIABLE.iter().zip(&pliable) {
                    let pliable =
                        planner.as_pliable().ok_or_else(|| anyhow::anyhow!("{name} is not pliable"))?;
                    let started = Instant::now();
                    let planned = pliable.plan_pliable(&request, &mut seeded_stream(seed, 1))?;
                    let plan_seconds = started.elapsed().as_secs_f64();
                    let report = verify_pliable(&request, &planned)?;
                    report.ensure_valid()?;
                    rows.push(Planned {
                        scheme: name,
                        candidates: randomness.to_string(),
                        candidates_per_point: randomness.candidates(workers),
                        transmissions: Some(planned.plan.len()),
                        uncoded_chosen: report.uncoded_transmissions,
                        made_by: planned.made_by,
                        guaranteed_min_entropy_bits: report.guaranteed_min_entropy_bits,
                        owner_entropy_bits: report.chosen.owner_entropy_bits.unwrap_or(f64::NAN),
                        stay_fraction: report.chosen.stay_fraction.unwrap_or(f64::NAN),
                        cached_fraction: report.chosen.cached_fraction,
                        plan_seconds,
                        ..base.clone()
                    });
                }
            }
            progress();
        }
    }
    Ok(rows)
}

/// Why a scheme refused, in a few words (the error's first clause).
fn refusal(e: &PlanError) -> String {
    match e {
        PlanError::OverBudget { .. } => "past its reach within the budget".into(),
        PlanError::TooManyWorkers { max, .. } => format!("more than {max} workers"),
        other => other.to_string(),
    }
}

/// The paper's setting: n = 20, m = 200 and n = 100, m = 300, caches from 1 to 10 (or 20)
/// times `m/n`.
fn paper_rows(seeds: &[u64]) -> anyhow::Result<Vec<PaperPlanned>> {
    let options = PlannerOptions::default().with_time_budget(PAPER_BUDGET);
    let auto = super::planner("auto", &options)?;
    let pliable: Vec<Box<dyn ShufflePlanner>> =
        PLIABLE.iter().map(|s| super::planner(s, &options)).collect::<anyhow::Result<_>>()?;
    let settings: [(usize, usize, &[usize]); 2] =
        [(20, 200, &[10, 20, 40, 60, 80, 100]), (100, 300, &[3, 6, 15, 30, 60])];
    let mut rows = Vec::new();
    for (workers, messages, caches) in settings {
        for &cache in caches {
            for &seed in seeds {
                let setting = PaperSetting { messages, workers, cache, seed };
                let request = setting.request()?;
                let inst = request.fully_random();
                let limit: f64 =
                    (0..messages as u32).map(|p| 1.0 / (inst.cachers_of(p).len() as f64 + 1.0)).sum();
                let row = |scheme, transmissions| PaperPlanned {
                    workers,
                    messages,
                    cache,
                    average_cachers: setting.average_cachers(),
                    seed,
                    scheme,
                    transmissions,
                    packing_limit: limit,
                };
                let ic = auto.plan(inst, &mut seeded_stream(seed, 1))?;
                verify(inst, &ic)?.ensure_valid()?;
                rows.push(row(INDEX_CODING, ic.len()));
                for (name, planner) in PLIABLE.iter().zip(&pliable) {
                    let pliable =
                        planner.as_pliable().ok_or_else(|| anyhow::anyhow!("{name} is not pliable"))?;
                    let planned = pliable.plan_pliable(&request, &mut seeded_stream(seed, 1))?;
                    verify_pliable(&request, &planned)?.ensure_valid()?;
                    rows.push(row(name, planned.plan.len()));
                }
            }
        }
    }
    Ok(rows)
}

/// Median transmissions of `scheme` at `workers` and `candidates` (fixed schemes: "1").
fn count(rows: &[Planned], workers: usize, scheme: &str, candidates: &str) -> Option<f64> {
    let at: Vec<f64> = rows
        .iter()
        .filter(|r| r.workers == workers && r.scheme == scheme && r.candidates == candidates)
        .filter_map(|r| r.transmissions.map(|t| t as f64))
        .collect();
    (!at.is_empty()).then(|| median(at))
}

/// Median of `f` over the rows of (workers, scheme, candidates).
fn stat(rows: &[Planned], workers: usize, scheme: &str, candidates: &str, f: fn(&Planned) -> f64) -> f64 {
    median(
        rows.iter()
            .filter(|r| r.workers == workers && r.scheme == scheme && r.candidates == candidates)
            .map(f),
    )
}

/// The candidate levels measured at `workers`, in increasing order, as labels.
fn levels(rows: &[Planned], workers: usize) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = rows
        .iter()
        .filter(|r| r.workers == workers && r.scheme == PLIABLE[0])
        .map(|r| (r.candidates_per_point, r.candidates.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The goal of the issue at n = 20: the fewest candidates at which `pliable-greedy` sends at
/// most half of the best fixed-assignment planner, and its ratio.
fn goal(rows: &[Planned]) -> Option<(Randomness, f64)> {
    let n = SETTINGS[0].0;
    let best = count(rows, n, BEST_FIXED, "1")?;
    levels(rows, n).into_iter().find_map(|(_, label)| {
        let ratio = best / count(rows, n, PLIABLE[0], &label)?;
        let randomness: Randomness = label.parse().ok()?;
        (ratio >= 2.0).then_some((randomness, ratio))
    })
}

fn count_chart(rows: &[Planned], workers: usize) -> LineChart {
    let levels = levels(rows, workers);
    let xs: Vec<f64> = levels.iter().map(|(c, _)| *c as f64).collect();
    let mut series: Vec<Series> = PLIABLE
        .iter()
        .map(|&s| {
            let curve = levels.iter().filter_map(|(c, l)| count(rows, workers, s, l).map(|t| (*c as f64, t)));
            Series::solid(s, curve.collect())
        })
        .collect();
    for scheme in FIXED {
        if let Some(t) = count(rows, workers, scheme, "1") {
            series.push(Series::dashed(
                format!("{scheme} (fully random)"),
                xs.iter().map(|&x| (x, t)).collect(),
            ));
        }
    }
    LineChart {
        title: format!("Pliable shuffling, n = {workers}, q = {}, alpha = {}", SETTINGS[0].1, SETTINGS[0].2),
        x_label: format!("candidates per point (1 = fully random, {workers} = all)"),
        y_label: "transmissions (median over seeds)".into(),
        log_x: true,
        series,
        ..Default::default()
    }
}

fn entropy_chart(rows: &[Planned]) -> LineChart {
    let mut series = Vec::new();
    for (workers, ..) in SETTINGS {
        let Some(best) = count(rows, workers, BEST_FIXED, "1") else { continue };
        let uniform = (workers as f64).log2();
        for scheme in PLIABLE {
            let curve = levels(rows, workers)
                .iter()
                .filter_map(|(_, l)| {
                    let kept = stat(rows, workers, scheme, l, |r| r.guaranteed_min_entropy_bits) / uniform;
                    count(rows, workers, scheme, l).map(|t| (kept, t / best))
                })
                .collect();
            series.push(Series::solid(
                format!("{}, n = {workers}", scheme.trim_start_matches("pliable-")),
                curve,
            ));
        }
    }
    LineChart {
        title: "The trade-off: transmissions against the randomness the constraint guarantees".into(),
        x_label: "guaranteed min-entropy of each point's owner / log2 n (1 = fully random, 0 = all)".into(),
        y_label: "transmissions / auto on the fully random assignment".into(),
        series,
        ..Default::default()
    }
}

fn paper_chart(rows: &[PaperPlanned]) -> LineChart {
    let workers = rows.first().map_or(20, |r| r.workers);
    let mut cachers: Vec<f64> =
        rows.iter().filter(|r| r.workers == workers).map(|r| r.average_cachers).collect();
    cachers.sort_by(f64::total_cmp);
    cachers.dedup();
    let gain = |scheme: &str, x: f64| paper_gain(rows, workers, scheme, x);
    let mut series: Vec<Series> = PLIABLE
        .iter()
        .map(|&s| Series::solid(s, cachers.iter().filter_map(|&x| gain(s, x).map(|g| (x, g))).collect()))
        .collect();
    series.push(Series::dashed(
        "packing limit",
        cachers.iter().filter_map(|&x| gain("limit", x).map(|g| (x, g))).collect(),
    ));
    LineChart {
        title: format!("The paper's setting: gain over index coding, n = {workers}"),
        x_label: "ns/m (average workers caching a message)".into(),
        y_label: "index coding / scheme (median over seeds)".into(),
        series,
        ..Default::default()
    }
}

/// Index coding / `scheme` at (workers, ns/m), median over seeds ("limit": the packing limit).
fn paper_gain(rows: &[PaperPlanned], workers: usize, scheme: &str, cachers: f64) -> Option<f64> {
    let at = |s: &str| -> Vec<&PaperPlanned> {
        rows.iter()
            .filter(|r| r.workers == workers && r.average_cachers == cachers && r.scheme == s)
            .collect()
    };
    let ic = at(INDEX_CODING);
    if ic.is_empty() {
        return None;
    }
    let ratios: Vec<f64> = if scheme == "limit" {
        ic.iter().map(|r| r.transmissions as f64 / r.packing_limit).collect()
    } else {
        let of = at(scheme);
        ic.iter()
            .filter_map(|r| {
                of.iter().find(|o| o.seed == r.seed).map(|o| r.transmissions as f64 / o.transmissions as f64)
            })
            .collect()
    };
    (!ratios.is_empty()).then(|| median(ratios))
}

fn summary(
    rows: &[Planned],
    paper: &[PaperPlanned],
    goal: Option<(Randomness, f64)>,
    training: &pliable_training::Training,
) -> String {
    let mut text = String::from(
        "Each point's next owner must be one of r workers drawn uniformly at random before planning \
         (`--candidates r`; r = 1 is fully random shuffling, the assignment every other scheme takes as given; \
         `all`: any balanced assignment). The pliable planners choose the owners and the packets together \
         (`docs/pliable.md`); coded, UberShuffle and `auto` (the best fixed-assignment planner) plan the fully \
         random assignment. Every plan passed `verify_pliable` (constraint, full batches, decoding at every \
         worker). Entropy is H(next owner | previous owner) of the chosen assignment (uniform: log2 n); \
         \"stay\" the points left with their previous worker; \"cached\" the points given to a worker caching \
         them, which cost nothing.\n\n",
    );
    for (workers, points, alpha) in SETTINGS {
        let best = count(rows, workers, BEST_FIXED, "1");
        let fixed: Vec<String> = FIXED
            .iter()
            .map(|s| match count(rows, workers, s, "1") {
                Some(t) => format!("{s} {t:.0}"),
                None => format!("{s} refused"),
            })
            .collect();
        let lines = levels(rows, workers).into_iter().map(|(_, l)| {
            let c = |s: &str| count(rows, workers, s, &l).map_or("-".into(), |t| format!("{t:.0}"));
            let ratio = match (best, count(rows, workers, PLIABLE[0], &l)) {
                (Some(b), Some(t)) if t > 0.0 && b / t < 100.0 => format!("{:.2}x", b / t),
                (Some(b), Some(t)) if t > 0.0 => format!("{:.0}x", b / t),
                (Some(_), Some(_)) => "nothing sent".into(),
                _ => "-".into(),
            };
            let s = |f: fn(&Planned) -> f64| stat(rows, workers, PLIABLE[0], &l, f);
            vec![
                l.clone(),
                c(PLIABLE[0]),
                ratio,
                c(PLIABLE[1]),
                format!("{:.2}", s(|r| r.guaranteed_min_entropy_bits)),
                format!("{:.3}", s(|r| r.owner_entropy_bits)),
                format!("{:.1} %", 100.0 * s(|r| r.stay_fraction)),
                format!("{:.1} %", 100.0 * s(|r| r.cached_fraction)),
            ]
        });
        text += &format!(
            "**n = {workers}, q = {points}, alpha = {alpha}** (fully random assignment: {}; its entropy {:.3} bits, {:.1} % stay, {:.1} % cached):\n\n{}\n",
            fixed.join(", "),
            stat(rows, workers, BEST_FIXED, "1", |r| r.owner_entropy_bits),
            100.0 * stat(rows, workers, BEST_FIXED, "1", |r| r.stay_fraction),
            100.0 * stat(rows, workers, BEST_FIXED, "1", |r| r.cached_fraction),
            markdown_table(
                &[
                    "candidates",
                    "pliable-greedy",
                    "auto / greedy",
                    "pliable-hierarchical",
                    "guaranteed min-entropy, bits",
                    "entropy (greedy), bits",
                    "stay",
                    "cached"
                ],
                lines
            )
        );
    }
    text += &goal_note(rows, goal);
    text += &training.summary;
    text += &paper_summary(paper);
    text
}

/// The fewest candidates that halve `auto`'s count at the first setting, and what the two ends
/// send, counted from the rows.
fn goal_note(rows: &[Planned], goal: Option<(Randomness, f64)>) -> String {
    match goal {
        Some((r, ratio)) => format!(
            "At n = {}, the fewest candidates with which `pliable-greedy` sends at most half of `auto`: **{r}** \
             ({ratio:.2}x fewer). With one candidate `pliable-greedy` is `auto` on the same assignment (the same \
             count, by construction); {}\n\n",
            SETTINGS[0].0,
            all_candidates_note(rows)
        ),
        None => format!("At n = {}, no level measured halves `auto`'s count.\n\n", SETTINGS[0].0),
    }
}

/// What the plans with every candidate allowed send, counted from their rows (a few points may
/// have no cacher among the workers with room, so "nothing" is not assumed).
fn all_candidates_note(rows: &[Planned]) -> String {
    let counts: Vec<usize> =
        rows.iter().filter(|r| r.candidates == "all").filter_map(|r| r.transmissions).collect();
    let (most, silent) =
        (counts.iter().copied().max().unwrap_or(0), counts.iter().filter(|&&c| c == 0).count());
    if counts.is_empty() {
        "no plan ran with all candidates.".into()
    } else if most == 0 {
        format!(
            "with all, every worker keeps points it caches and nothing is sent (all {} plans).",
            counts.len()
        )
    } else {
        format!(
            "with all, workers are given points they cache: {silent} of {} plans send nothing, the others at most \
             {most} transmission(s).",
            counts.len()
        )
    }
}

fn paper_summary(paper: &[PaperPlanned]) -> String {
    let mut keys: Vec<(usize, usize, usize, f64)> =
        paper.iter().map(|r| (r.workers, r.messages, r.cache, r.average_cachers)).collect();
    keys.dedup();
    let lines = keys.iter().map(|&(n, m, s, x)| {
        let med = |scheme: &str| {
            median(
                paper
                    .iter()
                    .filter(|r| r.workers == n && r.cache == s && r.scheme == scheme)
                    .map(|r| r.transmissions as f64),
            )
        };
        let limit = median(paper.iter().filter(|r| r.workers == n && r.cache == s).map(|r| r.packing_limit));
        let gain = |scheme| paper_gain(paper, n, scheme, x).map_or("-".into(), |g| format!("{g:.2}x"));
        vec![
            format!("{n}, {m}, {s}"),
            format!("{x:.1}"),
            format!("{:.0}", med(INDEX_CODING)),
            format!("{:.0} ({})", med(PLIABLE[0]), gain(PLIABLE[0])),
            format!("{:.0} ({})", med(PLIABLE[1]), gain(PLIABLE[1])),
            format!("{limit:.1} ({})", gain("limit")),
        ]
    });
    format!(
        "\n**The paper's setting** (Song, Fragouli and Zhao; reconstructed, see `docs/pliable.md`): m messages, \
         n workers each caching s uniformly random ones, every message to exactly one worker that does not \
         cache it, balanced batches. Index coding plans a random such assignment with `auto`; the pliable \
         schemes choose it. The paper finds gains over index coding of up to O(ns/m); a plan of one-step \
         packets cannot beat sum_p 1/(d_p + 1) (d_p the cachers of message p), about m/(ns/m + 1), which is \
         where an O(ns/m) gain over sending every message would come from. The limit is loose: it lets every \
         cacher of a message share its packet, while random caches rarely let many receivers each cache all \
         of a packet's other messages. Medians over seeds (gain over index coding in brackets):\n\n{}",
        markdown_table(
            &["n, m, s", "ns/m", "index coding", "pliable-greedy", "pliable-hierarchical", "packing limit"],
            lines
        )
    )
}

fn headlines(
    rows: &[Planned],
    paper: &[PaperPlanned],
    goal: Option<(Randomness, f64)>,
    training: &pliable_training::Training,
) -> Vec<Headline> {
    let (n, q, alpha) = SETTINGS[0];
    let mut out = Vec::new();
    if let (Some((r, ratio)), Some(best)) = (goal, count(rows, n, BEST_FIXED, "1")) {
        let loss =
            training.goal_loss.map_or(String::new(), |d| format!(", final LR loss {d:+.2} % vs uniform"));
        out.push(Headline {
            what: format!("pliable-greedy vs auto (best fixed assignment), n = {n}, q = {q}, alpha = {alpha}"),
            ours: format!("{ratio:.2}x fewer with {r} candidates per point{loss}"),
            paper: "(ours)".into(),
            table: format!("{NAME}.csv"),
            rows: format!(
                "workers={n}, schemes auto (candidates=1, {best:.0}) and pliable-greedy (candidates={r}); {NAME}-training.csv"
            ),
            machine: false,
        });
    }
    let workers = paper.first().map_or(20, |r| r.workers);
    let top = paper.iter().filter(|r| r.workers == workers).map(|r| r.average_cachers).fold(0.0, f64::max);
    if let Some(g) = paper_gain(paper, workers, PLIABLE[0], top) {
        let h = paper_gain(paper, workers, PLIABLE[1], top).map_or("-".into(), |h| format!("{h:.2}x"));
        out.push(Headline {
            what: format!("Song-Fragouli-Zhao setting, n = {workers}, ns/m = {top}: pliable / index coding"),
            ours: format!("{g:.2}x greedy, {h} hierarchical (reconstructed)"),
            paper: "up to O(ns/m)".into(),
            table: format!("{NAME}-paper.csv"),
            rows: format!("workers={workers}, average_cachers={top}, median over seeds"),
            machine: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workers: usize, scheme: &'static str, candidates: &str, transmissions: usize) -> Planned {
        let level: Randomness = candidates.parse().unwrap();
        Planned {
            workers,
            points: 1000,
            alpha: 0.3,
            seed: 1,
            scheme,
            candidates: candidates.into(),
            candidates_per_point: level.candidates(workers),
            transmissions: Some(transmissions),
            uncoded_chosen: 0,
            uncoded_fully_random: 0,
            made_by: String::new(),
            guaranteed_min_entropy_bits: level.guaranteed_min_entropy_bits(workers),
            owner_entropy_bits: 0.0,
            uniform_entropy_bits: 0.0,
            stay_fraction: 0.0,
            cached_fraction: 0.0,
            plan_seconds: 0.0,
        }
    }

    #[test]
    fn the_goal_is_the_fewest_candidates_that_halve_the_best_fixed_planner() {
        let mut rows = vec![row(20, "auto", "1", 1000)];
        for (c, t) in [("1", 1000), ("2", 700), ("3", 480), ("12", 100), ("all", 0)] {
            rows.push(row(20, PLIABLE[0], c, t));
        }
        let (r, ratio) = goal(&rows).unwrap();
        assert_eq!(r, Randomness::Candidates(3));
        assert!((ratio - 1000.0 / 480.0).abs() < 1e-12);
        // Levels are ordered by their number, not as text ("12" after "3").
        assert_eq!(levels(&rows, 20).last().map(|(c, _)| *c), Some(20));
        rows.retain(|r| r.candidates != "3" && r.candidates != "12" && r.candidates != "all");
        assert_eq!(goal(&rows), None);
    }
}
