//! What the document tests share: the repository's root and the documents that quote figures.

use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents that quote figures: README.md, docs/*.md, crates/*/README.md and
/// python/README.md.
pub fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    let mut crates: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path().join("README.md")))
        .filter(|p| p.is_file())
        .collect();
    docs.sort();
    crates.sort();
    docs.insert(0, root.join("README.md"));
    docs.extend(crates);
    docs.push(root.join("python/README.md"));
    docs
}

/// A scratch repository root under the test target's temporary folder holding one CSV,
/// `results/t.csv`, with `contents`.
pub fn scratch_root(name: &str, contents: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    fs::create_dir_all(root.join("results")).expect("a scratch folder");
    fs::write(root.join("results/t.csv"), contents).expect("a scratch CSV");
    root
}
