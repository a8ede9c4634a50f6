//! results/README.md's section of a run, named as its files are ([`Setting::name`]): the
//! training template, or the idle one for a run whose ranks slept instead of training.

use std::fmt::Write as _;
use std::path::Path;

use super::goals::{Goal, last_accuracy, med, med_opt, median};
use super::profile::{cpu_table, profile_table, profile_words};
use super::rows::Row;
use crate::netns::train::types::{Arm, MAIN_MBIT, MAIN_RANKS, Setting};

pub use crate::netns::goal::num;

/// The arms that ran, in order.
pub fn arms_run(rows: &[Row]) -> Vec<Arm> {
    Arm::ALL.into_iter().filter(|a| rows.iter().any(|r| r.arm == a.letter())).collect()
}

/// Interleaved runs of the arms.
fn runs(rows: &[Row]) -> usize {
    rows.iter().map(|r| r.repeat + 1).max().unwrap_or(1)
}

/// Replaces results/README.md's section of this run (the others stay as they are).
pub fn write_section(root: &Path, setting: &Setting, rows: &[Row], goals: &[Goal]) -> anyhow::Result<()> {
    let name = setting.name();
    let body = if setting.idle() {
        idle_section(&name, setting, rows, goals)
    } else {
        section(&name, setting, rows, goals)
    };
    crate::netns::publish::write_section(root, &name, &body)
}

/// One sentence per arm that ran: how its bytes travel.
fn travel_list(s: &mut String, setting: &Setting, rows: &[Row]) {
    s.push_str("How each arm's bytes travel on the plane:\n\n");
    for arm in arms_run(rows) {
        let _ = writeln!(s, "- ({}) {}: {}.", arm.letter(), arm.describe(setting.fraction), arm.travel());
    }
    s.push('\n');
}

/// What the columns shared by both templates mean.
const COLUMNS: &str = "shuffle: the delivery of an epoch's records, in the background of the epoch \
before; exposed: what training waited for it; emulator: the plane's own rounds of the delivery (what the \
store sent each rank, what the ranks relayed to each other) replayed on the emulator's single-ported links \
at the same rate; store uplink: the store's plane bytes of the delivery over the rate, which no delivery \
of them beats; limit: the most plane bytes one node sends or receives in the delivery (the store, or a \
rank) over the rate, the delivery's own lower bound";

/// An arm's first cells of both templates' tables: the arm, its times (exposed, epoch,
/// shuffle, the emulator's, the store uplink's and the delivery's bounds), the store's link
/// and the plane's bytes, medians over the epochs after the first.
fn timing_cells(rows: &[Row], arm: Arm, setting: &Setting) -> String {
    let a = arm.letter();
    let [exposed, epoch, shuffle, model, uplink, limit] = timings(rows, a);
    format!(
        "| ({a}) {} | {exposed} | {epoch} | {shuffle} | {model} | {uplink} | {limit} | {} | {} |",
        arm.describe(setting.fraction),
        num(med(rows, a, |r| r.store_tx_bytes as f64 / 1e6), 2),
        num(med(rows, a, |r| r.plane_received_bytes as f64 / 1e6), 2),
    )
}

/// Arm `a`'s times, medians over the epochs after the first, as text: exposed, epoch,
/// shuffle, the emulator's, the store's uplink bound and the delivery's limit.
pub fn timings(rows: &[Row], a: char) -> [String; 6] {
    [
        num(med(rows, a, |r| r.exposed_s), 3),
        num(med(rows, a, |r| r.epoch_s), 3),
        num(med(rows, a, |r| r.shuffle_s), 3),
        num(med_opt(rows, a, |r| r.model_shuffle_s), 3),
        num(med_opt(rows, a, |r| r.store_uplink_s), 3),
        num(med_opt(rows, a, |r| r.limit_s), 3),
    ]
}

/// The header of [`timing_cells`]' columns, then `more`.
fn timing_header(s: &mut String, more: &[&str]) {
    let mut columns = vec![
        "arm",
        "exposed s",
        "epoch s",
        "shuffle s",
        "emulator s",
        "store uplink s",
        "limit s",
        "store link MB/epoch",
        "plane MB/epoch",
    ];
    columns.extend_from_slice(more);
    let _ = writeln!(s, "| {} |", columns.join(" | "));
    let _ = writeln!(s, "|{}", " --- |".repeat(columns.len()));
}

