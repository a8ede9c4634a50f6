//! Which worker needs which transmission of a plan, and how each one travels: point to point
//! when one worker needs it, in a broadcast when several do.

use ubershuffle_core::{Plan, ShuffleInstance, VerifyError, peel, verify};

/// The route of every transmission of a plan and every worker's decoding schedule.
#[derive(Clone, Debug)]
pub struct Routes {
    /// For each worker of the instance, the transmissions it needs (plan indices, increasing).
    pub needs: Vec<Vec<u32>>,
    /// Transmissions sent in broadcasts (needed by several workers), increasing.
    pub broadcast: Vec<u32>,
    /// For each worker, the transmissions sent to it alone, increasing.
    pub unicast: Vec<Vec<u32>>,
}

impl Routes {
    /// Point-to-point copies of packets, over every worker.
    pub fn unicast_packets(&self) -> usize {
        self.unicast.iter().map(Vec::len).sum()
    }
}

/// Routes `plan` for `inst`: peels at every worker (the same schedule its decoder will follow)
/// and sends a transmission to its only user point to point, or by broadcast when several
/// workers use it (or none: the plan sends it, so it is sent and counted, to everyone). The
/// instance's workers are the live ones: after a loss, broadcasts go to the survivors' group.
pub fn route(inst: &ShuffleInstance, plan: &Plan) -> Result<Routes, VerifyError> {
    let mut needs = Vec::with_capacity(inst.workers());
    let mut users = vec![0u32; plan.len()];
    for w in 0..inst.workers() {
        let schedule = match peel(inst.points(), plan, inst.cache(w))?.schedule(plan, &inst.needs(w).to_vec())
        {
            Ok(schedule) => schedule,
            Err(missing) => {
                // The plan does not deliver: verify says which point, and why (it peels the
                // same way, so it finds this shortfall).
                verify(inst, plan)?.ensure_valid()?;
                return Err(VerifyError::NeverSent { worker: w, point: missing[0], missing: missing.len() });
            }
        };
        let seqs: Vec<u32> = schedule.into_iter().map(|(t, _)| t as u32).collect();
        for &t in &seqs {
            users[t as usize] += 1;
        }
        needs.push(seqs);
    }
    let shared = |t: u32| users[t as usize] != 1;
    let broadcast: Vec<u32> = (0..plan.len() as u32).filter(|&t| shared(t)).collect();
    let unicast = needs.iter().map(|seqs| seqs.iter().copied().filter(|&t| !shared(t)).collect()).collect();
    Ok(Routes { needs, broadcast, unicast })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ubershuffle_core::{PlannerOptions, seeded};
    use ubershuffle_planners::planner_by_name;

    #[test]
    fn coded_packets_are_broadcast_and_unicasts_go_point_to_point() {
        let inst = ShuffleInstance::paper_example();
        let plan_with = |name: &str| {
            planner_by_name(name, &PlannerOptions::default()).unwrap().plan(&inst, &mut seeded(0)).unwrap()
        };
        let uncoded = route(&inst, &plan_with("uncoded")).unwrap();
        assert!(uncoded.broadcast.is_empty());
        assert_eq!(uncoded.unicast.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 2, 3]);
        let coded = route(&inst, &plan_with("coded")).unwrap();
        // Table {0,2} row and table {1,2} row 0 serve two workers; the rest serve one.
        assert_eq!(coded.broadcast.len(), 2);
        let total: usize = coded.unicast.iter().map(Vec::len).sum();
        assert_eq!(total + coded.broadcast.len(), 4);
    }
}
