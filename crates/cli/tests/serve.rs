//! `ubershuffle serve`: the data plane's master delivers a records file (or a folder of
//! records of uneven size) to `ubershuffle worker` processes, each epoch's data bytes are the
//! plan's transmissions times the record (or segment) size plus the stated framing, and bad
//! input is one line.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

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
    assert!(one_line_error(&tiny).contains("--alpha 0.1 caches 1 points, less than a batch"));
    let mut magic = serve(&[&small[..], &["--alpha", "0.5", "--scheme", "magic"]].concat(), Some(TOKEN));
    assert!(one_line_error(&magic.output().unwrap()).contains("--scheme 'magic': known schemes are"));
    std::fs::remove_file(file).unwrap();
}

/// Serves with `records` (the flags naming the data set) to 3 `ubershuffle worker` processes
/// for 3 epochs; returns every epoch's metrics.
fn serve_to_workers(records: &[&str]) -> Vec<Value> {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "--workers",
        "3",
        "--alpha",
        "0.5",
        "--policy",
        "partial-local",
        "--fraction",
        "0.3",
        "--scheme",
        "coded",
        "--epochs",
        "3",
        "--listen",
        &addr,
        "--json",
    ];
    let master = serve(&[records, &args[..]].concat(), Some(TOKEN))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_ubershuffle"))
                .args(["worker", "--connect", &addr])
                .env("UBERSHUFFLE_TOKEN", TOKEN)
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let out = master.wait_with_output().unwrap();
    for mut w in workers {
        assert!(w.wait().unwrap().success(), "a worker failed");
    }
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["epochs"].as_array().unwrap().clone()
}

#[test]
fn workers_receive_each_epoch_and_the_master_sends_the_plan_plus_stated_framing() {
    let (points, width) = (96usize, 64usize);
    let bytes: Vec<u8> = (0..points * width).map(|i| (i * 31 % 251) as u8).collect();
    let file = records_file("data", &bytes);
    let epochs = serve_to_workers(&["--records", file.to_str().unwrap(), "--record-size", "64"]);
    assert_eq!(epochs.len(), 3);
    for e in &epochs {
        let n = |k: &str| e[k].as_u64().unwrap() as usize;
        assert!(n("transmissions") < n("uncoded_transmissions"), "{e}");
        assert_eq!(n("payload_bytes"), n("transmissions") * width);
        let packets = n("broadcast_packets") + n("unicast_packets");
        // The sum of `protocol::data_chunk_framing` over the epoch's data messages.
        let framing = 12 * n("data_messages") + 4 * packets + n("unicast_messages");
        assert_eq!(n("data_bytes"), n("transmissions") * width + framing, "{e}");
        assert_eq!(n("padding_bytes"), 0, "records of one size are one segment each");
    }
    std::fs::remove_file(file).unwrap();
}

#[test]
fn a_folder_of_records_of_uneven_size_is_delivered_in_segments() {
    let dir = std::env::temp_dir().join(format!("ubershuffle-serve-{}-folder", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..90usize {
        let size = (i * 7919) % 1500 + if i % 13 == 0 { 6000 } else { 0 };
        let bytes: Vec<u8> = (0..size).map(|k| ((k * 31 + i) % 251) as u8).collect();
        let name = if i % 2 == 0 { format!("r{i:03}") } else { format!("sub/r{i:03}") };
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let epochs = serve_to_workers(&["--records-dir", dir.to_str().unwrap()]);
    assert_eq!(epochs.len(), 3);
    for e in &epochs {
        let n = |k: &str| e[k].as_u64().unwrap() as usize;
        // Packets of one segment size (512 bytes: the smallest default), padding counted apart.
        assert_eq!(n("payload_bytes"), n("transmissions") * 512, "{e}");
        assert!(n("padding_bytes") > 0 && n("padding_bytes") < n("payload_bytes") / 2, "{e}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
