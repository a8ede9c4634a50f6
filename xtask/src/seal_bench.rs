//! `cargo xtask seal-bench`: the CPU cost of the sealed links per backend, from the criterion
//! bench `ubershuffle-transport/benches/seal.rs` run once with `ring` (the default feature
//! `ring-crypto`) and once with RustCrypto (`--no-default-features`), written to
//! results/seal.csv (medians of criterion's samples, against a `memcpy` of the same bytes in
//! the same run).

use std::fs;
use std::path::Path;

use anyhow::{Context, bail};

use crate::{cargo, target_dir, workspace_root};

/// The bench's frame size (`benches/seal.rs`).
const FRAME_BYTES: f64 = 1048576.0;

/// The bench's functions, by the operation they measure.
const FUNCTIONS: [(&str, &str); 3] =
    [("seal", "seal 1 MiB frame"), ("open", "open 1 MiB frame"), ("memcpy", "memcpy 1 MiB")];

/// Runs the bench for both backends and writes results/seal.csv.
pub(crate) fn run() -> anyhow::Result<()> {
    let mut rows =
        vec!["crypto,operation,frame_bytes,median_ns,gib_per_second,seconds_per_gb,over_memcpy".to_string()];
    for (crypto, features) in [("rustcrypto", &["--no-default-features"][..]), ("ring", &[][..])] {
        let mut args = vec!["bench", "-p", "ubershuffle-transport", "--bench", "seal"];
        args.extend_from_slice(features);
        cargo(&args)?;
        let group = target_dir().join("criterion").join("seal");
        let medians: Vec<f64> =
            FUNCTIONS.iter().map(|(_, name)| median_ns(&group.join(name))).collect::<anyhow::Result<_>>()?;
        let memcpy = medians[2];
        for ((operation, _), ns) in FUNCTIONS.iter().zip(&medians) {
            let gib_per_second = FRAME_BYTES / (ns * 1e-9) / f64::from(1u32 << 30);
            rows.push(format!(
                "{crypto},{operation},{},{ns:.0},{gib_per_second:.3},{:.4},{:.2}",
                FRAME_BYTES as u64,
                ns / FRAME_BYTES,
                ns / memcpy
            ));
        }
    }
    let out = workspace_root().join("results").join("seal.csv");
    // Written beside the target, then renamed over it: a failed run leaves the old file whole.
    let part = out.with_extension("csv.part");
    fs::write(&part, rows.join("\n") + "\n").with_context(|| format!("writing {}", part.display()))?;
    fs::rename(&part, &out).with_context(|| format!("replacing {}", out.display()))?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// The median of one bench function's newest run, in nanoseconds.
fn median_ns(dir: &Path) -> anyhow::Result<f64> {
    let path = dir.join("new").join("estimates.json");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    match json["median"]["point_estimate"].as_f64() {
        Some(ns) if ns > 0.0 => Ok(ns),
        _ => bail!("{} has no positive median", path.display()),
    }
}
