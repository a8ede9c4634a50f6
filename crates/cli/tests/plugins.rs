//! `ubershuffle plan --plugin` and `ubershuffle schemes --plugin` on real plugin libraries built
//! from this workspace: the example plugin's counts in `--json` like a built-in's, and a one-line
//! error with a non-zero exit for every plugin that misbehaves.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::process::Command;

use serde_json::Value;
use ubershuffle_plugin_host::workspace_plugins::{
    self, FUTURE_ABI, MISBEHAVING, PAIRWISE_XOR, WorkspacePlugin,
};

fn library(plugin: WorkspacePlugin) -> String {
    let path = workspace_plugins::built(plugin).unwrap_or_else(|e| panic!("{e}"));
    path.to_str().expect("utf-8 path").to_string()
}

/// Runs the binary; returns whether it succeeded, its stdout and its stderr.
fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ubershuffle")).args(args).output().expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Runs with `--json`, which must succeed, and parses stdout.
fn run_json(args: &[&str]) -> Value {
    let (ok, stdout, stderr) = run(&[args, &["--json"]].concat());
    assert!(ok, "{args:?}: {stderr}");
    serde_json::from_str(&stdout).expect("stdout is one JSON value")
}

/// Runs a command that must fail with one `error: ...` line on stderr and nothing on stdout;
/// returns that line.
fn one_line_error(args: &[&str]) -> String {
    let (ok, stdout, stderr) = run(args);
    assert!(!ok, "{args:?} should fail");
    assert!(stdout.is_empty(), "{args:?} printed {stdout}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr.trim_end().to_string()
}

const INSTANCE: [&str; 8] = ["-n", "12", "-q", "6000", "-a", "0.3", "--seed", "4"];

#[test]
fn the_example_plugin_plans_and_reports_like_a_built_in() {
    let lib = library(PAIRWISE_XOR);
    let plugin = run_json(&[&["plan", "--plugin", &lib][..], &INSTANCE].concat());
    let builtin = run_json(&[&["plan", "--scheme", "coded"][..], &INSTANCE].concat());
    for (key, value) in builtin.as_object().unwrap() {
        assert!(plugin.get(key).is_some(), "the plugin's output lacks {key}: {plugin}");
        let timed = ["plan_seconds", "verify_seconds", "lower_bound_seconds", "max_rss_bytes"];
        if !["scheme", "transmissions", "parts"].contains(&key.as_str()) && !timed.contains(&key.as_str()) {
            assert_eq!(&plugin[key], value, "{key}");
        }
    }
    assert_eq!(plugin["scheme"], "pairwise-xor");
    assert_eq!(plugin["plugin"], lib.as_str());
    assert_eq!(plugin["verified"], true);
    let sent = plugin["transmissions"].as_u64().unwrap();
    assert!(sent < plugin["uncoded_transmissions"].as_u64().unwrap());
    assert!(sent >= plugin["lower_bound"].as_u64().unwrap());
    // --scheme may name the plugin's one scheme; the same seed gives the same plan.
    let named = run_json(&[&["plan", "--plugin", &lib, "--scheme", "pairwise-xor"][..], &INSTANCE].concat());
    assert_eq!(named["transmissions"], plugin["transmissions"]);

    let listed = run_json(&["schemes", "--plugin", &lib]);
    assert_eq!(listed[0]["name"], "pairwise-xor");
    assert_eq!(listed[0]["plugin"], lib.as_str());
    let (ok, table, _) = run(&["schemes", "--plugin", &lib]);
    assert!(ok && table.starts_with("pairwise-xor  "), "{table}");
}

#[test]
fn every_misbehaving_plugin_gets_a_one_line_error() {
    let bad = library(MISBEHAVING);
    let plan = |extra: &[&str]| one_line_error(&[&["plan", "--plugin", &bad][..], extra, &INSTANCE].concat());
    let e = plan(&[]);
    assert!(e.ends_with(
        "exports several schemes (panics, undecodable, malformed, refuses): name one with --scheme"
    ));
    let e = plan(&["--scheme", "coded"]);
    assert!(e.contains("has no scheme 'coded'; it exports: panics, undecodable, malformed, refuses"), "{e}");
    let e = plan(&["--scheme", "panics"]);
    assert!(e.contains("panicked at ") && e.contains("the panics fixture panics on purpose"), "{e}");
    let e = plan(&["--scheme", "undecodable"]);
    // The fixture drops uncoded's last unicast: that point is never sent.
    assert!(e.contains("returned a plan that does not decode: worker 11 needs point"), "{e}");
    assert!(e.contains("which no transmission sends"), "{e}");
    let e = plan(&["--scheme", "malformed"]);
    assert!(e.contains("returned a malformed plan: transmission"), "{e}");
    let e = plan(&["--scheme", "refuses"]);
    assert!(e.contains("it refuses every instance"), "{e}");

    let e = one_line_error(&[&["plan", "--plugin", &library(FUTURE_ABI)][..], &INSTANCE].concat());
    assert!(e.contains("built for plugin ABI version 2, but this program speaks version 1"), "{e}");

    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let e = one_line_error(&["schemes", "--plugin", manifest]);
    assert!(e.contains("not a dynamic library this system can load"), "{e}");
    let e = one_line_error(&["schemes", "--plugin", "/nonexistent/libplugin.so"]);
    assert!(e.starts_with("error: cannot open plugin /nonexistent/libplugin.so: "), "{e}");
}
