//! Runs the real `ubershuffle` binary on real inputs and checks its JSON and its errors.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn ubershuffle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ubershuffle")).args(args).output().expect("the binary runs")
}

/// Runs with `--json` and returns the parsed object; the run must succeed.
fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ubershuffle(&all);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

/// Runs expecting failure; returns stderr, which must be one line (after clap's usage notes).
fn fails(args: &[&str]) -> String {
    let out = ubershuffle(args);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    stderr
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ubershuffle-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

const PAPER_EXAMPLE: &str = r#"{"workers": 3, "points": 9,
  "cache": [[1, 2, 3, 7], [5, 6, 7, 8], [0, 2, 3, 4]],
  "assignment": [[2, 4, 7], [0, 3, 8], [1, 5, 6]]}"#;

#[test]
fn paper_example_counts() {
    let path = temp_path("paper.json");
    std::fs::write(&path, PAPER_EXAMPLE).expect("write");
    let p = path.to_str().expect("utf-8 path");
    let uncoded = json(&["plan", "--scheme", "uncoded", "--instance", p]);
    assert_eq!(uncoded["transmissions"], 6);
    assert_eq!(uncoded["verified"], true);
    let coded = json(&["plan", "--scheme", "coded", "--instance", p]);
    assert_eq!(coded["transmissions"], 4);
    assert_eq!(coded["uncoded_transmissions"], 6);
    assert_eq!(coded["lower_bound"], 3);
    assert_eq!(coded["cache_size"], 4);
    for scheme in ["ubershuffle", "ubershuffle-opt"] {
        let v = json(&["plan", "--scheme", scheme, "--instance", p]);
        assert_eq!(v["transmissions"], 3, "{scheme}");
        assert_eq!(v["verified"], true);
    }
}

#[test]
fn ubershuffle_schemes_report_the_acyclic_bound() {
    let args = ["-n", "10", "-q", "3000", "-a", "0.5", "--seed", "4", "--time-budget", "0.5"];
    let greedy = json(&[&["plan", "--scheme", "ubershuffle"][..], &args].concat());
    let opt = json(&[&["plan", "--scheme", "ubershuffle-opt"][..], &args].concat());
    assert_eq!(greedy["lower_bound_kind"], "acyclic-subgraph");
    assert_eq!(greedy["lower_bound"], opt["lower_bound"]);
    let count = |v: &Value| v["transmissions"].as_u64().expect("count");
    assert!(count(&opt) < count(&greedy), "{opt} vs {greedy}");
    assert!(count(&opt) >= opt["lower_bound"].as_u64().expect("bound"));
}

