//! Numbers in prose tied to their CSV cells.
//!
//! A measured number in README or `docs/` carries, right after it (and its unit: `x`, `%`,
//! ` s`), a Markdown comment holding a [cell expression](super::cell_expr), invisible when
//! rendered:
//!
//! ```text
//! UberShuffle's whole epoch takes 0.734 s<!-- = median(results/table1.csv[setup=mc, gbit=1,
//! scheme=ubershuffle].epoch_s) --> against ...
//! ```
//!
//! [`check_text`] evaluates every such expression against the committed CSVs and compares the
//! value, rounded to the decimals written, with the number written: a changed cell or a changed
//! number fails (and so does a rounding slip, 0.733 where the cell rounds to 0.734).

use super::cell_expr::CellEvaluator;

/// What opens a citation.
pub const OPEN: &str = "<!-- = ";
/// What closes it.
pub const CLOSE: &str = "-->";

/// `number` followed by the citation of `expr`: how an experiment writes a figure of a headline
/// row that no fresh run checks (a time of this machine), so that docs_numbers checks it in
/// README against the CSV it was computed from.
pub fn cited(number: impl std::fmt::Display, expr: &str) -> String {
    format!("{number}{OPEN}{expr} {CLOSE}")
}

/// `text` without its Markdown comments (citations and labels), as a terminal shows it.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("<!--") {
        out.push_str(&rest[..at]);
        rest = rest[at..].find(CLOSE).map_or("", |end| &rest[at + end + CLOSE.len()..]);
    }
    out.push_str(rest);
    out
}

/// A number in prose and the expression it quotes.
#[derive(Clone, Debug, PartialEq)]
pub struct Citation {
    /// 1-based line of the number.
    pub line: usize,
    /// The number as written (with its sign, if any), e.g. `+0.23`.
    pub written: String,
    /// The cell expression.
    pub expr: String,
}

/// The citations of `text`; an error line for a citation with no number before it or no end.
pub fn citations(text: &str) -> (Vec<Citation>, Vec<String>) {
    let (mut found, mut problems) = (Vec::new(), Vec::new());
    let mut from = 0;
    while let Some(at) = text[from..].find(OPEN) {
        let start = from + at;
        let line = text[..start].matches('\n').count() + 1;
        let body = start + OPEN.len();
        let Some(length) = text[body..].find(CLOSE) else {
            problems.push(format!("line {line}: a citation without `{CLOSE}`"));
            break;
        };
        from = body + length + CLOSE.len();
        let expr = text[body..body + length].split_whitespace().collect::<Vec<_>>().join(" ");
        match number_before(&text[..start]) {
            Some(written) => found.push(Citation { line, written, expr }),
            None => problems.push(format!("line {line}: no number right before the citation `{expr}`")),
        }
    }
    (found, problems)
}

/// The number ending `text`, behind a unit (`x`, `%`, `s`, spaces, emphasis): decimal
/// (`0.734`, `-12.4`) or scientific (`7.35e-4`).
fn number_before(text: &str) -> Option<String> {
    let text = text.trim_end_matches([' ', 'x', '%', 's', '*']);
    let (mantissa_end, exponent) = match exponent_before(text) {
        Some(exponent) => (text.len() - exponent.len(), exponent),
        None => (text.len(), ""),
    };
    let text = &text[..mantissa_end];
    let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.').len();
    let number = text[text.len() - digits..].trim_start_matches('.');
    if !number.starts_with(|c: char| c.is_ascii_digit()) || number.ends_with('.') {
        return None;
    }
    let before = &text[..text.len() - number.len()];
    let sign = before.chars().last().filter(|c| *c == '+' || *c == '-');
    Some(sign.map_or(String::new(), String::from) + number + exponent)
}

/// The exponent (`e-4`, `e+3`, `e6`) ending `text`, when a digit stands before it.
fn exponent_before(text: &str) -> Option<&str> {
    let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let rest = &text[..text.len() - digits];
    let rest = rest.strip_suffix(['+', '-']).unwrap_or(rest);
    let rest = rest.strip_suffix('e')?;
    rest.ends_with(|c: char| c.is_ascii_digit()).then(|| &text[rest.len()..])
}

