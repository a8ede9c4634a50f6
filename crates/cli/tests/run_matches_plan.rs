//! One source of epoch assignments: for the same flags and seed, `ubershuffle run` sends exactly
//! the per-epoch transmissions that `ubershuffle plan --policy ... --epochs` predicts (both step
//! the core's `EpochChain`), over policies, schemes and seeds.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

mod common;

use common::json;
use serde_json::Value;

/// The per-epoch transmissions `plan` predicts and `run` sends for the same settings.
fn predicted_and_sent(settings: &[&str]) -> (Vec<u64>, Vec<u64>) {
    let mut plan = vec!["plan"];
    plan.extend_from_slice(settings);
    let mut run = vec!["run", "--learner", "linreg"];
    run.extend_from_slice(settings);
    let column = |v: &Value, key: &str| -> Vec<u64> {
        v[key].as_array().unwrap().iter().map(|e| e["transmissions"].as_u64().unwrap()).collect()
    };
    (column(&json(&plan), "per_epoch"), column(&json(&run), "epochs"))
}

#[test]
fn run_sends_what_plan_predicts_over_policies_schemes_and_seeds() {
    let cases: [(&[&str], &str); 5] = [
        (&["--policy", "partial-local", "--fraction", "0.3"], "coded"),
        (&["--policy", "global"], "ubershuffle"),
        (&["--policy", "global"], "uncoded"),
        (&["--policy", "local"], "coded"),
        (&["--policy", "partial-local", "--fraction", "0.6"], "clique-cover"),
    ];
    for (policy, scheme) in cases {
        for (seed, alpha) in [("1", "0.25"), ("7", "0.5")] {
            let mut settings = policy.to_vec();
            let common =
                ["--scheme", scheme, "-n", "4", "-q", "400", "-a", alpha, "--epochs", "3", "--seed", seed];
            settings.extend_from_slice(&common);
            let (predicted, sent) = predicted_and_sent(&settings);
            assert_eq!(predicted.len(), 3, "{settings:?}");
            assert_eq!(predicted, sent, "{settings:?}");
        }
    }
}

#[test]
fn the_issue_example_agrees() {
    let settings = [
        "--policy",
        "partial-local",
        "--fraction",
        "0.3",
        "--scheme",
        "coded",
        "-n",
        "4",
        "-q",
        "400",
        "-a",
        "0.25",
        "--epochs",
        "2",
    ];
    let (predicted, sent) = predicted_and_sent(&settings);
    assert_eq!(predicted, sent);
}
