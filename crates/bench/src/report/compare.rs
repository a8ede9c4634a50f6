//! A run beside the committed results: whether its machine-independent values are the same
//! (the differences `--check` fails on), its machine columns (times, rates, memory) as ratios to
//! the committed cells, its headline figures next to the committed ones, and its time next to
//! the committed run's. `cargo xtask experiments` prints this after every run, so a user's run
//! says how it relates to `results/` without touching it.

use std::path::Path;

use super::check::checked_columns;
use super::citation::plain;
use super::headline::HeadlineRecord;
use super::markdown_table;
use super::run_seconds;
use super::table::{Table, parse_csv};
use super::write::{RunKind, committed_headlines};

/// The machine column `column` of one table: this run's cells over the committed ones, over the
/// rows both have (matched on their machine-independent cells).
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnRatio {
    /// The table's file.
    pub file: String,
    /// The column.
    pub column: String,
    /// The median ratio.
    pub median: f64,
    /// The smallest and largest ratio.
    pub range: (f64, f64),
}

/// One experiment's run beside the committed results.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The experiment.
    pub name: String,
    /// This run's seconds.
    pub seconds: f64,
    /// The committed run's seconds (`results/experiment-seconds.csv`).
    pub committed_seconds: Option<f64>,
    /// Where the machine-independent values differ (empty: the same), one line each.
    pub differences: Vec<String>,
    /// The machine columns as ratios.
    pub ratios: Vec<ColumnRatio>,
    /// This run's headline figures beside the committed ones.
    pub headlines: Vec<HeadlineSide>,
}

/// A headline figure of this run beside the committed one.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadlineSide {
    /// What it measures.
    pub what: String,
    /// The committed figure (`None`: not committed).
    pub committed: Option<String>,
    /// This run's figure.
    pub now: String,
    /// Whether it is a time of the machine (`--check` leaves it out).
    pub machine: bool,
}

impl HeadlineSide {
    /// "same", "differs", "not committed", or for a time "a time of this machine".
    fn verdict(&self) -> &'static str {
        match &self.committed {
            _ if self.machine => "a time of this machine",
            Some(was) if *was == self.now => "same",
            Some(_) => "differs",
            None => "not committed",
        }
    }
}

impl Comparison {
    /// Compares `tables` and `headlines` of the experiment `name`, run in `seconds`, with the
    /// committed results of `run` under `root`; `differences` are those `--check` found.
    pub fn new(
        name: &str,
        run: RunKind,
        root: &Path,
        tables: &[Table],
        headlines: &[HeadlineRecord],
        seconds: f64,
        differences: Vec<String>,
    ) -> Comparison {
        let dir = root.join(run.results_dir());
        let ratios = tables
            .iter()
            .filter_map(|t| {
                let committed = std::fs::read(dir.join(&t.file)).ok()?;
                let (header, rows) = parse_csv(&t.file, &committed).ok()?;
                Some(machine_ratios(t, &header, &rows))
            })
            .flatten()
            .collect();
        let committed = committed_headlines(root);
        let times = run_seconds::read(&root.join("results").join(run_seconds::FILE));
        let headlines = headlines
            .iter()
            .map(|h| HeadlineSide {
                // The terminal shows the figures without their citations.
                what: plain(&h.what),
                committed: committed
                    .iter()
                    .find(|c| c.experiment == name && c.run == run.name() && c.what == h.what)
                    .map(|c| plain(&c.ours)),
                now: plain(&h.ours),
                machine: h.machine,
            })
            .collect();
        Comparison {
            name: name.into(),
            seconds,
            committed_seconds: run_seconds::of(&times, name, run.name()),
            differences,
            ratios,
            headlines,
        }
    }

    /// "same" or "differs: FIRST DIFFERENCE (and N more)".
    pub fn values(&self) -> String {
        match self.differences.as_slice() {
            [] => "same".into(),
            [only] => format!("differs: {only}"),
            [first, rest @ ..] => format!("differs: {first} (and {} more)", rest.len()),
        }
    }

    /// The machine columns' median ratios, e.g. `fig3.csv plan_seconds x0.93 (0.51-2.10)`.
    pub fn timings(&self) -> String {
        if self.ratios.is_empty() {
            return "-".into();
        }
        let each = self
            .ratios
            .iter()
            .map(|r| format!("{} {} x{:.2} ({:.2}-{:.2})", r.file, r.column, r.median, r.range.0, r.range.1));
        each.collect::<Vec<_>>().join(", ")
    }
}

