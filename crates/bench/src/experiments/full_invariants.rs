//! The invariants of the full runs' CSVs (`results/full/`), checked on every committed row,
//! re-run by `--check --sample` or not: every derived column recomputed from the row's own
//! primary columns (ratios, gaps, goal flags, references), bounds below counts, and cells that
//! must agree between rows of one instance (its bound, its uncoded count, Theorem 1's count).
//! With the digests ([`crate::report::digest`]) this makes a changed cell of a row the sample
//! does not re-run fail CI: the digest names the cell, the invariants say why the value is wrong
//! when it is a derived one.

use std::collections::BTreeMap;
use std::path::Path;

use crate::report::table::parse_csv;

/// Relative tolerance of a recomputed ratio (the CSV holds the shortest round-trip text).
const TOLERANCE: f64 = 1e-9;

/// A committed CSV, by column name.
struct Sheet {
    file: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// What a check found wrong, one line each.
struct Findings<'a> {
    sheet: &'a Sheet,
    lines: Vec<String>,
}

impl Sheet {
    fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    fn text(&self, row: usize, column: &str) -> &str {
        self.column(column).and_then(|c| self.rows[row].get(c)).map_or("", String::as_str)
    }

    /// The cell as a number (`None` when empty or not a number).
    fn num(&self, row: usize, column: &str) -> Option<f64> {
        self.text(row, column).parse().ok()
    }

    /// The cells of `columns` joined, to group the rows of one instance.
    fn key(&self, row: usize, columns: &[&str]) -> String {
        columns.iter().map(|c| self.text(row, c)).collect::<Vec<_>>().join("\u{1f}")
    }
}

impl Findings<'_> {
    fn flag(&mut self, row: usize, column: &str, why: String) {
        let key: Vec<String> =
            self.sheet.header.iter().take(4).map(|h| format!("{h}={}", self.sheet.text(row, h))).collect();
        self.lines.push(format!(
            "{} line {} ({}), column {column}: {why}",
            self.sheet.file,
            row + 2,
            key.join(", ")
        ));
    }

    /// `column` must equal `value(row)` (within the tolerance; empty when `value` is `None`).
    fn derived(&mut self, column: &str, value: impl Fn(&Sheet, usize) -> Option<f64>) {
        for row in 0..self.sheet.rows.len() {
            let (cell, want) = (self.sheet.text(row, column), value(self.sheet, row));
            let ok = match (cell.parse::<f64>().ok(), want) {
                (Some(have), Some(want)) => {
                    have == want || (have - want).abs() <= TOLERANCE * have.abs().max(want.abs())
                }
                (None, None) => cell.is_empty(),
                _ => false,
            };
            if !ok {
                let want = want.map_or("empty".to_string(), |w| w.to_string());
                self.flag(row, column, format!("is {cell:?}, but the row's own columns give {want}"));
            }
        }
    }

    /// `low` must not exceed `high` where both are numbers (beyond the tolerance: a linear
    /// relaxation's optimum may be its integer optimum plus rounding).
    fn at_most(&mut self, low: &str, high: &str) {
        for row in 0..self.sheet.rows.len() {
            if let (Some(l), Some(h)) = (self.sheet.num(row, low), self.sheet.num(row, high))
                && l - h > TOLERANCE * l.abs().max(h.abs())
            {
                self.flag(row, low, format!("{l} exceeds {high} {h}"));
            }
        }
    }

    /// `column` must be the same in every row with the same `key` cells.
    fn same_within(&mut self, key: &[&str], column: &str) {
        let mut first: BTreeMap<String, usize> = BTreeMap::new();
        for row in 0..self.sheet.rows.len() {
            let at = *first.entry(self.sheet.key(row, key)).or_insert(row);
            let (was, now) = (self.sheet.text(at, column), self.sheet.text(row, column));
            if was != now {
                let why =
                    format!("is {now:?}, but line {} of the same {} has {was:?}", at + 2, key.join("/"));
                self.flag(row, column, why);
            }
        }
    }
}