/// Whether `value` rounded to the decimals of `written` is `written` (a `+` sign asks for a
/// positive value). A scientific `written` (`7.35e-4`) is compared at its mantissa's decimals.
pub fn rounds_to(written: &str, value: f64) -> bool {
    if let Some((mantissa, exponent)) = written.split_once('e') {
        let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len());
        let shown = format!("{value:.decimals$e}");
        let Some((shown_mantissa, shown_exponent)) = shown.split_once('e') else {
            return false;
        };
        let same_exponent = matches!(
            (exponent.parse::<i32>(), shown_exponent.parse::<i32>()),
            (Ok(a), Ok(b)) if a == b
        );
        return same_exponent && shown_mantissa == mantissa.trim_start_matches('+');
    }
    let decimals = written.split_once('.').map_or(0, |(_, d)| d.len());
    let shown = format!("{value:.decimals$}");
    let shown = if shown.starts_with('-') || !written.starts_with('+') { shown } else { format!("+{shown}") };
    // -0.0 rounds to "-0.0": a written "0.0" or "-0.0" are both that value.
    shown == written
        || (value.abs() < 0.5 * 10f64.powi(-(decimals as i32))
            && written.trim_start_matches(['+', '-']) == shown.trim_start_matches('-'))
}

/// Every problem with the citations of `text` (named `name` in the messages), and how many
/// citations it holds.
pub fn check_text(name: &str, text: &str, eval: &mut CellEvaluator) -> (usize, Vec<String>) {
    let (found, problems) = citations(text);
    let mut problems: Vec<String> = problems.into_iter().map(|p| format!("{name}: {p}")).collect();
    for citation in &found {
        match eval.evaluate(&citation.expr) {
            Ok(value) if rounds_to(&citation.written, value) => {}
            Ok(value) => problems.push(format!(
                "{name}:{}: written {}, the cells give {value} (`{}`)",
                citation.line, citation.written, citation.expr
            )),
            Err(e) => problems.push(format!("{name}:{}: {e}", citation.line)),
        }
    }
    (found.len(), problems)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn numbers_are_read_behind_their_units() {
        let text = "takes 0.734 s<!-- = a --> and 2.46x<!-- = b -->,\n+0.23 %<!-- = c\n d --> or **-12.4 %**<!-- = e -->\nwords<!-- = f -->";
        let (found, problems) = citations(text);
        let got: Vec<(usize, &str, &str)> =
            found.iter().map(|c| (c.line, c.written.as_str(), c.expr.as_str())).collect();
        assert_eq!(got, [(1, "0.734", "a"), (1, "2.46", "b"), (2, "+0.23", "c d"), (3, "-12.4", "e")]);
        assert_eq!(problems, ["line 4: no number right before the citation `f`"]);
        let (found, _) = citations("about 7.35e-4<!-- = a --> or 2e6 s<!-- = b -->, 1.5e+3x<!-- = c -->");
        let got: Vec<&str> = found.iter().map(|c| c.written.as_str()).collect();
        assert_eq!(got, ["7.35e-4", "2e6", "1.5e+3"]);
    }

    #[test]
    fn a_cited_figure_reads_back_and_shows_plain() {
        let text = format!(
            "median {} % ({} of 9 at 90 %<!-- param --> or more)",
            cited(100, "a * 100"),
            cited(9, "count(b)")
        );
        let (found, problems) = citations(&text);
        let got: Vec<(&str, &str)> = found.iter().map(|c| (c.written.as_str(), c.expr.as_str())).collect();
        assert_eq!((got, problems), (vec![("100", "a * 100"), ("9", "count(b)")], Vec::new()));
        assert_eq!(plain(&text), "median 100 % (9 of 9 at 90 % or more)");
        assert_eq!(plain("open <!-- never closed"), "open ");
    }

    #[test]
    fn rounding_is_compared_at_the_written_precision() {
        assert!(rounds_to("0.734", 0.73362));
        assert!(!rounds_to("0.733", 0.73362));
        assert!(rounds_to("13423", 13423.0));
        assert!(!rounds_to("13424", 13423.0));
        assert!(rounds_to("+0.23", 0.2311));
        assert!(!rounds_to("+0.23", -0.2311));
        assert!(rounds_to("-12.4", -12.43));
        assert!(rounds_to("0.0", -0.01));
        assert!(rounds_to("7.35e-4", 0.000_734_9));
        assert!(!rounds_to("7.35e-4", 0.000_736_1));
        assert!(!rounds_to("7.35e-4", 0.007_35));
        assert!(rounds_to("2e6", 2.04e6));
        assert!(rounds_to("1.5e+3", 1500.0));
        assert!(!rounds_to("1.5e3", 1400.0));
    }
}
