//! The committed full results (`results/full/`) are what their runs wrote: every CSV matches
//! the digests the full run wrote beside it (`results/full/digests.toml`) and satisfies its
//! invariants, and a cell changed by hand, in a row `--check --sample` re-runs or in one it does
//! not, fails with the file, line and column named. Fast: no experiment is run here.

use std::path::{Path, PathBuf};

use ubershuffle_bench::experiments::full_invariants;
use ubershuffle_bench::report::Table;
use ubershuffle_bench::report::check::first_missing_row;
use ubershuffle_bench::report::digest;
use ubershuffle_bench::report::table::parse_csv;

fn full_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results/full")
}

/// Every difference the committed-results check of `--check --sample` reports for `dir`.
fn differences(dir: &Path) -> Vec<String> {
    digest::check_dir(dir).into_iter().chain(full_invariants::check_dir(dir)).collect()
}

/// The full CSVs, by name.
fn full_csvs() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(full_dir())
        .expect("results/full is readable")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".csv"))
        .collect();
    files.sort();
    files
}

/// A scratch copy of results/full's CSVs and digests.
fn copy_of_full(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ubershuffle-full-results-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    for file in full_csvs().into_iter().chain([digest::FILE.to_string()]) {
        std::fs::copy(full_dir().join(&file), dir.join(&file)).expect("copy a full result");
    }
    dir
}

/// A changed value: a number plus one, any other text with a letter added.
fn changed(cell: &str) -> String {
    match cell.parse::<i64>() {
        Ok(n) => (n + 1).to_string(),
        Err(_) => match cell.parse::<f64>() {
            Ok(x) if x.is_finite() => (x * 1.5 + 1.0).to_string(),
            _ => format!("{cell}x"),
        },
    }
}

#[test]
fn the_committed_full_results_match_their_digests_and_invariants() {
    let found = differences(&full_dir());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn a_changed_cell_of_any_full_csv_fails_naming_its_file_row_and_column() {
    for file in full_csvs() {
        let bytes = std::fs::read(full_dir().join(&file)).expect("readable");
        let (header, rows) = parse_csv(&file, &bytes).expect("a CSV");
        let machine = digest::machine_columns(&full_dir(), &file).expect("digested");
        // The first row is one `--check --sample` re-runs (speed.csv aside: it re-runs none);
        // the last is one it does not in fig3, scale and carpool-fresh (a q = 1e6 auto row, an
        // alpha = 0.4 instance), which only the digests and invariants check.
        for (which, row) in [("first", 0), ("last", rows.len() - 1)] {
            let column = (0..header.len())
                .rev()
                .find(|&c| !machine.contains(&header[c]) && !rows[row][c].is_empty())
                .expect("a checked cell");
            let mut edited = rows.clone();
            edited[row][column] = changed(&rows[row][column]);
            let dir = copy_of_full(&format!("{file}-{which}"));
            let table = Table {
                file: file.clone(),
                header: header.clone(),
                rows: edited.clone(),
                machine_columns: machine.clone(),
            };
            std::fs::write(dir.join(&file), table.to_csv().expect("CSV")).expect("write the edited copy");
            let found = differences(&dir);
            let _ = std::fs::remove_dir_all(&dir);
            let named = format!("{file} line {}", row + 2);
            let column_named = format!("column {}", header[column]);
            assert!(
                found.iter().any(|d| d.starts_with(&named) && d.contains(&column_named)),
                "{file}: changing the {which} row's {} was not reported as {named} ... {column_named}: {found:?}",
                header[column]
            );
            // A re-run row is also compared with the fresh run: the same row, as the run makes
            // it, is no longer among the committed rows.
            let fresh = Table {
                file: file.clone(),
                header: header.clone(),
                rows: vec![rows[row].clone()],
                machine_columns: machine.clone(),
            };
            let missing = first_missing_row(&fresh, &header, &edited).expect("the fresh row is missing");
            assert!(missing.starts_with(&format!("{file}: the row (")), "{missing}");
        }
    }
}
