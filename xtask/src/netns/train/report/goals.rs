//! The goals measured from the rows (medians over the epochs after the first, every
//! repeat), and the profile and CPU figures beside them. A goal whose text is empty or starts
//! with `(` is information, not a target.

use super::rows::Row;

pub use crate::netns::goal::{Goal, goal_value, median};

/// Median over the epochs after the first (every repeat) of `f` in arm `arm`.
pub fn med(rows: &[Row], arm: char, f: impl Fn(&Row) -> f64) -> f64 {
    median(rows.iter().filter(|r| r.arm == arm && r.epoch > 0).map(f).collect())
}

/// [`med`] of an optional figure (rows without it left out).
pub fn med_opt(rows: &[Row], arm: char, f: impl Fn(&Row) -> Option<f64>) -> f64 {
    med(rows, arm, |r| f(r).unwrap_or(f64::NAN))
}

/// The last epoch's held-out accuracy of arm `arm` (median over repeats).
pub fn last_accuracy(rows: &[Row], arm: char) -> f64 {
    let last = rows.iter().filter(|r| r.arm == arm).map(|r| r.epoch).max().unwrap_or(0);
    median(rows.iter().filter(|r| r.arm == arm && r.epoch == last).map(|r| r.held_out_accuracy).collect())
}

/// Whether arm `arm`'s rows carry the store delivery's profile (newer store-mode logs).
pub fn profiled(rows: &[Row], arm: char) -> bool {
    rows.iter().any(|r| r.arm == arm && (r.rank_scatter_s.is_some() || r.relay_s.is_some()))
}

/// The bound of b's shuffle time against c's at `ranks` training ranks: coding gains more the
/// more ranks share each packet.
fn b_vs_c_bound(ranks: usize) -> f64 {
    if ranks >= 8 { 0.4 } else { 0.6 }
}

