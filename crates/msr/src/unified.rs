//! The unified scheme of Li, Maddah-Ali and Avestimehr (Zhang-Simeone ref. [5]): an outer MDS
//! code of rate q/K (eq. (7)) and an inner repetition code placing every coded row on
//! r = floor(mu q) servers (eq. (8)), and its closed-form load ([5, eq. (9)], as the issue
//! states it).

use super::design::{Phase, Scheme, SchemeDesign, supply};
use super::{MsrError, MsrSetting, Ratio};

/// The unified scheme's design and closed-form load for `setting`.
///
/// With r = floor(mu q), mubar = r / q and `B_j` as in [`supply`] (rate q/K):
/// if r <= 1 there is no multicast and L = 1 - mubar; otherwise s_q is the smallest s >= 2
/// with `sum_{j=s}^{r} B_j <= 1 - mubar` and
/// `L = sum_{j=s_q}^{r} B_j / j + min{1 - mubar - sum_{j=s_q}^{r} B_j, B_{s_q-1} / (s_q - 1)}`,
/// the second option only when s_q >= 3. The first option unicasts the rest; the second runs
/// the whole redundancy-(s_q - 1) phase (delivering more rows than needed).
pub fn unified_design(setting: &MsrSetting) -> Result<SchemeDesign, MsrError> {
    let (k, q) = (setting.servers(), setting.wait());
    let r = setting.storage().times(Ratio::integer(q as i128))?.floor() as usize;
    if r == 0 {
        return Err(MsrError::InvalidParameter(format!(
            "mu q < 1 leaves the unified scheme no rows (q = {q})"
        )));
    }
    let rate = Ratio::new(q as i128, k as i128)?;
    let mubar = Ratio::new(r as i128, q as i128)?;
    let need = Ratio::ONE.minus(mubar)?;
    let b: Vec<Ratio> = (0..=r).map(|j| supply(setting, r, rate, j)).collect::<Result<_, _>>()?;
    let design = |phases: Vec<Phase>, load: Ratio| SchemeDesign {
        scheme: Scheme::Unified,
        setting: *setting,
        repetition: r,
        mds_rate: rate,
        storage_used: mubar,
        phases,
        load,
    };
    if r <= 1 {
        let phases = if need > Ratio::ZERO {
            vec![Phase::Unicast { share: need, from_redundancy: 1 }]
        } else {
            vec![]
        };
        return Ok(design(phases, need));
    }
    let tail = |s: usize| -> Result<Ratio, MsrError> {
        b[s.min(r + 1)..].iter().try_fold(Ratio::ZERO, |a, x| a.plus(*x))
    };
    let mut s_q = r + 1;
    for s in 2..=r + 1 {
        if tail(s)? <= need {
            s_q = s;
            break;
        }
    }
    let mut phases = Vec::new();
    let mut load = Ratio::ZERO;
    for j in (s_q..=r).rev() {
        if b[j] != Ratio::ZERO {
            phases.push(Phase::Full { redundancy: j });
            load = load.plus(b[j].over(Ratio::integer(j as i128))?)?;
        }
    }
    let rest = need.minus(tail(s_q)?)?;
    if rest > Ratio::ZERO {
        let gain = Ratio::integer(s_q as i128 - 1);
        let whole_phase = b[s_q - 1].over(gain)?;
        if s_q >= 3 && whole_phase < rest {
            phases.push(Phase::Full { redundancy: s_q - 1 });
            load = load.plus(whole_phase)?;
        } else {
            phases.push(Phase::Unicast { share: rest, from_redundancy: s_q - 1 });
            load = load.plus(rest)?;
        }
    }
    Ok(design(phases, load))
}
