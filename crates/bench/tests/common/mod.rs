//! What the document tests share: the repository's root and the documents that quote figures.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents that quote figures (`ubershuffle_bench::report::documents`).
pub fn documents(root: &Path) -> Vec<PathBuf> {
    ubershuffle_bench::report::documents::documents(root).expect("the documents are readable")
}

/// A scratch repository root under the test target's temporary folder holding one CSV,
/// `results/t.csv`, with `contents`.
pub fn scratch_root(name: &str, contents: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    fs::create_dir_all(root.join("results")).expect("a scratch folder");
    fs::write(root.join("results/t.csv"), contents).expect("a scratch CSV");
    root
}
