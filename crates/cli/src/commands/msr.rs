//! `ubershuffle msr`: coded map-shuffle-reduce with stragglers. Prints both schemes' closed-form
//! loads, executes both on one random task (the first q finishers of sampled shifted-exponential
//! map times are the non-stragglers), and reports the counted messages and whether Y = A X.

use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use ubershuffle_core::rng::seeded_stream;
use ubershuffle_msr::{
    DEFAULT_INNER, ExecutionReport, MapRound, MatrixTask, MsrParams, MsrSetting, Ratio, SchemeDesign,
    ShiftedExponential, execute, expected_map_latency, improved_design, sample_map_round, smallest_columns,
    smallest_sizes, unified_design,
};

use crate::cli::MsrArgs;
use crate::output::{print_json, print_table};

/// Executions estimated above this many field operations are skipped (a few seconds in release).
const WORK_LIMIT: f64 = 1e10;
/// Executions estimated to hold more than this many bytes are skipped.
const BYTES_LIMIT: f64 = 1.0e9;
/// The stream of the seed that draws the map times (A and X use streams 0 and 1).
const MAP_TIMES_STREAM: u64 = 2;

/// The design's fields for JSON.
fn design_json(d: &SchemeDesign, rows: usize, columns: usize) -> anyhow::Result<Value> {
    Ok(json!({
        "repetition": d.repetition,
        "mds_rate": d.mds_rate.to_string(),
        "storage_used": d.storage_used.to_string(),
        "phases": d.phases.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "load": d.load.to_f64(),
        "load_exact": d.load.to_string(),
        "closed_form_messages": u64::try_from(d.closed_form_messages(rows, columns)?)?,
    }))
}

/// The rows and columns to run at: the user's (checked against both designs) or the smallest.
fn sizes(args: &MsrArgs, designs: [&SchemeDesign; 2]) -> anyhow::Result<(usize, usize)> {
    let (smallest_rows, _) = smallest_sizes(&designs)?;
    let rows = args.rows.unwrap_or(smallest_rows);
    for d in designs {
        d.layout(rows).with_context(|| {
            format!("--rows (both schemes run on one A; the smallest M suiting both is {smallest_rows})")
        })?;
    }
    let columns = match args.columns {
        Some(n) => n,
        None => smallest_columns(&designs, rows)?,
    };
    for d in designs {
        d.columns_per_server(rows, columns).context("--columns")?;
    }
    Ok((rows, columns))
}

/// Checks the flags, runs, prints; exits non-zero if an execution disagrees with its closed
/// form or with A X.
pub fn run(args: &MsrArgs) -> anyhow::Result<ExitCode> {
    let storage: Ratio = args.storage.parse().context("--storage")?;
    if !(args.rate.is_finite() && args.rate > 0.0) {
        bail!("--rate must be a positive number, got {}", args.rate);
    }
    let setting: MsrSetting = MsrParams::new(args.servers, storage, args.wait).check()?;
    let unified = unified_design(&setting)?;
    let improved = improved_design(&setting)?;
    let (rows, columns) = sizes(args, [&unified, &improved])?;

    let model = ShiftedExponential { shift: storage.to_f64() * columns as f64, rate: args.rate };
    let round = sample_map_round(
        setting.servers(),
        setting.wait(),
        model,
        &mut seeded_stream(args.seed, MAP_TIMES_STREAM),
    );
    let expected_latency =
        expected_map_latency(setting.servers(), setting.wait(), storage.to_f64(), columns as f64, args.rate);

    let reports = execute_both(args, [&unified, &improved], rows, columns, &round.non_stragglers)?;
    let closed = |d: &SchemeDesign| -> anyhow::Result<u64> {
        Ok(u64::try_from(d.closed_form_messages(rows, columns)?)?)
    };
    let (closed_unified, closed_improved) = (closed(&unified)?, closed(&improved)?);
    let counts_match =
        reports.as_ref().map(|(u, i)| u.messages == closed_unified && i.messages == closed_improved);
    let products_match = reports.as_ref().map(|(u, i)| u.product_matches && i.product_matches);
    let improvement = match improved.load > Ratio::ZERO {
        true => Some(unified.load.over(improved.load)?.to_f64()),
        false => None,
    };

    let o = Outcome {
        setting: &setting,
        storage,
        rows,
        columns,
        unified: &unified,
        improved: &improved,
        round: &round,
        expected_latency,
        reports: reports.as_ref(),
        closed: [closed_unified, closed_improved],
        improvement,
    };
    if args.json {
        print_outcome_json(args, &o, counts_match, products_match)?;
    } else {
        print_outcome_table(&o)?;
    }
    let ok = counts_match.unwrap_or(true) && products_match.unwrap_or(true);
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Both schemes executed on a random task, or `None` (with a note) when the sizes pass the
/// work or memory limits.
fn execute_both(
    args: &MsrArgs,
    [unified, improved]: [&SchemeDesign; 2],
    rows: usize,
    columns: usize,
    non_stragglers: &[usize],
) -> anyhow::Result<Option<(ExecutionReport, ExecutionReport)>> {
    let work = unified.execution_work(rows, columns, DEFAULT_INNER)
        + improved.execution_work(rows, columns, DEFAULT_INNER);
    let bytes = unified.execution_bytes(rows, columns).max(improved.execution_bytes(rows, columns));
    Ok(if work <= WORK_LIMIT && bytes <= BYTES_LIMIT {
        let task = MatrixTask::random(rows, DEFAULT_INNER, columns, args.seed);
        Some((
            execute(unified, &task, non_stragglers).context("executing the unified scheme")?,
            execute(improved, &task, non_stragglers).context("executing the improved scheme")?,
        ))
    } else {
        eprintln!(
            "note: not executed: M = {rows}, N = {columns} need about {work:.1e} field operations and {:.0} MB (limits {WORK_LIMIT:.0e}, {:.0} MB); closed forms only",
            bytes / 1e6,
            BYTES_LIMIT / 1e6
        );
        None
    })
}

/// What a run computed, for printing.
struct Outcome<'a> {
    setting: &'a MsrSetting,
    storage: Ratio,
    rows: usize,
    columns: usize,
    unified: &'a SchemeDesign,
    improved: &'a SchemeDesign,
    round: &'a MapRound,
    expected_latency: f64,
    reports: Option<&'a (ExecutionReport, ExecutionReport)>,
    closed: [u64; 2],
    improvement: Option<f64>,
}

