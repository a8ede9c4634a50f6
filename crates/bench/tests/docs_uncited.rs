//! Every number in prose is accounted for.
//!
//! A number in `README.md`, `docs/*.md`, `crates/*/README.md` or `python/README.md` must be one
//! of:
//!
//! - **cited**: a `<!-- = EXPR -->` comment follows it (behind its unit), which `docs_numbers.rs`
//!   evaluates against the committed CSVs;
//! - **code**: inside a code span or a fenced block (commands, flags, example output);
//! - **not a measurement by rule** (below);
//! - **labelled** by one of three markers:
//!   - `<!-- param -->`: something set, not measured (a parameter, a constant of the design, a
//!     size in an API description, a worked example or arithmetic on such);
//!   - `<!-- paper -->`: a value quoted from a paper;
//!   - `<!-- not from a CSV: WHY -->`: a measurement that has no committed CSV (a fuzzing count, a
//!     one-off timing); the visible text beside it says so too.
//!
//!   A label right after a number covers the numbers of its line from the previous comment (or
//!   the line's start) up to it; a label alone on its line covers the block below it (up to the
//!   next blank line: a paragraph, list or table).
//!
//! The rules, applied outside code, comments and link targets:
//!
//! 1. headings (`#` lines) are skipped, and so are the lines of README's headline block (which
//!    `cargo xtask experiments` renders from `results/headline.csv`) that render a
//!    machine-independent row: `cargo xtask experiments --check` computes those again from a
//!    fresh run. The block's other rows (times of one machine, and the netns experiments' rows,
//!    which CI cannot run again) are scanned like prose: their figures carry citations of the
//!    CSVs they come from, which `docs_numbers.rs` evaluates;
//! 2. a parameter: right after `name =` (or `=`, `<=`, `>=`, `<`, `>`, `≤`, `≥`; `name` one word
//!    of at most 12 characters, e.g. `n = 20`, `q=1e6`, `K <= 10`), after a `--flag` or `-f`, or
//!    after the words `alpha`, `mu`, `seed(s)`, `rank(s)`, `MTU`, `version`;
//! 3. a reference: after `Fig.`, `Figure`, `Table`, `Section`, `§`, `eq.`, `Theorem`, `Lemma`,
//!    `Corollary`, `Algorithm`, `Example`, `Definition`, `Remark`, `Appendix`, `issue`, `step`,
//!    `item`, `line`, `page`, `#` (singular or plural, any case);
//! 4. a version (two dots, as `0.8.2`, or `3.9+`), a year (1900-2099), a date (`2026-11-25`);
//! 5. an ordered list's item number (`1. ` at the start of a line), part of a word (`x86_64`, `l2`, `SHA-256`, `Apache-2.0`) or an ordinal (`1st`, `2nd`);
//! 6. a list continuing such a number on its line: after `,`, `and`, `or`, `to`, `-`, `..`, `/`
//!    (`n = 8 to 12`, `Sections 3 and 4`, `mu = 1/3`).
//!
//! A measured number caught by a rule (say `speedup = 2.5`) is a slip of style: write
//! measurements in words and cite them. `results/README.md` is not scanned: the experiments write
//! every number of its prose from the rows they measured in the same run.

mod common;

use common::{documents, repo_root, scratch_root};

use std::fs;

use ubershuffle_bench::report::cell_expr::CellEvaluator;
use ubershuffle_bench::report::citation::{CLOSE, OPEN, check_text};
use ubershuffle_bench::report::headline;

/// The markers that label a number (the body of `<!-- ... -->`, trimmed).
fn is_label(body: &str) -> bool {
    body == "param"
        || body == "paper"
        || body.strip_prefix("not from a CSV:").is_some_and(|why| !why.trim().is_empty())
}

/// Whether `line` is nothing but a label comment.
fn is_block_label(line: &str) -> bool {
    let line = line.trim();
    line.strip_prefix("<!--").and_then(|l| l.strip_suffix(CLOSE)).is_some_and(|body| is_label(body.trim()))
}

