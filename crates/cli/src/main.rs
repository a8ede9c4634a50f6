//! `ubershuffle`: plan, verify, run and compare coded data shuffling schemes.
//!
//! The binary is thin: it parses arguments, calls the library crates and prints. `--json`
//! prints one JSON object on stdout; errors are one line on stderr with a non-zero exit.

mod cli;
mod commands;
mod output;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return output::usage_error(e),
    };
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", output::one_line(&e));
            ExitCode::FAILURE
        }
    }
}