fn print_outcome_json(
    args: &MsrArgs,
    o: &Outcome<'_>,
    counts_match: Option<bool>,
    products_match: Option<bool>,
) -> anyhow::Result<()> {
    let Outcome {
        setting,
        storage,
        rows,
        columns,
        unified,
        improved,
        round,
        expected_latency,
        reports,
        improvement,
        ..
    } = o;
    let (rows, columns, storage, expected_latency, improvement) =
        (*rows, *columns, *storage, *expected_latency, *improvement);
    print_json(&json!({
        "servers": setting.servers(),
        "storage": storage.to_string(),
        "storage_value": storage.to_f64(),
        "wait": setting.wait(),
        "seed": args.seed,
        "rate": args.rate,
        "rows": rows,
        "columns": columns,
        "inner": DEFAULT_INNER,
        "load_unified": unified.load.to_f64(),
        "load_improved": improved.load.to_f64(),
        "improvement": improvement,
        "unified": design_json(unified, rows, columns)?,
        "improved": design_json(improved, rows, columns)?,
        "non_stragglers": round.non_stragglers,
        "expected_map_latency": expected_latency,
        "sampled_map_latency": round.latency,
        "executed": reports.is_some(),
        "executed_unified_messages": reports.map(|(u, _)| u.messages),
        "executed_improved_messages": reports.map(|(_, i)| i.messages),
        "executed_load_unified": reports.map(|(u, _)| u.load.to_f64()),
        "executed_load_improved": reports.map(|(_, i)| i.load.to_f64()),
        "counts_match": counts_match,
        "product_matches_unified": reports.map(|(u, _)| u.product_matches),
        "product_matches_improved": reports.map(|(_, i)| i.product_matches),
        "product_matches": products_match,
    }))?;
    Ok(())
}

fn print_outcome_table(o: &Outcome<'_>) -> anyhow::Result<()> {
    let Outcome {
        setting,
        storage,
        rows,
        columns,
        unified,
        improved,
        round,
        expected_latency,
        reports,
        improvement,
        ..
    } = o;
    let [closed_unified, closed_improved] = o.closed;
    let describe = |d: &SchemeDesign| {
        format!("{} (r = {}, MDS rate {}, stores {} of A)", d.load, d.repetition, d.mds_rate, d.storage_used)
    };
    let executed = |pick: fn(&(ExecutionReport, ExecutionReport)) -> &ExecutionReport, closed: u64| {
        reports.map_or("not executed".to_string(), |r| {
            let e = pick(r);
            format!("{} messages (closed form {closed}), Y = A X: {}", e.messages, e.product_matches)
        })
    };
    print_table(&[
        ("setting", format!("K = {}, mu = {storage}, q = {}", setting.servers(), setting.wait())),
        ("sizes", format!("M = {rows}, N = {columns}, inner {DEFAULT_INNER}, over GF(2^31-1)")),
        ("load unified", describe(unified)),
        ("load improved", describe(improved)),
        ("improvement", improvement.map_or("-".into(), |f| format!("{f:.3}x"))),
        ("non-stragglers", format!("{:?}", round.non_stragglers)),
        ("map latency", format!("{:.4} sampled, {expected_latency:.4} expected (eq. 4)", round.latency)),
        ("executed unified", executed(|r| &r.0, closed_unified)),
        ("executed improved", executed(|r| &r.1, closed_improved)),
    ])?;
    Ok(())
}