/// The training template.
fn section(name: &str, setting: &Setting, rows: &[Row], goals: &[Goal]) -> String {
    let mut s = format!("## {name}\n\n");
    let _ = writeln!(
        s,
        "Real PyTorch DDP jobs (gloo, CPU) between network namespaces: a store node and {} training ranks, \
each in a namespace of its own, every port shaped by {} at {} Mbit/s (MTU {}). The records are \
scikit-learn's digits upscaled to {} px with grain {} and JPEG-encoded at varying quality ({} training \
records, {:.1} MB, {:.1} KB on average), decoded to 32x32 in the Dataset; a small CNN, {} epochs, the \
same seed in every arm of a run (run r adds r to the seed, for the chain and the model). Times are this \
machine's wall seconds (2 cores shared by every rank, so training is CPU-bound and noisy); bytes are the \
kernel's interface counters and the plane's own.\n",
        setting.ranks,
        setting.qdisc,
        setting.mbit,
        setting.mtu,
        setting.side,
        setting.grain,
        setting.records,
        setting.bytes as f64 / 1e6,
        setting.bytes as f64 / setting.records.max(1) as f64 / 1e3,
        setting.epochs
    );
    travel_list(&mut s, setting, rows);
    let _ = writeln!(s, "![Held-out accuracy against wall time]({name}.svg)\n");
    let runs = runs(rows);
    let _ = writeln!(
        s,
        "Medians over the epochs after the first, {runs} interleaved run{} of the arms ({COLUMNS}; accuracy \
and wall time: the last epoch's, median over the runs; the chart: the first run):\n",
        if runs == 1 { "" } else { "s" }
    );
    timing_header(&mut s, &["storage MB/rank", "accuracy (last)", "wall s (last)"]);
    for arm in arms_run(rows) {
        let a = arm.letter();
        let last_epoch = rows.iter().filter(|r| r.arm == a).map(|r| r.epoch).max().unwrap_or(0);
        let last_wall =
            median(rows.iter().filter(|r| r.arm == a && r.epoch == last_epoch).map(|r| r.wall_s).collect());
        let _ = writeln!(
            s,
            "{} {} | {} | {} |",
            timing_cells(rows, arm, setting),
            num(med(rows, a, |r| r.storage_bytes_per_rank as f64 / 1e6), 2),
            num(last_accuracy(rows, a), 4),
            num(last_wall, 1),
        );
    }
    goal_table(&mut s, goals);
    profile_table(&mut s, setting, rows);
    cpu_table(&mut s, setting, rows);
    profile_words(&mut s, rows, goals);
    data_and_command(&mut s, name, setting, rows, "(per arm and epoch)");
    s
}

/// The idle template (`--sleep-train`): the same arms with the CPU idle.
fn idle_section(name: &str, setting: &Setting, rows: &[Row], goals: &[Goal]) -> String {
    let mut s = format!("## {name}\n\n");
    let runs = runs(rows);
    let _ = writeln!(
        s,
        "The control of netns-train's profile: the same kind of namespaces, links ({} ranks, {} at {} Mbit/s, \
MTU {}), records ({} JPEGs, {:.1} MB) and plane, but no rank trains: each reads every record of its epoch \
and sleeps {} s per epoch (the CPU idle, as while a GPU computes), so the links and not this machine's \
cores are the bottleneck. {} epochs per arm, {} interleaved run{} of the arms; medians over the epochs \
after the first ({COLUMNS}).\n",
        setting.ranks,
        setting.qdisc,
        setting.mbit,
        setting.mtu,
        setting.records,
        setting.bytes as f64 / 1e6,
        setting.sleep_train,
        setting.epochs,
        runs,
        if runs == 1 { "" } else { "s" }
    );
    travel_list(&mut s, setting, rows);
    timing_header(&mut s, &[]);
    for arm in arms_run(rows) {
        let _ = writeln!(s, "{}", timing_cells(rows, arm, setting));
    }
    // Without training there is no accuracy, and the exposed time of (a) against (d) is the
    // training run's question.
    let shuffle: Vec<Goal> = goals
        .iter()
        .filter(|g| {
            g.key.starts_with("b_vs_c_")
                || ["_vs_model", "_vs_uplink", "_vs_limit"].iter().any(|t| g.key.ends_with(t))
        })
        .cloned()
        .collect();
    goal_table(&mut s, &shuffle);
    profile_table(&mut s, setting, rows);
    cpu_table(&mut s, setting, rows);
    profile_words(&mut s, rows, goals);
    data_and_command(&mut s, name, setting, rows, "");
    s
}

/// The goals (targets only) as a Markdown table.
fn goal_table(s: &mut String, goals: &[Goal]) {
    s.push_str("\nThe issue's goals:\n\n| goal | measured | wanted | met |\n| --- | --- | --- | --- |\n");
    for g in goals.iter().filter(|g| g.is_target()) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            g.measure,
            num(g.value, 3),
            g.goal,
            if g.met { "yes" } else { "no" }
        );
    }
}

/// The command that makes this run again: the flags that differ from the defaults.
fn command(setting: &Setting, rows: &[Row]) -> String {
    let mut c = String::from("cargo xtask netns-train --python PYTHON");
    if setting.idle() {
        let _ = write!(c, " --sleep-train {}", setting.sleep_train);
    }
    if setting.ranks != MAIN_RANKS {
        let _ = write!(c, " --ranks {}", setting.ranks);
    }
    if setting.mbit != MAIN_MBIT {
        let _ = write!(c, " --mbit {}", setting.mbit);
    }
    let arms = arms_run(rows);
    if arms.len() < Arm::ALL.len() {
        let letters: Vec<String> = arms.iter().map(|a| a.letter().to_string()).collect();
        let _ = write!(c, " --arm {}", letters.join(","));
    }
    let runs = runs(rows);
    if runs > 1 {
        let _ = write!(c, " --repeats {runs}");
    }
    c
}

/// The section's data files and the command that regenerates them.
fn data_and_command(s: &mut String, name: &str, setting: &Setting, rows: &[Row], per_row: &str) {
    let per_row = if per_row.is_empty() { String::new() } else { format!(" {per_row}") };
    let _ = writeln!(
        s,
        "\nData: [`{name}.csv`]({name}.csv){per_row}, [`{name}-links.csv`]({name}-links.csv) (per node's link), \
[`{name}-summary.csv`]({name}-summary.csv) (the goals). Regenerate (Linux, root; a Python with torch, Pillow, \
scikit-learn and the package): `{}`.",
        command(setting, rows)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_with_their_digits_or_a_dash() {
        assert_eq!((num(1.23456, 3), num(f64::NAN, 2)), ("1.235".to_string(), "-".to_string()));
    }
}
