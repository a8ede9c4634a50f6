//! Secrets off the command line: `ubershuffle token`, `--token-file` (owner-only), the
//! `UBERSHUFFLE_TOKEN` variable, `--token` (warns), weak tokens refused, and
//! `--insecure-plaintext` (one warning line; both sides must agree).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use common::{Proc, TEST_TOKEN, ubershuffle};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ubershuffle-token-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `ubershuffle args` with `UBERSHUFFLE_TOKEN` set to `token`, or unset.
fn with_env(args: &[&str], token: Option<&str>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ubershuffle"));
    match token {
        Some(t) => c.env("UBERSHUFFLE_TOKEN", t),
        None => c.env_remove("UBERSHUFFLE_TOKEN"),
    };
    c.args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

#[test]
fn token_prints_a_fresh_secret_or_writes_an_owner_only_file() {
    let a = ubershuffle(&["token"]);
    let b = ubershuffle(&["token"]);
    let (a, b) = (String::from_utf8(a.stdout).unwrap(), String::from_utf8(b.stdout).unwrap());
    assert_eq!(a.trim().len(), 64);
    assert!(a.trim().chars().all(|c| c.is_ascii_hexdigit()) && a != b);
    let dir = scratch("out");
    let path = dir.join("cluster.token");
    let p = path.to_str().unwrap();
    let out = ubershuffle(&["token", "--out", p]);
    assert!(out.status.success() && out.stdout.is_empty(), "{}", stderr(&out));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let again = ubershuffle(&["token", "--out", p]);
    assert!(
        !again.status.success() && stderr(&again).starts_with("error: cannot create"),
        "{}",
        stderr(&again)
    );
    // The file works as --token-file: a worker gets as far as connecting (nobody listens).
    let out =
        with_env(&["worker", "--connect", "127.0.0.1:1", "--token-file", p, "--join-timeout", "0.2"], None);
    assert!(stderr(&out).contains("cannot connect"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weak_missing_and_exposed_tokens_are_refused_in_one_line() {
    let connect = ["worker", "--connect", "127.0.0.1:1", "--join-timeout", "0.2"];
    let out = with_env(&connect, None);
    assert!(stderr(&out).starts_with("error: no token: give --token-file PATH or set UBERSHUFFLE_TOKEN"));
    let out = with_env(&connect, Some("s3cret"));
    assert!(stderr(&out).starts_with("error: the token is weak (about 31 bits"), "{}", stderr(&out));
    assert_eq!(stderr(&out).lines().count(), 1);
    // --weak-token-ok lets it pass (to the connection, which fails).
    let mut weak_ok = connect.to_vec();
    weak_ok.push("--weak-token-ok");
    assert!(stderr(&with_env(&weak_ok, Some("s3cret"))).contains("cannot connect"));
    // --token works, with one warning line first.
    let mut on_line = connect.to_vec();
    on_line.extend(["--token", TEST_TOKEN]);
    let err = stderr(&with_env(&on_line, None));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("warning: --token shows the secret in the process list"), "{err}");
    assert!(lines[1].contains("cannot connect"), "{err}");
    // A token file others may read is refused.
    let dir = scratch("perm");
    let path = dir.join("t");
    std::fs::write(&path, TEST_TOKEN).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut file = connect.to_vec();
        file.extend(["--token-file", path.to_str().unwrap()]);
        let err = stderr(&with_env(&file, None));
        assert!(err.starts_with("error: --token-file") && err.contains("mode 640"), "{err}");
        assert_eq!(err.lines().count(), 1);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn insecure_plaintext_warns_once_and_both_sides_must_agree() {
    let start_master = |extra: &[&str]| {
        let mut args =
            vec!["master", "--listen", "127.0.0.1:0", "--workers", "1", "--bytes", "1000", "--rounds", "1"];
        args.extend_from_slice(extra);
        let mut m = Proc::spawn(&args);
        let line = m.wait_for("listening on ");
        let addr = line.trim_start_matches("listening on ").split(',').next().unwrap().to_string();
        (m, addr)
    };
    // A sealed worker is refused by a plain-text master, naming why; a plain-text one joins.
    let (m, addr) = start_master(&["--insecure-plaintext"]);
    let (ok, err) = Proc::spawn(&["worker", "--connect", &addr]).finish(Duration::from_secs(20));
    assert!(!ok && err.contains("runs in plain text (--insecure-plaintext) and the other seals"), "{err}");
    let w = Proc::spawn(&["-v", "worker", "--connect", &addr, "--insecure-plaintext"]);
    let (ok, err) = m.finish(Duration::from_secs(20));
    assert!(ok, "{err}");
    assert_eq!(err.matches("warning: --insecure-plaintext").count(), 1, "{err}");
    let (ok, err) = w.finish(Duration::from_secs(20));
    assert!(ok, "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("warning:")).count(), 1, "{err}");
    assert!(
        err.contains("TCP links up (plain text: --insecure-plaintext)") && err.contains("sealed=false"),
        "{err}"
    );
}

#[test]
fn a_default_cluster_says_it_is_sealed() {
    let mut m = Proc::spawn(&[
        "master",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--bytes",
        "1000",
        "--rounds",
        "1",
    ]);
    let line = m.wait_for("listening on ");
    let addr = line.trim_start_matches("listening on ").split(',').next().unwrap().to_string();
    let w = Proc::spawn(&["-v", "worker", "--connect", &addr]);
    assert!(m.finish(Duration::from_secs(20)).0);
    let (ok, err) = w.finish(Duration::from_secs(20));
    assert!(ok, "{err}");
    assert!(err.contains("TCP links up (sealed)") && err.contains("sealed=true"), "{err}");
    assert!(err.contains("Noise_XXpsk3_25519_AESGCM_SHA256"), "{err}");
    assert!(!err.contains("warning:"), "{err}");
}
