//! Printing: one-line errors, aligned tables, JSON and plain lines on stdout.
//!
//! Everything goes through [`print_line`], which returns an error instead of panicking when
//! stdout is closed (`ubershuffle ... --json | head`); `main` ends quietly on a broken pipe.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;

/// An error and its causes on one line, `outer: inner: ...`, with any newlines flattened.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

/// Whether `e` is stdout closing under us (the reader went away), which is not a failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe))
}

/// Writes `text` and a newline to stdout.
pub fn print_line(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// Prints `rows` as two aligned columns on stdout.
pub fn print_table(rows: &[(&str, String)]) -> anyhow::Result<()> {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let text: Vec<String> = rows.iter().map(|(key, value)| format!("{key:<width$}  {value}")).collect();
    print_line(&text.join("\n"))
}

/// Prints `value` as one line of JSON on stdout.
pub fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    print_line(&value.to_string())
}

/// A command line clap could not parse: help and version print as clap prints them; an error
/// becomes one `error: ...` line on stderr (its usage and "for more information" lines
/// dropped) and exit status 1, like every other error (README: "exit status 1").
pub fn usage_error(e: clap::Error) -> ExitCode {
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    let line = parts.join(" ");
    match line.strip_prefix("error:") {
        Some(rest) => eprintln!("error:{rest}"),
        None => eprintln!("error: {line}"),
    }
    ExitCode::FAILURE
}

/// Shows the libraries' `tracing` events on stderr: none by default, `info` with `-v`, `debug`
/// with `-vv`; `RUST_LOG`, when set, decides instead.
pub fn show_events(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let level = match verbose {
        0 => "off",
        1 => "info",
        _ => "debug",
    };
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A second subscriber (there is none) would be the only reason this fails: nothing to do.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}
