//! The report of `cargo xtask netns-gradients`: the ranks' logs turned into rows (per epoch and
//! rank, and per step of the first training rank), the plane's bytes checked ([`super::checks`]),
//! the goals measured, and the CSVs, the chart of the all-reduce time per step,
//! results/README.md's section and README's headline row.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Serialize;
use ubershuffle_bench::report::chart::{LineChart, Series};
use ubershuffle_bench::report::headline::HeadlineRecord;

use super::checks;
use super::types::{ARMS, Job, Plane, Setting, describe};
use crate::netns::goal::{Goal, cited, median};
use crate::netns::{beside, write_csv};

/// Where the report writes.
pub struct Options<'a> {
    /// The CSV.
    pub out: &'a Path,
    /// Whether results/README.md's section and README's headline are written (default out).
    pub readme: bool,
    /// The short form (its times are not the experiment's).
    pub short: bool,
}

/// One training rank's epoch.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    arm: char,
    plane: &'static str,
    repeat: usize,
    epoch: usize,
    place: usize,
    steps: usize,
    /// Steps whose all-reduce began while the next epoch's delivery was in flight.
    steps_during_delivery: usize,
    /// Median all-reduce time over the epoch's steps.
    allreduce_median_s: f64,
    /// Median all-reduce time over the steps during the delivery (NaN: none).
    allreduce_during_delivery_median_s: f64,
    /// The epoch's all-reduce time over its steps (the mean per step).
    allreduce_mean_s: f64,
    /// The ring all-reduce's lower bound per step at the port's rate.
    allreduce_limit_s: f64,
    /// The epoch's steps' time over their number (the mean step).
    step_mean_s: f64,
    exposed_s: f64,
    epoch_s: f64,
    /// The next epoch's delivery time.
    delivery_s: f64,
    /// What that delivery waited for the all-reduces.
    yield_s: f64,
    /// How often that delivery waited for the all-reduces.
    yields: u64,
    /// Records that delivery brought the rank (the plane's figures).
    records_received: u64,
    read_bytes: u64,
}

/// One step of the first training rank.
#[derive(Clone, Debug, Serialize)]
pub struct StepRow {
    arm: char,
    plane: &'static str,
    repeat: usize,
    epoch: usize,
    step: usize,
    allreduce_s: f64,
    step_s: f64,
    during_delivery: bool,
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() { f64::NAN } else { values.iter().sum::<f64>() / values.len() as f64 }
}

/// Every training rank's epochs of `job`, and the first training rank's steps.
pub fn job_rows(job: &Job, setting: &Setting) -> (Vec<Row>, Vec<StepRow>) {
    let mut rows = Vec::new();
    let mut steps = Vec::new();
    for log in job.ranks.iter().filter(|l| l.role == "trainer") {
        for e in &log.epochs {
            let during: Vec<f64> = e
                .allreduce_step_seconds
                .iter()
                .zip(&e.allreduce_step_during_delivery)
                .filter(|(_, d)| **d)
                .map(|(s, _)| *s)
                .collect();
            rows.push(Row {
                arm: job.arm,
                plane: job.plane.name(),
                repeat: job.repeat,
                epoch: e.epoch,
                place: log.place,
                steps: e.step_seconds.len(),
                steps_during_delivery: during.len(),
                allreduce_median_s: median(e.allreduce_step_seconds.clone()),
                allreduce_during_delivery_median_s: median(during),
                allreduce_mean_s: mean(&e.allreduce_step_seconds),
                allreduce_limit_s: setting.allreduce_limit_s(log.gradient_bytes),
                step_mean_s: mean(&e.step_seconds),
                exposed_s: e.exposed_seconds,
                epoch_s: e.epoch_seconds,
                delivery_s: e.delivery_seconds,
                yield_s: e.yield_seconds,
                yields: e.yields.unwrap_or(0),
                records_received: e.delivery_received.and_then(|r| r.records_received).unwrap_or(0),
                read_bytes: e.read_bytes,
            });
            if log.place == 0 {
                for (k, (&allreduce_s, &step_s)) in
                    e.allreduce_step_seconds.iter().zip(&e.step_seconds).enumerate()
                {
                    steps.push(StepRow {
                        arm: job.arm,
                        plane: job.plane.name(),
                        repeat: job.repeat,
                        epoch: e.epoch,
                        step: k,
                        allreduce_s,
                        step_s,
                        during_delivery: e.allreduce_step_during_delivery.get(k).copied().unwrap_or(false),
                    });
                }
            }
        }
    }
    (rows, steps)
}

