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
    let checked = params.check()?;
    let limits = ubershuffle_core::limits::Limits::from_env()?;
    let cache = ubershuffle_core::cache_size_for(args.alpha, args.points);
    super::instance_source::check_generated(&limits, args.workers, args.points, cache)?;
    let inst = checked.generate();
    let json = inst.to_json();
    match &args.out {
        Some(path) => write_atomically(path, format!("{json}\n").as_bytes())?,
        None => print_line(&json)?,
    }
    Ok(ExitCode::SUCCESS)
}
