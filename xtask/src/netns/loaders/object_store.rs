//! The Python side of `cargo xtask netns-loaders` made ready: its venv (made and filled on
//! first use, or a given Python checked), the object store (moto's S3 server in the store's
//! namespace, logging every request) and the data set uploaded in the three layouts.

use std::io::{BufRead, BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::types::{Arm, Request};
use crate::netns::topology::{Node, Topology};

/// The port the object store listens on (inside the namespaces only).
pub const PORT: u16 = 9000;
/// The bucket the data set goes to.
pub const BUCKET: &str = "digits";
/// What the packages the command installs into its own venv are (pip's names).
const PACKAGES: [&str; 8] =
    ["torch", "pillow", "scikit-learn", "numpy", "boto3", "moto[server]", "mosaicml-streaming", "litdata"];
/// Placeholder credentials for moto (it accepts any; nothing secret).
const CREDENTIALS: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "netns-loaders"),
    ("AWS_SECRET_ACCESS_KEY", "netns-loaders"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
];

/// The modules the arms import, with the pip package that brings each.
fn modules(arms: &[Arm]) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![
        ("torch", "torch"),
        ("PIL", "pillow"),
        ("sklearn", "scikit-learn"),
        ("boto3", "boto3"),
        ("moto.server", "moto[server]"),
        ("ubershuffle.torch", "./python"),
    ];
    if arms.iter().any(|a| a.script_arm() == "m") {
        out.push(("streaming", "mosaicml-streaming"));
    }
    if arms.iter().any(|a| a.script_arm() == "l") {
        out.push(("litdata", "litdata"));
    }
    out
}

/// The pip packages of the modules `python` cannot import (empty: it has everything).
fn missing(python: &Path, arms: &[Arm]) -> anyhow::Result<Vec<&'static str>> {
    let wanted = modules(arms);
    let names: Vec<&str> = wanted.iter().map(|(m, _)| *m).collect();
    let probe = format!(
        "import importlib\nfor m in {names:?}:\n    try:\n        importlib.import_module(m)\n    except Exception:\n        print(m)\n"
    );
    let out = Command::new(python)
        .args(["-c", &probe])
        .env("LITDATA_DISABLE_VERSION_CHECK", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !out.status.success() {
        bail!("{} does not run ({})", python.display(), out.status);
    }
    let lacking: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    Ok(wanted.into_iter().filter(|(m, _)| lacking.iter().any(|l| l == m)).map(|(_, p)| p).collect())
}

/// The Python the ranks run: `given` checked (one line naming what it lacks), or the command's
/// own venv under `work`, made and filled on first use (torch's wheels make it about 6.6 GB).
pub fn python(given: Option<&Path>, arms: &[Arm], root: &Path, target: &Path) -> anyhow::Result<PathBuf> {
    if let Some(python) = given {
        let lacking = missing(python, arms)?;
        if !lacking.is_empty() {
            bail!(
                "{} lacks {}: pip install {} (or leave out --python: the command makes its own venv)",
                python.display(),
                lacking.join(", "),
                lacking.join(" ")
            );
        }
        return Ok(python.to_path_buf());
    }
    let venv = target.join("netns-loaders").join("venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        eprintln!("xtask: making the venv {} (torch and the loaders: about 6.6 GB)", venv.display());
        let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
        if !matches!(made, Ok(s) if s.success()) {
            bail!("python3 -m venv {} failed: install python3 and python3-venv", venv.display());
        }
    }
    let lacking = missing(&python, arms)?;
    if lacking.is_empty() {
        return Ok(python);
    }
    eprintln!("xtask: installing {} into {}", lacking.join(", "), venv.display());
    let third_party: Vec<&str> = lacking.iter().copied().filter(|p| *p != "./python").collect();
    if !third_party.is_empty() {
        // Every package the arms may need, at once, so that pip resolves them together
        // (Streaming pins numpy below 2.2).
        pip(&python, &PACKAGES, root, target)?;
    }
    if lacking.contains(&"./python") {
        pip(&python, &["./python"], root, target)?;
    }
    let still = missing(&python, arms)?;
    if !still.is_empty() {
        bail!("{} still lacks {} after pip install", python.display(), still.join(", "));
    }
    Ok(python)
}

fn pip(python: &Path, packages: &[&str], root: &Path, target: &Path) -> anyhow::Result<()> {
    let status = Command::new(python)
        .args(["-m", "pip", "install", "-q"])
        .args(packages)
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target)
        .status()
        .with_context(|| format!("cannot run {} -m pip", python.display()))?;
    if !status.success() {
        bail!("pip install {} failed ({status}): see its output above", packages.join(" "));
    }
    Ok(())
}

