//! The main run's rows of `results/headline.csv` and README's headline table.

use std::path::Path;

use ubershuffle_bench::report::headline::HeadlineRecord;

use super::goals::{Goal, goal_value};
use super::section::num;

/// Replaces netns-train's rows of `results/headline.csv` and re-renders README's headline table
/// (the main run's goals only: training, 4 ranks, 100 Mbit/s).
pub fn publish_headlines(root: &Path, goals: &[Goal]) -> anyhow::Result<()> {
    let v = |key: &str, digits: usize| num(goal_value(goals, key), digits);
    let record = |what: String, ours: String, paper: &str, keys: &str| HeadlineRecord {
        experiment: "netns-train".into(),
        run: "full".into(),
        what,
        ours,
        paper: paper.into(),
        source: format!("results/netns-train-summary.csv: {keys}"),
        command: "cargo xtask netns-train --python PYTHON".into(),
        machine: true,
    };
    let mut fresh = Vec::new();
    if goals.iter().any(|g| g.key == "a_vs_d_epoch") {
        fresh.push(record(
            "PyTorch DDP on 4 ranks, 100 Mbit/s links: partial-local (Q = 0.3) vs reading each new batch from the store"
                .into(),
            format!(
                "exposed data time {}x shorter, epochs {}x shorter, accuracy {} points apart",
                v("a_vs_d_exposed", 0),
                v("a_vs_d_epoch", 2),
                v("a_vs_d_accuracy", 2)
            ),
            "about 5x faster training at the same accuracy (partial-local seed)",
            "key=a_vs_d_exposed, a_vs_d_epoch, a_vs_d_accuracy",
        ));
    }
    if goals.iter().any(|g| g.key == "b_vs_c_shuffle") {
        fresh.push(record(
            "PyTorch DDP on 4 ranks, 100 Mbit/s links: coded vs uncoded store delivery, alpha 0.5, each packet \
only to the ranks that decode it"
                .into(),
            format!(
                "store bytes {}x, shuffle time {}x, epoch time {}x; (c) at {}x its store's uplink bound, (b) at {}x \
its busiest port's",
                v("b_vs_c_bytes", 3),
                v("b_vs_c_shuffle", 2),
                v("b_vs_c_epoch", 2),
                v("c_vs_uplink", 2),
                v("b_vs_limit", 2)
            ),
            "shuffle time about 0.5x, training time about 0.7x (UberShuffle)",
            "key=b_vs_c_bytes, b_vs_c_shuffle, b_vs_c_epoch, c_vs_uplink, b_vs_limit",
        ));
    }
    crate::netns::publish::publish_headlines(root, "netns-train", fresh)
}
