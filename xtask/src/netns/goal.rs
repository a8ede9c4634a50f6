//! The issues' goals as the netns experiments measure them (the type and its tables are
//! `ubershuffle_bench::report::goals`'s), and the median they are measured with.

pub use ubershuffle_bench::report::goals::Goal;
use ubershuffle_bench::report::goals::{Rows, table};

/// The goal `key`'s value (NaN when it was not measured).
pub fn goal_value(goals: &[Goal], key: &str) -> f64 {
    goals.iter().find(|g| g.key == key).map_or(f64::NAN, |g| g.value)
}

/// The median of `values` (NaN when empty).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

/// Goal `key`'s value with `digits` decimals, cited from `results/{name}-summary.csv` as
/// docs_numbers wants it (`-`, uncited, when it was not measured).
pub fn cited(name: &str, goals: &[Goal], key: &str, digits: usize) -> String {
    let v = goal_value(goals, key);
    if v.is_finite() {
        format!("{v:.digits$}<!-- = results/{name}-summary.csv[key={key}].value -->")
    } else {
        "-".into()
    }
}

/// A number with `digits` decimals, or `-`.
pub fn num(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{v:.digits$}") } else { "-".into() }
}

/// Prints one line per goal: `met`, `MISS`, or nothing for information, the value, the goal and
/// what is measured.
pub fn print_goals(goals: &[Goal]) {
    for g in goals {
        let verdict = if !g.is_target() {
            "    "
        } else if g.met {
            "met "
        } else {
            "MISS"
        };
        eprintln!("  {verdict} {:>9} {:>14}  {}", num(g.value, 4), g.goal, g.measure);
    }
}

/// The goals as results/README.md's table (measure, value, goal, met; every row), each value
/// cited from `results/{name}-summary.csv` as docs_numbers wants it.
pub fn goals_table(name: &str, goals: &[Goal]) -> String {
    table(&format!("results/{name}-summary.csv"), goals, Rows::All)
}

/// The name of a run's files and results/README.md section: `base`, then `-{ranks}ranks` and
/// `-{mbit}mbit` when they differ from the main run's.
pub fn run_name(base: &str, ranks: usize, mbit: f64) -> String {
    let mut name = String::from(base);
    if ranks != crate::netns::topology::MAIN_RANKS {
        name.push_str(&format!("-{ranks}ranks"));
    }
    if mbit != crate::netns::topology::MAIN_MBIT {
        // f64's Display prints 1000.0 as `1000`.
        name.push_str(&format!("-{mbit}mbit"));
    }
    name
}
