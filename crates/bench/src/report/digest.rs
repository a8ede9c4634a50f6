//! Digests of the full runs' CSVs (`results/full/digests.toml`): written by the full run beside
//! its CSVs, and compared with the committed CSVs by `--check --sample` and a test, so that a
//! cell edited by hand fails even in the rows the sample does not re-run.
//!
//! For every CSV the file records its header, its machine-dependent columns (left out, as in
//! `--check`), its number of rows, one digest per row over the row's checked cells and one per
//! checked column over that column's cells. A changed cell changes one row digest and one column
//! digest, which together name it. The digest is 64-bit FNV-1a over the cells' text: it guards
//! against edits by hand and runs that were not committed together, not against someone who
//! recomputes it on purpose (the invariants and the re-run sample check the values themselves).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use ubershuffle_runtime::write_atomically;

use super::table::{Table, parse_csv};
use super::{ReportError, check::row_key};

/// The digests' file in a full run's folder.
pub const FILE: &str = "digests.toml";

/// What the file says at its top.
const PREAMBLE: &str = "# Written by `cargo xtask experiments NAME` (a full run) beside the CSVs it writes: per CSV its\n\
                        # header, the machine-dependent columns left out, and 64-bit FNV-1a digests of every row's and\n\
                        # every checked column's cells. `cargo xtask experiments --check --sample` and\n\
                        # crates/bench/tests/full_results.rs compare them with the committed CSVs. Do not edit.\n\n";

/// The digests of one CSV.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// Every column, in order.
    pub header: Vec<String>,
    /// The machine-dependent columns, which the digests leave out.
    pub machine_columns: Vec<String>,
    /// The number of rows.
    pub rows: usize,
    /// One digest per checked column (the header without the machine columns), in order.
    pub columns: Vec<String>,
    /// One digest per row, over its checked cells.
    pub row_digests: Vec<String>,
}

/// The digests' file: one entry per CSV, by file name.
#[derive(Clone, Debug, Default, Deserialize)]
struct Digests {
    files: BTreeMap<String, FileDigest>,
}

/// 64-bit FNV-1a of `cells`, each followed by a unit separator, as 16 hex digits.
fn fnv1a<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for cell in cells {
        for &byte in cell.as_bytes().iter().chain(&[0x1f]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// The indices of the checked columns of `header`.
fn checked(header: &[String], machine_columns: &[String]) -> Vec<usize> {
    (0..header.len()).filter(|&c| !machine_columns.contains(&header[c])).collect()
}

fn cell(row: &[String], c: usize) -> &str {
    row.get(c).map_or("", String::as_str)
}

impl FileDigest {
    /// The digests of a table of `header` and `rows`, leaving out `machine_columns`.
    pub fn of(header: &[String], rows: &[Vec<String>], machine_columns: &[String]) -> FileDigest {
        let checked = checked(header, machine_columns);
        FileDigest {
            header: header.to_vec(),
            machine_columns: machine_columns.to_vec(),
            rows: rows.len(),
            columns: checked.iter().map(|&c| fnv1a(rows.iter().map(|r| cell(r, c)))).collect(),
            row_digests: rows.iter().map(|r| fnv1a(checked.iter().map(|&c| cell(r, c)))).collect(),
        }
    }

    /// How the committed `header` and `rows` of `file` differ from these digests, one line per
    /// changed row naming its line, leading cells and changed columns (empty when they agree).
    pub fn differences(&self, file: &str, header: &[String], rows: &[Vec<String>]) -> Vec<String> {
        if header != self.header.as_slice() {
            return vec![format!(
                "{file}: the columns differ from {FILE}: committed [{}], digested [{}]",
                header.join(", "),
                self.header.join(", ")
            )];
        }
        if rows.len() != self.rows {
            return vec![format!("{file}: {} rows, but {FILE} digested {}", rows.len(), self.rows)];
        }
        let fresh = FileDigest::of(header, rows, &self.machine_columns);
        let checked = checked(header, &self.machine_columns);
        let columns: Vec<&str> = checked
            .iter()
            .zip(fresh.columns.iter().zip(&self.columns))
            .filter(|(_, (now, was))| now != was)
            .map(|(&c, _)| header[c].as_str())
            .collect();
        let table = Table {
            file: file.into(),
            header: header.to_vec(),
            rows: Vec::new(),
            machine_columns: self.machine_columns.clone(),
        };
        let named = if columns.is_empty() { "a checked column".into() } else { columns.join(" or ") };
        fresh
            .row_digests
            .iter()
            .zip(&self.row_digests)
            .enumerate()
            .filter(|(_, (now, was))| now != was)
            .map(|(i, _)| {
                format!(
                    "{file} line {} ({}), column {named}: differs from what the full run wrote ({FILE}); \
                     a cell edited by hand? regenerate with `cargo xtask experiments NAME`",
                    i + 2,
                    row_key(&table, &rows[i], &checked)
                )
            })
            .collect()
    }
}

fn read(dir: &Path) -> Result<Digests, ReportError> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Digests::default()),
        Err(e) => return Err(e.into()),
    };
    toml::from_str(&text).map_err(|e| ReportError::Csv {
        file: FILE.into(),
        reason: e.to_string().lines().next().unwrap_or("not valid TOML").to_string(),
    })
}

