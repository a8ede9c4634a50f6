//! `ubershuffle schemes`: list the built-in schemes, or those of a plugin library.

use std::process::ExitCode;

use serde_json::json;
use ubershuffle_planners::builtin_planners;
use ubershuffle_plugin_host::PluginLibrary;

use crate::cli::SchemesArgs;
use crate::output::{print_json, print_table};

/// Prints every scheme with its one-line description (with `--plugin`, the plugin's schemes,
/// and in JSON the plugin's path beside each).
pub fn run(args: &SchemesArgs) -> anyhow::Result<ExitCode> {
    let (schemes, plugin): (Vec<(String, String)>, _) = match &args.plugin {
        Some(path) => {
            let plugin = PluginLibrary::load(path)?;
            let schemes = plugin.schemes().iter().map(|s| (s.name.clone(), s.description.clone())).collect();
            (schemes, Some(path.display().to_string()))
        }
        None => (
            builtin_planners().iter().map(|e| (e.name.to_string(), e.description.to_string())).collect(),
            None,
        ),
    };
    if args.json {
        print_json(&json!(
            schemes
                .iter()
                .map(|(name, description)| {
                    let mut entry = json!({"name": name, "description": description});
                    if let Some(path) = &plugin {
                        entry["plugin"] = json!(path);
                    }
                    entry
                })
                .collect::<Vec<_>>()
        ))?;
    } else {
        let rows: Vec<(&str, String)> = schemes.iter().map(|(n, d)| (n.as_str(), d.clone())).collect();
        print_table(&rows)?;
    }
    Ok(ExitCode::SUCCESS)
}