/// Median over the epochs after the first (every repeat and rank) of `f`, in arm `arm` and
/// plane `plane`.
fn med(rows: &[Row], arm: char, plane: Plane, f: impl Fn(&Row) -> f64) -> f64 {
    median(rows.iter().filter(|r| r.arm == arm && r.plane == plane.name() && r.epoch > 0).map(f).collect())
}

/// The goals of the issue per arm, and the information beside them.
pub fn goals(rows: &[Row], setting: &Setting) -> Vec<Goal> {
    let mut out = Vec::new();
    let mut push = |key: String, measure: String, value: f64, goal: &str, met: bool| {
        out.push(Goal { key, measure, value, goal: goal.into(), met });
    };
    for arm in ARMS.into_iter().filter(|a| rows.iter().any(|r| r.arm == *a)) {
        let m = |plane, f: &dyn Fn(&Row) -> f64| med(rows, arm, plane, f);
        let idle = m(Plane::Idle, &|r| r.allreduce_median_s);
        let flight = m(Plane::Flight, &|r| r.allreduce_during_delivery_median_s);
        let yielding = m(Plane::Yield, &|r| r.allreduce_during_delivery_median_s);
        let limit = m(Plane::Idle, &|r| r.allreduce_limit_s);
        let what = describe(arm, setting.fraction);
        push(
            format!("{arm}_allreduce_limit_s"),
            format!(
                "({arm}) {what}: the ring all-reduce's bound per step, 2(n-1)/n of the gradient over the port's rate (s)"
            ),
            limit,
            "(bound)",
            true,
        );
        push(
            format!("{arm}_allreduce_idle_s"),
            format!("({arm}) all-reduce per step, plane idle (s)"),
            idle,
            "(information)",
            true,
        );
        push(
            format!("{arm}_allreduce_idle_vs_limit"),
            format!("({arm}) all-reduce per step, plane idle, against its bound"),
            idle / limit,
            "(information)",
            true,
        );
        push(
            format!("{arm}_flight_vs_idle"),
            format!("({arm}) all-reduce per step during the delivery, not yielding, against the plane idle"),
            flight / idle,
            "(information)",
            true,
        );
        let ratio = yielding / idle;
        push(
            format!("{arm}_yield_vs_idle"),
            format!("({arm}) all-reduce per step during the delivery, yielding, against the plane idle"),
            ratio,
            "≤ 1.1",
            ratio <= 1.1,
        );
        let epoch_ratio = m(Plane::Yield, &|r| r.allreduce_mean_s) / m(Plane::Idle, &|r| r.allreduce_mean_s);
        push(
            format!("{arm}_yield_epoch_vs_idle"),
            format!("({arm}) all-reduce time of the epoch over its steps, yielding, against the plane idle"),
            epoch_ratio,
            "(information)",
            true,
        );
        let exposed = m(Plane::Yield, &|r| r.exposed_s / r.epoch_s);
        push(
            format!("{arm}_exposed_share_yield"),
            format!("({arm}) exposed data time, yielding, as a share of the epoch"),
            exposed,
            "≤ 0.05",
            exposed <= 0.05,
        );
        let step = m(Plane::Yield, &|r| r.step_mean_s) / m(Plane::Flight, &|r| r.step_mean_s);
        push(
            format!("{arm}_step_yield_vs_flight"),
            format!("({arm}) step time, yielding, against not yielding"),
            step,
            "≤ 1.0",
            step <= 1.0,
        );
        let delivery = m(Plane::Yield, &|r| r.delivery_s) / m(Plane::Flight, &|r| r.delivery_s);
        push(
            format!("{arm}_delivery_yield_vs_flight"),
            format!("({arm}) the delivery's time, yielding, against not yielding (yielding's cost)"),
            delivery,
            "(information)",
            true,
        );
        push(
            format!("{arm}_yield_s"),
            format!("({arm}) what a delivery waited for the all-reduces (s)"),
            m(Plane::Yield, &|r| r.yield_s),
            "(information)",
            true,
        );
        push(
            format!("{arm}_during_share_flight"),
            format!("({arm}) share of the steps during the delivery, not yielding"),
            m(Plane::Flight, &|r| r.steps_during_delivery as f64 / r.steps.max(1) as f64),
            "(information)",
            true,
        );
        push(
            format!("{arm}_during_share_yield"),
            format!("({arm}) share of the steps during the delivery, yielding"),
            m(Plane::Yield, &|r| r.steps_during_delivery as f64 / r.steps.max(1) as f64),
            "(information)",
            true,
        );
    }
    out.retain(|g| g.value.is_finite());
    out
}