/// Records the digests of `tables` in `dir`'s digests file, keeping the other files' entries.
pub fn record(dir: &Path, tables: &[Table]) -> Result<(), ReportError> {
    let mut digests = read(dir)?;
    for table in tables {
        digests
            .files
            .insert(table.file.clone(), FileDigest::of(&table.header, &table.rows, &table.machine_columns));
    }
    let mut text = String::from(PREAMBLE);
    for (file, d) in &digests.files {
        text += &d.to_toml(file)?;
    }
    write_atomically(&dir.join(FILE), text.as_bytes())?;
    Ok(())
}

/// A TOML string (a JSON string is a valid TOML basic string).
fn quoted<T: Serialize + ?Sized>(value: &T) -> Result<String, ReportError> {
    serde_json::to_string(value).map_err(|e| ReportError::Csv { file: FILE.into(), reason: e.to_string() })
}

impl FileDigest {
    /// The entry of `file` as a TOML table, one row digest a line (so that a diff shows rows).
    fn to_toml(&self, file: &str) -> Result<String, ReportError> {
        let mut rows = String::new();
        for d in &self.row_digests {
            rows += &format!("    {},\n", quoted(d)?);
        }
        Ok(format!(
            "[files.{}]\nheader = {}\nmachine_columns = {}\nrows = {}\ncolumns = {}\nrow_digests = [\n{rows}]\n\n",
            quoted(file)?,
            quoted(&self.header)?,
            quoted(&self.machine_columns)?,
            self.rows,
            quoted(&self.columns)?,
        ))
    }
}

/// Compares every CSV in `dir` with the digests file there: every CSV must have digests, every
/// digested CSV must exist, and every checked cell must be the one the full run wrote. Returns
/// one line per difference (empty when all agree).
pub fn check_dir(dir: &Path) -> Vec<String> {
    let digests = match read(dir) {
        Ok(d) if d.files.is_empty() => {
            return vec![format!("{}: missing or empty", dir.join(FILE).display())];
        }
        Ok(d) => d,
        Err(e) => return vec![e.to_string()],
    };
    let mut differences = Vec::new();
    let mut csvs: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
            .filter(|f| f.ends_with(".csv"))
            .collect(),
        Err(e) => return vec![format!("{}: {e}", dir.display())],
    };
    csvs.sort();
    for file in csvs.iter().filter(|f| !digests.files.contains_key(*f)) {
        differences.push(format!("{file}: committed, but {FILE} has no digests of it"));
    }
    for (file, digest) in &digests.files {
        let parsed = std::fs::read(dir.join(file))
            .map_err(|e| format!("{file}: in {FILE}, but not readable ({e})"))
            .and_then(|bytes| parse_csv(file, &bytes).map_err(|e| e.to_string()));
        match parsed {
            Ok((header, rows)) => differences.extend(digest.differences(file, &header, &rows)),
            Err(e) => differences.push(e),
        }
    }
    differences
}

/// The machine columns `dir`'s digests file records for `file` (`None` when it has none).
pub fn machine_columns(dir: &Path, file: &str) -> Option<Vec<String>> {
    read(dir).ok()?.files.get(file).map(|d| d.machine_columns.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn strings(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn a_changed_cell_is_named_by_its_row_and_column() {
        let header = strings(&["scheme", "count", "seconds"]);
        let rows = vec![strings(&["coded", "10", "1.5"]), strings(&["uncoded", "20", "2.5"])];
        let digest = FileDigest::of(&header, &rows, &strings(&["seconds"]));
        assert!(digest.differences("x.csv", &header, &rows).is_empty());
        let mut timed = rows.clone();
        timed[1][2] = "9.9".into();
        assert!(digest.differences("x.csv", &header, &timed).is_empty(), "machine columns are left out");
        let mut edited = rows.clone();
        edited[1][1] = "21".into();
        let d = digest.differences("x.csv", &header, &edited);
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("x.csv line 3 (scheme=uncoded, count=21), column count:"), "{}", d[0]);
        let shorter = &rows[..1];
        assert!(
            digest.differences("x.csv", &header, shorter)[0].contains("1 rows, but digests.toml digested 2")
        );
    }

    #[test]
    fn recorded_digests_read_back_and_check_the_folder() {
        let dir = std::env::temp_dir().join(format!("ubershuffle-digests-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let table = Table {
            file: "t.csv".into(),
            header: strings(&["scheme", "note \"quoted\"", "seconds"]),
            rows: vec![strings(&["coded", "a, b", "1.5"])],
            machine_columns: strings(&["seconds"]),
        };
        std::fs::write(dir.join("t.csv"), table.to_csv().unwrap()).unwrap();
        assert!(check_dir(&dir)[0].contains("missing or empty"));
        record(&dir, std::slice::from_ref(&table)).unwrap();
        assert_eq!(check_dir(&dir), Vec::<String>::new());
        assert_eq!(machine_columns(&dir, "t.csv"), Some(strings(&["seconds"])));
        std::fs::write(dir.join("u.csv"), "a\n1\n").unwrap();
        assert_eq!(check_dir(&dir), ["u.csv: committed, but digests.toml has no digests of it"]);
        std::fs::remove_file(dir.join("t.csv")).unwrap();
        assert!(check_dir(&dir).iter().any(|d| d.starts_with("t.csv: in digests.toml, but not readable")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cells_are_separated_in_the_digest() {
        assert_ne!(fnv1a(["ab", "c"]), fnv1a(["a", "bc"]));
        assert_eq!(fnv1a([]), "cbf29ce484222325");
    }
}
