//! The report of `cargo xtask netns-train`: the ranks' logs turned into typed rows ([`rows`]),
//! the bytes checked ([`checks`]), each store delivery's rounds replayed on the emulator, the
//! issue's goals measured ([`goals`]), and the CSVs, the chart of accuracy against wall time,
//! results/README.md's section ([`section`], [`profile`]) and README's headlines
//! ([`headline`]).

mod checks;
#[cfg(test)]
mod fixtures;
mod goals;
mod headline;
mod profile;
mod rows;
mod section;

use std::path::Path;

use anyhow::{Context, bail};
use ubershuffle_bench::report::chart::{LineChart, Series};

use crate::netns::train::types::{Arm, Job, ReportOptions, Setting};
use crate::netns::{beside, write_csv};
use checks::Check;
use goals::{Goal, last_accuracy, med};
use rows::Row;
use section::num;

pub use headline::headline_records;

/// Builds the rows, checks the bytes, replays the store deliveries, writes everything; fails
/// (after writing) when a byte check failed.
pub fn report(options: &ReportOptions, setting: &Setting, jobs: &[Job], root: &Path) -> anyhow::Result<()> {
    let mut all_rows = Vec::new();
    let mut links = Vec::new();
    for job in jobs {
        let (mut r, l) = rows::job_rows(job, setting)?;
        rows::replay(&mut r, job, setting)?;
        all_rows.extend(r);
        links.extend(l);
    }
    let rows = all_rows;
    let checks: Vec<Check> = jobs.iter().flat_map(|job| checks::byte_checks(job, setting)).collect();
    let goals = goals::goals(&rows, setting.ranks);
    let out = &options.out;
    write_csv(out, &rows)?;
    write_csv(&beside(out, "-links.csv"), &links)?;
    write_csv(&beside(out, "-summary.csv"), &goals)?;
    let chart = accuracy_chart(&rows, setting);
    // No chart when no rank trained (--sleep-train): there is no accuracy to draw.
    let charted = !chart.series.is_empty();
    if charted {
        let svg = chart.to_svg().map_err(|e| anyhow::anyhow!("the chart: {e}"))?;
        std::fs::write(beside(out, ".svg"), svg)
            .with_context(|| format!("cannot write {}", beside(out, ".svg").display()))?;
    }
    if options.readme {
        section::write_section(root, setting, &rows, &goals)?;
        if setting.is_main() {
            headline::publish_headlines(root, &goals)?;
        }
    }
    print_summary(&rows, &goals, &checks);
    if options.short {
        eprintln!(
            "netns-train: the short form checks bytes only; its times and accuracy are not the experiment's"
        );
    }
    let shown = out.strip_prefix(root).unwrap_or(out).display().to_string();
    let chart = if charted { " and a chart, .svg," } else { "" };
    eprintln!("xtask: wrote {shown} (and -links.csv, -summary.csv{chart} beside it)");
    let failed: Vec<&Check> = checks.iter().filter(|c| !c.ok).collect();
    if let Some(first) = failed.first() {
        bail!("{} of {} byte checks failed; the first: {}", failed.len(), checks.len(), first.what);
    }
    eprintln!("netns-train: all {} byte checks passed", checks.len());
    Ok(())
}

/// Accuracy against wall time, one line per arm (its first run).
fn accuracy_chart(rows: &[Row], setting: &Setting) -> LineChart {
    let series = Arm::ALL
        .iter()
        .filter_map(|arm| {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.arm == arm.letter() && r.repeat == 0)
                .map(|r| (r.wall_s, r.held_out_accuracy))
                .filter(|p| p.1.is_finite())
                .collect();
            (!points.is_empty()).then(|| {
                Series::solid(format!("({}) {}", arm.letter(), arm.describe(setting.fraction)), points)
            })
        })
        .collect();
    LineChart {
        title: format!(
            "Held-out accuracy against wall time, {} ranks at {} Mbit/s",
            setting.ranks, setting.mbit
        ),
        x_label: "wall time since the job's start (s)".into(),
        y_label: "held-out accuracy".into(),
        log_x: false,
        log_y: false,
        series,
    }
}