/// Blanks (to spaces, newlines kept) `bytes[from..to]`.
fn blank(bytes: &mut [u8], from: usize, to: usize) {
    let to = to.min(bytes.len());
    for b in &mut bytes[from..to] {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// Blanks whole lines: fenced code, headings, the lines of the rendered headline block that are
/// one of `checked` (rule 1) and blocks under a block label.
fn blank_lines(text: &str, bytes: &mut [u8], checked: &[String]) {
    let (mut fenced, mut rendered, mut labelled) = (false, false, false);
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
        fenced ^= fence;
        rendered |= line.contains("<!-- headline table");
        labelled = (labelled && !line.trim().is_empty()) || is_block_label(line);
        let recomputed = rendered && checked.iter().any(|c| c == line.trim_end());
        if fence || fenced || recomputed || labelled || trimmed.starts_with('#') {
            blank(bytes, start, start + line.len());
        }
        rendered &= !line.contains("<!-- end of headline table");
        start += line.len();
    }
}

/// Blanks code spans (within a paragraph).
fn blank_code_spans(bytes: &mut [u8]) {
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|b| **b == b'`').count();
        let fence = vec![b'`'; run];
        let after = i + run;
        let paragraph_end = find(bytes, after, b"\n\n").unwrap_or(bytes.len());
        match find(bytes, after, &fence).filter(|end| *end < paragraph_end) {
            Some(end) => {
                blank(bytes, i, end + run);
                i = end + run;
            }
            None => i = after,
        }
    }
}

/// Where `needle` first occurs in `bytes` from `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|at| from + at)
}

/// Blanks from each `open` to the end of its `close`.
fn blank_between(bytes: &mut [u8], open: &[u8], close: &[u8]) {
    let mut from = 0;
    while let Some(start) = find(bytes, from, open) {
        let end = find(bytes, start + open.len(), close).map_or(bytes.len(), |e| e + close.len());
        blank(bytes, start, end);
        from = end;
    }
}

/// Blanks link targets `](...)` and bare URLs.
fn blank_links(bytes: &mut [u8]) {
    let mut from = 0;
    while let Some(start) = find(bytes, from, b"](") {
        let end =
            bytes[start..].iter().position(|b| *b == b')' || *b == b'\n').map_or(bytes.len(), |e| start + e);
        blank(bytes, start, end);
        from = end;
    }
    for scheme in [&b"http://"[..], b"https://"] {
        let mut from = 0;
        while let Some(start) = find(bytes, from, scheme) {
            let end = bytes[start..]
                .iter()
                .position(|b| b.is_ascii_whitespace() || b"()<>".contains(b))
                .map_or(bytes.len(), |e| start + e);
            blank(bytes, start, end);
            from = end;
        }
    }
}

