//! Loads real plugin libraries built from this workspace: the example plugin, and fixtures that
//! panic, return undecodable or malformed plans, refuse, speak a future ABI, or are no plugin at
//! all. Every failure must be a one-line error naming the plugin, and the process must go on.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::path::{Path, PathBuf};

use pairwise_xor::PairwiseXor;
use rand_core::Rng;
use ubershuffle_core::{GeneratorParams, PlanError, ShuffleInstance, ShufflePlanner, seeded, verify};
use ubershuffle_plugin_host::workspace_plugins::{
    self, FUTURE_ABI, MISBEHAVING, NOT_A_PLUGIN, PAIRWISE_XOR, WorkspacePlugin,
};
use ubershuffle_plugin_host::{PluginError, PluginLibrary};

fn built(plugin: WorkspacePlugin) -> PathBuf {
    workspace_plugins::built(plugin).unwrap_or_else(|e| panic!("{e}"))
}

fn generated(workers: usize, points: usize, alpha: f64, seed: u64) -> ShuffleInstance {
    GeneratorParams { workers, points, alpha, seed }.check().unwrap().generate()
}

/// The error's message, checked to be one line that names `path`.
fn message_naming(error: &dyn std::error::Error, path: &Path) -> String {
    let message = error.to_string();
    assert!(!message.contains('\n'), "not one line: {message}");
    assert!(message.contains(&path.display().to_string()), "does not name {}: {message}", path.display());
    message
}

fn load_error(path: &Path) -> PluginError {
    PluginLibrary::load(path).err().unwrap_or_else(|| panic!("{} loaded", path.display()))
}

#[test]
fn the_example_plugin_loads_plans_and_verifies() {
    let path = built(PAIRWISE_XOR);
    let plugin = PluginLibrary::load(&path).unwrap();
    assert_eq!(plugin.path(), path);
    assert_eq!(plugin.scheme_names(), ["pairwise-xor"]);
    assert_eq!(plugin.schemes()[0].description, PairwiseXor::DESCRIPTION);
    let planner = plugin.planner(None).unwrap();
    assert_eq!(planner.name(), "pairwise-xor");
    assert_eq!(planner.plugin_path(), path);
    assert_eq!(plugin.planner(Some("pairwise-xor")).unwrap().name(), "pairwise-xor");

    assert_eq!(planner.plan(&ShuffleInstance::paper_example(), &mut seeded(0)).unwrap().len(), 3);
    for (seed, (workers, alpha)) in [(5, 0.3), (10, 0.2), (20, 0.45)].into_iter().enumerate() {
        let inst = generated(workers, 4000, alpha, seed as u64);
        let plan = planner.plan(&inst, &mut seeded(seed as u64)).unwrap();
        assert!(verify(&inst, &plan).unwrap().is_valid());
        assert!(plan.len() < inst.uncoded_transmissions());
    }
}

#[test]
fn a_loaded_plan_is_the_plan_the_planner_makes_in_process_from_the_same_seed() {
    let planner = PluginLibrary::load(built(PAIRWISE_XOR)).unwrap().planner(None).unwrap();
    let inst = generated(8, 3000, 0.3, 4);
    for seed in 0..3 {
        let loaded = planner.plan(&inst, &mut seeded(seed)).unwrap();
        let plugin_seed = seeded(seed).next_u64(); // what the host hands the plugin
        let in_process = PairwiseXor.plan(&inst, &mut seeded(plugin_seed)).unwrap();
        assert_eq!(loaded, in_process);
    }
}

#[test]
fn plugin_planners_work_from_several_threads() {
    let planner = PluginLibrary::load(built(PAIRWISE_XOR)).unwrap().planner(None).unwrap();
    let inst = generated(6, 2000, 0.4, 1);
    let expected = planner.plan(&inst, &mut seeded(1)).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| assert_eq!(planner.plan(&inst, &mut seeded(1)).unwrap(), expected));
        }
    });
}

fn misbehaving(scheme: &str) -> (PathBuf, PlanError) {
    let path = built(MISBEHAVING);
    let planner = PluginLibrary::load(&path).unwrap().planner(Some(scheme)).unwrap();
    let err = planner.plan(&ShuffleInstance::paper_example(), &mut seeded(0)).unwrap_err();
    (path, err)
}

