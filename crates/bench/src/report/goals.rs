//! An issue's goals as a summary CSV holds them (`key,measure,value,goal,met`, one row a goal),
//! and the goals tables rendered from such a CSV into a document between markers:
//!
//! ```text
//! <!-- goals table of results/netns-loaders-summary.csv: written by cargo xtask -->
//! | measure | value | goal | met |
//! ...
//! <!-- end of goals table -->
//! ```
//!
//! A document's table holds the CSV's targets (not its information rows); its `met` column is
//! the CSV's `met`, never typed. [`check_text`] renders every block again from its CSV and names
//! a block that differs; [`render_text`] writes them again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ReportError;

/// What opens a goals table's marker line, before the CSV's path.
pub const BEGIN: &str = "<!-- goals table of ";
/// What follows the CSV's path on the marker line.
pub const BEGIN_TAIL: &str = ": written by cargo xtask -->";
/// The marker line after the table.
pub const END: &str = "<!-- end of goals table -->";

/// One goal of an issue, measured (a row of a summary CSV).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    /// A short key for citations.
    pub key: String,
    /// What is measured.
    pub measure: String,
    /// The measured value.
    pub value: f64,
    /// The goal (empty, or in parentheses, for information).
    pub goal: String,
    /// Whether it is met.
    pub met: bool,
}

impl Goal {
    /// Whether the goal is a target (not information).
    pub fn is_target(&self) -> bool {
        !self.goal.is_empty() && !self.goal.starts_with('(')
    }
}

/// Which rows of a summary a table shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// Every row (results/README.md's sections).
    All,
    /// The targets only (the documents' goals tables).
    Targets,
}

/// The goals of the summary CSV `file` (a path from `root`, e.g.
/// `results/netns-loaders-summary.csv`).
pub fn read(root: &Path, file: &str) -> Result<Vec<Goal>, ReportError> {
    let csv_error = |reason: String| ReportError::Csv { file: file.into(), reason };
    let mut reader = csv::Reader::from_path(root.join(file)).map_err(|e| csv_error(e.to_string()))?;
    reader.deserialize().collect::<Result<Vec<Goal>, _>>().map_err(|e| csv_error(e.to_string()))
}

/// `text` followed by a `param` label when it holds a digit (a goal's bound, a limit in a
/// measure's words: set, not measured, as docs_uncited wants it).
fn labelled(text: &str) -> String {
    if text.contains(|c: char| c.is_ascii_digit()) { format!("{text} <!-- param -->") } else { text.into() }
}

/// The table (measure, value, goal, met) of `goals`, each value cited from `file` (the summary
/// CSV they were read from or are written to) as docs_numbers wants it.
pub fn table(file: &str, goals: &[Goal], rows: Rows) -> String {
    let mut s = String::from("| measure | value | goal | met |\n|---|---|---|---|\n");
    for g in goals.iter().filter(|g| rows == Rows::All || g.is_target()) {
        let met = match (g.is_target(), g.met) {
            (false, _) => "",
            (true, true) => "yes",
            (true, false) => "**no**",
        };
        let value = if g.value.is_finite() {
            format!("{:.3} <!-- = {file}[key={}].value -->", g.value, g.key)
        } else {
            "-".into()
        };
        s.push_str(&format!("| {} | {value} | {} | {met} |\n", labelled(&g.measure), labelled(&g.goal)));
    }
    s
}

/// A goals table in a document: its CSV and where its body stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The summary CSV it is rendered from (a path from the repository's root).
    pub file: String,
    /// 1-based line of its opening marker.
    pub line: usize,
    /// The byte range of its body (the lines between the markers).
    pub body: std::ops::Range<usize>,
}

/// The goals tables of `text` (a marker is a line of its own; one quoted in prose is not);
/// an error line for a marker without its end or its path.
pub fn blocks(text: &str) -> Result<Vec<Block>, String> {
    let mut found = Vec::new();
    let mut open: Option<(String, usize, usize)> = None;
    let mut at = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let marker = line.trim();
        if let Some(rest) = marker.strip_prefix(BEGIN) {
            if let Some((_, line, _)) = open {
                return Err(format!("line {line}: a goals table without `{END}` before the next one"));
            }
            let file = rest
                .strip_suffix(BEGIN_TAIL)
                .filter(|f| f.starts_with("results/") && f.ends_with(".csv"))
                .ok_or_else(|| {
                    format!(
                        "line {}: a goals table's marker is not `{BEGIN}results/FILE.csv{BEGIN_TAIL}`",
                        i + 1
                    )
                })?;
            open = Some((file.to_string(), i + 1, at + line.len()));
        } else if marker == END
            && let Some((file, line, start)) = open.take()
        {
            found.push(Block { file, line, body: start..at });
        }
        at += line.len();
    }
    match open {
        Some((_, line, _)) => Err(format!("line {line}: a goals table without `{END}`")),
        None => Ok(found),
    }
}

