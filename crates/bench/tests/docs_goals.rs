//! Goals tables are their summary CSVs rendered.
//!
//! A table of an issue's goals in the documents (a Markdown table with a `met` column) stands
//! between the markers of `ubershuffle_bench::report::goals` and must be what its summary CSV
//! (`key,measure,value,goal,met`) renders to: a goal's "yes" or "**no**" is the CSV's `met`,
//! never typed. The netns runs write the tables again with their CSVs; `cargo xtask
//! netns-publish` does it from the committed CSVs.

mod common;

use common::{documents, repo_root, scratch_root};

use std::fs;

use ubershuffle_bench::report::goals::{BEGIN, BEGIN_TAIL, END, blocks, check_text, render_text};

/// The lines (1-based) of `text`'s table headers with a `met` column outside a goals table.
fn typed_goal_tables(text: &str) -> Vec<usize> {
    let inside: Vec<std::ops::Range<usize>> =
        blocks(text).unwrap_or_default().into_iter().map(|b| b.body).collect();
    let mut at = 0;
    let mut found = Vec::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let header = line.trim_start().starts_with('|') && cells.contains(&"met");
        if header && !inside.iter().any(|r| r.contains(&at)) {
            found.push(i + 1);
        }
        at += line.len();
    }
    found
}

#[test]
fn every_goals_table_is_its_summary_rendered_and_none_is_typed() {
    let root = repo_root();
    let (mut tables, mut problems) = (0, Vec::new());
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).expect("the document is readable");
        let name = doc.strip_prefix(&root).unwrap_or(&doc).display().to_string();
        let (count, found) = check_text(&name, &text, &root);
        tables += count;
        problems.extend(found);
        for line in typed_goal_tables(&text) {
            problems.push(format!("{name}:{line}: a goals table typed by hand: put it between `{BEGIN}results/NAME-summary.csv{BEGIN_TAIL}` and `{END}`"));
        }
    }
    assert!(problems.is_empty(), "goals tables that are not their CSVs:\n{}", problems.join("\n"));
    assert!(tables >= 2, "found only {tables} goals tables");
}

#[test]
fn a_changed_met_value_or_typed_table_fails() {
    let csv = "key,measure,value,goal,met\nfast,epoch time over (m)'s,0.96,at most 1.05,true\n\
               info,epoch time (s),4.1,(information),true\nclose,accuracy gap (points),1.01,at most 1,false\n";
    let root = scratch_root("docs-goals", csv);
    let empty = format!("Goals:\n\n{BEGIN}results/t.csv{BEGIN_TAIL}\n{END}\n");
    let rendered = render_text(&empty, &root, None).expect("the table renders");
    assert_eq!(check_text("doc.md", &rendered, &root), (1, Vec::new()));
    assert!(
        rendered.contains("| at most 1 <!-- param --> | **no** |") && !rendered.contains("(information)")
    );
    let problems = |text: &str| check_text("doc.md", text, &root).1.len();
    assert_eq!(problems(&rendered.replace("| **no** |", "| yes |")), 1, "a met typed over");
    assert_eq!(problems(&rendered.replace("0.960", "0.950")), 1, "a value typed over");
    fs::write(root.join("results/t.csv"), csv.replace("1.01,at most 1,false", "0.99,at most 1,true"))
        .expect("a changed summary");
    assert_eq!(problems(&rendered), 1, "a summary whose goal is now met");
    let typed = "| goal | measured | met |\n|---|---|---|\n| fast | 0.96 | yes |\n";
    assert_eq!(typed_goal_tables(typed), [1]);
    assert_eq!(typed_goal_tables(&rendered), Vec::<usize>::new());
    fs::remove_dir_all(&root).expect("the scratch folder goes");
}
