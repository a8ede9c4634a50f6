//! The improved scheme of Zhang and Simeone, as reconstructed here (see the module docs of
//! [`super`] for the derivation): any rate pair (rho, r) satisfying the reconstructed
//! Proposition 1, with the greedy shuffle of Section III-C, minimised over the pairs.

use super::combinatorics::binomial;
use super::design::{Scheme, SchemeDesign, greedy_phases};
use super::{MsrError, MsrSetting, Ratio};

/// The reconstructed feasibility conditions (10a)-(10c) of Proposition 1 for a rate pair:
/// (10a) `0 < rho <= 1` and `1 <= r <= K`; (10b) storage `r / (K rho) <= mu`;
/// (10c) reconstruction `rho <= 1 - C(K-q, r) / C(K, r)` (the rows not stored only at
/// stragglers must number at least M).
pub fn is_feasible(setting: &MsrSetting, repetition: usize, rate: Ratio) -> Result<bool, MsrError> {
    let (k, q) = (setting.servers(), setting.wait());
    if repetition == 0 || repetition > k || rate <= Ratio::ZERO || rate > Ratio::ONE {
        return Ok(false);
    }
    let stored = Ratio::integer(repetition as i128).over(Ratio::integer(k as i128).times(rate)?)?;
    let lost = Ratio::new(binomial(k - q, repetition) as i128, binomial(k, repetition) as i128)?;
    Ok(stored <= setting.storage() && rate <= Ratio::ONE.minus(lost)?)
}

/// The design for one rate pair, or `None` if the pair is infeasible. Proposition 2: the load
/// is that of the greedy phases (eq. (13), plus eq. (15)'s partial last phase).
pub fn improved_design_at(
    setting: &MsrSetting,
    repetition: usize,
    rate: Ratio,
) -> Result<Option<SchemeDesign>, MsrError> {
    if !is_feasible(setting, repetition, rate)? {
        return Ok(None);
    }
    let k = setting.servers();
    let storage_used = Ratio::integer(repetition as i128).over(Ratio::integer(k as i128).times(rate)?)?;
    let demand = Ratio::ONE.minus(storage_used)?;
    let Some((phases, load)) = greedy_phases(setting, repetition, rate, demand)? else {
        return Err(MsrError::Internal(format!(
            "rate {rate}, repetition {repetition} passed (10c) but the non-stragglers lack rows"
        )));
    };
    Ok(Some(SchemeDesign {
        scheme: Scheme::Improved,
        setting: *setting,
        repetition,
        mds_rate: rate,
        storage_used,
        phases,
        load,
    }))
}

/// For each repetition r = 1..=floor(mu K) the best rate, rho = r / (mu K) (the lowest rate
/// storage allows: lowering rho only lowers the demand and raises every `B_j`), when feasible.
pub fn improved_candidates(setting: &MsrSetting) -> Result<Vec<SchemeDesign>, MsrError> {
    let mu_k = setting.storage().times(Ratio::integer(setting.servers() as i128))?;
    let mut out = Vec::new();
    for r in 1..=mu_k.floor().max(0) as usize {
        let rate = Ratio::integer(r as i128).over(mu_k)?;
        if let Some(d) = improved_design_at(setting, r, rate)? {
            out.push(d);
        }
    }
    Ok(out)
}

/// The improved scheme: the candidate of least load (ties go to the larger repetition).
/// Never worse than [`super::unified_design`]: r = floor(mu q) with rho = r/(mu K) <= q/K is
/// always a candidate, and at any fixed pair the greedy phases cost no more than the unified
/// formula (its partial last phase replaces the unified scheme's min of unicast or a whole phase).
pub fn improved_design(setting: &MsrSetting) -> Result<SchemeDesign, MsrError> {
    improved_candidates(setting)?
        .into_iter()
        .min_by(|a, b| a.load.cmp(&b.load).then(b.repetition.cmp(&a.repetition)))
        .ok_or_else(|| MsrError::Internal("no feasible rate pair for the improved scheme".into()))
}
