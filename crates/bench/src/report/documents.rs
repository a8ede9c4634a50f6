//! The documents that quote figures from the committed results: README.md, docs/*.md,
//! crates/*/README.md and python/README.md (results/README.md is written by the runs and is not
//! among them).

use std::path::{Path, PathBuf};

/// The documents under the repository's `root` that quote figures, in a fixed order.
pub fn documents(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let markdown_in = |dir: &Path| -> std::io::Result<Vec<PathBuf>> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        found.sort();
        Ok(found)
    };
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path().join("README.md")))
        .filter(|p| p.is_file())
        .collect();
    crates.sort();
    let mut docs = vec![root.join("README.md")];
    docs.extend(markdown_in(&root.join("docs"))?);
    docs.extend(crates);
    docs.push(root.join("python").join("README.md"));
    Ok(docs)
}
