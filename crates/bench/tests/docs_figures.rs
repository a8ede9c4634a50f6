//! Published figures point at committed results.
//!
//! Every `results/....csv` named in the documents (`README.md`, `docs/*.md`,
//! `crates/*/README.md`, `python/README.md`) must exist in the repository,
//! so renaming or dropping a CSV that a document quotes fails here (and so in CI). A pointer
//! followed by a comma, as in `5.58x (results/full/fig3.csv, points=1000000, alpha=0.55)`,
//! names rows: each `column=value` after it (up to the parenthesis that closes the pointer,
//! a table cell's `|`, the next pointer or the end of the paragraph; pieces split at `,` and
//! `;`) must be a column of the CSV, and at least one row must match all of them (numbers
//! compare as numbers, so `gbit=1` matches `1.0`). Pieces that are not `column=value` are
//! prose and are skipped.
//! Paths with capitals (`results/NAME.csv`) are placeholders and are skipped too.
//!
//! The values quoted beside a pointer are not compared: they are for a reader to check
//! against the row the pointer names.

mod common;

use common::{documents, repo_root, scratch_root};

use std::fs;
use std::path::Path;

/// A pointer to a results CSV found in a document.
#[derive(Debug, Clone, PartialEq)]
struct Pointer {
    /// 1-based line of the document.
    line: usize,
    /// The path from the repository's root, e.g. `results/full/fig3.csv`.
    path: String,
    /// The `column=value` pairs that name its rows.
    filters: Vec<(String, String)>,
}

/// The characters a path may hold.
fn in_path(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_./-".contains(c)
}

/// The pointers of a document's text. A pointer's rows may continue on the next lines of its
/// paragraph (Markdown wraps).
fn pointers(text: &str) -> Vec<Pointer> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("results/") {
        let start = from + at;
        let run = text[start..].find(|c: char| !in_path(c)).map_or(text.len(), |n| start + n);
        // A sentence may end right after the path.
        let path = text[start..run].trim_end_matches('.');
        from = run.max(start + 1);
        if !path.ends_with(".csv") || path.chars().any(|c| c.is_ascii_uppercase()) {
            continue;
        }
        let tail = &text[start + path.len()..];
        // Its rows end with the paragraph, or where the next pointer starts.
        let end = [tail.find("\n\n"), tail.find("results/")].into_iter().flatten().min();
        let paragraph = end.map_or(tail, |end| &tail[..end]);
        found.push(Pointer {
            line: text[..start].matches('\n').count() + 1,
            path: path.to_string(),
            filters: filters(paragraph),
        });
    }
    found
}

/// The `column=value` pairs after a pointer, when a comma follows it.
fn filters(tail: &str) -> Vec<(String, String)> {
    let tail = tail.strip_prefix('`').unwrap_or(tail);
    let Some(rest) = tail.strip_prefix(',') else {
        return Vec::new();
    };
    let mut pieces = Vec::new();
    let (mut depth, mut piece_start) = (0usize, 0);
    let mut end = rest.len();
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = i;
                break;
            }
            ')' => depth -= 1,
            '|' if depth == 0 => {
                end = i;
                break;
            }
            ',' | ';' if depth == 0 => {
                pieces.push(&rest[piece_start..i]);
                piece_start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(&rest[piece_start..end]);
    pieces
        .into_iter()
        .filter_map(|piece| {
            let piece = piece.trim().trim_matches('`');
            let (column, value) = piece.split_once('=')?;
            let is_column = !column.is_empty()
                && column.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            let value = value.trim().trim_matches('`');
            (is_column && !value.is_empty()).then(|| (column.to_string(), value.to_string()))
        })
        .collect()
}

