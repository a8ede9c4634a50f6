//! Checking a committed [`CostModel`] against the code today: every price it holds beside the
//! same price measured again, as charged / measured, and whether that ratio stays within
//! [`BAND`]. A kernel or planner that became 2x slower or faster falls outside it.

use super::CostModel;

/// The accepted charged / measured band.
pub const BAND: (f64, f64) = (0.67, 1.5);

/// One price, committed and measured again.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceCheck {
    /// The price's name, e.g. `plan.ubershuffle at n = 20` or `xor_ns_per_byte`.
    pub name: String,
    /// What the committed model charges, in nanoseconds per unit.
    pub charged: f64,
    /// What it measures now (`None`: the price is not measured any more).
    pub measured: Option<f64>,
}

impl PriceCheck {
    /// charged / measured (NaN when not measured).
    pub fn ratio(&self) -> f64 {
        self.measured.map_or(f64::NAN, |m| self.charged / m)
    }

    /// Whether the ratio lies within [`BAND`].
    pub fn within_band(&self) -> bool {
        let r = self.ratio();
        r >= BAND.0 && r <= BAND.1
    }
}

/// Every price of a model by name, scaled ones at each size measured.
pub fn prices(model: &CostModel) -> Vec<(String, f64)> {
    let mut out = vec![
        ("xor_ns_per_byte".to_string(), model.xor_ns_per_byte),
        ("copy_ns_per_byte".to_string(), model.copy_ns_per_byte),
        ("checksum_ns_per_byte".to_string(), model.checksum_ns_per_byte),
        ("draw_ns_per_point".to_string(), model.draw_ns_per_point),
        ("keep_ns_per_point".to_string(), model.keep_ns_per_point),
    ];
    let scaled = [("verify".to_string(), &model.verify), ("peel".to_string(), &model.peel)]
        .into_iter()
        .chain(model.plan.iter().map(|(name, s)| (format!("plan.{name}"), s)));
    for (name, s) in scaled {
        out.extend(s.workers.iter().zip(&s.ns_per_unit).map(|(n, c)| (format!("{name} at n = {n}"), *c)));
    }
    for (table, map) in [("coordinate_ns", &model.coordinate_ns), ("loss_ns", &model.loss_ns)] {
        out.extend(map.iter().map(|(kind, c)| (format!("{table}.{kind}"), *c)));
    }
    out
}

/// Every price of `committed` beside the same price in `measured`; prices measured now but not
/// committed are reported too, with a charged price of what the model would charge there
/// ([`Scaling::at`](super::Scaling::at) for a size, 0 otherwise).
pub fn compare(committed: &CostModel, measured: &CostModel) -> Vec<PriceCheck> {
    let now = prices(measured);
    let mut checks: Vec<PriceCheck> = prices(committed)
        .into_iter()
        .map(|(name, charged)| {
            let measured = now.iter().find(|(n, _)| *n == name).map(|(_, m)| *m);
            PriceCheck { name, charged, measured }
        })
        .collect();
    let new: Vec<PriceCheck> = now
        .iter()
        .filter(|(n, _)| !checks.iter().any(|c| c.name == *n))
        .map(|(name, m)| PriceCheck {
            name: name.clone(),
            charged: charged_at(committed, name),
            measured: Some(*m),
        })
        .collect();
    checks.extend(new);
    checks
}

/// What `model` charges for a scaled price named `NAME at n = N` it was not calibrated at.
fn charged_at(model: &CostModel, name: &str) -> f64 {
    let Some((table, n)) = name.split_once(" at n = ") else { return 0.0 };
    let Ok(n) = n.parse::<usize>() else { return 0.0 };
    match table {
        "verify" => model.verify.at(n),
        "peel" => model.peel.at(n),
        _ => table.strip_prefix("plan.").and_then(|p| model.plan.get(p)).map_or(0.0, |s| s.at(n)),
    }
}

