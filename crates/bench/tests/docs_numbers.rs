//! Numbers in prose equal their cells.
//!
//! Every number in `README.md`, `docs/*.md`, `crates/*/README.md` or `python/README.md` followed
//! by a citation comment
//! (`0.734 s<!-- = median(results/table1.csv[setup=mc, gbit=1, scheme=ubershuffle].epoch_s) -->`,
//! see `ubershuffle_bench::report::citation`) must be what its cells give, rounded to the
//! decimals written. Changing a committed cell or the number in the text fails here (and so in
//! CI).

mod common;

use common::{documents, repo_root, scratch_root};

use std::fs;

use ubershuffle_bench::report::cell_expr::CellEvaluator;
use ubershuffle_bench::report::citation::check_text;

#[test]
fn every_cited_number_in_readme_and_docs_is_its_cells_value() {
    let root = repo_root();
    let mut eval = CellEvaluator::new(&root);
    let (mut cited, mut problems) = (0, Vec::new());
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).expect("the document is readable");
        let name = doc.strip_prefix(&root).unwrap_or(&doc).display().to_string();
        let (count, found) = check_text(&name, &text, &mut eval);
        cited += count;
        problems.extend(found);
    }
    assert!(problems.is_empty(), "numbers that differ from their cells:\n{}", problems.join("\n"));
    assert!(cited > 40, "found only {cited} cited numbers");
}

#[test]
fn a_changed_cell_or_number_or_rounding_fails() {
    let root = scratch_root("docs-numbers", "scheme,epoch_s\ncoded,0.7336\ncoded,0.7338\nuncoded,0.991\n");
    let mut eval = CellEvaluator::new(&root);
    let mut problems = |text: &str| check_text("doc.md", text, &mut eval).1;
    let cite = "<!-- = median(results/t.csv[scheme=coded].epoch_s) -->";
    assert!(problems(&format!("takes 0.734 s{cite}")).is_empty());
    assert!(problems(&format!("takes 0.7337 s{cite}")).is_empty());
    assert_eq!(problems(&format!("takes 0.733 s{cite}")).len(), 1, "a rounding slip");
    assert_eq!(problems(&format!("takes 0.75 s{cite}")).len(), 1, "a changed number");
    let ratio =
        "1.35x<!-- = results/t.csv[scheme=uncoded].epoch_s / median(results/t.csv[scheme=coded].epoch_s) -->";
    assert!(problems(ratio).is_empty());
    fs::write(root.join("results/t.csv"), "scheme,epoch_s\ncoded,0.7336\ncoded,0.7338\nuncoded,0.999\n")
        .expect("a changed cell");
    let mut eval = CellEvaluator::new(&root);
    assert_eq!(check_text("doc.md", ratio, &mut eval).1.len(), 1, "a changed cell");
    fs::remove_dir_all(&root).expect("the scratch folder goes");
}