/// Whether a CSV cell holds `wanted`: the same text, or the same number.
fn cell_matches(cell: &str, wanted: &str) -> bool {
    cell == wanted || matches!((cell.parse::<f64>(), wanted.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
}

/// What is wrong with a pointer, if anything, reading CSVs under `root`.
fn check(root: &Path, pointer: &Pointer) -> Option<String> {
    let file = root.join(&pointer.path);
    if !file.is_file() {
        return Some(format!("{} does not exist", pointer.path));
    }
    if pointer.filters.is_empty() {
        return None;
    }
    let mut reader = match csv::Reader::from_path(&file) {
        Ok(reader) => reader,
        Err(e) => return Some(format!("{}: {e}", pointer.path)),
    };
    let headers = match reader.headers() {
        Ok(headers) => headers.clone(),
        Err(e) => return Some(format!("{}: {e}", pointer.path)),
    };
    let mut columns = Vec::new();
    for (column, value) in &pointer.filters {
        match headers.iter().position(|h| h == column) {
            Some(index) => columns.push((index, value)),
            None => return Some(format!("{} has no column {column}", pointer.path)),
        }
    }
    let found = reader.records().any(|record| {
        record
            .is_ok_and(|r| columns.iter().all(|(i, value)| r.get(*i).is_some_and(|c| cell_matches(c, value))))
    });
    let wanted: Vec<String> = pointer.filters.iter().map(|(c, v)| format!("{c}={v}")).collect();
    (!found).then(|| format!("{} has no row with {}", pointer.path, wanted.join(", ")))
}

#[test]
fn every_results_pointer_in_readme_and_docs_names_a_committed_csv_and_its_rows() {
    let root = repo_root();
    let mut problems = Vec::new();
    let (mut seen, mut with_rows) = (0, 0);
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).expect("the document is readable");
        let name = doc.strip_prefix(&root).unwrap_or(&doc).display().to_string();
        for pointer in pointers(&text) {
            seen += 1;
            with_rows += usize::from(!pointer.filters.is_empty());
            if let Some(problem) = check(&root, &pointer) {
                problems.push(format!("{name}:{}: {problem}", pointer.line));
            }
        }
    }
    assert!(problems.is_empty(), "pointers to results that do not hold:\n{}", problems.join("\n"));
    // The scan itself must find what the documents point at.
    assert!(seen > 10 && with_rows > 5, "found only {seen} pointers ({with_rows} naming rows)");
}

#[test]
fn the_scanner_reads_pointers_as_written() {
    let text = "a 5.58x (results/full/fig3.csv, points=1000000, alpha=0.55; median over seeds) b\n\
                see [`results/fig3.csv`](../results/fig3.csv).\n\
                | x | (`results/scale.csv`, scheme=auto, what=plan (seed 1)) | y=2 |\n\
                each writes results/NAME.csv and results/NAME*.svg\n\
                ends with results/msr.csv.\n\
                wrapped (results/theorem1.csv, points=1000,\n  alpha=0.1) and\n\n\
                next (results/plugins.csv, seed=1\n\nnot=this\n\
                two (results/msr.csv, wait=9; and results/msr-scan.csv, at_wait=7)";
    let found: Vec<String> = pointers(text)
        .iter()
        .map(|p| {
            let rows: Vec<String> = p.filters.iter().map(|(c, v)| format!(" {c}={v}")).collect();
            format!("{}: {}{}", p.line, p.path, rows.concat())
        })
        .collect();
    assert_eq!(
        found,
        [
            "1: results/full/fig3.csv points=1000000 alpha=0.55",
            "2: results/fig3.csv",
            "2: results/fig3.csv",
            "3: results/scale.csv scheme=auto what=plan (seed 1)",
            "5: results/msr.csv",
            "6: results/theorem1.csv points=1000 alpha=0.1",
            "9: results/plugins.csv seed=1",
            "12: results/msr.csv wait=9",
            "12: results/msr-scan.csv at_wait=7",
        ]
    );
}

#[test]
fn a_missing_csv_column_or_row_is_reported() {
    let root = scratch_root("docs-figures", "scheme,gbit,points\ncoded,1.0,1000000\nuncoded,10.0,1000\n");
    let problem = |text: &str| {
        let pointer = pointers(text).into_iter().next().expect("a pointer");
        check(&root, &pointer)
    };
    assert_eq!(problem("(results/t.csv, scheme=coded, gbit=1, points=1e6)"), None);
    assert_eq!(problem("(results/t.csv)"), None);
    assert_eq!(problem("(results/gone.csv)"), Some("results/gone.csv does not exist".into()));
    assert_eq!(problem("(results/t.csv, speed=3)"), Some("results/t.csv has no column speed".into()));
    assert_eq!(
        problem("(results/t.csv, scheme=coded, gbit=10)"),
        Some("results/t.csv has no row with scheme=coded, gbit=10".into())
    );
    fs::remove_dir_all(&root).unwrap();
}
