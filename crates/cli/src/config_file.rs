//! `ubershuffle run --config FILE`: a TOML file whose keys are `run`'s long flags
//! (`workers = 8`, `step-size = 0.02`, `json = true`). The file becomes command-line arguments
//! placed before the user's, so that one parser (clap, with its defaults and value types)
//! reads both and a flag on the command line overrides the file. Every problem is reported
//! with the file and the line of the key.

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use anyhow::{Context, bail};
use clap::error::ContextKind;

/// The longest config file read (a config is a few hundred bytes; this stops `/dev/zero`).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Keys a config file may not set.
const NOT_IN_FILE: &[&str] = &["config", "help"];

/// The arguments `FILE` stands for, each with the line of its key, checked against `run`'s
/// flags (`run` is clap's `run` subcommand).
pub fn file_arguments(path: &Path, run: &clap::Command) -> anyhow::Result<Vec<(OsString, usize)>> {
    let text = read_capped(path)?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map_or(0, |s| line_at(&text, s.start));
        anyhow::anyhow!("config {}{}: {}", path.display(), at_line(line), e.message().replace('\n', " "))
    })?;
    let mut args = Vec::new();
    for (key, value) in &table {
        let line = line_of_key(&text, key).unwrap_or(0);
        let fail = |what: String| anyhow::anyhow!("config {}{}: {what}", path.display(), at_line(line));
        let known = run.get_arguments().any(|a| a.get_long() == Some(key.as_str()));
        if !known || NOT_IN_FILE.contains(&key.as_str()) {
            return Err(fail(format!(
                "unknown key {key} (the keys are the long flags of `ubershuffle run --help`)"
            )));
        }
        let flag = format!("--{key}");
        match value {
            toml::Value::Boolean(true) => args.push((flag.into(), line)),
            toml::Value::Boolean(false) => {}
            toml::Value::String(s) => args.push((format!("{flag}={s}").into(), line)),
            toml::Value::Integer(i) => args.push((format!("{flag}={i}").into(), line)),
            toml::Value::Float(x) => args.push((format!("{flag}={x}").into(), line)),
            _ => return Err(fail(format!("{key} must be a string, a number or true/false"))),
        }
    }
    Ok(args)
}

/// Parses `run` with the file's arguments alone, so that a bad value is reported at its line
/// in the file rather than as if typed on the command line.
pub fn check_alone(path: &Path, run: &clap::Command, args: &[(OsString, usize)]) -> anyhow::Result<()> {
    let argv = std::iter::once(OsString::from("run")).chain(args.iter().map(|(a, _)| a.clone()));
    let Err(e) = run.clone().try_get_matches_from(argv) else { return Ok(()) };
    let flag = e.get(ContextKind::InvalidArg).map(|v| v.to_string()).unwrap_or_default();
    let key = flag.trim_start_matches('-').split([' ', '=']).next().unwrap_or_default();
    let line = args
        .iter()
        .find(|(a, _)| a.to_string_lossy().trim_start_matches('-').split('=').next() == Some(key))
        .map_or(0, |(_, l)| *l);
    let message = e.render().to_string();
    let first = message.lines().next().unwrap_or("invalid value").trim_start_matches("error: ");
    bail!("config {}{}: {first}", path.display(), at_line(line))
}

/// Reads `path`, at most [`MAX_CONFIG_BYTES`].
fn read_capped(path: &Path) -> anyhow::Result<String> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read config {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        bail!(
            "config {}: larger than {} bytes; a config file holds a few settings",
            path.display(),
            MAX_CONFIG_BYTES
        );
    }
    String::from_utf8(bytes).with_context(|| format!("config {}: not UTF-8 text", path.display()))
}

fn at_line(line: usize) -> String {
    if line > 0 { format!(" line {line}") } else { String::new() }
}

/// The line (from 1) of byte offset `at`.
fn line_at(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].lines().count().max(1)
}

/// The line (from 1) where `key` is set, or where the table `[key]` starts.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix(key).or_else(|| l.strip_prefix('[').and_then(|t| t.strip_prefix(key)));
            rest.is_some_and(|r| r.trim_start().starts_with(['=', ']']))
        })
        .map(|k| k + 1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::CommandFactory;

    use super::*;
    use crate::cli::Cli;

    fn run_command() -> clap::Command {
        Cli::command().find_subcommand("run").unwrap().clone()
    }

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("ubershuffle-config-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn keys_become_flags_with_their_lines() {
        let path = write(
            "ok",
            "workers = 8\n# comment\nstep-size = 0.02\njson = true\nresume = false\nscheme = \"coded\"\n",
        );
        let args = file_arguments(&path, &run_command()).unwrap();
        let text: Vec<(String, usize)> =
            args.iter().map(|(a, l)| (a.to_string_lossy().into_owned(), *l)).collect();
        assert_eq!(
            text,
            [
                ("--json".into(), 4),
                ("--scheme=coded".into(), 6),
                ("--step-size=0.02".into(), 3),
                ("--workers=8".into(), 1)
            ]
        );
        check_alone(&path, &run_command(), &args).unwrap();
    }

    #[test]
    fn problems_name_the_file_and_line() {
        let cases = [
            ("unknown", "workers = 2\nfoo = 3\n", "line 2: unknown key foo"),
            ("config", "config = \"x\"\n", "unknown key config"),
            ("array", "epochs = [1, 2]\n", "line 1: epochs must be"),
            ("syntax", "workers = \n", "line 1"),
        ];
        for (name, text, want) in cases {
            let e = file_arguments(&write(name, text), &run_command()).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "{name}: {e}");
        }
        let path = write("value", "epochs = 2\nworkers = \"eight\"\n");
        let args = file_arguments(&path, &run_command()).unwrap();
        let e = check_alone(&path, &run_command(), &args).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("eight") && !e.contains('\n'), "{e}");
    }
}