/// `text` with every goals table rendered again from its CSV under `root` (only those of
/// `only`, when given).
pub fn render_text(text: &str, root: &Path, only: Option<&str>) -> Result<String, ReportError> {
    let blocks = blocks(text).map_err(|reason| ReportError::Csv { file: "a goals table".into(), reason })?;
    let mut out = String::with_capacity(text.len());
    let mut kept = 0;
    for block in blocks.iter().filter(|b| only.is_none_or(|f| f == b.file)) {
        out.push_str(&text[kept..block.body.start]);
        out.push_str(&table(&block.file, &read(root, &block.file)?, Rows::Targets));
        kept = block.body.end;
    }
    out.push_str(&text[kept..]);
    Ok(out)
}

/// Every goals table of `text` (named `name` in the messages) that is not its CSV under `root`
/// rendered, and how many tables it holds.
pub fn check_text(name: &str, text: &str, root: &Path) -> (usize, Vec<String>) {
    let blocks = match blocks(text) {
        Ok(blocks) => blocks,
        Err(e) => return (0, vec![format!("{name}: {e}")]),
    };
    let mut problems = Vec::new();
    for block in &blocks {
        let want = match read(root, &block.file) {
            Ok(goals) => table(&block.file, &goals, Rows::Targets),
            Err(e) => {
                problems.push(format!("{name}:{}: {e}", block.line));
                continue;
            }
        };
        let have = &text[block.body.clone()];
        if have != want {
            let first = have.lines().zip(want.lines()).position(|(h, w)| h != w).unwrap_or(0);
            problems.push(format!(
                "{name}:{}: the goals table differs from {} (first at its line {}: {:?}, the CSV gives {:?}); \
                 `cargo xtask netns-publish` renders it again",
                block.line,
                block.file,
                first + 1,
                have.lines().nth(first).unwrap_or(""),
                want.lines().nth(first).unwrap_or("")
            ));
        }
    }
    (blocks.len(), problems)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn goal(key: &str, value: f64, goal: &str, met: bool) -> Goal {
        Goal { key: key.into(), measure: format!("{key}, limit 2"), value, goal: goal.into(), met }
    }

    #[test]
    fn targets_show_met_from_the_summary_and_information_is_left_out() {
        let goals = [
            goal("a", 0.5, "(information)", true),
            goal("b", 1.25, "at most 1", false),
            goal("c", 0.75, "at least Q", true),
        ];
        let file = "results/t-summary.csv";
        let targets = table(file, &goals, Rows::Targets);
        assert_eq!(
            targets,
            "| measure | value | goal | met |\n|---|---|---|---|\n\
             | b, limit 2 <!-- param --> | 1.250 <!-- = results/t-summary.csv[key=b].value --> | at most 1 <!-- param --> | **no** |\n\
             | c, limit 2 <!-- param --> | 0.750 <!-- = results/t-summary.csv[key=c].value --> | at least Q | yes |\n"
        );
        let all = table(file, &goals, Rows::All);
        assert!(all.contains("| a, limit 2 <!-- param --> | 0.500 <!-- = results/t-summary.csv[key=a].value --> | (information) |  |"));
    }

    #[test]
    fn blocks_are_found_between_their_markers() {
        let text = format!("intro\n{BEGIN}results/a.csv{BEGIN_TAIL}\n| old |\n{END}\nrest\n");
        let found = blocks(&text).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].file.as_str(), found[0].line), ("results/a.csv", 2));
        assert_eq!(&text[found[0].body.clone()], "| old |\n");
        assert!(
            blocks(&format!("{BEGIN}results/a.csv{BEGIN_TAIL}\n| x |\n")).unwrap_err().contains("without")
        );
        assert!(blocks(&format!("{BEGIN}a.txt{BEGIN_TAIL}\n{END}\n")).unwrap_err().contains("marker"));
        let quoted = format!("write `{BEGIN}results/NAME.csv{BEGIN_TAIL}` and `{END}` around it\n");
        assert_eq!(blocks(&quoted).unwrap(), []);
    }
}
