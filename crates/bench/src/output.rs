//! Printing: one-line errors, aligned tables, JSON on stdout.

/// An error and its causes on one line, `outer: inner: ...`, with any newlines flattened.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
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