#[test]
fn a_panicking_plugin_is_an_error_with_its_message_and_the_process_goes_on() {
    for _ in 0..2 {
        let (path, err) = misbehaving("panics");
        let message = message_naming(&err, &path);
        assert!(message.starts_with("scheme panics failed: plugin "), "{message}");
        assert!(message.contains("panicked at "), "{message}");
        assert!(message.contains("lib.rs:"), "the location is kept: {message}");
        assert!(message.contains("the panics fixture panics on purpose"), "{message}");
    }
    // Still alive, and other plugins still work.
    let planner = PluginLibrary::load(built(PAIRWISE_XOR)).unwrap().planner(None).unwrap();
    assert!(planner.plan(&ShuffleInstance::paper_example(), &mut seeded(0)).is_ok());
}

#[test]
fn an_undecodable_plan_is_rejected_naming_the_first_worker_that_cannot_decode() {
    let (path, err) = misbehaving("undecodable");
    let message = message_naming(&err, &path);
    // The fixture drops uncoded's last unicast: worker 2's point 6 of the paper's example.
    assert!(
        message.ends_with(
            "returned a plan that does not decode: worker 2 needs point 6, which no transmission sends (1 of its points missing in all)"
        ),
        "{message}"
    );
}

#[test]
fn a_malformed_plan_is_rejected() {
    let (path, err) = misbehaving("malformed");
    let message = message_naming(&err, &path);
    assert!(message.contains("returned a malformed plan: transmission 6 names point 16"), "{message}");
}

#[test]
fn a_planner_error_in_the_plugin_comes_back_with_its_message() {
    let (path, err) = misbehaving("refuses");
    let message = message_naming(&err, &path);
    assert!(message.contains("does not apply to this instance: it refuses every instance"), "{message}");
}

#[test]
fn choosing_a_scheme_from_a_plugin_with_several() {
    let path = built(MISBEHAVING);
    let plugin = PluginLibrary::load(&path).unwrap();
    assert_eq!(plugin.scheme_names(), ["panics", "undecodable", "malformed", "refuses"]);
    assert_eq!(plugin.planners().len(), 4);
    let message = message_naming(&plugin.planner(None).unwrap_err(), &path);
    assert!(message.ends_with(
        "exports several schemes (panics, undecodable, malformed, refuses): name one with --scheme"
    ));
    let message = message_naming(&plugin.planner(Some("coded")).unwrap_err(), &path);
    assert!(message.contains("has no scheme 'coded'; it exports: panics, undecodable"), "{message}");
}

#[test]
fn a_plugin_built_for_another_abi_version_is_refused() {
    let path = built(FUTURE_ABI);
    let err = load_error(&path);
    assert!(matches!(err, PluginError::AbiMismatch { found: 2, expected: 1, .. }), "{err:?}");
    let message = message_naming(&err, &path);
    assert!(message.contains("built for plugin ABI version 2, but this program speaks version 1"));
}

#[test]
fn a_library_that_is_not_a_plugin_is_refused() {
    let path = built(NOT_A_PLUGIN);
    let err = load_error(&path);
    let message = message_naming(&err, &path);
    assert!(message.contains("is not an ubershuffle plugin: it exports no `ubershuffle_plugin_abi_version`"));
}

#[test]
fn files_that_are_not_libraries_and_missing_paths_are_refused() {
    let dir = std::env::temp_dir().join(format!("plugin-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("libnotes.so");
    std::fs::write(&text, "this is a text file, not a library\n").unwrap();
    let err = load_error(&text);
    assert!(matches!(err, PluginError::NotALibrary { .. }), "{err:?}");
    assert!(message_naming(&err, &text).contains("not a dynamic library this system can load"));

    let err = load_error(&dir);
    assert!(matches!(err, PluginError::NotALibrary { .. }), "a folder: {err:?}");

    let missing = dir.join("libmissing.so");
    let err = load_error(&missing);
    assert!(matches!(err, PluginError::Open { .. }), "{err:?}");
    assert!(message_naming(&err, &missing).starts_with("cannot open plugin "));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn a_bare_library_name_is_not_searched_for_in_system_folders() {
    // libc is on every Linux system's library path, but not in the current folder.
    let err = load_error(Path::new("libc.so.6"));
    assert!(matches!(err, PluginError::Open { .. }), "{err:?}");
}
