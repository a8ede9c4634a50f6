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

/// Where the documents' goals tables differ from their committed summary CSVs, one line each.
pub fn check_goal_tables(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut differences = Vec::new();
    for doc in ubershuffle_bench::report::documents::documents(root)? {
        let text = std::fs::read_to_string(&doc).with_context(|| format!("cannot read {}", doc.display()))?;
        let name = doc.strip_prefix(root).unwrap_or(&doc).display().to_string();
        differences.extend(goals::check_text(&name, &text, root).1);
    }
    Ok(differences)
}

/// The netns experiments that publish rows of results/headline.csv, each with what makes its
/// rows from its main run's summary (`results/{name}-summary.csv`).
#[allow(clippy::type_complexity)]
const HEADLINES: [(&str, fn(&[goals::Goal]) -> Vec<HeadlineRecord>); 3] = [
    ("netns-train", crate::netns::train::headline_records),
    ("netns-gradients", crate::netns::gradients::headline_records),
    ("netns-loaders", crate::netns::loaders::headline_records),
];

/// Where the committed netns rows of results/headline.csv differ from what the committed
/// summary CSVs make of them (the runs are not repeated: they need root and an hour; their
/// rows must be what their own CSVs give), one line each.
pub fn check_headlines(root: &Path) -> anyhow::Result<Vec<String>> {
    let path = root.join("results").join("headline.csv");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let committed = headline::parse_records(&text)?;
    let mut differences = Vec::new();
    for (name, make) in HEADLINES {
        let summary = format!("results/{name}-summary.csv");
        let fresh = make(&goals::read(root, &summary)?);
        let theirs: Vec<&HeadlineRecord> = committed.iter().filter(|r| r.experiment == name).collect();
        if theirs.len() != fresh.len() {
            differences.push(format!(
                "headline.csv holds {} rows of {name}, {summary} makes {}",
                theirs.len(),
                fresh.len()
            ));
        }
        for (have, want) in theirs.iter().zip(&fresh) {
            let fields = [
                ("what", &have.what, &want.what),
                ("ours", &have.ours, &want.ours),
                ("paper", &have.paper, &want.paper),
                ("source", &have.source, &want.source),
                ("command", &have.command, &want.command),
            ];
            for (field, have_text, want_text) in fields.into_iter().filter(|(_, h, w)| h != w) {
                differences.push(format!(
                    "headline.csv, {name} \"{}\": its {field} is {have_text:?}, {summary} makes {want_text:?}",
                    want.what
                ));
            }
            if have.machine != want.machine || have.run != want.run {
                differences
                    .push(format!("headline.csv, {name} \"{}\": its run or machine flag differs", want.what));
            }
        }
    }
    Ok(differences)
}

/// Writes the netns rows of results/headline.csv again from the committed summary CSVs, and
/// README's headline table.
pub fn publish_committed_headlines(root: &Path) -> anyhow::Result<()> {
    for (name, make) in HEADLINES {
        let fresh = make(&goals::read(root, &format!("results/{name}-summary.csv"))?);
        publish_headlines(root, name, fresh)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The workspace's root.
    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn the_committed_netns_headlines_are_what_their_summaries_give() {
        assert_eq!(check_headlines(&root()).unwrap(), Vec::<String>::new());
        assert_eq!(check_goal_tables(&root()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_summary_or_headline_changed_alone_fails() {
        let scratch = std::env::temp_dir().join(format!("netns-publish-{}", std::process::id()));
        std::fs::create_dir_all(scratch.join("results")).unwrap();
        let copy = |file: &str, edit: &dyn Fn(String) -> String| {
            let text = std::fs::read_to_string(root().join("results").join(file)).unwrap();
            std::fs::write(scratch.join("results").join(file), edit(text)).unwrap();
        };
        let same = |t: String| t;
        for (name, _) in HEADLINES {
            copy(&format!("{name}-summary.csv"), &same);
        }
        copy("headline.csv", &same);
        assert_eq!(check_headlines(&scratch).unwrap(), Vec::<String>::new());
        // A ratio of the gradients' summary moved by 0.1, the committed row kept. The
        // value is read from the committed summary, so a new measurement keeps this test.
        let summary = std::fs::read_to_string(root().join("results/netns-gradients-summary.csv")).unwrap();
        let row = summary.lines().find(|l| l.starts_with("p_yield_vs_idle,")).unwrap();
        let value: f64 = row.split("\",").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
        let moved = value + 0.1;
        copy("netns-gradients-summary.csv", &|t| t.replace(&format!("\",{value},"), &format!("\",{moved},")));
        let differences = check_headlines(&scratch).unwrap();
        assert_eq!(differences.len(), 1, "{differences:?}");
        let shown = format!("{moved:.2}<!--");
        assert!(
            differences[0].contains("its ours is") && differences[0].contains(&shown),
            "{}",
            differences[0]
        );
        // The row edited to match by hand, the summary as committed.
        copy("netns-gradients-summary.csv", &same);
        copy("headline.csv", &|t| {
            t.replace(&format!("peer partial-local {value:.2}<!--"), &format!("peer partial-local {shown}"))
        });
        assert_eq!(check_headlines(&scratch).unwrap().len(), 1);
        // A row gone.
        copy("headline.csv", &|t| {
            t.lines().filter(|l| !l.starts_with("netns-loaders,")).collect::<Vec<_>>().join("\n")
        });
        assert!(check_headlines(&scratch).unwrap()[0].contains("holds 0 rows of netns-loaders"));
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
