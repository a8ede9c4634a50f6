//! `ubershuffle schemes`: list the built-in schemes.

use std::process::ExitCode;

use serde_json::json;
use shuffle_core::builtin_planners;

use crate::cli::SchemesArgs;
use crate::output::{print_json, print_table};

/// Prints every built-in scheme with its one-line description.
pub fn run(args: &SchemesArgs) -> anyhow::Result<ExitCode> {
    let entries = builtin_planners();
    if args.json {
        print_json(&json!(
            entries.iter().map(|e| json!({"name": e.name, "description": e.description})).collect::<Vec<_>>()
        ));
    } else {
        let rows: Vec<(&str, String)> = entries.iter().map(|e| (e.name, e.description.to_string())).collect();
        print_table(&rows);
    }
    Ok(ExitCode::SUCCESS)
}
