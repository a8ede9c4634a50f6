//! Where the store arms' delivery time and the ranks' CPU go, as Markdown tables and words,
//! every figure taken from the run's rows and goals.

use std::fmt::Write as _;

use super::goals::{Goal, goal_value, med, med_opt, profiled};
use super::rows::Row;
use super::section::num;
use crate::netns::train::types::{Arm, Setting};

/// The store arms' profile (medians over the epochs after the first) as a Markdown table.
pub fn profile_table(s: &mut String, setting: &Setting, rows: &[Row]) {
    let arms: Vec<Arm> =
        [Arm::A, Arm::B, Arm::C].into_iter().filter(|a| profiled(rows, a.letter())).collect();
    if arms.is_empty() {
        return;
    }
    s.push_str(
        "\nWhere the store arms' delivery time goes (medians over the epochs after the first, seconds; \
the ranks' figures are the longest over the ranks; the waits include the other ranks' and the store's \
lateness, so the columns overlap and do not add up):\n\n",
    );
    s.push_str("| arm | shuffle | emulator | limit | store: request wait | plan (ahead) | plan wait | encode | send | ranks: answer wait | from the store | relay | decode | gloo waits |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for arm in arms {
        let a = arm.letter();
        let m = |f: fn(&Row) -> Option<f64>| num(med_opt(rows, a, f), 3);
        let _ = writeln!(
            s,
            "| ({a}) {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            arm.describe(setting.fraction),
            num(med(rows, a, |r| r.shuffle_s), 3),
            m(|r| r.model_shuffle_s),
            m(|r| r.limit_s),
            m(|r| r.store_request_wait_s),
            m(|r| r.store_plan_ahead_s),
            m(|r| r.store_plan_s),
            m(|r| r.store_encode_s),
            m(|r| r.store_scatter_s),
            m(|r| r.answer_wait_s),
            m(|r| r.rank_scatter_s),
            m(|r| r.relay_s),
            m(|r| r.decode_s),
            m(|r| r.rank_gloo_wait_s),
        );
    }
}

/// The ranks' and the store's CPU seconds (medians over the epochs after the first), for the
/// store arms and (d), as a Markdown table.
pub fn cpu_table(s: &mut String, setting: &Setting, rows: &[Row]) {
    let arms: Vec<Arm> = [Arm::A, Arm::B, Arm::C, Arm::D]
        .into_iter()
        .filter(|a| {
            rows.iter().any(|r| r.arm == a.letter() && (r.rank_cpu_s.is_some() || r.store_cpu_s.is_some()))
        })
        .collect();
    if arms.is_empty() {
        return;
    }
    let whose = if setting.idle() {
        "the ranks slept instead of training, so a rank's CPU is the plane's alone (with the reading of its records)"
    } else {
        "the ranks trained, so a rank's CPU includes its training (a run with --sleep-train has the plane's alone)"
    };
    let _ = writeln!(
        s,
        "\nCPU seconds (medians over the epochs after the first; a rank's over its epoch, the busiest rank's; \
the store's over its delivery): {whose}.\n"
    );
    s.push_str("| arm | busiest rank's CPU s per epoch | store's CPU s per delivery | epoch s |\n");
    s.push_str("| --- | --- | --- | --- |\n");
    for arm in arms {
        let a = arm.letter();
        let _ = writeln!(
            s,
            "| ({a}) {} | {} | {} | {} |",
            arm.describe(setting.fraction),
            num(med_opt(rows, a, |r| r.rank_cpu_s), 3),
            num(med_opt(rows, a, |r| r.store_cpu_s), 3),
            num(med(rows, a, |r| r.epoch_s), 3),
        );
    }
}

/// What the profile says of coded (b) against uncoded (c) delivery, in words.
pub fn profile_words(s: &mut String, rows: &[Row], goals: &[Goal]) {
    if !(profiled(rows, 'b') && profiled(rows, 'c')) {
        return;
    }
    let v = |key: &str| goal_value(goals, key);
    let relayed = |a: char| med_opt(rows, a, |r| r.relay_bytes.map(|b| b as f64 / 1e6));
    // Waiting less than a tenth of the planner's own time: the plan was off the delivery's path.
    let planning = if v("b_plan_wait_s") < 0.1 * v("b_plan_s").max(0.01) {
        "(b) also plans, which (c) does not, but beside the delivery of the step before"
    } else {
        "(b) also pays for planning, which (c) does not"
    };
    let _ = writeln!(
        s,
        "\nWhere coded delivery (b) gains against its bytes: the store sends {bytes}x the bytes of uncoded \
delivery (c), and the delivery takes {ratio}x as long. Each packet goes only to the ranks that decode it: \
(c) took {c_uplink}x the time its store's uplink needs for its bytes, (b) {b_limit}x the time its busiest port \
needs for its own. The ranks relayed {relay_b} MB to each other per delivery in (b) and {relay_c} MB in (c); at \
the slowest rank, receiving from the store took {scatter_b} s in (b) and {scatter_c} s in (c), the relay \
{relay_s_b} s and {relay_s_c} s. {planning}: the `auto` planner (its search bounded by ShuffleGroup's \
`time_budget`) took {plan} s per step on the store, and the delivery waited {wait} s for its plan; decoding \
took {decode} s.",
        bytes = num(v("b_vs_c_bytes"), 3),
        ratio = num(v("b_vs_c_shuffle"), 3),
        c_uplink = num(v("c_vs_uplink"), 3),
        b_limit = num(v("b_vs_limit"), 3),
        relay_b = num(relayed('b'), 2),
        relay_c = num(relayed('c'), 2),
        scatter_b = num(v("b_scatter_s"), 3),
        scatter_c = num(v("c_scatter_s"), 3),
        relay_s_b = num(v("b_relay_s"), 3),
        relay_s_c = num(v("c_relay_s"), 3),
        plan = num(v("b_plan_s"), 3),
        wait = num(v("b_plan_wait_s"), 3),
        decode = num(v("b_decode_s"), 3),
    );
}