/// The text as the scanner reads it: code, comments, link targets, headings, the headline
/// block's `checked` lines and block-labelled lines blanked, every byte offset kept.
fn prose(text: &str, checked: &[String]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    blank_lines(text, &mut bytes, checked);
    blank_code_spans(&mut bytes);
    blank_between(&mut bytes, b"<!--", CLOSE.as_bytes());
    blank_links(&mut bytes);
    // Only ASCII was replaced, and by ASCII, so the text stays UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

/// A number as written in prose: its byte range.
#[derive(Clone, Copy, Debug)]
struct Number {
    start: usize,
    end: usize,
}

/// The end of the number starting at `start`: digits, `.digits`, an exponent, thousands groups
/// (`10 000`, `1,000`).
fn number_end(b: &[u8], start: usize) -> usize {
    let digits =
        |at: usize| b.get(at..).map_or(0, |rest| rest.iter().take_while(|c| c.is_ascii_digit()).count());
    let mut end = start + digits(start);
    let decimal = |at: usize| b.get(at) == Some(&b'.') && digits(at + 1) > 0;
    let group = |at: usize| {
        digits(at) == 3 && !b.get(at + 3).is_some_and(u8::is_ascii_alphanumeric) && !decimal(at + 3)
    };
    while end - start <= 3 && b.get(end).is_some_and(|c| *c == b' ' || *c == b',') && group(end + 1) {
        end += 4;
    }
    while b.get(end) == Some(&b'.') && digits(end + 1) > 0 {
        end += 1 + digits(end + 1);
    }
    if b.get(end) == Some(&b'e') {
        let sign = usize::from(b.get(end + 1).is_some_and(|c| *c == b'-' || *c == b'+'));
        if digits(end + 1 + sign) > 0 {
            end += 1 + sign + digits(end + 1 + sign);
        }
    }
    end
}

/// The numbers of the scanned text.
fn numbers(scanned: &str) -> Vec<Number> {
    let b = scanned.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let after_letter = |at: usize| at > 0 && (b[at - 1].is_ascii_alphabetic() || b[at - 1] == b'_');
        let inside_word = after_letter(i)
            || (i > 0 && b[i - 1].is_ascii_digit())
            || (i > 1 && b[i - 1] == b'-' && after_letter(i - 1));
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        if inside_word {
            // The rest of the word: `x86_64`, `2.0` of `Apache-2.0`.
            i = number_end(b, i);
            continue;
        }
        let end = number_end(b, i);
        let word_follows = b.get(end).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
        let unit = scanned[end..].trim_start_matches(|c: char| c.is_ascii_alphabetic());
        let unit = &scanned[end..scanned.len() - unit.len()];
        let part_of_word = word_follows
            && !["x", "s", "ms", "us", "k", "M", "G", "B", "KiB", "MiB", "GiB", "GB", "MB"].contains(&unit);
        if !part_of_word {
            found.push(Number { start: i, end });
        }
        i = end.max(i + 1);
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
    }
    found
}

/// The reference words of rule 3 (lower case, singular; a trailing `s` is allowed).
const REFERENCES: [&str; 19] = [
    "fig.",
    "figure",
    "table",
    "section",
    "§",
    "eq.",
    "equation",
    "theorem",
    "lemma",
    "corollary",
    "algorithm",
    "example",
    "definition",
    "remark",
    "appendix",
    "issue",
    "step",
    "item",
    "line",
];

/// The words of rule 2 that a parameter's value follows.
const PARAMETERS: [&str; 8] = ["alpha", "mu", "seed", "seeds", "rank", "ranks", "mtu", "version"];

/// Whether `before` (the line up to a number) ends like a parameter or a reference (rules 2
/// and 3).
fn names_a_parameter_or_reference(before: &str) -> bool {
    let trimmed = before.trim_end();
    for op in ["<=", ">=", "≤", "≥", "=", "<", ">"] {
        if let Some(name) = trimmed.strip_suffix(op) {
            let name = name.trim_end();
            let word = &name
                [name.rfind(|c: char| c.is_whitespace() || "(,;[{".contains(c)).map_or(0, |at| at + 1)..];
            let word_like = word.chars().all(|c| c.is_alphanumeric() || "_'".contains(c));
            return !word.is_empty() && word.chars().count() <= 12 && word_like;
        }
    }
    let last = trimmed.trim_end_matches('(').trim_end();
    let word = last[last.rfind(char::is_whitespace).map_or(0, |at| at + 1)..].trim_start_matches(['(', '[']);
    let lower = word.to_lowercase();
    let singular = lower.replace("s.", ".");
    let singular = singular.strip_suffix('s').filter(|w| REFERENCES.contains(w)).unwrap_or(&singular);
    let flag = (word.starts_with("--") && word.len() > 2) || (word.len() == 2 && word.starts_with('-'));
    flag || word == "#"
        || word == "p."
        || REFERENCES.contains(&singular)
        || PARAMETERS.contains(&lower.as_str())
}

/// Whether the number is a version, a year or a date (rule 4) or an ordinal (rule 5).
fn is_version_year_date_or_ordinal(text: &str, n: Number) -> bool {
    let written = &text[n.start..n.end];
    let after = &text[n.end..];
    let year = written.len() == 4 && written.parse::<u32>().is_ok_and(|y| (1900..2100).contains(&y));
    let version = written.matches('.').count() >= 2 || after.starts_with('+');
    let ordinal = ["st", "nd", "rd", "th"].iter().any(|o| {
        after.strip_prefix(o).is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_alphanumeric()))
    });
    // A date's month and day continue its year (rule 6).
    year || version || ordinal
}

