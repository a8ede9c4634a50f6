//! `results/README.md` (and `results/full/README.md`): one section per experiment between markers, so that running one
//! experiment replaces its own section and leaves the others as they were.

use std::collections::BTreeMap;
use std::path::Path;

use ubershuffle_runtime::write_atomically;

fn begin(name: &str) -> String {
    format!("<!-- experiment {name} begin -->")
}

fn end(name: &str) -> String {
    format!("<!-- experiment {name} end -->")
}

/// Splits a README into its sections by name.
fn sections(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!-- experiment ") {
        let after = &rest[start + "<!-- experiment ".len()..];
        let Some(name_end) = after.find(" begin -->") else { break };
        let name = after[..name_end].to_string();
        let body_start = start + begin(&name).len();
        let Some(stop) = rest[body_start..].find(&end(&name)) else { break };
        out.insert(name.clone(), rest[body_start..body_start + stop].trim().to_string());
        rest = &rest[body_start + stop + end(&name).len()..];
    }
    out
}

/// Replaces (or adds) the section `name` of the README at `path`, keeping sections in `order`
/// (names not in `order` come last, alphabetically) after `preamble`.
pub fn update_section(
    path: &Path,
    preamble: &str,
    name: &str,
    body: &str,
    order: &[&str],
) -> std::io::Result<()> {
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let mut all = sections(&existing);
    all.insert(name.to_string(), body.trim().to_string());
    let rank = |n: &str| order.iter().position(|o| *o == n).unwrap_or(order.len());
    let mut names: Vec<&String> = all.keys().collect();
    names.sort_by_key(|n| (rank(n), n.to_string()));
    let mut text = String::from(preamble);
    for n in names {
        text.push_str(&format!("\n{}\n{}\n{}\n", begin(n), all[n.as_str()], end(n)));
    }
    write_atomically(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_one_section_and_keeps_order() {
        let dir = std::env::temp_dir().join(format!("results-readme-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("README.md");
        let _ = std::fs::remove_file(&path);
        let order = ["a", "b"];
        update_section(&path, "# Results\n", "b", "## b\n\nfirst b", &order).unwrap();
        update_section(&path, "# Results\n", "a", "## a\n\nonly a", &order).unwrap();
        update_section(&path, "# Results\n", "b", "## b\n\nsecond b", &order).unwrap();
        update_section(&path, "# Results\n", "zz", "## zz", &order).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# Results"));
        assert!(!text.contains("first b") && text.contains("second b"));
        let (a, b, z) =
            (text.find("only a").unwrap(), text.find("second b").unwrap(), text.find("## zz").unwrap());
        assert!(a < b && b < z);
        assert_eq!(sections(&text).len(), 3);
    }
}