/// Prints the medians, the goals and the failed byte checks.
fn print_summary(rows: &[Row], goals: &[Goal], checks: &[Check]) {
    eprintln!("netns-train: medians over epochs after the first:");
    for arm in section::arms_run(rows) {
        let a = arm.letter();
        let [exposed, epoch, shuffle, model, uplink, limit] = section::timings(rows, a);
        eprintln!(
            "  ({a}) exposed {exposed:>7} s  epoch {epoch:>7} s  shuffle {shuffle:>7} s  model {model:>7} s  \
uplink {uplink:>7} s  limit {limit:>7} s  store {:>7} MB  accuracy {}",
            num(med(rows, a, |r| r.plane_store_sent_bytes as f64 / 1e6), 2),
            num(last_accuracy(rows, a), 4),
        );
    }
    crate::netns::goal::print_goals(goals);
    for c in checks.iter().filter(|c| !c.ok) {
        eprintln!("  byte check FAILED: {}", c.what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use fixtures::{coded, setting, uncoded};

    fn rows_of(job: &Job) -> Vec<Row> {
        let (mut r, _) = rows::job_rows(job, &setting()).unwrap();
        rows::replay(&mut r, job, &setting()).unwrap();
        r
    }

    #[test]
    fn store_deliveries_get_their_bounds_and_their_replay() {
        let rate = 100e6 / 8.0;
        let c = rows_of(&uncoded(0, 3500));
        assert_eq!((c[0].store_uplink_s, c[0].model_shuffle_s), (None, None));
        let c = &c[1];
        assert_eq!((c.store_uplink_s, c.limit_s), (Some(5000.0 / rate), Some(5000.0 / rate)));
        assert_eq!(
            (c.relay_bytes, c.record_received_bytes, c.store_cpu_s),
            (Some(0), Some(5000), Some(0.05))
        );
        assert!((c.model_shuffle_s.unwrap() * rate / 5000.0 - 1.0).abs() < 0.01);
        let b = &rows_of(&coded())[1];
        assert_eq!(
            (b.store_uplink_s, b.limit_s, b.relay_bytes),
            (Some(2000.0 / rate), Some(2000.0 / rate), Some(2000))
        );
        // Rank 1 gets its store piece after rank 0's, then rank 0's relay: three pieces' time.
        assert!((b.model_shuffle_s.unwrap() * rate / 3000.0 - 1.0).abs() < 0.01);
        assert_eq!(b.rank_cpu_s, Some(0.2));
    }

    #[test]
    fn uncoded_ranks_receive_the_records_they_lacked_and_the_kernel_agrees() {
        let failed = |job: &Job, s: &Setting| -> Vec<String> {
            checks::byte_checks(job, s).into_iter().filter(|c| !c.ok).map(|c| c.what).collect()
        };
        assert_eq!(failed(&uncoded(0, 3500), &setting()), Vec::<String>::new());
        assert_eq!(failed(&coded(), &setting()), Vec::<String>::new());
        let lacked = failed(&uncoded(0, 3400), &setting());
        assert_eq!(
            lacked,
            ["arm c: rank 0 received 3500 bytes of records for epoch 1, the records it lacked 3400"]
        );
        let skewed = failed(&uncoded(200, 3500), &setting());
        assert!(
            skewed.len() == 1 && skewed[0].starts_with("arm c: rank 0's link received 3898 bytes"),
            "{skewed:?}"
        );
        // A rank that trains shares its link with the gradients: no kernel check.
        let trained = Setting { sleep_train: 0.0, ..setting() };
        assert_eq!(failed(&uncoded(200, 3500), &trained), Vec::<String>::new());
    }

    #[test]
    fn goals_measure_the_deliveries_against_their_bounds() {
        let mut rows = rows_of(&uncoded(0, 3500));
        rows.extend(rows_of(&coded()));
        let goals = goals::goals(&rows, 2);
        let value = |key: &str| goals::goal_value(&goals, key);
        let rate = 100e6 / 8.0;
        assert!((value("c_vs_uplink") - 0.001 / (5000.0 / rate)).abs() < 1e-9);
        assert!((value("b_vs_limit") - 0.001 / (2000.0 / rate)).abs() < 1e-9);
        assert!((value("b_vs_c_shuffle") - 1.0).abs() < 1e-9);
        let keys: Vec<&str> = goals.iter().map(|g| g.key.as_str()).collect();
        for key in ["b_measured_vs_model", "c_measured_vs_model", "b_rank_cpu_s", "c_store_cpu_s"] {
            assert!(keys.contains(&key), "{key} in {keys:?}");
        }
        let section = {
            let mut s = String::new();
            profile::profile_words(&mut s, &rows, &goals);
            s
        };
        assert!(section.contains("the store sends 0.400x the bytes"), "{section}");
    }

    #[test]
    fn the_side_files_sit_beside_the_csv() {
        let out = Path::new("/r/netns-train.csv");
        assert_eq!(beside(out, "-links.csv"), Path::new("/r/netns-train-links.csv"));
        assert_eq!(beside(out, ".svg"), Path::new("/r/netns-train.svg"));
    }
}