/// The all-reduce time per step over epoch 1 of the first run, the first training rank: per
/// arm, not yielding (dashed) and yielding (solid), and the plane idle of the first arm.
fn chart(steps: &[StepRow], setting: &Setting) -> LineChart {
    let points = |arm: char, plane: Plane| -> Vec<(f64, f64)> {
        steps
            .iter()
            .filter(|s| s.arm == arm && s.plane == plane.name() && s.repeat == 0 && s.epoch == 1)
            .map(|s| (s.step as f64, s.allreduce_s * 1e3))
            .collect()
    };
    let mut series = Vec::new();
    let arms: Vec<char> = ARMS.into_iter().filter(|a| steps.iter().any(|s| s.arm == *a)).collect();
    if let Some(&first) = arms.first() {
        let idle = points(first, Plane::Idle);
        if !idle.is_empty() {
            series.push(Series::dashed(format!("({first}) plane idle"), idle));
        }
    }
    for &arm in &arms {
        for (plane, dashed) in [(Plane::Flight, true), (Plane::Yield, false)] {
            let p = points(arm, plane);
            if p.is_empty() {
                continue;
            }
            let name = format!("({arm}) {}", if dashed { "in flight" } else { "yielding" });
            series.push(if dashed { Series::dashed(name, p) } else { Series::solid(name, p) });
        }
    }
    LineChart {
        title: format!(
            "All-reduce of a {} MB gradient per step, epoch 1, {} ranks at {} Mbit/s",
            setting.gradient_mb, setting.ranks, setting.mbit
        ),
        x_label: "step of the epoch".into(),
        y_label: "all-reduce time (ms)".into(),
        log_x: false,
        log_y: false,
        series,
    }
}

/// Builds the rows, checks, goals; writes everything; fails (after writing) when a check failed.
pub fn report(options: &Options<'_>, setting: &Setting, jobs: &[Job], root: &Path) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let mut steps = Vec::new();
    for job in jobs {
        let (r, s) = job_rows(job, setting);
        rows.extend(r);
        steps.extend(s);
    }
    let failed = checks::checks(jobs, setting.epochs);
    let goals = goals(&rows, setting);
    let out = options.out;
    write_csv(out, &rows)?;
    write_csv(&beside(out, "-steps.csv"), &steps)?;
    write_csv(&beside(out, "-summary.csv"), &goals)?;
    let svg = chart(&steps, setting).to_svg().map_err(|e| anyhow::anyhow!("the chart: {e}"))?;
    std::fs::write(beside(out, ".svg"), svg)
        .with_context(|| format!("cannot write {}", beside(out, ".svg").display()))?;
    if options.readme {
        write_section(root, setting, &goals, jobs)?;
        if setting.is_main() {
            publish_headline(root, &goals)?;
        }
    }
    eprintln!("netns-gradients: medians over the epochs after the first:");
    crate::netns::goal::print_goals(&goals);
    if options.short {
        eprintln!(
            "netns-gradients: the short form checks the bytes the plane delivered, the hook and the yielding, not the times"
        );
    }
    for job in jobs.iter().filter(|j| j.plane == Plane::Yield) {
        eprintln!(
            "netns-gradients: arm {} run {}: the deliveries yielded {} times",
            job.arm,
            job.repeat,
            checks::yields(job)
        );
    }
    let shown = out.strip_prefix(root).unwrap_or(out).display();
    eprintln!("xtask: wrote {shown} (and -steps.csv, -summary.csv and a chart, .svg, beside it)");
    if let Some(first) = failed.first() {
        bail!("{} checks failed; the first: {first}", failed.len());
    }
    let checked: u64 = jobs.iter().map(checks::records_checked).sum();
    eprintln!(
        "netns-gradients: every rank read the source's bytes, the same in every plane ({checked} records the plane carried among them), with the same counts; every step's all-reduce was timed; every yielding plane yielded"
    );
    Ok(())
}

