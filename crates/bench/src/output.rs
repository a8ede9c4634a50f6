//! Printing and writing: one-line errors, atomic file writes, aligned tables.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// An error and its causes on one line, `outer: inner: ...`, with any newlines flattened.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a
/// failure never leaves a half-written file behind.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Prints `rows` as two aligned columns on stdout.
pub fn print_table(rows: &[(&str, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (key, value) in rows {
        println!("{key:<width$}  {value}");
    }
}

/// Prints `value` as one line of JSON on stdout.
pub fn print_json(value: &serde_json::Value) {
    println!("{value}");
}
