//! `ubershuffle gradient-coding`: the expected decoding error of a gradient code under the
//! heterogeneous straggler model, by the theorems, exact enumeration and Monte Carlo.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::{Value, json};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_gradient_codes::EncodingMatrix;
use ubershuffle_learners::gradient_coding::expected::{
    ExpectedErrorReport, MonteCarloOptions, ThreeWays, expected_error_report,
};
use ubershuffle_learners::straggler::HeterogeneousParams;

use crate::cli::GradientCodingArgs;
use crate::output::{print_json, print_line, print_table};

/// 95 % normal confidence intervals.
const Z95: f64 = 1.96;

fn methods_json(t: &ThreeWays) -> Value {
    let (lo, hi) = t.monte_carlo.interval(Z95);
    json!({
        "analytic": t.analytic,
        "enumeration": t.enumeration.map(|e| e.mean),
        "enumeration_min_over_placements": t.enumeration.map(|e| e.min_over_placements),
        "enumeration_max_over_placements": t.enumeration.map(|e| e.max_over_placements),
        "monte_carlo": t.monte_carlo.mean,
        "monte_carlo_ci95": [lo, hi],
    })
}

fn show(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.4}"))
}

/// Computes and prints the report.
pub fn run(args: &GradientCodingArgs) -> anyhow::Result<ExitCode> {
    let e = &args.execute;
    if e.run {
        return super::gradient_coding_run::run(args);
    }
    if e.transport != crate::cli::TransportKind::Inproc || e.listen.is_some() || e.slow_workers.is_some() {
        bail!("--transport, --listen and --slow-workers execute the descent: add --run");
    }
    let (kind, shuffle) = (args.code, args.shuffle);
    if args.runs < 2 {
        bail!("--runs must be at least 2, got {}", args.runs);
    }
    let code = kind.build(args.workers, args.replication, &mut seeded_stream(args.seed, 1))?;
    let iterations = args.iterations.unwrap_or(2 * args.workers);
    if iterations == 0 {
        bail!("--iterations must be positive");
    }
    let params = HeterogeneousParams::new(args.p_slow, args.p_slow_straggle, args.p_active_straggle);
    let options = MonteCarloOptions::new(args.runs, iterations, args.seed);
    let report = expected_error_report(&code, params, shuffle, options)?;
    if args.json {
        let by_m: Vec<Value> = report
            .by_slow_count
            .iter()
            .map(|(m, p, t)| {
                let mut v = methods_json(t);
                v["slow_workers"] = json!(m);
                v["probability"] = json!(p);
                v
            })
            .collect();
        print_json(&json!({
            "code": kind.name(),
            "workers": args.workers,
            "replication": code.replication(),
            "p_slow": args.p_slow,
            "p_slow_straggle": args.p_slow_straggle,
            "p_active_straggle": args.p_active_straggle,
            "shuffle": shuffle.name(),
            "marginal_straggle_probability": report.marginal_straggle,
            "expected_error": methods_json(&report.drawn),
            "by_slow_workers": by_m,
            "monte_carlo_runs": args.runs,
            "monte_carlo_iterations_per_run": iterations,
            "seed": args.seed,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    print_text(args, &code, &report, iterations)?;
    Ok(ExitCode::SUCCESS)
}

/// The report as tables: the drawn placement's expected error three ways, then by the number
/// of slow workers.
fn print_text(
    args: &GradientCodingArgs,
    code: &EncodingMatrix,
    report: &ExpectedErrorReport,
    iterations: usize,
) -> anyhow::Result<()> {
    let (kind, shuffle) = (args.code, args.shuffle);
    let (lo, hi) = report.drawn.monte_carlo.interval(Z95);
    print_table(&[
        ("code", format!("{} (n = {}, s = {})", kind.name(), args.workers, code.replication())),
        ("shuffle", shuffle.name().to_string()),
        (
            "straggle prob. per worker",
            format!("{:.4} (p_hat p_ss + (1 - p_hat) p_as)", report.marginal_straggle),
        ),
        ("E[err] analytic", show(report.drawn.analytic)),
        ("E[err] enumeration", show(report.drawn.enumeration.map(|e| e.mean))),
        (
            "E[err] Monte Carlo",
            format!(
                "{:.4} (95% CI {lo:.4} .. {hi:.4}; {} runs x {iterations} iterations)",
                report.drawn.monte_carlo.mean, args.runs
            ),
        ),
    ])?;
    print_line("")?;
    print_line(
        "Exactly m slow workers (placed uniformly at random); placement range = long-run error of the best and worst placement under this shuffle:",
    )?;
    print_line(&format!(
        "{:>3} {:>8} {:>9} {:>11} {:>21} {:>9}",
        "m", "P_m", "analytic", "enumeration", "placement range", "MC"
    ))?;
    for (m, p, t) in &report.by_slow_count {
        let range = t
            .enumeration
            .map_or("-".into(), |e| format!("{:.4} .. {:.4}", e.min_over_placements, e.max_over_placements));
        print_line(&format!(
            "{m:>3} {p:>8.4} {:>9} {:>11} {range:>21} {:>9.4}",
            show(t.analytic),
            show(t.enumeration.map(|e| e.mean)),
            t.monte_carlo.mean
        ))?;
    }
    Ok(())
}
