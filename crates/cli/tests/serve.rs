//! `ubershuffle serve`: a store outside the job serves a records file (or a folder of records
//! of uneven size) to training ranks that join it (here Rust threads over `ubershuffle_plane`,
//! as a Rust training framework would run them), every record of every epoch's batch byte for
//! byte; a job restarted after its ranks stopped early is served again and ends the store; bad
//! input is one line.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use ubershuffle_core::epoch_chain::ChainParams;
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_plane::driver::mesh::JobKey;
use ubershuffle_plane::driver::outside::{OpensStore, join_outside};
use ubershuffle_plane::schedule::ChainSchedule;
use ubershuffle_plane::store::locked;
use ubershuffle_plane::{EngineConfig, Schedule};

const TOKEN: &str = "serve-test-token-7Qx2mVb9Lr4Tz8Kp3Wn6Hs";

fn records_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ubershuffle-serve-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn serve(args: &[&str], token: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ubershuffle"));
    c.arg("serve").args(args);
    match token {
        Some(t) => c.env("UBERSHUFFLE_TOKEN", t),
        None => c.env_remove("UBERSHUFFLE_TOKEN"),
    };
    c
}

fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{stderr}");
    stderr
}

#[test]
fn bad_input_is_one_line() {
    let file = records_file("ragged", &[7u8; 100]);
    let path = file.to_str().unwrap();
    let base = ["--records", path, "--workers", "2", "--alpha", "0.5", "--listen", "127.0.0.1:0"];
    let no_token = serve(&[&base[..], &["--record-size", "10"]].concat(), None).output().unwrap();
    assert!(one_line_error(&no_token).contains("no token: give --token-file PATH or set UBERSHUFFLE_TOKEN"));
    let ragged = serve(&[&base[..], &["--record-size", "30"]].concat(), Some(TOKEN)).output().unwrap();
    assert!(one_line_error(&ragged).contains("not a positive multiple of the record size 30"));
    let bare = serve(&base, Some(TOKEN)).output().unwrap();
    assert!(one_line_error(&bare).contains("--records needs --record-size B or --index FILE"));
    let odd_index = records_file("odd-index", &[0u8; 12]);
    let mut index = serve(&[&base[..], &["--index", odd_index.to_str().unwrap()]].concat(), Some(TOKEN));
    assert!(one_line_error(&index.output().unwrap()).contains("little-endian u64 offsets"));
    let short =
        records_file("short-index", &[0u64, 60].iter().flat_map(|o| o.to_le_bytes()).collect::<Vec<u8>>());
    let mut index = serve(&[&base[..], &["--index", short.to_str().unwrap()]].concat(), Some(TOKEN));
    assert!(one_line_error(&index.output().unwrap()).contains("100 bytes, but its index ends at 60"));
    let empty = std::env::temp_dir().join(format!("ubershuffle-serve-{}-empty", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let tail = ["--workers", "2", "--alpha", "0.5", "--listen", "127.0.0.1:0"];
    let mut folder =
        serve(&[&["--records-dir", empty.to_str().unwrap()][..], &tail[..]].concat(), Some(TOKEN));
    assert!(one_line_error(&folder.output().unwrap()).contains("the folder holds no file"));
    for f in [odd_index, short] {
        std::fs::remove_file(f).unwrap();
    }
    std::fs::remove_dir(empty).unwrap();
    let mut policy =
        serve(&[&base[..], &["--record-size", "10", "--policy", "sideways"]].concat(), Some(TOKEN));
    assert!(one_line_error(&policy.output().unwrap()).contains("--policy"));
    // Checked before any worker is admitted (no one connects here), said in flags.
    let small = ["--records", path, "--record-size", "10", "--workers", "2", "--listen", "127.0.0.1:0"];
    let tiny = serve(&[&small[..], &["--alpha", "0.1"]].concat(), Some(TOKEN)).output().unwrap();
    assert!(one_line_error(&tiny).contains("--alpha 0.1"), "a cache smaller than a batch");
    let mut magic = serve(&[&small[..], &["--alpha", "0.5", "--scheme", "magic"]].concat(), Some(TOKEN));
    assert!(one_line_error(&magic.output().unwrap()).contains("--scheme \"magic\""));
    std::fs::remove_file(file).unwrap();
}

/// The store: `ubershuffle serve` over `records` to 2 training ranks, epochs 0 to 3; returns
/// the process and the address it listens at (read from its first line).
fn start_store(records: &[&str]) -> (Child, SocketAddr) {
    let args = [
        "--workers",
        "2",
        "--alpha",
        "0.6",
        "--policy",
        "partial-local",
        "--fraction",
        "0.3",
        "--scheme",
        "coded",
        "--epochs",
        "3",
        "--timeout",
        "10",
        "--join-timeout",
        "60",
        "--listen",
        "127.0.0.1:0",
        "--json",
    ];
    let mut store = serve(&[records, &args[..]].concat(), Some(TOKEN))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(store.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let address = first.split(" on ").nth(1).and_then(|r| r.split(' ').next()).unwrap();
    let address: SocketAddr = address.parse().unwrap_or_else(|_| panic!("{first}"));
    // The rest of its lines, drained so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (store, address)
}

/// A training rank: joins the store at `address` as `place` of 2, takes epochs `epochs`, and
/// checks every record of each epoch's batch against `source`'s bytes.
fn train(address: SocketAddr, place: usize, epochs: std::ops::Range<u64>, dir: PathBuf, source: &[Vec<u8>]) {
    let hooks = OpensStore::new(dir);
    let opened = hooks.opened();
    let config = |joined: &ubershuffle_plane::driver::host::Joined| {
        let about: Value = serde_json::from_slice(&joined.about).unwrap();
        let settings = about["settings"].as_array().unwrap();
        let n = |k: &str| about[k].as_u64().unwrap();
        Ok(EngineConfig {
            rank: joined.mesh.rank,
            world: joined.mesh.addresses.len(),
            timeout: about["timeout"].as_f64().unwrap(),
            plane: "Exchange".into(),
            settings: settings
                .iter()
                .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string()))
                .collect(),
            reads_source: false,
            store_error: None,
            chunk_bytes: n("chunk_bytes"),
            yield_to_gradients: false,
            store_rank: Some(joined.mesh.addresses.len() - 1),
            segment_bytes: n("segment_bytes") as usize,
            round_bytes: n("round_bytes"),
            link_rate: 0.0,
        })
    };
    let (plane, _) = join_outside(
        address,
        &JobKey::from_token(TOKEN),
        (Some(place), Some(2)),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        (Duration::from_secs(30), Duration::from_secs(30)),
        config,
        Box::new(hooks),
    )
    .unwrap();
    let policy = ExchangePolicy::new("partial-local", Some(0.3)).unwrap();
    let params = ChainParams::new(2, source.len(), policy, 0).with_alpha(0.6).unwrap();
    let schedule = ChainSchedule::new(params, "coded").unwrap();
    for epoch in epochs {
        let at = schedule.at(epoch).unwrap();
        plane.set_epoch(at.boxed_copy()).unwrap();
        let held = opened.lock().unwrap().clone().unwrap();
        let held = locked(&held);
        for &id in &at.targets()[place] {
            assert_eq!(
                held.get(id),
                Some(&source[id as usize][..]),
                "rank {place}, record {id}, epoch {epoch}"
            );
        }
    }
    plane.close();
}

/// Serves `source` (named to `serve` by `records`) to a job that stops after epoch 1, then
/// to its restart, which takes epochs 2 and 3; returns the store's report.
fn serve_two_attempts(records: &[&str], source: &[Vec<u8>], scratch: &Path) -> Value {
    let (store, address) = start_store(records);
    for (attempt, epochs) in [(0, 0..2), (1, 2..4)] {
        let ranks: Vec<_> = (0..2)
            .map(|place| {
                let dir = scratch.join(format!("attempt-{attempt}-rank-{place}"));
                let (epochs, source) = (epochs.clone(), source.to_vec());
                std::thread::spawn(move || train(address, place, epochs, dir, &source))
            })
            .collect();
        for r in ranks {
            r.join().unwrap();
        }
    }
    let out = store.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ubershuffle-serve-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_job_and_its_restart_receive_every_record_of_every_epoch_byte_for_byte() {
    let (points, width) = (96usize, 64usize);
    let source: Vec<Vec<u8>> =
        (0..points).map(|i| (0..width).map(|k| ((i * width + k) * 31 % 251) as u8).collect()).collect();
    let dir = scratch("fixed");
    let file = dir.join("data.bin");
    std::fs::write(&file, source.concat()).unwrap();
    let report =
        serve_two_attempts(&["--records", file.to_str().unwrap(), "--record-size", "64"], &source, &dir);
    let attempts = report["attempts"].as_array().unwrap();
    let ends: Vec<&str> = attempts.iter().map(|a| a["end"].as_str().unwrap()).collect();
    assert_eq!(ends, ["closed", "finished"], "{report}");
    for (a, taken) in attempts.iter().zip([[0, 1], [2, 3]]) {
        // Every epoch the ranks took was sent (one served ahead of a close may not have been).
        let sent = |epoch: u64| {
            a["epochs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["epoch"] == epoch && e["bytes_sent"].as_u64() > Some(0))
        };
        assert!(taken.iter().all(|&e| sent(e)), "{a}");
    }
    // The second attempt's ranks were fresh processes: the store sent them their caches again
    // and read nothing from the file again.
    let read = |a: &Value| {
        a["epochs"].as_array().unwrap().iter().map(|e| e["source_records"].as_u64().unwrap()).sum::<u64>()
    };
    assert_eq!((read(&attempts[0]), read(&attempts[1])), (points as u64, 0));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_folder_of_records_of_uneven_size_is_served_as_python_lists_it() {
    let dir = scratch("folder");
    let data = dir.join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    let mut named = Vec::new();
    for i in 0..90usize {
        let size = (i * 7919) % 1500 + if i % 13 == 0 { 6000 } else { 0 };
        let bytes: Vec<u8> = (0..size).map(|k| ((k * 31 + i) % 251) as u8).collect();
        let name = if i % 2 == 0 { format!("r{i:03}") } else { format!("sub/r{i:03}") };
        std::fs::write(data.join(&name), &bytes).unwrap();
        named.push((name, bytes));
    }
    std::fs::write(data.join(".hidden"), b"not a record").unwrap();
    named.sort();
    let source: Vec<Vec<u8>> = named.into_iter().map(|(_, b)| b).collect();
    let report = serve_two_attempts(&["--records-dir", data.to_str().unwrap()], &source, &dir);
    assert_eq!(report["attempts"].as_array().unwrap().len(), 2, "{report}");
    std::fs::remove_dir_all(dir).unwrap();
}
