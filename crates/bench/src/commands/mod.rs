//! One module per subcommand; [`run`] dispatches.

mod instance;
mod master;
mod plan;
mod schemes;
mod worker;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plan(args) => plan::run(&args),
        Command::Instance(args) => instance::run(&args),
        Command::Schemes(args) => schemes::run(&args),
        Command::Master(args) => master::run(&args),
        Command::Worker(args) => worker::run(&args),
    }
}
