//! One module per subcommand; [`run()`] dispatches.

mod gradient_coding;
mod gradient_coding_run;
mod instance;
mod instance_source;
mod master;
mod msr;
mod plan;
mod plan_no_excess;
mod plan_pliable;
mod plan_policy;
pub(crate) mod run;
mod schemes;
mod serve;
mod worker;

use std::process::ExitCode;

use crate::cli::{Cli, Command};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plan(args) => plan::run(&args),
        Command::Instance(args) => instance::run(&args),
        Command::Schemes(args) => schemes::run(&args),
        Command::GradientCoding(args) => gradient_coding::run(&args),
        Command::Msr(args) => msr::run(&args),
        Command::Master(args) => master::run(&args),
        Command::Worker(args) => worker::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Token(args) => crate::token::token_command(&args).map(|()| ExitCode::SUCCESS),
    }
}
