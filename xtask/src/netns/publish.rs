//! Where the netns experiments publish: their section of results/README.md, the documents'
//! goals tables of their summary CSVs, and their rows of results/headline.csv with README's
//! headline table rendered again.

use std::path::Path;

use anyhow::Context;
use ubershuffle_bench::report::goals;
use ubershuffle_bench::report::headline::{self, HeadlineRecord};

/// Replaces results/README.md's section `name` with `body` (the others stay as they are, in
/// their order; a new one goes last), and renders the documents' goals tables of
/// `results/{name}-summary.csv` again.
pub fn write_section(root: &Path, name: &str, body: &str) -> anyhow::Result<()> {
    let path = root.join("results").join("README.md");
    let existing =
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let marker = "<!-- experiment ";
    let preamble =
        existing.find(marker).map_or(existing.as_str(), |at| &existing[..at]).trim_end().to_string() + "\n";
    let order: Vec<String> = existing
        .match_indices(marker)
        .filter_map(|(at, _)| {
            existing[at + marker.len()..].split_once(" begin -->").map(|(n, _)| n.to_string())
        })
        .filter(|n| !n.contains(' '))
        .collect();
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    ubershuffle_bench::report::sections::update_section(&path, &preamble, name, body, &order)
        .with_context(|| format!("cannot write {}", path.display()))?;
    render_goal_tables(root, Some(&format!("results/{name}-summary.csv")))
}

/// Renders the goals tables of the documents (README.md, docs/*.md, ...) again from the
/// committed summary CSVs they name (only those of `only`, when given), rewriting the documents
/// whose tables changed.
pub fn render_goal_tables(root: &Path, only: Option<&str>) -> anyhow::Result<()> {
    let documents = ubershuffle_bench::report::documents::documents(root)
        .with_context(|| format!("cannot list the documents under {}", root.display()))?;
    for doc in documents {
        let text = std::fs::read_to_string(&doc).with_context(|| format!("cannot read {}", doc.display()))?;
        let rendered = goals::render_text(&text, root, only).with_context(|| format!("{}", doc.display()))?;
        if rendered != text {
            ubershuffle_runtime::write_atomically(&doc, rendered.as_bytes())
                .with_context(|| format!("cannot write {}", doc.display()))?;
            eprintln!("xtask: rendered the goals tables of {} again", doc.display());
        }
    }
    Ok(())
}

/// Replaces `experiment`'s rows of results/headline.csv (run `full`) with `fresh` and renders
/// README's headline table again.
pub fn publish_headlines(root: &Path, experiment: &str, fresh: Vec<HeadlineRecord>) -> anyhow::Result<()> {
    let path = root.join("results").join("headline.csv");
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let records = headline::parse_records(&existing)?;
    // The experiments in the order they stand (this one last when new).
    let mut order: Vec<String> = Vec::new();
    for r in &records {
        if !order.contains(&r.experiment) {
            order.push(r.experiment.clone());
        }
    }
    if !order.iter().any(|e| e == experiment) {
        order.push(experiment.into());
    }
    let order: Vec<&str> = order.iter().map(String::as_str).collect();
    let all = headline::merge(records, experiment, "full", fresh, &order);
    ubershuffle_runtime::write_atomically(&path, headline::to_csv(&all)?.as_bytes())?;
    let readme_path = root.join("README.md");
    let readme = std::fs::read_to_string(&readme_path)
        .with_context(|| format!("cannot read {}", readme_path.display()))?;
    ubershuffle_runtime::write_atomically(
        &readme_path,
        headline::replace_block(&readme, &headline::render(&all))?.as_bytes(),
    )?;
    Ok(())
}
