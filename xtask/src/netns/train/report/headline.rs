//! The main run's rows of `results/headline.csv` and README's headline table.

use std::path::Path;

use ubershuffle_bench::report::headline::HeadlineRecord;

use super::goals::Goal;
use crate::netns::goal::cited;

/// The experiment's name in `results/headline.csv`, and its summary's base name.
pub const NAME: &str = "netns-train";

/// netns-train's rows of `results/headline.csv` from the main run's goals (training, 4 ranks,
/// 100 Mbit/s), each figure cited from `results/netns-train-summary.csv`.
pub fn headline_records(goals: &[Goal]) -> Vec<HeadlineRecord> {
    let v = |key: &str, digits: usize| cited(NAME, goals, key, digits);
    let record = |what: &str, ours: String, paper: &str, keys: &str| HeadlineRecord {
        experiment: NAME.into(),
        run: "full".into(),
        what: what.into(),
        ours,
        paper: paper.into(),
        source: format!("results/{NAME}-summary.csv: {keys}"),
        command: format!("cargo xtask {NAME} --python PYTHON"),
        machine: true,
    };
    let mut fresh = Vec::new();
    if goals.iter().any(|g| g.key == "a_vs_d_epoch") {
        fresh.push(record(
            "PyTorch DDP on 4 ranks, 100 Mbit/s links<!-- param -->: partial-local (Q = 0.3) vs reading each new \
batch from the store",
            format!(
                "exposed data time {}x shorter, epochs {}x shorter, accuracy {} points apart",
                v("a_vs_d_exposed", 0),
                v("a_vs_d_epoch", 2),
                v("a_vs_d_accuracy", 2)
            ),
            "about 5x<!-- paper --> faster training at the same accuracy (partial-local seed)",
            "key=a_vs_d_exposed, a_vs_d_epoch, a_vs_d_accuracy",
        ));
    }
    if goals.iter().any(|g| g.key == "b_vs_c_shuffle") {
        fresh.push(record(
            "PyTorch DDP on 4 ranks, 100 Mbit/s links<!-- param -->: coded vs uncoded store delivery, alpha 0.5, \
each packet only to the ranks that decode it",
            format!(
                "store bytes {}x, shuffle time {}x, epoch time {}x; (c) at {}x its store's uplink bound, (b) at {}x \
its busiest port's",
                v("b_vs_c_bytes", 3),
                v("b_vs_c_shuffle", 2),
                v("b_vs_c_epoch", 2),
                v("c_vs_uplink", 2),
                v("b_vs_limit", 2)
            ),
            "shuffle time about 0.5x, training time about 0.7x<!-- paper --> (UberShuffle)",
            "key=b_vs_c_bytes, b_vs_c_shuffle, b_vs_c_epoch, c_vs_uplink, b_vs_limit",
        ));
    }
    fresh
}

/// Replaces netns-train's rows of `results/headline.csv` and re-renders README's headline table
/// (the main run's goals only).
pub fn publish_headlines(root: &Path, goals: &[Goal]) -> anyhow::Result<()> {
    crate::netns::publish::publish_headlines(root, NAME, headline_records(goals))
}