/// The object store: moto's S3 server in the store's namespace, stopped when dropped.
pub struct ObjectStore {
    child: Child,
    /// Its URL, as every namespace reaches it.
    pub endpoint: String,
    /// Its request log (JSON lines).
    pub log: PathBuf,
}

impl ObjectStore {
    /// Starts the server (`loaders_data.py serve`) in the store's namespace and waits until it
    /// listens.
    pub fn start(
        topology: &Topology,
        python: &Path,
        script: &Path,
        work: &Path,
    ) -> anyhow::Result<ObjectStore> {
        let log = work.join("requests.jsonl");
        let _ = std::fs::remove_file(&log);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &topology.namespace(Node::Master), "env"])
            .arg(format!("PYTHONPATH={}", std::env::var("PYTHONPATH").unwrap_or_default()))
            .arg(python)
            .arg(script)
            .args(["serve", "--host", "0.0.0.0", "--port", &PORT.to_string(), "--log"])
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot run `ip netns exec` for the object store")?;
        let stdout = child.stdout.take().context("the object store's output")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let endpoint = format!("http://{}:{PORT}", topology.address(Node::Master));
        let store = ObjectStore { child, endpoint, log };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains("serving") => Ok(store),
            _ => bail!("the object store (moto's S3 server) did not start within 60 s"),
        }
    }

    /// Bytes of the request log so far: where a job's requests begin.
    pub fn mark(&self) -> u64 {
        std::fs::metadata(&self.log).map_or(0, |m| m.len())
    }

    /// The requests logged since `mark`.
    pub fn requests_since(&self, mark: u64) -> anyhow::Result<Vec<Request>> {
        let mut file = match std::fs::File::open(&self.log) {
            Ok(f) => f,
            Err(_) => return Ok(Vec::new()),
        };
        file.seek(std::io::SeekFrom::Start(mark))?;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).with_context(|| format!("{}: not a request: {l}", self.log.display()))
            })
            .collect()
    }
}

impl Drop for ObjectStore {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the upload made, as `loaders_data.py make` prints it.
#[derive(Clone, Debug, Deserialize)]
pub struct Uploaded {
    /// Records.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
    /// MDS shards' bytes.
    pub mds_bytes: u64,
    /// LitData chunks' bytes.
    pub lit_bytes: u64,
}

/// Every record's bytes, by id, from the manifest the upload wrote under `out`.
pub fn record_sizes(out: &Path) -> anyhow::Result<Vec<u64>> {
    #[derive(Deserialize)]
    struct Manifest {
        sizes: Vec<u64>,
    }
    let path = out.join("manifest.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(serde_json::from_str::<Manifest>(&text)
        .with_context(|| format!("{} is not a manifest", path.display()))?
        .sizes)
}

/// Writes the data set as MDS, LitData and one object per record, and uploads them from the
/// store's namespace.
#[allow(clippy::too_many_arguments)]
pub fn upload(
    topology: &Topology,
    store: &ObjectStore,
    python: &Path,
    script: &Path,
    data: &Path,
    out: &Path,
    chunk_bytes: u64,
    arms: &[Arm],
) -> anyhow::Result<Uploaded> {
    // Only the layouts the arms read: each needs its loader installed to be written.
    let formats: Vec<&str> = [("m", "mds"), ("l", "lit")]
        .into_iter()
        .filter(|(arm, _)| arms.iter().any(|a| a.script_arm() == *arm))
        .map(|(_, f)| f)
        .collect();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &topology.namespace(Node::Master), "env"])
        .arg(format!("PYTHONPATH={}", std::env::var("PYTHONPATH").unwrap_or_default()))
        .arg(format!("AWS_ENDPOINT_URL={}", store.endpoint));
    for (k, v) in CREDENTIALS {
        cmd.arg(format!("{k}={v}"));
    }
    let output = cmd
        .arg(python)
        .arg(script)
        .arg("make")
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(out)
        .args(["--bucket", BUCKET, "--chunk-bytes", &chunk_bytes.to_string()])
        .arg(format!("--formats={}", formats.join(",")))
        .stdin(Stdio::null())
        .output()
        .context("cannot run `ip netns exec` for the upload")?;
    // The writers' output (LitData's progress bars among it) goes to a log beside the data.
    let log = out.with_extension("log");
    let _ = std::fs::write(&log, &output.stderr);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        bail!(
            "writing and uploading the data set failed ({}): {last} (all of it in {})",
            output.status,
            log.display()
        );
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().rfind(|l| l.starts_with('{')).context("the upload printed no JSON")?;
    serde_json::from_str(line).context("the upload's JSON")
}