/// The goals, from the rows of a run with `ranks` training ranks (those whose arms
/// ran).
pub fn goals(rows: &[Row], ranks: usize) -> Vec<Goal> {
    let has = |a: char| rows.iter().any(|r| r.arm == a);
    let has_figure = |a: char, f: fn(&Row) -> Option<f64>| rows.iter().any(|r| r.arm == a && f(r).is_some());
    let mut out = Vec::new();
    let mut goal = |key: &str, measure: &str, value: f64, text: &str, met: bool| {
        out.push(Goal { key: key.into(), measure: measure.into(), value, goal: text.into(), met });
    };
    if has('b') && has('c') {
        let bound = b_vs_c_bound(ranks);
        let v = med(rows, 'b', |r| r.shuffle_s) / med(rows, 'c', |r| r.shuffle_s);
        goal(
            "b_vs_c_shuffle",
            "shuffle time, coded (b) / uncoded (c)",
            v,
            &format!("<= {bound}"),
            v <= bound,
        );
        let v = med(rows, 'b', |r| r.epoch_s) / med(rows, 'c', |r| r.epoch_s);
        goal("b_vs_c_epoch", "epoch time, coded (b) / uncoded (c)", v, "<= 0.8", v <= 0.8);
        let v = med(rows, 'b', |r| r.plane_store_sent_bytes as f64)
            / med(rows, 'c', |r| r.plane_store_sent_bytes as f64);
        goal("b_vs_c_bytes", "store's bytes, coded (b) / uncoded (c)", v, "(the plan's ratio)", true);
    }
    for arm in ['a', 'b', 'c'].into_iter().filter(|&a| has_figure(a, |r| r.model_shuffle_s)) {
        let v = med_opt(rows, arm, |r| r.model_shuffle_s.map(|m| r.shuffle_s / m));
        goal(
            &format!("{arm}_measured_vs_model"),
            &format!("shuffle time of ({arm}), measured / emulator"),
            v,
            "0.85 to 1.15",
            (0.85..=1.15).contains(&v),
        );
    }
    let uplink = |arm: char| med_opt(rows, arm, |r| r.store_uplink_s.map(|u| r.shuffle_s / u));
    if has_figure('c', |r| r.store_uplink_s) {
        let v = uplink('c');
        goal("c_vs_uplink", "shuffle time of (c) / its store's uplink bound", v, "<= 1.15", v <= 1.15);
    }
    if has_figure('a', |r| r.store_uplink_s) {
        goal("a_vs_uplink", "shuffle time of (a) / its store's uplink bound", uplink('a'), "(info)", true);
    }
    if has_figure('b', |r| r.limit_s) {
        let v = med_opt(rows, 'b', |r| r.limit_s.map(|l| r.shuffle_s / l));
        goal("b_vs_limit", "shuffle time of (b) / its busiest port's bound", v, "<= 1.2", v <= 1.2);
    }
    for arm in ['a', 'b', 'c'].into_iter().filter(|&a| has_figure(a, |r| r.part_bytes.map(|p| p as f64))) {
        let v = med_opt(rows, arm, |r| {
            let packets = (r.unicast_bytes + r.multicast_bytes) as f64;
            r.part_bytes.filter(|_| packets > 0.0).map(|p| p as f64 / packets)
        });
        goal(
            &format!("{arm}_plan_share"),
            &format!("the plan's parts sent by ({arm})'s store / its packets' bytes (not in the limit)"),
            v,
            "",
            true,
        );
    }
    for arm in ['b', 'c'].into_iter().filter(|&a| profiled(rows, a)) {
        let m = |f: fn(&Row) -> Option<f64>| med_opt(rows, arm, f);
        let figures: [(&str, &str, f64); 6] = [
            (
                "plan_s",
                "the store's planner per epoch, s",
                m(|r| r.store_plan_ahead_s.filter(|v| *v > 0.0).or(r.store_plan_s)),
            ),
            ("plan_wait_s", "what the delivery waited for its plan, s", m(|r| r.store_plan_s)),
            ("scatter_s", "receiving from the store (ranks), s", m(|r| r.rank_scatter_s)),
            ("relay_s", "the relay among the ranks, s", m(|r| r.relay_s)),
            ("decode_s", "decoding at the ranks, s", m(|r| r.decode_s)),
            ("answer_wait_s", "from the request to the store's answer (ranks), s", m(|r| r.answer_wait_s)),
        ];
        for (key, what, v) in figures {
            goal(&format!("{arm}_{key}"), &format!("profile of ({arm}): {what}"), v, "", true);
        }
    }
    for arm in ['a', 'b', 'c', 'd'] {
        if has_figure(arm, |r| r.rank_cpu_s) {
            let v = med_opt(rows, arm, |r| r.rank_cpu_s);
            goal(
                &format!("{arm}_rank_cpu_s"),
                &format!("CPU of ({arm})'s busiest rank per epoch, s"),
                v,
                "",
                true,
            );
        }
        if has_figure(arm, |r| r.store_cpu_s) {
            let v = med_opt(rows, arm, |r| r.store_cpu_s);
            goal(
                &format!("{arm}_store_cpu_s"),
                &format!("CPU of ({arm})'s store per delivery, s"),
                v,
                "",
                true,
            );
        }
    }
    if has('a') && has('d') {
        let (a, d) = (med(rows, 'a', |r| r.exposed_s), med(rows, 'd', |r| r.exposed_s));
        goal("a_exposed", "exposed data time of (a), s", a, "", true);
        goal("d_exposed", "exposed data time of (d), s", d, "", true);
        let v = a / d.max(1e-3);
        goal("a_vs_d_exposed", "exposed data time, (a) / (d) (d's at least 1 ms)", v, ">= 5", v >= 5.0);
        let v = med(rows, 'a', |r| r.epoch_s) / med(rows, 'd', |r| r.epoch_s);
        goal("a_vs_d_epoch", "epoch time, (a) / (d)", v, ">= 2", v >= 2.0);
        let v = (last_accuracy(rows, 'a') - last_accuracy(rows, 'd')).abs() * 100.0;
        goal(
            "a_vs_d_accuracy",
            "accuracy gap between (a) and (d) after the last epoch, points",
            v,
            "<= 1",
            v <= 1.0,
        );
    }
    if has('a') {
        let v = med(rows, 'a', |r| r.shuffle_s / r.epoch_s);
        goal("a_data_share", "data time / epoch time of (a)", v, ">= 0.5", v >= 0.5);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_skip_non_finite_values() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, f64::NAN, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }

    #[test]
    fn coding_must_gain_more_with_more_ranks() {
        assert_eq!(
            (b_vs_c_bound(2), b_vs_c_bound(4), b_vs_c_bound(6), b_vs_c_bound(8)),
            (0.6, 0.6, 0.6, 0.4)
        );
    }
}
