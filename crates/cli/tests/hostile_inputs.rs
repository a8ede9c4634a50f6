//! Inputs a hostile but fair user might try: every one is a one-line error with exit status 1,
//! quickly and within a small memory limit (the process runs under `ulimit -v`), never a panic
//! or an allocation failure. Also: usage errors exit 1, `--out` keeps earlier runs, and a run
//! that loses every worker says why.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{fails, json, ubershuffle};
use proptest::prelude::*;

/// Runs `ubershuffle args` with its address space limited to `kib` KiB (single-threaded
/// commands only: every thread reserves its own malloc arena), returning its output and time.
fn limited(kib: u64, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    let mut script = format!("ulimit -v {kib}; exec \"$0\"");
    for k in 1..=args.len() {
        script.push_str(&format!(" \"${k}\""));
    }
    let started = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_ubershuffle"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// The output must be a clean failure: exit status 1, one `error:` line, nothing on stdout.
fn one_line_error(args: &[&str], out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
    assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
    stderr
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ubershuffle-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_83_byte_instance_fails_fast_in_50_mib() {
    let dir = temp_dir("i83");
    let path = dir.join("i.json");
    std::fs::write(
        &path,
        "{\"workers\":3,\"points\":4294967295,\"cache\":[[0],[1],[2]],\"assignment\":[[0],[1],[2]]}\n",
    )
    .unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 83);
    let args = ["plan", "--instance", path.to_str().unwrap()];
    let (out, took) = limited(50 * 1024, &args, &[]);
    let e = one_line_error(&args, &out);
    assert!(e.contains("point 3 is assigned to no worker"), "{e}");
    assert!(took < Duration::from_secs(1), "took {took:?}"); // the process's start included
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn huge_requests_are_one_line_errors_within_a_small_memory_limit() {
    let cases: &[(&[&str], &str)] = &[
        (&["plan", "--shuffle-matrix", "2000000000,0;0,2000000000"], "over the cap of 4.0 GiB"),
        (&["plan", "-n", "2", "-q", "4294967295"], "UBERSHUFFLE_MAX_MEMORY_BYTES"),
        (&["plan", "-n", "2", "-q", "4294967295", "-a", "0.9"], "over the cap"),
        (&["instance", "-n", "2", "-q", "4294967295", "-a", "0.9"], "over the cap"),
        (&["plan", "-n", "3", "-q", "30", "--time-budget", "1e300"], "--time-budget must be a positive"),
        (&["plan", "-n", "3", "-q", "30", "--clique-search=-1"], "--clique-search must be a number"),
        (&["plan", "-n", "3", "-q", "30", "--clique-search", "nan"], "--clique-search must be a number"),
        (&["gradient-coding", "--runs", "1000000000000"], "exceed the Monte Carlo reach"),
        (&["plan", "--policy", "global", "-n", "2", "-q", "4294967295"], "over the cap"),
    ];
    for (args, want) in cases {
        let (out, took) = limited(100 * 1024, args, &[]);
        let e = one_line_error(args, &out);
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    }
    // `run` starts threads, so it runs unlimited; it must refuse before generating anything.
    for (args, want) in [
        (&["run", "-q", "4000000000"][..], "over the cap"),
        (&["run", "--learner", "matcomp", "--rank", "1000000000000"][..], "model parameters"),
        (&["run", "--features", "18446744073709551615"][..], "model parameters"),
    ] {
        let started = Instant::now();
        let e = fails(args);
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?}");
    }
}

#[test]
fn input_files_stop_at_the_cap() {
    let env = [("UBERSHUFFLE_MAX_INPUT_BYTES", "1M")];
    for args in [&["plan", "--instance", "/dev/zero"][..], &["run", "--config", "/dev/zero"][..]] {
        let (out, _) = limited(100 * 1024, args, &env);
        let e = one_line_error(args, &out);
        assert!(e.contains("larger than the input cap of 1.0 MiB (set UBERSHUFFLE_MAX_INPUT_BYTES"), "{e}");
    }
    // The default cap is stated in the message.
    let e = fails(&["plan", "--instance", "/dev/zero"]);
    assert!(e.contains("input cap of 256.0 MiB"), "{e}");
    // A bad setting is an error too.
    let (out, _) =
        limited(100 * 1024, &["plan", "-n", "2", "-q", "4"], &[("UBERSHUFFLE_MAX_MEMORY_BYTES", "lots")]);
    assert!(one_line_error(&[], &out).contains("UBERSHUFFLE_MAX_MEMORY_BYTES=lots is not a size"));
}

#[test]
fn usage_errors_exit_1_with_one_error_line() {
    for args in [&["plan", "--bogus"][..], &["run", "--workers", "many"][..], &["frobnicate"][..]] {
        let out = ubershuffle(args);
        one_line_error(args, &out);
    }
}

#[test]
fn an_earlier_run_in_out_is_kept_unless_resumed_or_forced() {
    let dir = temp_dir("out");
    let out = dir.to_str().unwrap();
    let first = json(&["run", "--epochs", "1", "-q", "400", "--out", out]);
    assert_eq!(first["epochs"].as_array().unwrap().len(), 1);
    let before = std::fs::read(dir.join("epochs.csv")).unwrap();
    let e = fails(&["run", "--epochs", "1", "-q", "400", "--seed", "9", "--out", out]);
    assert!(e.contains("holds an earlier run") && e.contains("--force"), "{e}");
    assert_eq!(std::fs::read(dir.join("epochs.csv")).unwrap(), before, "the earlier run was touched");
    let resumed = json(&["run", "--epochs", "2", "-q", "400", "--out", out, "--resume"]);
    assert_eq!(resumed["epochs"].as_array().unwrap().len(), 2);
    let forced = json(&["run", "--epochs", "1", "-q", "400", "--seed", "9", "--out", out, "--force"]);
    assert_eq!(forced["epochs"].as_array().unwrap().len(), 1);
    assert!(fails(&["run", "--out", out, "--resume", "--force"]).contains("cannot be used with"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn losing_every_worker_to_a_slow_link_says_so() {
    // On the emulated 1 Mbit/s links the starting caches take seconds of emulated time: the
    // workers hear no whole message from the master for 2 x --timeout and leave, saying why.
    let e = fails(&["run", "--bandwidth", "1mbit", "--timeout", "0.3", "--epochs", "1"]);
    assert!(e.contains("no worker is left"), "{e}");
    assert!(e.contains("the master sent nothing for 600") && e.contains("too slow for the timeout"), "{e}");
}

/// Numbers at the edges of what the flags take: tiny, huge and malformed.
fn extreme() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("1".to_string()),
        Just("3".to_string()),
        Just("4294967295".to_string()),
        Just("4294967296".to_string()),
        Just("18446744073709551615".to_string()),
        Just("99999999999999999999999".to_string()),
        Just("1e300".to_string()),
        Just("NaN".to_string()),
        Just("-5".to_string()),
        (2_000_000_000u64..u64::MAX).prop_map(|v| v.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// `plan`, `instance`, `gradient-coding` and `msr` with extreme numbers: success or a
    /// one-line error, within 100 MiB of address space and a few seconds; never a panic or an
    /// abort.
    #[test]
    fn extreme_numbers_never_panic_or_abort(
        n in extreme(), q in extreme(), runs in extreme(), servers in extreme(), which in 0usize..4
    ) {
        let args: Vec<&str> = match which {
            0 => vec!["plan", "-n", &n, "-q", &q, "--time-budget", &runs],
            1 => vec!["instance", "-n", &n, "-q", &q, "-a", "0.9"],
            2 => vec!["gradient-coding", "-n", &n, "--runs", &runs, "--iterations", &q],
            _ => vec!["msr", "--servers", &servers, "--storage", "1/2", "--wait", &n, "--rows", &q],
        };
        let (out, took) = limited(100 * 1024, &args, &[]);
        let code = out.status.code();
        prop_assert!(code == Some(0) || code == Some(1), "{:?}: status {:?}: {}", args, out.status, String::from_utf8_lossy(&out.stderr));
        if code == Some(1) {
            one_line_error(&args, &out);
        }
        prop_assert!(took < Duration::from_secs(10), "{:?} took {:?}", args, took);
    }
}
