//! `--check`: a fresh run's tables against the committed ones, column by column, leaving out
//! the machine-dependent columns (times, rates, memory).
//!
//! Numbers compare within a relative 1e-9 (the same binary gives the same bits, but `libm`
//! functions may differ in the last place between C libraries); every other cell compares as
//! text. The first difference is reported with the row's leading cells, so that it can be found.

use super::table::Table;

/// The relative tolerance for numeric cells.
const RELATIVE_TOLERANCE: f64 = 1e-9;

/// How many leading cells name a row in a difference.
const KEY_CELLS: usize = 4;

/// The machine-independent columns to compare, or the difference when the columns changed.
pub(crate) fn checked_columns(fresh: &Table, committed_header: &[String]) -> Result<Vec<usize>, String> {
    if committed_header != fresh.header.as_slice() {
        return Err(format!(
            "{}: the columns changed: committed [{}], this run [{}]",
            fresh.file,
            committed_header.join(", "),
            fresh.header.join(", ")
        ));
    }
    Ok((0..fresh.header.len()).filter(|&c| !fresh.machine_columns.contains(&fresh.header[c])).collect())
}

/// Compares `fresh` with the committed table (`committed_header`, `committed_rows`); `None`
/// when every checked cell agrees, otherwise a one-line description of the first difference.
pub fn first_difference(
    fresh: &Table,
    committed_header: &[String],
    committed_rows: &[Vec<String>],
) -> Option<String> {
    let file = &fresh.file;
    let checked = match checked_columns(fresh, committed_header) {
        Ok(checked) => checked,
        Err(changed) => return Some(changed),
    };
    for (index, (old, new)) in committed_rows.iter().zip(&fresh.rows).enumerate() {
        for &c in &checked {
            let (was, now) = (old.get(c).map_or("", String::as_str), new.get(c).map_or("", String::as_str));
            if !same_cell(was, now) {
                return Some(format!(
                    "{file} line {} ({}), column {}: committed {was:?}, this run {now:?}",
                    index + 2,
                    row_key(fresh, new, &checked),
                    fresh.header[c]
                ));
            }
        }
    }
    if committed_rows.len() != fresh.rows.len() {
        return Some(format!(
            "{file}: committed {} rows, this run {}",
            committed_rows.len(),
            fresh.rows.len()
        ));
    }
    None
}

/// Checks a sample of a full run: the same columns, and every fresh row among the committed rows
/// (on the checked columns). `None` when all are there, otherwise the first fresh row missing,
/// named with the committed row closest to it and the columns where they differ.
pub fn first_missing_row(
    fresh: &Table,
    committed_header: &[String],
    committed_rows: &[Vec<String>],
) -> Option<String> {
    let file = &fresh.file;
    let checked = match checked_columns(fresh, committed_header) {
        Ok(checked) => checked,
        Err(changed) => return Some(changed),
    };
    let differing = |old: &[String], new: &[String]| -> Vec<usize> {
        let cell = |row: &[String], c: usize| row.get(c).map_or("", String::as_str).to_string();
        checked.iter().copied().filter(|&c| !same_cell(&cell(old, c), &cell(new, c))).collect()
    };
    for new in &fresh.rows {
        let closest =
            committed_rows.iter().map(|old| (differing(old, new), old)).min_by_key(|(d, _)| d.len());
        match closest {
            Some((columns, _)) if columns.is_empty() => {}
            Some((columns, old)) => {
                let cells: Vec<String> = columns
                    .iter()
                    .map(|&c| {
                        let (was, now) =
                            (old.get(c).map_or("", String::as_str), new.get(c).map_or("", String::as_str));
                        format!("{} committed {was:?}, this run {now:?}", fresh.header[c])
                    })
                    .collect();
                return Some(format!(
                    "{file}: the row ({}) is not committed; the closest committed row differs in {}",
                    row_key(fresh, new, &checked),
                    cells.join("; ")
                ));
            }
            None => return Some(format!("{file}: no committed rows")),
        }
    }
    None
}

/// The first few checked cells of a row, as `column=value` pairs.
pub(crate) fn row_key(table: &Table, row: &[String], checked: &[usize]) -> String {
    checked
        .iter()
        .take(KEY_CELLS)
        .map(|&c| format!("{}={}", table.header[c], row.get(c).map_or("", String::as_str)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether two cells agree: equal text, or numbers within the tolerance.
fn same_cell(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) if x.is_finite() && y.is_finite() => {
            (x - y).abs() <= RELATIVE_TOLERANCE * x.abs().max(y.abs())
        }
        _ => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A table of (scheme, count, seconds) rows, `seconds` its machine column.
    pub(crate) fn table(rows: &[[&str; 3]]) -> Table {
        Table {
            file: "x.csv".into(),
            header: vec!["scheme".into(), "count".into(), "seconds".into()],
            rows: rows.iter().map(|r| r.iter().map(|c| c.to_string()).collect()).collect(),
            machine_columns: vec!["seconds".into()],
        }
    }

    #[test]
    fn machine_columns_and_last_place_differences_pass() {
        let committed = table(&[["coded", "0.30000000000000004", "1.5"]]);
        let fresh = table(&[["coded", "0.3", "9.9"]]);
        assert_eq!(first_difference(&fresh, &committed.header, &committed.rows), None);
    }

    #[test]
    fn the_first_difference_is_named_with_its_row() {
        let committed = table(&[["coded", "10", "1"], ["uncoded", "20", "1"]]);
        let fresh = table(&[["coded", "10", "1"], ["uncoded", "21", "1"]]);
        let d = first_difference(&fresh, &committed.header, &committed.rows).unwrap();
        assert!(d.contains("line 3") && d.contains("scheme=uncoded") && d.contains("column count"), "{d}");
        let shorter = table(&[["coded", "10", "1"]]);
        let d = first_difference(&shorter, &committed.header, &committed.rows).unwrap();
        assert!(d.contains("committed 2 rows, this run 1"), "{d}");
        let mut renamed = fresh.clone();
        renamed.header[1] = "packets".into();
        assert!(first_difference(&renamed, &committed.header, &committed.rows).unwrap().contains("columns"));
    }

    #[test]
    fn a_sample_must_be_among_the_committed_rows() {
        let committed = table(&[["coded", "10", "1"], ["uncoded", "20", "1"], ["opt", "5", "1"]]);
        let sample = table(&[["uncoded", "20", "7"], ["coded", "10", "3"]]);
        assert_eq!(first_missing_row(&sample, &committed.header, &committed.rows), None);
        let changed = table(&[["uncoded", "21", "7"]]);
        let d = first_missing_row(&changed, &committed.header, &committed.rows).unwrap();
        assert!(d.contains("scheme=uncoded") && d.contains("count committed \"20\", this run \"21\""), "{d}");
        let mut renamed = sample.clone();
        renamed.header[1] = "packets".into();
        assert!(first_missing_row(&renamed, &committed.header, &committed.rows).unwrap().contains("columns"));
    }
}
