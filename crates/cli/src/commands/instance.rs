//! `ubershuffle instance`: write a generated instance as JSON.

use std::process::ExitCode;

use ubershuffle_core::GeneratorParams;

use crate::cli::InstanceArgs;
use ubershuffle_runtime::write_atomically;

use crate::output::print_line;

/// Generates the instance and writes it to `--out` or stdout.
pub fn run(args: &InstanceArgs) -> anyhow::Result<ExitCode> {
    let params =
        GeneratorParams { workers: args.workers, points: args.points, alpha: args.alpha, seed: args.seed };
    let inst = params.check()?.generate();
    let json = inst.to_json();
    match &args.out {
        Some(path) => write_atomically(path, format!("{json}\n").as_bytes())?,
        None => print_line(&json)?,
    }
    Ok(ExitCode::SUCCESS)
}
