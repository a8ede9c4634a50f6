//! `ubershuffle`: plan, verify, run and compare coded data shuffling schemes.
//!
//! The binary is thin: it parses arguments, calls the library crates and prints. `--json`
//! prints one JSON object on stdout; errors are one line on stderr with a non-zero exit.

mod cli;
mod commands;
mod config_file;
mod flag_values;
mod output;
mod token;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(Failure::Usage(e)) => return output::usage_error(e),
        Err(Failure::Config(e)) => {
            eprintln!("error: {}", output::one_line(&e));
            return ExitCode::FAILURE;
        }
    };
    output::show_events(cli.verbose);
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", output::one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// Why the command line could not be read.
enum Failure {
    /// clap's error (or help or version).
    Usage(clap::Error),
    /// The `--config` file of `run`.
    Config(anyhow::Error),
}

/// Parses `argv`. For `run --config FILE`, the file's settings become arguments placed before
/// the user's, and the whole is parsed again, so the command line overrides the file.
fn parse(argv: Vec<OsString>) -> Result<Cli, Failure> {
    let command = Cli::command();
    let mut matches = command.clone().try_get_matches_from(&argv).map_err(Failure::Usage)?;
    let config = match matches.subcommand() {
        Some(("run", run)) => run.get_one::<std::path::PathBuf>("config").cloned(),
        _ => None,
    };
    if let (Some(path), Some(run)) = (config, command.find_subcommand("run")) {
        let file = config_file::file_arguments(&path, run).map_err(Failure::Config)?;
        config_file::check_alone(&path, run, &file).map_err(Failure::Config)?;
        let at = argv.iter().position(|a| a == "run").unwrap_or(1);
        let merged: Vec<OsString> = argv[..=at]
            .iter()
            .cloned()
            .chain(file.into_iter().map(|(a, _)| a))
            .chain(argv[at + 1..].iter().cloned())
            .collect();
        matches = command.try_get_matches_from(merged).map_err(Failure::Usage)?;
    }
    let mut cli = Cli::from_arg_matches(&matches).map_err(Failure::Usage)?;
    if let Command::Run(run) = &mut cli.command {
        run.settings.given = given_ids(&matches);
    }
    Ok(cli)
}

/// The ids of `run`'s arguments given on the command line (or by its config file).
pub(crate) fn given_ids(matches: &ArgMatches) -> Vec<String> {
    let Some(("run", run)) = matches.subcommand() else { return Vec::new() };
    run.ids()
        .filter(|id| run.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.as_str().to_string())
        .collect()
}