/// Whether `between` (from one number to the next) continues a list (rule 6).
fn continues_a_list(between: &str) -> bool {
    let between = between.trim();
    [",", "and", "or", "to", "-", "–", "..", "/", ", and", ", or"].contains(&between)
}

/// What follows a number behind its unit: `x`, `%`, `s`, spaces, emphasis (as `citation` reads).
fn after_unit(text: &str, end: usize) -> &str {
    text[end..].trim_start_matches([' ', 'x', '%', 's', '*'])
}

/// Whether the first comment after the number on its line is a label, or a citation right after it.
fn cited_or_labelled(text: &str, n: Number) -> bool {
    if after_unit(text, n.end).starts_with(OPEN) {
        return true;
    }
    let line = &text[n.end..text[n.end..].find('\n').map_or(text.len(), |e| n.end + e)];
    let Some(at) = line.find("<!--") else {
        return false;
    };
    let body = &line[at + 4..];
    let body = body.find(CLOSE).map_or(body, |e| &body[..e]);
    is_label(body.trim())
}

/// The numbers of `text` that are neither cited, nor code, nor labelled, nor exempt by a rule:
/// `(line, number)`.
fn unaccounted(text: &str) -> Vec<(usize, String)> {
    unaccounted_at(text, &[]).into_iter().map(|(line, _, number)| (line, number)).collect()
}

/// [`unaccounted`] with the 1-based column (in bytes) of each number, `(line, column, number)`,
/// the headline block's lines `checked` (rule 1) skipped.
fn unaccounted_at(text: &str, checked: &[String]) -> Vec<(usize, usize, String)> {
    let scanned = prose(text, checked);
    let mut found = Vec::new();
    let mut previous: Option<(Number, bool)> = None;
    for n in numbers(&scanned) {
        let line_start = scanned[..n.start].rfind('\n').map_or(0, |at| at + 1);
        let before = &scanned[line_start..n.start];
        let in_list = previous.is_some_and(|(p, exempt)| {
            exempt && p.end >= line_start && continues_a_list(&scanned[p.end..n.start])
        });
        let list_marker =
            before.trim().is_empty() && [". ", ") "].iter().any(|m| scanned[n.end..].starts_with(m));
        let exempt = in_list
            || list_marker
            || names_a_parameter_or_reference(before)
            || is_version_year_date_or_ordinal(&scanned, n);
        if !exempt && !cited_or_labelled(text, n) {
            let line = text[..n.start].matches('\n').count() + 1;
            found.push((line, n.start - line_start + 1, text[n.start..n.end].to_string()));
        }
        previous = Some((n, exempt));
    }
    found
}

/// The lines of README's headline block that render a machine-independent row of
/// `results/headline.csv` (rule 1: `--check` computes them again).
fn recomputed_headline_lines(root: &std::path::Path) -> Vec<String> {
    let text =
        fs::read_to_string(root.join("results/headline.csv")).expect("results/headline.csv is readable");
    let records = headline::parse_records(&text).expect("results/headline.csv parses");
    records
        .into_iter()
        .filter(|r| !r.machine)
        .filter_map(|r| headline::render(&[r]).lines().nth(2).map(String::from))
        .collect()
}

/// How to mend an unaccounted number.
const HOW: &str = "cite its cells right after it (`<!-- = EXPR -->`, see docs_numbers.rs), or label it \
`<!-- param -->`, `<!-- paper -->` or `<!-- not from a CSV: WHY -->` (see docs_uncited.rs)";