/// Replaces results/README.md's section of this run.
fn write_section(root: &Path, setting: &Setting, goals: &[Goal], jobs: &[Job]) -> anyhow::Result<()> {
    let name = setting.name();
    let repeats = jobs.iter().map(|j| j.repeat + 1).max().unwrap_or(1);
    let mut s = String::new();
    let _ = writeln!(s, "## {name}\n");
    let _ = writeln!(
        s,
        "Does the plane's background delivery slow DDP's gradient all-reduce, and does yielding to it help? {} training ranks in network namespaces, every port shaped by {} at {} Mbit/s <!-- param -->, MTU {} <!-- param -->; {} JPEG records <!-- param --> ({:.1} MB <!-- param -->). Each step reads its {} records <!-- param -->, sleeps {} s <!-- param --> (the compute, the CPU idle as while a GPU computes) and all-reduces a gradient of {} MB <!-- param --> under DDP (gloo); {} epochs <!-- param --> per job, {} interleaved runs <!-- param -->; medians over the epochs after the first and over the ranks.",
        setting.ranks,
        setting.qdisc,
        setting.mbit,
        setting.mtu,
        setting.records,
        setting.bytes as f64 / 1e6,
        setting.batch,
        setting.compute,
        setting.gradient_mb,
        setting.epochs,
        repeats
    );
    s.push_str("\nPlanes: idle, the next epoch's delivery waited for before the epoch starts (the all-reduce alone on the links); in flight, the delivery in the background of the epoch, not yielding; yielding, in flight, the delivery posting no new round while a step's all-reduce is on the wire (`ShuffleGroup.yield_to(model)`). \"During the delivery\": the steps whose all-reduce began while the delivery was in flight.\n\n");
    s.push_str(&crate::netns::goal::goals_table(&name, goals));
    let _ = writeln!(s, "\n![All-reduce time per step]({name}.svg)\n");
    let _ = writeln!(
        s,
        "Data: [`{name}.csv`]({name}.csv) (per arm, plane, epoch and rank), [`{name}-steps.csv`]({name}-steps.csv) (every step of the first rank), [`{name}-summary.csv`]({name}-summary.csv) (the goals). Regenerate (Linux, root; a Python with torch, Pillow, scikit-learn and the package): `cargo xtask netns-gradients --python PYTHON --repeats {repeats}{}`.",
        if setting.mbit != super::types::MAIN_MBIT {
            format!(" --mbit {}", setting.mbit)
        } else {
            String::new()
        }
    );
    crate::netns::publish::write_section(root, &name, &s)
}