/// Each machine column of `fresh` over the committed table's, on the rows whose
/// machine-independent cells agree (each committed row used once); columns without a pair of
/// positive numbers are left out.
pub fn machine_ratios(fresh: &Table, header: &[String], rows: &[Vec<String>]) -> Vec<ColumnRatio> {
    let Ok(checked) = checked_columns(fresh, header) else { return Vec::new() };
    let key = |row: &[String]| -> Vec<String> {
        checked.iter().map(|&c| row.get(c).cloned().unwrap_or_default()).collect()
    };
    let mut unused: Vec<Option<Vec<String>>> = rows.iter().map(|r| Some(key(r))).collect();
    let pairs: Vec<(&Vec<String>, &Vec<String>)> = fresh
        .rows
        .iter()
        .filter_map(|new| {
            let k = key(new);
            let at = unused.iter().position(|u| u.as_ref() == Some(&k))?;
            unused[at] = None;
            Some((new, &rows[at]))
        })
        .collect();
    fresh
        .machine_columns
        .iter()
        .filter_map(|column| {
            let c = fresh.column(column)?;
            let number = |row: &Vec<String>| row.get(c).and_then(|v| v.parse::<f64>().ok());
            let mut ratios: Vec<f64> = pairs
                .iter()
                .filter_map(|(new, old)| match (number(new), number(old)) {
                    (Some(n), Some(o)) if n > 0.0 && o > 0.0 && n.is_finite() && o.is_finite() => Some(n / o),
                    _ => None,
                })
                .collect();
            ratios.sort_by(f64::total_cmp);
            let (&low, &high) = (ratios.first()?, ratios.last()?);
            Some(ColumnRatio {
                file: fresh.file.clone(),
                column: column.clone(),
                median: super::median(ratios.iter().copied()),
                range: (low, high),
            })
        })
        .collect()
}

/// The printed side-by-side of a run's experiments: their seconds beside the committed run's,
/// whether their values are the same, their timings as ratios; then their headline figures
/// beside the committed ones.
pub fn render(comparisons: &[Comparison]) -> String {
    let seconds = |s: Option<f64>| s.map_or_else(|| "-".into(), |s| format!("{s:.0}"));
    let mut rows: Vec<Vec<String>> = comparisons
        .iter()
        .map(|c| {
            vec![
                c.name.clone(),
                format!("{:.1}", c.seconds),
                seconds(c.committed_seconds),
                c.values(),
                c.timings(),
            ]
        })
        .collect();
    let committed: Option<f64> = comparisons.iter().map(|c| c.committed_seconds).sum();
    rows.push(vec![
        "total".into(),
        format!("{:.1}", comparisons.iter().map(|c| c.seconds).sum::<f64>()),
        seconds(committed),
        String::new(),
        String::new(),
    ]);
    let headlines = comparisons.iter().flat_map(|c| {
        c.headlines.iter().map(move |h| {
            let committed = h.committed.clone().unwrap_or_default();
            vec![c.name.clone(), h.what.clone(), committed, h.now.clone(), h.verdict().into()]
        })
    });
    let headlines: Vec<Vec<String>> = headlines.collect();
    let mut text = markdown_table(
        &[
            "experiment",
            "seconds",
            "committed run's seconds",
            "machine-independent values vs committed",
            "timings, this run / committed (median over rows, range)",
        ],
        rows,
    );
    if !headlines.is_empty() {
        text += "\n";
        text += &markdown_table(&["experiment", "headline figure", "committed", "this run", ""], headlines);
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::report::check::tests::table;

    #[test]
    fn machine_columns_become_ratios_over_matching_rows() {
        let committed = table(&[["coded", "10", "2"], ["uncoded", "20", "4"], ["opt", "5", "1"]]);
        let fresh = table(&[["uncoded", "20", "2"], ["coded", "10", "3"], ["new", "1", "9"]]);
        let r = machine_ratios(&fresh, &committed.header, &committed.rows);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].column.as_str(), r[0].median, r[0].range), ("seconds", 1.0, (0.5, 1.5)));
        let mut renamed = committed.clone();
        renamed.header[2] = "secs".into();
        assert!(machine_ratios(&fresh, &renamed.header, &renamed.rows).is_empty());
    }

    #[test]
    fn the_side_by_side_names_values_timings_and_headlines() {
        let c = Comparison {
            name: "fig3".into(),
            seconds: 98.04,
            committed_seconds: Some(111.0),
            differences: vec!["fig3.csv line 2: committed 1, this run 2".into(), "another".into()],
            ratios: vec![ColumnRatio {
                file: "fig3.csv".into(),
                column: "plan_seconds".into(),
                median: 0.93,
                range: (0.5, 2.1),
            }],
            headlines: vec![
                HeadlineSide {
                    what: "ratio".into(),
                    committed: Some("2.58x".into()),
                    now: "2.60x".into(),
                    machine: false,
                },
                HeadlineSide {
                    what: "speed".into(),
                    committed: Some("83 %".into()),
                    now: "80 %".into(),
                    machine: true,
                },
            ],
        };
        let text = render(&[c]);
        assert!(
            text.contains(
                "| fig3 | 98.0 | 111 | differs: fig3.csv line 2: committed 1, this run 2 (and 1 more) |"
            ),
            "{text}"
        );
        assert!(text.contains("fig3.csv plan_seconds x0.93 (0.50-2.10)"), "{text}");
        assert!(text.contains("| total | 98.0 | 111 |"), "{text}");
        assert!(text.contains("| fig3 | ratio | 2.58x | 2.60x | differs |"), "{text}");
        assert!(text.contains("| fig3 | speed | 83 % | 80 % | a time of this machine |"), "{text}");
    }
}