/// `model` with every price multiplied by `factor` where `name` names it (the whole name, or
/// its table: `plan.ubershuffle`, `xor_ns_per_byte`); `all` scales every price. For checking
/// that the check notices a kernel made slower or faster.
pub fn scaled(model: &CostModel, name: &str, factor: f64) -> CostModel {
    let hit = |price: &str| name == "all" || price == name;
    let mut m = model.clone();
    for (price, value) in [
        ("xor_ns_per_byte", &mut m.xor_ns_per_byte),
        ("copy_ns_per_byte", &mut m.copy_ns_per_byte),
        ("checksum_ns_per_byte", &mut m.checksum_ns_per_byte),
        ("draw_ns_per_point", &mut m.draw_ns_per_point),
        ("keep_ns_per_point", &mut m.keep_ns_per_point),
    ] {
        if hit(price) {
            *value *= factor;
        }
    }
    let tables = [("verify".to_string(), &mut m.verify), ("peel".to_string(), &mut m.peel)]
        .into_iter()
        .chain(m.plan.iter_mut().map(|(p, s)| (format!("plan.{p}"), s)));
    for (_, s) in tables.filter(|(t, _)| hit(t)) {
        s.ns_per_unit.iter_mut().for_each(|c| *c *= factor);
    }
    for (table, map) in [("coordinate_ns", &mut m.coordinate_ns), ("loss_ns", &mut m.loss_ns)] {
        for (_, c) in map.iter_mut().filter(|(k, _)| hit(table) || hit(&format!("{table}.{k}"))) {
            *c *= factor;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scaling;

    fn model() -> CostModel {
        CostModel {
            xor_ns_per_byte: 0.04,
            copy_ns_per_byte: 0.03,
            checksum_ns_per_byte: 0.09,
            verify: Scaling { workers: vec![20, 100], ns_per_unit: vec![3.6, 6.2] },
            peel: Scaling { workers: vec![20, 100], ns_per_unit: vec![28.0, 55.0] },
            plan: [("ubershuffle".to_string(), Scaling { workers: vec![20], ns_per_unit: vec![786.0] })]
                .into(),
            coordinate_ns: [("linear-regression".to_string(), 2.6)].into(),
            loss_ns: [("linear-regression".to_string(), 1.0)].into(),
            draw_ns_per_point: 11.6,
            keep_ns_per_point: 30.8,
        }
    }

    #[test]
    fn the_same_prices_pass_and_an_injected_factor_of_two_fails() {
        let committed = model();
        assert!(compare(&committed, &committed).iter().all(PriceCheck::within_band));
        for (price, factor) in [("xor_ns_per_byte", 2.0), ("plan.ubershuffle", 0.5), ("coordinate_ns", 2.0)] {
            let measured = scaled(&committed, price, factor);
            let outside: Vec<String> = compare(&committed, &measured)
                .into_iter()
                .filter(|c| !c.within_band())
                .map(|c| c.name)
                .collect();
            assert_eq!(outside.len(), 1, "{price} x{factor}: {outside:?}");
            assert!(outside[0].starts_with(price), "{outside:?}");
        }
        let all = compare(&committed, &scaled(&committed, "all", 2.0));
        assert!(all.iter().all(|c| !c.within_band() && (c.ratio() - 0.5).abs() < 1e-12));
    }

    #[test]
    fn a_size_measured_now_but_not_committed_is_compared_with_its_extrapolation() {
        let committed = model();
        let mut measured = committed.clone();
        measured
            .plan
            .insert("ubershuffle".into(), Scaling { workers: vec![10, 20], ns_per_unit: vec![160.0, 786.0] });
        let checks = compare(&committed, &measured);
        let at10 = checks.iter().find(|c| c.name == "plan.ubershuffle at n = 10").map(PriceCheck::ratio);
        assert_eq!(at10, Some(786.0 / 160.0));
        assert!(checks.iter().any(|c| c.name == "plan.ubershuffle at n = 10" && !c.within_band()));
    }
}