#[test]
fn every_number_in_the_readmes_and_docs_is_cited_labelled_or_not_measured() {
    let root = repo_root();
    let checked = recomputed_headline_lines(&root);
    assert!(!checked.is_empty(), "no machine-independent row in results/headline.csv");
    let mut problems = Vec::new();
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).expect("the document is readable");
        let name = doc.strip_prefix(&root).unwrap_or(&doc).display().to_string();
        for (line, column, number) in unaccounted_at(&text, &checked) {
            problems.push(format!("{name}:{line}:{column}: {number}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} numbers neither cited nor labelled; {HOW}:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn parameters_references_versions_and_code_pass_the_rules() {
    let text = "# Table 3 at 0.5\n\
                With n = 20, q=1e6 and K <= 10, alpha 0.3 and 0.5, `--epochs 3` or --epochs 3 (see Fig. 4,\n\
                Sections 3 and 4, eq. (43), Theorem 1, issue #28), rustc 1.95.0, Python 3.9+, in 2026,\n\
                on 2026-11-25, the 2nd try, x86_64, AES-256-GCM, rank 0, Figs. 3-4, [a link](../results/fig3.svg#L12), n = 8 to 12, mu = 1/3,\n\
                q = 10 000.\n\
                2. an item\n\
                ```sh\nubershuffle plan -n 20 --alpha 0.4\n```\n\
                <!-- paper -->\n| E_err | 1.976 | 0.5173 |\n\n\
                set to 4096 bytes<!-- param --> and 2.46x<!-- = a -->\n\
                <!-- headline table: rendered -->\n| 8.61x |\n<!-- end of headline table -->\n";
    let checked = ["| 8.61x |".to_string()];
    assert_eq!(unaccounted_at(text, &checked), []);
    let machine_row = text.replace("| 8.61x |\n<!--", "| 8.61x |\n| 0.83x, 2.6 s<!-- = a --> |\n<!--");
    let found: Vec<String> = unaccounted_at(&machine_row, &checked).into_iter().map(|(_, _, n)| n).collect();
    assert_eq!(found, ["0.83"], "a headline row --check does not recompute is scanned");
    assert_eq!(unaccounted(text), [(15, "8.61".to_string())], "so is every row when none is recomputed");
}

#[test]
fn an_unlabelled_or_uncited_number_is_named_with_its_line() {
    let text = "It takes 0.734 s here,\nand 2.5x<!-- stray comment --> there; 7.35e-4, 111 of 116\n\
                rows (n = 8, seeds 1-3) 12 % <!-- param\n--> or `3`, and 5 workers<!-- = a -->.\n\
                a speedup of 10 000 and 1,000 runs";
    let found: Vec<String> = unaccounted(text).into_iter().map(|(line, n)| format!("{line}: {n}")).collect();
    assert_eq!(
        found,
        ["1: 0.734", "2: 2.5", "2: 7.35e-4", "2: 111", "2: 116", "4: 5", "5: 10 000", "5: 1,000"]
    );
}

#[test]
fn uncited_or_altered_measurements_in_a_doc_fail() {
    let root = scratch_root("docs-uncited", "scheme,epoch_s,ok\ncoded,0.7336,1\nuncoded,0.991,0\n");
    let mut eval = CellEvaluator::new(&root);
    let cited = "coded takes 0.734 s<!-- = results/t.csv[scheme=coded].epoch_s --> and 1<!-- = count(results/t.csv[ok=1]) --> of 2 rows pass.";
    assert_eq!(unaccounted(cited).len(), 1, "the `2` is neither cited nor labelled");
    let cited = cited.replace("of 2 rows", "of 2<!-- = count(results/t.csv[]) --> rows");
    assert_eq!(unaccounted(&cited), []);
    assert!(check_text("doc.md", &cited, &mut eval).1.is_empty());
    let uncited = cited.replace("<!-- = results/t.csv[scheme=coded].epoch_s -->", "");
    assert_eq!(unaccounted(&uncited), [(1, "0.734".to_string())], "an un-cited measurement");
    let altered = cited.replace("0.734", "0.70");
    assert_eq!(check_text("doc.md", &altered, &mut eval).1.len(), 1, "an altered measurement");
    let relabelled = cited.replace("<!-- = results/t.csv[scheme=coded].epoch_s -->", "<!-- params -->");
    assert_eq!(unaccounted(&relabelled).len(), 1, "an unknown marker is no label");
    fs::remove_dir_all(&root).expect("the scratch folder goes");
}