#[test]
fn generated_plan_has_every_field() {
    let v = json(&[
        "plan",
        "--scheme",
        "coded",
        "--workers",
        "20",
        "--points",
        "10000",
        "--alpha",
        "0.4",
        "--seed",
        "3",
    ]);
    for key in [
        "scheme",
        "workers",
        "points",
        "cache_size",
        "transmissions",
        "uncoded_transmissions",
        "lower_bound",
        "lower_bound_kind",
        "clique_family_bound",
        "clique_family_bound_kind",
        "clique_family_search_threshold",
        "clique_family_estimate",
        "verified",
        "plan_seconds",
        "theorem1_transmissions",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert_eq!(v["cache_size"], 4000);
    assert_eq!(v["verified"], true);
    let t = v["transmissions"].as_u64().expect("count");
    assert!(t < v["uncoded_transmissions"].as_u64().expect("count"));
    assert!(t >= v["lower_bound"].as_u64().expect("bound"));
    let family = v["clique_family_bound"].as_u64().expect("bound");
    assert!(family >= v["lower_bound"].as_u64().expect("bound") && family <= t);
    assert_eq!(v["clique_family_bound_kind"], "search");
    assert!(v["clique_family_search_threshold"].as_u64().expect("threshold") >= 3);
    // Without the search the bound counts cachers, and is no larger.
    let cachers =
        json(&["plan", "-n", "20", "-q", "10000", "-a", "0.4", "--seed", "3", "--clique-search", "0"]);
    assert_eq!(cachers["clique_family_bound_kind"], "cachers");
    assert_eq!(cachers["clique_family_search_threshold"], 0);
    assert!(cachers["clique_family_bound"].as_u64().expect("bound") <= family);
    // Same seed, same count.
    let again = json(&["plan", "--workers", "20", "--points", "10000", "--alpha", "0.4", "--seed", "3"]);
    assert_eq!(again["transmissions"], v["transmissions"]);
}

#[test]
fn instance_round_trips_through_a_file() {
    let path = temp_path("gen.json");
    let p = path.to_str().expect("utf-8 path");
    let out = ubershuffle(&["instance", "-n", "4", "-q", "40", "-a", "0.5", "--seed", "9", "--out", p]);
    assert!(out.status.success());
    let from_file = json(&["plan", "--instance", p]);
    let generated = json(&["plan", "-n", "4", "-q", "40", "-a", "0.5", "--seed", "9"]);
    assert_eq!(from_file["transmissions"], generated["transmissions"]);
    let stdout = ubershuffle(&["instance", "-n", "4", "-q", "40", "-a", "0.5", "--seed", "9"]).stdout;
    assert_eq!(String::from_utf8_lossy(&stdout).trim(), std::fs::read_to_string(&path).expect("read").trim());
}

#[test]
fn plan_out_writes_a_plan_that_parses() {
    let path = temp_path("plan.json");
    let p = path.to_str().expect("utf-8 path");
    let v = json(&["plan", "-n", "3", "-q", "30", "-a", "0.5", "--plan-out", p]);
    let plan =
        ubershuffle_core::Plan::from_json(&std::fs::read_to_string(&path).expect("read")).expect("parses");
    assert_eq!(plan.len() as u64, v["transmissions"].as_u64().expect("count"));
}

#[test]
fn bad_input_gets_a_one_line_error() {
    let e = fails(&["plan", "-n", "4", "-q", "100", "-a", "0.1"]);
    assert!(e.starts_with("error: cache size") && e.trim().lines().count() == 1, "{e}");
    let e = fails(&["plan", "-n", "200", "-q", "100", "-a", "0.5"]);
    assert!(e.contains("more workers (200) than points (100)"), "{e}");
    let e = fails(&["plan", "-n", "2", "-q", "10", "-a", "1.5"]);
    assert!(e.contains("alpha must lie in (0, 1]"), "{e}");
    let e = fails(&["plan", "--scheme", "nope", "-n", "2", "-q", "10", "-a", "0.5"]);
    assert!(e.contains("invalid value 'nope' for '--scheme'"), "{e}");

    let twice = temp_path("twice.json");
    std::fs::write(&twice, r#"{"workers": 2, "points": 4, "cache": [[0],[1]], "assignment": [[0,1],[1,3]]}"#)
        .expect("write");
    let e = fails(&["plan", "--instance", twice.to_str().expect("utf-8")]);
    assert!(e.contains("point 1 is assigned to both worker 0 and worker 1"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");

    let garbage = temp_path("garbage.json");
    std::fs::write(&garbage, "{not json").expect("write");
    let e = fails(&["plan", "--instance", garbage.to_str().expect("utf-8")]);
    assert!(e.contains("malformed instance JSON"), "{e}");

    let e = fails(&["plan", "--instance", "/nonexistent/x.json"]);
    assert!(e.contains("cannot read /nonexistent/x.json"), "{e}");
    let e = fails(&["plan"]);
    assert!(e.contains("give an instance"), "{e}");
    let e = fails(&["plan", "--time-budget=-1", "-n", "2", "-q", "4", "-a", "0.5"]);
    assert!(e.contains("--time-budget"), "{e}");
}

#[test]
fn failed_write_leaves_nothing_behind() {
    let dir = temp_path("no-such-dir");
    let target = dir.join("inst.json");
    let e = fails(&["instance", "-n", "2", "-q", "4", "-a", "0.5", "--out", target.to_str().expect("utf-8")]);
    assert!(e.contains("cannot write"), "{e}");
    assert!(!dir.exists());
}

#[test]
fn help_everywhere_and_scheme_listing() {
    for args in [
        vec!["--help"],
        vec!["plan", "--help"],
        vec!["instance", "--help"],
        vec!["schemes", "--help"],
        vec!["gradient-coding", "--help"],
    ] {
        let out = ubershuffle(&args);
        assert!(out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"), "{args:?}");
    }
    let v = json(&["schemes"]);
    let names: Vec<&str> = v.as_array().expect("array").iter().filter_map(|e| e["name"].as_str()).collect();
    assert!(names.contains(&"uncoded") && names.contains(&"coded"), "{names:?}");
}

#[test]
fn gradient_coding_reports_three_methods_that_agree() {
    let base = [
        "gradient-coding",
        "--workers",
        "8",
        "--p-slow",
        "0.3",
        "--p-slow-straggle",
        "0.8",
        "--p-active-straggle",
        "0.01",
    ];
    let mut args = base.to_vec();
    args.extend(["--code", "frc", "--replication", "1"]);
    let v = json(&args);
    let e = &v["expected_error"];
    // s = 1 is uncoded: the expected error is the expected number of stragglers, 8 * 0.247.
    assert!((e["analytic"].as_f64().unwrap() - 1.976).abs() < 1e-9);
    assert!((e["enumeration"].as_f64().unwrap() - 1.976).abs() < 1e-9);
    assert_eq!(v["by_slow_workers"].as_array().unwrap().len(), 9);
    let mut args = base.to_vec();
    args.extend(["--code", "crc", "--replication", "2", "--shuffle", "none", "--runs", "3000"]);
    let v = json(&args);
    let e = &v["expected_error"];
    let exact = e["enumeration"].as_f64().unwrap();
    assert!((e["analytic"].as_f64().unwrap() - exact).abs() < 1e-9);
    let ci = e["monte_carlo_ci95"].as_array().unwrap();
    // A 95 % interval may miss; widen it to 4 standard errors (1.96 -> 4) for the test.
    let (lo, hi) = (ci[0].as_f64().unwrap(), ci[1].as_f64().unwrap());
    let (mid, half) = ((lo + hi) / 2.0, (hi - lo) / 2.0 * 4.0 / 1.96);
    assert!((exact - mid).abs() <= half, "{e}");
    assert_eq!(v["shuffle"], "none");
    assert_eq!(v["replication"], 2);
}

#[test]
fn gradient_coding_bad_input_is_one_line() {
    let e = fails(&["gradient-coding", "--code", "frc", "--workers", "9", "--replication", "2"]);
    assert!(e.contains("s to divide n"), "{e}");
    assert!(fails(&["gradient-coding", "--p-slow", "1.5"]).contains("p_slow"));
    assert!(fails(&["gradient-coding", "--code", "lt"]).contains("unknown gradient code"));
    assert!(fails(&["gradient-coding", "--shuffle", "sometimes"]).contains("unknown shuffle"));
    assert!(fails(&["gradient-coding", "--workers", "0"]).contains("workers"));
}

#[test]
fn attia_tandon_example_1_counts_and_bounds() {
    let s = ["--shuffle-matrix", "2,1,2;2,1,2;1,3,1"];
    let worst = json(&["plan", "--scheme", "worst-case", s[0], s[1]]);
    assert_eq!(worst["transmissions"], 6);
    assert_eq!(worst["uncoded_transmissions"], 11);
    assert_eq!(worst["achievable_bound"], 6);
    assert_eq!(worst["lower_bound"], 6);
    assert_eq!(worst["lower_bound_kind"], "attia-tandon-thm2");
    assert_eq!(worst["worst_case"], 10);
    assert_eq!(worst["verified"], true);
    let cycles = json(&["plan", "--scheme", "cycle-packing", s[0], s[1]]);
    assert_eq!(cycles["transmissions"], 6);
    assert_eq!(json(&["plan", "--scheme", "uncoded", s[0], s[1]])["transmissions"], 11);
    // A cyclic shuffle meets Theorem 3's (K-1) N/K.
    let cyclic = json(&["plan", "--scheme", "worst-case", "--shuffle-matrix", "0,5,0;0,0,5;5,0,0"]);
    assert_eq!((cyclic["transmissions"].as_u64(), cyclic["worst_case"].as_u64()), (Some(10), Some(10)));
}

#[test]
fn no_alpha_means_no_excess_storage() {
    let v = json(&["plan", "--scheme", "cycle-packing", "--workers", "6", "--points", "60", "--seed", "4"]);
    assert_eq!(v["cache_size"], 10);
    let t = v["transmissions"].as_u64().unwrap();
    assert!(t >= v["lower_bound"].as_u64().unwrap() && t <= v["achievable_bound"].as_u64().unwrap(), "{v}");
    let w = json(&["plan", "--scheme", "worst-case", "-n", "6", "-q", "60", "--seed", "4"]);
    assert_eq!(w["transmissions"], w["achievable_bound"]);
    // The worst-case scheme refuses excess storage with a one-line reason.
    let e = fails(&["plan", "--scheme", "worst-case", "-n", "4", "-q", "40", "-a", "0.5"]);
    assert!(e.contains("does not apply to this instance") && e.contains("no excess storage"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
}

#[test]
fn bad_shuffle_matrices_get_one_line_errors() {
    for (matrix, want) in [
        ("2,-1,2;2,1,2;1,3,1", "cannot be negative"),
        ("2,x,2;2,1,2;1,3,1", "non-negative integers"),
        ("2,1.5;1,1", "non-negative integers"),
        ("1,1;1,1;1,1", "must be square"),
        ("2,1;1,1", "every row and column must sum to N/K"),
        ("2,1;0,3", "column 0 sums to 2"),
    ] {
        let e = fails(&["plan", "--scheme", "worst-case", "--shuffle-matrix", matrix]);
        assert!(e.starts_with("error: invalid --shuffle-matrix") && e.contains(want), "{matrix}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
    }
    let e = fails(&["plan", "--shuffle-matrix", "1,0;0,1", "--workers", "2"]);
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn exchange_policies_report_points_moved_per_epoch() {
    let base = ["plan", "--scheme", "coded", "-n", "5", "-q", "500", "--seed", "2"];
    let local = json(&[&base[..], &["--policy", "local"]].concat());
    assert_eq!((local["points_moved"].as_u64(), local["transmissions"].as_u64()), (Some(0), Some(0)));
    let partial =
        json(&[&base[..], &["--policy", "partial-local", "--fraction", "0.3", "--epochs", "4"]].concat());
    assert_eq!(partial["points_exchanged"], 150);
    let epochs = partial["per_epoch"].as_array().unwrap();
    assert_eq!(epochs.len(), 4);
    for e in epochs {
        assert!(e["points_moved"].as_u64().unwrap() <= 150 && e["verified"] == true, "{e}");
        assert_eq!(e["points_moved"], e["uncoded_transmissions"]); // no excess storage
    }
    assert_eq!(epochs[0]["transmissions"], partial["transmissions"]);
    let global = json(&[&base[..], &["--policy", "global", "--alpha", "0.4"]].concat());
    assert!(global["points_moved"].as_u64().unwrap() > 300, "{global}");
    assert!(global["transmissions"].as_u64().unwrap() < global["uncoded_transmissions"].as_u64().unwrap());
    // The partial exchange is itself a no-excess shuffle: the worst-case scheme plans it.
    let coded = json(&[
        "plan",
        "--scheme",
        "worst-case",
        "-n",
        "5",
        "-q",
        "500",
        "--policy",
        "partial-local",
        "--fraction",
        "0.3",
    ]);
    assert_eq!(coded["transmissions"], coded["achievable_bound"]);
    for (args, want) in [
        (vec!["--policy", "partial-local"], "needs the fraction"),
        (vec!["--policy", "partial-local", "--fraction", "1.5"], "[0, 1]"),
        (vec!["--policy", "global", "--fraction", "0.5"], "only to partial-local"),
        (vec!["--policy", "local", "--epochs", "0"], "at least 1"),
    ] {
        let e = fails(&[&base[..], &args[..]].concat());
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn a_closed_stdout_ends_quietly() {
    use std::process::Stdio;
    // Several megabytes of JSON into a pipe whose reader has gone away.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ubershuffle"))
        .args(["instance", "-n", "10", "-q", "400000", "-a", "0.5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{stderr}");
}

#[test]
fn pliable_schemes_choose_the_assignment_within_the_candidates() {
    let args = ["-n", "8", "-q", "4000", "-a", "0.3", "--seed", "2", "--time-budget", "0.5"];
    let fixed = json(&[&["plan", "--scheme", "auto"][..], &args].concat());
    let one = json(&[&["plan", "--scheme", "pliable-greedy", "--candidates", "1"][..], &args].concat());
    // One candidate per point: the fully random assignment, planned by auto.
    assert_eq!(one["transmissions"], fixed["transmissions"]);
    assert_eq!(one["uncoded_transmissions"], fixed["uncoded_transmissions"]);
    let four = json(&[&["plan", "--scheme", "pliable-greedy", "--randomness", "4"][..], &args].concat());
    for key in ["transmissions", "uncoded_transmissions", "verified", "randomness", "lower_bound"] {
        assert!(!four[key].is_null(), "{key} missing: {four}");
    }
    assert_eq!(four["verified"], true);
    let count = |v: &Value, k: &str| v[k].as_u64().expect("count");
    assert!(2 * count(&four, "transmissions") < count(&fixed, "transmissions"), "{four} vs {fixed}");
    assert_eq!(count(&four, "fully_random_uncoded_transmissions"), count(&fixed, "uncoded_transmissions"));
    let r = &four["randomness"];
    assert_eq!(r["candidates"], "4");
    assert_eq!(r["density_bound"], 4);
    let chosen = r["chosen"]["owner_entropy_bits"].as_f64().expect("entropy");
    let random = r["fully_random"]["owner_entropy_bits"].as_f64().expect("entropy");
    assert!(chosen < random && random <= 3.0, "{r}");
    assert!(r["guaranteed_min_entropy_bits"].as_f64().expect("bits") > 0.9);
    // The chosen assignment is written as an instance that plans on its own.
    let chosen_path = temp_path("chosen.json");
    let c = chosen_path.to_str().expect("utf-8 path");
    let hier = json(&[&["plan", "--scheme", "pliable-hierarchical", "--chosen-out", c][..], &args].concat());
    assert_eq!(hier["verified"], true);
    let again = json(&["plan", "--scheme", "uncoded", "--instance", c]);
    assert_eq!(again["uncoded_transmissions"], hier["uncoded_transmissions"]);
}

#[test]
fn pliable_flags_are_refused_where_they_do_not_apply() {
    let e = fails(&["plan", "--scheme", "coded", "--candidates", "2", "-n", "4", "-q", "40", "-a", "0.5"]);
    assert!(e.contains("apply to the pliable schemes"), "{e}");
    // Nothing is written when --chosen-out is refused.
    let chosen = temp_path("refused-chosen.json");
    let c = chosen.to_str().expect("utf-8 path");
    let e = fails(&["plan", "--scheme", "auto", "--chosen-out", c, "-n", "4", "-q", "40", "-a", "0.5"]);
    assert!(e.contains("apply to the pliable schemes"), "{e}");
    assert!(!chosen.exists(), "{}", chosen.display());
    // A small pliable plan with `flags` added fails with this message.
    let fails_with = |flags: &[&str]| {
        let mut args = vec!["plan", "--scheme", "pliable-greedy", "-n", "4", "-q", "40", "-a", "0.5"];
        args.extend_from_slice(flags);
        fails(&args)
    };
    for candidates in ["0", "none"] {
        let e = fails_with(&["--candidates", candidates]);
        assert!(e.contains("positive number of workers or 'all'"), "{e}");
    }
    let e = fails_with(&["--policy", "local"]);
    assert!(e.contains("chooses the next assignment itself"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}
