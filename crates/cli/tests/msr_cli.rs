//! Runs the real `ubershuffle msr` on the issue's and the paper's settings and checks its JSON
//! and its errors.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::process::{Command, Output};

use serde_json::Value;

fn ubershuffle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ubershuffle")).args(args).output().expect("the binary runs")
}

fn msr_json(args: &[&str]) -> Value {
    let mut all = vec!["msr"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = ubershuffle(&all);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn issue_checks_and_executions() {
    for (q, want) in [("2", 0.5), ("3", 2.0 / 3.0), ("4", 0.25)] {
        let v = msr_json(&["--servers", "4", "--storage", "1/2", "--wait", q]);
        assert!((v["load_unified"].as_f64().unwrap() - want).abs() < 1e-9, "q={q}: {v}");
        assert_eq!(v["executed"], true);
        assert_eq!(v["counts_match"], true);
        assert_eq!(v["product_matches"], true);
        assert_eq!(v["executed_unified_messages"], v["unified"]["closed_form_messages"]);
        assert_eq!(v["executed_improved_messages"], v["improved"]["closed_form_messages"]);
        assert!(v["load_improved"].as_f64().unwrap() <= v["load_unified"].as_f64().unwrap());
    }
    let v = msr_json(&["--servers", "4", "--storage", "0.5", "--wait", "3"]);
    assert_eq!(v["improved"]["load_exact"], "5/12");
}

#[test]
fn papers_example_counts() {
    let v =
        msr_json(&["--servers", "6", "--storage", "1/2", "--wait", "4", "--rows", "20", "--columns", "12"]);
    assert_eq!((v["rows"].as_u64(), v["columns"].as_u64()), (Some(20), Some(12)));
    assert_eq!(v["executed_improved_messages"], 76);
    assert_eq!(v["executed_unified_messages"], 84);
    assert_eq!(v["improved"]["load_exact"], "19/60");
    assert_eq!(v["unified"]["load_exact"], "7/20");
    assert_eq!(v["non_stragglers"].as_array().unwrap().len(), 4);
    let latency = v["expected_map_latency"].as_f64().unwrap();
    // mu N (1 + H_6 - H_2) with N = 12, lambda = 1.
    assert!((latency - 6.0 * (1.0 + 1.0 / 3.0 + 1.0 / 4.0 + 1.0 / 5.0 + 1.0 / 6.0)).abs() < 1e-9);
}

#[test]
fn bad_parameters_get_one_line() {
    for (args, needle) in [
        (vec!["--servers", "4", "--storage", "1/2", "--wait", "5"], "wait q"),
        (vec!["--servers", "4", "--storage", "1/5", "--wait", "4"], "mu K"),
        (vec!["--servers", "4", "--storage", "x", "--wait", "2"], "--storage"),
        (vec!["--servers", "6", "--storage", "1/3", "--wait", "2"], "ceil(1/mu)"),
        (vec!["--servers", "6", "--storage", "1/2", "--wait", "4", "--rows", "10"], "multiple of 20"),
        (vec!["--servers", "6", "--storage", "1/2", "--wait", "4", "--columns", "8"], "--columns"),
        (vec!["--servers", "4", "--storage", "1/2", "--wait", "2", "--rate", "0"], "--rate"),
    ] {
        let mut all = vec!["msr"];
        all.extend_from_slice(&args);
        let out = ubershuffle(&all);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle) && !stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