/// The invariants of one CSV.
type Check = fn(&mut Findings<'_>);

/// Checks every full CSV in `dir` that has invariants; one line per violation.
pub fn check_dir(dir: &Path) -> Vec<String> {
    let checks: [(&str, Check); 9] = [
        ("theorem1.csv", theorem1),
        ("fig3.csv", fig3),
        ("scale.csv", scale),
        ("carpool-optimum.csv", carpool),
        ("carpool-fresh.csv", carpool_fresh),
        ("pliable.csv", pliable),
        ("pliable-paper.csv", pliable_paper),
        ("pliable-training.csv", pliable_training),
        ("speed.csv", speed),
    ];
    let mut lines = Vec::new();
    for (file, check) in checks {
        match load(dir, file) {
            Ok(sheet) => {
                let mut findings = Findings { sheet: &sheet, lines: Vec::new() };
                check(&mut findings);
                lines.extend(findings.lines);
            }
            Err(e) => lines.push(e),
        }
    }
    lines
}

fn load(dir: &Path, file: &str) -> Result<Sheet, String> {
    let bytes = std::fs::read(dir.join(file)).map_err(|e| format!("{file}: not readable ({e})"))?;
    let (header, rows) = parse_csv(file, &bytes).map_err(|e| e.to_string())?;
    Ok(Sheet { file: file.into(), header, rows })
}

/// `num / den` of a row, `None` when either is not a number.
fn ratio(num: &'static str, den: &'static str) -> impl Fn(&Sheet, usize) -> Option<f64> {
    move |s, r| Some(s.num(r, num)? / s.num(r, den)?)
}

fn theorem1(f: &mut Findings<'_>) {
    f.derived("coded_over_theorem1", ratio("coded", "theorem1"));
    f.at_most("coded", "uncoded");
    f.same_within(&["alpha", "points"], "theorem1");
}

fn fig3(f: &mut Findings<'_>) {
    f.at_most("lower_bound", "transmissions");
    for column in ["lower_bound", "lower_bound_kind", "theorem1"] {
        f.same_within(&["alpha", "points", "seed"], column);
    }
    f.same_within(&["alpha", "points"], "theorem1");
}

/// The schemes of the `scale` sweep whose plans lie in the clique family (packets each receiver
/// decodes alone).
const CLIQUE_FAMILY: [&str; 5] = ["uncoded", "coded", "ubershuffle", "ubershuffle-opt", "clique-cover"];

fn scale(f: &mut Findings<'_>) {
    f.derived("over_uncoded", ratio("transmissions", "uncoded"));
    f.derived("bound_over_uncoded", ratio("lower_bound", "uncoded"));
    f.derived("clique_bound_over_uncoded", ratio("clique_bound", "uncoded"));
    f.derived("clique_estimate_over_uncoded", ratio("clique_estimate", "uncoded"));
    f.at_most("lower_bound", "transmissions");
    f.at_most("lower_bound", "clique_bound");
    f.at_most("clique_bound", "clique_estimate");
    let point = ["workers", "points", "alpha"];
    for column in [
        "uncoded",
        "lower_bound",
        "clique_bound",
        "clique_bound_kind",
        "clique_search_threshold",
        "clique_search_work",
        "clique_estimate",
        "instance_bytes",
    ] {
        f.same_within(&point, column);
    }
    // `uncoded` is the uncoded scheme's count at the point; a refused scheme sends nothing.
    let sheet = f.sheet;
    let uncoded: BTreeMap<String, String> = (0..sheet.rows.len())
        .filter(|&r| sheet.text(r, "scheme") == "uncoded")
        .map(|r| (sheet.key(r, &point), sheet.text(r, "transmissions").to_string()))
        .collect();
    for row in 0..sheet.rows.len() {
        let count = uncoded.get(&sheet.key(row, &point)).map_or("", String::as_str);
        if sheet.text(row, "uncoded") != count {
            f.flag(row, "uncoded", format!("differs from the uncoded scheme's transmissions {count:?}"));
        }
        if sheet.text(row, "refused").is_empty() == sheet.text(row, "transmissions").is_empty() {
            f.flag(row, "transmissions", "must be empty exactly when the scheme refused".into());
        }
        // The clique family's bound holds for the plans of its members (cycle-packing, which
        // `auto` may pick on no-excess instances, decodes in two steps).
        if CLIQUE_FAMILY.contains(&sheet.text(row, "made_by"))
            && let (Some(bound), Some(sent)) =
                (sheet.num(row, "clique_bound"), sheet.num(row, "transmissions"))
            && bound > sent
        {
            f.flag(row, "clique_bound", format!("{bound} exceeds the family member's transmissions {sent}"));
        }
        let searched = sheet.text(row, "clique_search_threshold") != "0";
        let kind = sheet.text(row, "clique_bound_kind");
        if kind != if searched { "search" } else { "cachers" } {
            f.flag(row, "clique_bound_kind", format!("{kind:?} does not match the search's threshold"));
        }
    }
}

/// The reference of a carpool row: the proven optimum, else the relaxation rounded up.
fn reference(s: &Sheet, r: usize) -> Option<f64> {
    s.num(r, "optimum").or_else(|| Some((s.num(r, "relaxation")? - 1e-9).ceil()))
}

fn carpool(f: &mut Findings<'_>) {
    f.derived("reference", reference);
    f.derived("gap", |s, r| Some(s.num(r, "transmissions")? / reference(s, r)? - 1.0));
    f.at_most("reference", "transmissions");
    f.at_most("relaxation", "optimum");
    let instance = ["workers", "points", "alpha", "seed"];
    for column in ["relaxation", "optimum", "reference"] {
        f.same_within(&instance, column);
    }
}

fn carpool_fresh(f: &mut Findings<'_>) {
    carpool(f);
    let flag =
        |test: fn(f64) -> bool| move |s: &Sheet, r: usize| Some(f64::from(u8::from(test(s.num(r, "gap")?))));
    f.derived("within_goal", flag(|gap| gap <= 0.03));
    f.derived("above_ceiling", flag(|gap| gap > 0.05));
}

fn pliable(f: &mut Findings<'_>) {
    f.derived("uniform_entropy_bits", |s, r| Some(s.num(r, "workers")?.log2()));
    f.at_most("transmissions", "uncoded_chosen");
    f.same_within(&["workers", "points", "alpha", "seed"], "uncoded_fully_random");
    f.same_within(&["workers", "points", "alpha", "seed", "candidates"], "guaranteed_min_entropy_bits");
}

fn pliable_paper(f: &mut Findings<'_>) {
    f.derived("average_cachers", |s, r| {
        Some(s.num(r, "workers")? * s.num(r, "cache")? / s.num(r, "messages")?)
    });
    f.at_most("packing_limit", "transmissions");
    f.same_within(&["workers", "messages", "cache", "seed"], "packing_limit");
}

fn pliable_training(f: &mut Findings<'_>) {
    f.at_most("transmissions", "uncoded_transmissions");
}

fn speed(f: &mut Findings<'_>) {
    f.derived("speed_vs_baseline", ratio("baseline_median_seconds", "median_seconds"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sheet(header: &[&str], rows: &[&[&str]]) -> Sheet {
        Sheet {
            file: "t.csv".into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: rows.iter().map(|r| r.iter().map(|c| c.to_string()).collect()).collect(),
        }
    }

    #[test]
    fn a_wrong_gap_or_flag_is_named() {
        let header = [
            "workers",
            "points",
            "alpha",
            "seed",
            "transmissions",
            "relaxation",
            "optimum",
            "reference",
            "gap",
            "within_goal",
            "above_ceiling",
        ];
        let good: &[&str] = &["8", "300", "0.2", "1", "103", "99.5", "", "100", "0.03", "1", "0"];
        let s = sheet(&header, &[good]);
        let mut f = Findings { sheet: &s, lines: Vec::new() };
        carpool_fresh(&mut f);
        assert!(f.lines.is_empty(), "{:?}", f.lines);
        let bad: &[&str] = &["8", "300", "0.2", "1", "104", "99.5", "", "100", "0.03", "0", "0"];
        let s = sheet(&header, &[good, bad]);
        let mut f = Findings { sheet: &s, lines: Vec::new() };
        carpool_fresh(&mut f);
        assert!(
            f.lines.iter().any(
                |l| l.starts_with("t.csv line 3 (workers=8, points=300, alpha=0.2, seed=1), column gap:")
            )
        );
        assert!(
            f.lines.iter().any(|l| l.contains("line 3") && l.contains("column within_goal")),
            "{:?}",
            f.lines
        );
    }

    #[test]
    fn a_clique_family_bound_above_a_members_plan_or_of_the_wrong_kind_is_named() {
        let header = [
            "scheme",
            "made_by",
            "workers",
            "points",
            "alpha",
            "transmissions",
            "uncoded",
            "over_uncoded",
            "lower_bound",
            "bound_over_uncoded",
            "clique_bound",
            "clique_bound_over_uncoded",
            "clique_bound_kind",
            "clique_search_threshold",
            "clique_search_work",
            "clique_estimate",
            "clique_estimate_over_uncoded",
            "refused",
            "instance_bytes",
        ];
        let row = |scheme: &'static str, made_by: &'static str, sent: &'static str, over: &'static str| {
            [
                scheme, made_by, "10", "1000", "0.1", sent, "100", over, "20", "0.2", "25", "0.25", "search",
                "4", "9", "30", "0.3", "", "64",
            ]
        };
        let uncoded = row("uncoded", "uncoded", "100", "1");
        // cycle-packing decodes in two steps: no member of the family, so it may beat the bound.
        let auto = row("auto", "cycle-packing", "24", "0.24");
        let s = sheet(&header, &[&uncoded, &auto]);
        let mut f = Findings { sheet: &s, lines: Vec::new() };
        scale(&mut f);
        assert!(f.lines.is_empty(), "{:?}", f.lines);
        let below = row("clique-cover", "clique-cover", "24", "0.24");
        let mut wrong_kind = row("coded", "coded", "40", "0.4");
        wrong_kind[12] = "cachers";
        let s = sheet(&header, &[&uncoded, &below, &wrong_kind]);
        let mut f = Findings { sheet: &s, lines: Vec::new() };
        scale(&mut f);
        assert!(
            f.lines.iter().any(|l| l.contains("line 3") && l.contains("column clique_bound:")),
            "{:?}",
            f.lines
        );
        assert!(
            f.lines.iter().any(|l| l.contains("line 4") && l.contains("column clique_bound_kind")),
            "{:?}",
            f.lines
        );
    }
}
