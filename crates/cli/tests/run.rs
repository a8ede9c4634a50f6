//! `ubershuffle run` in-process, as a real process: its JSON, reproducibility, the TOML config
//! file, `--out` files and `--resume`, fault injection, and bad flags.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod common;

use std::path::{Path, PathBuf};

use common::{fails, json, ubershuffle};
use serde_json::Value;

/// A small, fast run: 3 workers, 600 points, 3 epochs.
const SMALL: &[(&str, &str)] = &[("--workers", "3"), ("--points", "600"), ("--epochs", "3"), ("--seed", "3")];

/// `ubershuffle run` with the small run's flags, those in `extra` replacing them.
fn with<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run"];
    for (flag, value) in SMALL {
        if !extra.contains(flag) {
            args.extend([*flag, *value]);
        }
    }
    args.extend_from_slice(extra);
    args
}

fn losses(v: &Value) -> Vec<f64> {
    v["epochs"].as_array().unwrap().iter().map(|e| e["loss"].as_f64().unwrap()).collect()
}

fn counts(v: &Value) -> Vec<u64> {
    v["epochs"].as_array().unwrap().iter().map(|e| e["transmissions"].as_u64().unwrap()).collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ubershuffle-run-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn an_in_process_run_trains_and_reports_every_epoch() {
    let v = json(&with(&[]));
    assert_eq!(v["config"]["scheme"], "coded");
    assert_eq!(v["config"]["workers"], 3);
    assert_eq!(v["config"]["transport"], "inproc");
    assert_eq!(v["config"]["cache-capacity"], 300); // alpha 2/n at most 1/2 of q = 600
    assert_eq!(v["complete"], true);
    let epochs = v["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 3);
    for (k, e) in epochs.iter().enumerate() {
        assert_eq!(e["epoch"], k + 1);
        assert_eq!((e["updates"].as_u64(), e["stragglers"].as_u64()), (Some(3), Some(0)), "{e}");
        assert!(e["transmissions"].as_u64() < e["uncoded_transmissions"].as_u64(), "{e}");
        for field in ["plan_seconds", "encode_seconds", "transmit_seconds", "decode_seconds", "train_seconds"]
        {
            assert!(e[field].as_f64().unwrap() >= 0.0, "{field}: {e}");
        }
        assert!(e["shuffle_seconds"].as_f64().unwrap() > 0.0);
    }
    let t = &v["totals"];
    let l = losses(&v);
    assert!(l[2] < l[0] && l[0] < t["initial_loss"].as_f64().unwrap(), "{l:?} {t}");
    assert_eq!(t["final_loss"].as_f64(), Some(l[2]));
    assert!(
        t["mean_shuffle_seconds"].as_f64().unwrap() > 0.0 && t["mean_epoch_seconds"].as_f64().unwrap() > 0.0
    );
    assert_eq!(t["lost_workers"], serde_json::json!([]));

    // The same seed gives the same numbers; another seed other numbers.
    let again = json(&with(&[]));
    assert_eq!((losses(&again), counts(&again)), (l.clone(), counts(&v)));
    let other = json(&with(&["--seed", "4"]));
    assert_ne!(losses(&other), l);
}

#[test]
fn the_summary_table_goes_to_stdout() {
    let out = ubershuffle(&with(&["--scheme", "uncoded"]));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap();
    for column in [
        "epoch",
        "transmissions",
        "uncoded",
        "broadcast",
        "unicast",
        "shuffle s",
        "transmit s",
        "train s",
        "updates",
        "stragglers",
        "loss",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert_eq!(text.lines().take_while(|l| !l.is_empty()).count(), 4, "{text}");
    assert!(text.contains("mean shuffle"), "{text}");
    let row = |key: &str| text.lines().find(|l| l.starts_with(key)).unwrap_or_default().to_string();
    assert!(row("lost workers").ends_with(" none"), "{text}");
    // Uncoded: every packet point to point, and the totals say so.
    assert!(row("sent on the wire").contains(" 0 broadcast + "), "{text}");
    assert!(row("sent on the wire").contains("(100.0 % of uncoded"), "{text}");
}

#[test]
fn a_config_file_stands_for_the_flags_and_flags_override_it() {
    let dir = temp_dir("config");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("run.toml");
    std::fs::write(
        &file,
        "# a run\nworkers = 3\npoints = 600\nepochs = 3\nseed = 3\nscheme = \"uncoded\"\nstep-size = 0.002\n",
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let from_flags = json(&with(&["--scheme", "uncoded", "--step-size", "0.002"]));
    let from_file = json(&["run", "--config", config]);
    assert_eq!(losses(&from_file), losses(&from_flags));
    assert_eq!(from_file["config"], from_flags["config"]);
    let overridden = json(&["run", "--config", config, "--epochs", "2", "--scheme", "coded"]);
    assert_eq!(overridden["epochs"].as_array().unwrap().len(), 2);
    assert_eq!(overridden["config"]["scheme"], "coded");

    std::fs::write(&file, "workers = 3\nwrokers = 4\n").unwrap();
    let e = fails(&["run", "--config", config]);
    assert!(e.contains("line 2") && e.contains("unknown key wrokers"), "{e}");
    std::fs::write(&file, "workers = \"three\"\n").unwrap();
    assert!(fails(&["run", "--config", config]).contains("line 1"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_resumed_run_ends_where_an_uninterrupted_one_does() {
    let whole = json(&with(&["--epochs", "4"]));
    let dir = temp_dir("resume");
    let out = dir.to_str().unwrap();
    let first = json(&with(&["--epochs", "2", "--out", out]));
    assert_eq!(first["epochs"].as_array().unwrap().len(), 2);
    assert_eq!(files_in(&dir), ["checkpoint.json", "epochs.csv", "summary.json"]);
    let csv = std::fs::read_to_string(dir.join("epochs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(csv.starts_with("epoch,attempts,workers,transmissions"));

    let resumed = json(&with(&["--epochs", "4", "--out", out, "--resume"]));
    assert_eq!(losses(&resumed), losses(&whole));
    assert_eq!(counts(&resumed), counts(&whole));
    assert_eq!(std::fs::read_to_string(dir.join("epochs.csv")).unwrap().lines().count(), 5);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!((summary["complete"].as_bool(), losses(&summary)), (Some(true), losses(&whole)));

    let e = fails(&with(&["--epochs", "5", "--out", out, "--resume", "--seed", "9"]));
    assert!(e.contains("belongs to another run (seed: 3 there, 9 here)"), "{e}");
    // Other data (here, noisier labels) are caught by the data's digest in the fingerprint.
    let e = fails(&with(&["--epochs", "5", "--out", out, "--resume", "--noise", "0.5"]));
    assert!(e.contains("belongs to another run (data: train 600x"), "{e}");
    assert_eq!(files_in(&dir), ["checkpoint.json", "epochs.csv", "summary.json"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stragglers_matrix_completion_and_shaped_links() {
    let v = json(&[
        "run",
        "--learner",
        "matcomp",
        "--rows",
        "60",
        "--cols",
        "40",
        "--ratings-per-row",
        "20",
        "--workers",
        "4",
        "--epochs",
        "3",
        "--stragglers",
        "iid:0.4",
        "--deadline",
        "0.05",
        "--bandwidth",
        "500mbit",
        "--seed",
        "2",
    ]);
    let epochs = v["epochs"].as_array().unwrap();
    let late: u64 = epochs.iter().map(|e| e["stragglers"].as_u64().unwrap()).sum();
    assert!(late > 0, "{v}");
    for e in epochs {
        assert_eq!(e["updates"].as_u64().unwrap() + e["stragglers"].as_u64().unwrap(), 4, "{e}");
    }
    assert_eq!(v["config"]["training-points"], 1080);
    assert!(v["totals"]["final_loss"].as_f64() < v["totals"]["initial_loss"].as_f64());
}

#[test]
fn fault_injection_drops_a_worker_and_the_run_goes_on() {
    let v = json(&with(&["--workers", "4", "--epochs", "4", "--kill-worker", "2@2", "--timeout", "1"]));
    assert_eq!(v["totals"]["lost_workers"], serde_json::json!([2]));
    let epochs = v["epochs"].as_array().unwrap();
    assert_eq!(epochs.len(), 4);
    assert_eq!(epochs[1]["lost_workers"], serde_json::json!([2]));
    assert!(epochs[2..].iter().all(|e| e["workers"] == 3 && e["updates"] == 3));
}

#[test]
fn verbose_shows_the_libraries_events_and_quiet_runs_show_none() {
    let args = with(&["--workers", "4", "--epochs", "3", "--kill-worker", "2@2", "--timeout", "1"]);
    let stderr = |extra: &[&str]| {
        let mut all = extra.to_vec();
        all.extend_from_slice(&args);
        String::from_utf8_lossy(&ubershuffle(&all).stderr).to_string()
    };
    let verbose = stderr(&["-v"]);
    assert!(verbose.contains("worker lost") && verbose.contains("worker=2"), "{verbose}");
    assert_eq!(verbose.matches("epoch done").count(), 3, "{verbose}");
    assert!(!verbose.contains("epoch phase"), "phases are -vv: {verbose}");
    assert!(stderr(&["-vv"]).contains("epoch phase"));
    let quiet = stderr(&[]);
    assert!(!quiet.contains("worker lost") && !quiet.contains("epoch done"), "{quiet}");
}

#[test]
fn bad_flags_are_one_line_errors_and_write_nothing() {
    let dir = temp_dir("bad");
    let out = dir.to_str().unwrap();
    for (args, want) in [
        (vec!["--bandwidth", "1gb"], "invalid --bandwidth '1gb'"),
        (vec!["--stragglers", "iid:0.3"], "needs --deadline"),
        (vec!["--stragglers", "iid:2", "--deadline", "1"], "probability"),
        (vec!["--learner", "svm"], "invalid value 'svm' for '--learner"),
        (vec!["--transport", "tcp"], "needs --listen"),
        (vec!["--transport", "mpi"], "mpi feature"),
        (vec!["--resume"], "checkpoint.json does not exist"),
        (vec!["--kill-worker", "5@1"], "only workers 0..2"),
        (vec!["--alpha", "0.1"], "less than a batch"),
        (vec!["--workers", "x"], "invalid value 'x' for '--workers"),
        (vec!["--epochs", "0"], "--epochs must be at least 1"),
        (vec!["--scheme", "nope"], "known schemes are"),
    ] {
        let mut all = with(&args);
        all.extend(["--out", out]);
        let e = fails(&all);
        assert!(e.contains(want), "{args:?}: {e}");
    }
    assert!(!dir.exists(), "a failed run left {}", dir.display());
    assert!(fails(&with(&["--resume"])).contains("--resume needs --out"));
}

#[test]
fn a_pliable_run_chooses_its_batches_and_reports_their_randomness() {
    let fixed = json(&with(&["--scheme", "auto", "--workers", "6", "--points", "1200"]));
    let pliable = json(&with(&[
        "--scheme",
        "pliable-greedy",
        "--randomness",
        "4",
        "--workers",
        "6",
        "--points",
        "1200",
    ]));
    assert_eq!(pliable["config"]["candidates"], "4");
    let sent = |v: &Value| counts(v).iter().sum::<u64>();
    assert!(2 * sent(&pliable) < sent(&fixed), "{:?} vs {:?}", counts(&pliable), counts(&fixed));
    for e in pliable["epochs"].as_array().unwrap() {
        let h = e["owner_entropy_bits"].as_f64().unwrap();
        assert!(h > 1.0 && h < (6f64).log2(), "{e}");
        assert!(e["owner_chi_square_per_df"].as_f64().unwrap() > 0.0, "{e}");
    }
    assert!(
        pliable["totals"]["mean_stay_fraction"].as_f64() > fixed["totals"]["mean_stay_fraction"].as_f64()
    );
    // The default constraint is filled in and echoed.
    let default = json(&with(&["--scheme", "pliable-hierarchical"]));
    assert_eq!(default["config"]["candidates"], "4");
    let e = fails(&with(&["--scheme", "uncoded", "--candidates", "2"]));
    assert!(e.contains("applies to the pliable schemes"), "{e}");
    let e = fails(&with(&["--scheme", "pliable-greedy", "--candidates", "0"]));
    assert!(e.contains("positive number of workers or 'all'"), "{e}");
    let e = fails(&with(&["--scheme", "pliable-greedy", "--policy", "local"]));
    assert!(e.contains("takes --policy global"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}