/// netns-gradients' row of `results/headline.csv` from the main run's goals (4 ranks,
/// 100 Mbit/s), each figure cited from `results/netns-gradients-summary.csv`.
pub fn headline_records(goals: &[Goal]) -> Vec<HeadlineRecord> {
    const NAME: &str = "netns-gradients";
    let v = |key: &str| cited(NAME, goals, key, 2);
    let keys = ["p", "g", "s"]
        .map(|a| format!("{a}_yield_vs_idle, {a}_flight_vs_idle, {a}_step_yield_vs_flight"))
        .join(", ");
    vec![HeadlineRecord {
        experiment: NAME.into(),
        run: "full".into(),
        what: "DDP all-reduce (2 MB gradient, 4 ranks, 100 Mbit/s<!-- param -->) while the next epoch's records travel: yielding vs not, against the plane idle".into(),
        ours: format!(
            "all-reduce during the delivery, yielding / not / idle: peer partial-local {}x / {}x, peer global {}x / {}x, store coded {}x / {}x; step time yielding / not {}x, {}x, {}x",
            v("p_yield_vs_idle"), v("p_flight_vs_idle"), v("g_yield_vs_idle"), v("g_flight_vs_idle"), v("s_yield_vs_idle"), v("s_flight_vs_idle"),
            v("p_step_yield_vs_flight"), v("g_step_yield_vs_flight"), v("s_step_yield_vs_flight")
        ),
        paper: "NoPFS (SC'21): all-reduces up to 2x<!-- paper --> longer beside I/O".into(),
        source: format!("results/{NAME}-summary.csv: key={keys}"),
        command: format!("cargo xtask {NAME} --python PYTHON"),
        machine: true,
    }]
}

/// Replaces netns-gradients' row of `results/headline.csv` and re-renders README's table.
fn publish_headline(root: &Path, goals: &[Goal]) -> anyhow::Result<()> {
    crate::netns::publish::publish_headlines(root, "netns-gradients", headline_records(goals))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::goal::goal_value;
    use crate::netns::gradients::types::{EpochLog, RankLog};

    fn setting() -> Setting {
        Setting {
            ranks: 2,
            mbit: 100.0,
            qdisc: "tbf",
            mtu: 1500,
            side: 64,
            grain: 0.0,
            records: 100,
            bytes: 1000,
            epochs: 2,
            batch: 4,
            compute: 0.1,
            gradient_mb: 1.0,
            fraction: 0.3,
        }
    }

    fn job(plane: Plane, allreduce: f64, during: bool) -> Job {
        let epoch = |epoch| EpochLog {
            epoch,
            exposed_seconds: 0.01,
            epoch_seconds: 1.0,
            train_seconds: 0.99,
            step_seconds: vec![0.3, 0.3],
            allreduce_step_seconds: vec![allreduce, 0.1],
            allreduce_step_during_delivery: vec![during, false],
            yield_seconds: 0.0,
            delivery_seconds: 0.5,
            read_bytes: 50,
            ..EpochLog::default()
        };
        let rank = |place| RankLog {
            rank: place,
            role: "trainer".into(),
            place,
            gradient_bytes: 1_000_000,
            epochs: vec![epoch(0), epoch(1)],
        };
        Job { arm: 'p', plane, repeat: 0, ranks: vec![rank(0), rank(1)] }
    }

    #[test]
    fn the_goals_compare_the_steps_during_the_delivery_with_the_plane_idle() {
        let jobs =
            [job(Plane::Idle, 0.1, false), job(Plane::Flight, 0.3, true), job(Plane::Yield, 0.105, true)];
        let rows: Vec<Row> = jobs.iter().flat_map(|j| job_rows(j, &setting()).0).collect();
        let goals = goals(&rows, &setting());
        assert!((goal_value(&goals, "p_flight_vs_idle") - 3.0).abs() < 1e-9);
        assert!((goal_value(&goals, "p_yield_vs_idle") - 1.05).abs() < 1e-9);
        assert!(goals.iter().find(|g| g.key == "p_yield_vs_idle").is_some_and(|g| g.met));
        // 2 ranks: each sends half the gradient twice, 1 MB at 12.5 MB/s.
        assert!((goal_value(&goals, "p_allreduce_limit_s") - 0.08).abs() < 1e-9);
        let (_, steps) = job_rows(&jobs[1], &setting());
        assert_eq!(steps.len(), 4, "the first rank's steps of both epochs");
    }
}
