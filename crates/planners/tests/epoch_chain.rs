//! The epoch chain (`ubershuffle_core::epoch_chain`) stepped with the real planners: caches
//! carry over, a lost worker's batch is dealt to the others, a saved state resumes the chain,
//! pliable schemes choose within their candidates.

#![allow(clippy::unwrap_used)]

use ubershuffle_core::PlannerOptions;
use ubershuffle_core::epoch_chain::{
    ChainError, ChainParams, ChainStart, EpochChain, PlannedEpoch, contiguous_blocks, next_cache,
};
use ubershuffle_core::exchange_policy::ExchangePolicy;
use ubershuffle_core::pliable::Randomness;
use ubershuffle_planners::planner_by_name;

fn chain(policy: ExchangePolicy, capacity: Option<usize>) -> EpochChain {
    let params = ChainParams::new(5, 500, policy, 3);
    let params = match capacity {
        Some(c) => params.with_cache_capacity(c),
        None => params,
    };
    EpochChain::new(params).unwrap()
}

fn step(chain: &mut EpochChain, scheme: &str) -> PlannedEpoch {
    let planner = planner_by_name(scheme, &PlannerOptions::default()).unwrap();
    let planned = chain.draw(&chain.all_workers(), 0).unwrap().plan(planner.as_ref(), None).unwrap();
    planned.verify().unwrap();
    chain.commit(&planned);
    planned
}

#[test]
fn local_moves_nothing_and_global_moves_about_one_minus_one_over_n() {
    let mut local = chain(ExchangePolicy::Local, None);
    let e = step(&mut local, "uncoded");
    assert_eq!((e.points_exchanged, e.points_moved, e.instance.uncoded_transmissions()), (0, 0, 0));
    let mut global = chain(ExchangePolicy::Global, None);
    let moved: usize = (0..20).map(|_| step(&mut global, "uncoded").points_moved).sum();
    let mean = moved as f64 / 20.0;
    assert!((mean - 400.0).abs() < 20.0, "{mean}");
}

#[test]
fn partial_local_exchanges_the_fraction_and_keeps_batch_sizes() {
    let mut c = chain(ExchangePolicy::PartialLocal { fraction: 0.3 }, None);
    let sizes: Vec<usize> = c.state().batches.iter().map(Vec::len).collect();
    for epoch in 1..=20 {
        let e = step(&mut c, "uncoded");
        assert_eq!(e.epoch, epoch);
        assert_eq!(e.points_exchanged, 150);
        // Every exchanged point goes to another worker (the paper's exchange; global's pool
        // may deal a point back).
        assert_eq!(e.points_moved, 150);
        assert_eq!(e.instance.uncoded_transmissions(), e.points_moved); // no excess storage
        assert_eq!(c.state().batches.iter().map(Vec::len).collect::<Vec<_>>(), sizes);
    }
}

#[test]
fn caches_carry_over_hold_the_batch_and_stay_full() {
    let mut c = chain(ExchangePolicy::PartialLocal { fraction: 0.5 }, Some(200));
    for _ in 0..4 {
        let before = c.state().clone();
        let e = step(&mut c, "coded");
        for w in 0..5 {
            assert_eq!(e.instance.cache(w).to_vec(), before.caches[w]);
            let (batch, cache) = (&c.state().batches[w], &c.state().caches[w]);
            assert_eq!(cache.len(), 200);
            assert!(batch.iter().all(|p| cache.binary_search(p).is_ok()));
            // The rest of the cache comes from the old one (nothing arrives unasked).
            assert!(cache.iter().all(|p| batch.contains(p) || before.caches[w].contains(p)));
        }
        assert!(e.instance.uncoded_transmissions() < e.points_moved);
    }
}

#[test]
fn same_seed_same_chain_and_a_saved_state_resumes_it() {
    let mut a = chain(ExchangePolicy::Global, Some(150));
    let mut b = chain(ExchangePolicy::Global, Some(150));
    step(&mut a, "coded");
    step(&mut b, "coded");
    let resumed = EpochChain::with_state(*a.params(), a.state().clone()).unwrap();
    let mut resumed = resumed;
    let (x, y, z) = (step(&mut a, "coded"), step(&mut b, "coded"), step(&mut resumed, "coded"));
    assert_eq!((x.plan.len(), x.instance.clone()), (y.plan.len(), y.instance.clone()));
    assert_eq!((x.plan.len(), x.instance), (z.plan.len(), z.instance));
    let other = EpochChain::new(ChainParams::new(5, 500, ExchangePolicy::Global, 4)).unwrap();
    assert_ne!(other.state(), chain(ExchangePolicy::Global, None).state());
}

#[test]
fn a_lost_worker_s_batch_is_dealt_to_the_others_and_it_can_come_back() {
    let mut c = chain(ExchangePolicy::Global, Some(150));
    step(&mut c, "coded");
    c.forget(2);
    let drawn = c.draw(&[0, 1, 3, 4], 0).unwrap();
    let sizes: Vec<usize> = drawn.previous.iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 500);
    assert!(sizes.iter().all(|&s| s == 125), "{sizes:?}");
    let planner = planner_by_name("coded", &PlannerOptions::default()).unwrap();
    let planned = drawn.plan(planner.as_ref(), None).unwrap();
    planned.verify().unwrap();
    c.commit(&planned);
    assert!(c.state().batches[2].is_empty() && c.state().caches[2].is_empty());
    c.readmit(&[2]);
    assert_eq!(c.state().batches[2].len(), 100);
    assert_eq!(c.state().caches[2].len(), 150);
    c.state().check_shape(5, 500).unwrap();
    step(&mut c, "coded");
}

#[test]
fn a_chain_started_in_blocks_starts_from_contiguous_ids_and_the_policy_mixes_after() {
    let random = ChainParams::new(3, 301, ExchangePolicy::Global, 9).with_cache_capacity(150);
    let params = random.with_start(ChainStart::Blocks);
    let mut blocks = EpochChain::new(params).unwrap();
    let want: Vec<Vec<u32>> = vec![(0..101).collect(), (101..201).collect(), (201..301).collect()];
    assert_eq!(contiguous_blocks(3, 301), want);
    assert_eq!(blocks.state().batches, want);
    // Deterministic under the seed (the starting caches too), and the default is untouched.
    assert_eq!(EpochChain::new(params).unwrap().state(), blocks.state());
    assert_eq!(ChainParams::new(3, 301, ExchangePolicy::Global, 9).start, ChainStart::Random);
    assert_ne!(EpochChain::new(random).unwrap().state().batches, want);
    assert_eq!(EpochChain::starting_from(random, want.clone()).unwrap().state(), blocks.state());
    // From epoch 1 on, the global policy deals the points at random: every worker gets points
    // of every block.
    let e = step(&mut blocks, "uncoded");
    assert!(e.points_moved > 150, "{}", e.points_moved);
    for batch in &blocks.state().batches {
        for block in &want {
            assert!(batch.iter().any(|p| block.contains(p)), "{batch:?}");
        }
    }
    assert_eq!("blocks".parse::<ChainStart>().unwrap(), ChainStart::Blocks);
    let e = "contiguous".parse::<ChainStart>().unwrap_err().to_string();
    assert_eq!(e, r#"the first epoch must be "random" or "blocks", got "contiguous""#);
}

#[test]
fn bad_draws_states_and_schemes_are_refused() {
    let c = chain(ExchangePolicy::Global, None);
    assert!(matches!(c.draw(&[], 0), Err(ChainError::Live { .. })));
    assert!(matches!(c.draw(&[0, 7], 0), Err(ChainError::Live { .. })));
    assert!(matches!(c.draw(&[1, 0], 0), Err(ChainError::Live { .. })));
    let mut state = c.state().clone();
    state.batches[0].push(499);
    let e = EpochChain::with_state(*c.params(), state).unwrap_err().to_string();
    assert!(e.contains("two batches") || e.contains("lacks"), "{e}");
    let bad = ChainParams::new(5, 500, ExchangePolicy::Global, 0).with_cache_capacity(50);
    assert!(EpochChain::new(bad).unwrap_err().to_string().contains("cannot hold"));
    assert!(EpochChain::new(ChainParams::new(5, 3, ExchangePolicy::Local, 0)).is_err());
    let given = EpochChain::starting_from(
        ChainParams::new(2, 4, ExchangePolicy::Local, 0),
        vec![vec![0, 1], vec![1, 2]],
    );
    assert!(given.unwrap_err().to_string().contains("two batches"));

    let coded = planner_by_name("coded", &PlannerOptions::default()).unwrap();
    let e = c.draw(&c.all_workers(), 0).unwrap().plan(coded.as_ref(), Some(Randomness::Candidates(2)));
    assert!(matches!(e, Err(ChainError::CandidatesNeedPliable { .. })));
    let pliable = planner_by_name("pliable-greedy", &PlannerOptions::default()).unwrap();
    let local = chain(ExchangePolicy::Local, None);
    let e = local.draw(&local.all_workers(), 0).unwrap().plan(pliable.as_ref(), None).unwrap_err();
    assert!(e.to_string().contains("needs the global policy"), "{e}");
}

#[test]
fn extra_cache_holds_on_every_number_of_workers_and_alpha_does_not() {
    let capacity = |workers: usize, points: usize, extra: f64| {
        let params = ChainParams::new(workers, points, ExchangePolicy::Global, 0);
        params.with_extra_cache(extra).unwrap().cache_capacity.unwrap()
    };
    // The largest batch, plus the share of the rest (floored).
    assert_eq!(capacity(2, 10_000, 0.2), 5_000 + 1_000);
    assert_eq!(capacity(4, 10_000, 0.2), 2_500 + 1_500);
    assert_eq!(capacity(3, 10, 0.0), 4);
    assert_eq!(capacity(3, 10, 1.0), 10);
    assert_eq!(capacity(1, 10, 0.5), 10);
    // alpha = 0.4 caches as much as extra_cache = 0.2 on 4 workers, and cannot hold on 2.
    let alpha = |workers: usize| ChainParams::new(workers, 10_000, ExchangePolicy::Global, 0).with_alpha(0.4);
    assert_eq!(alpha(4).unwrap().cache_capacity, Some(capacity(4, 10_000, 0.2)));
    assert!(alpha(2).is_err());
    for workers in 1..=12 {
        for extra in [0.0, 0.1, 0.29, 0.5, 1.0] {
            let params = ChainParams::new(workers, 1_000, ExchangePolicy::Global, 5).with_extra_cache(extra);
            let mut c = EpochChain::new(params.unwrap()).unwrap();
            if workers > 1 {
                step(&mut c, "coded");
            }
        }
    }
    for bad in [-0.1, 1.5, f64::NAN] {
        let e = ChainParams::new(4, 100, ExchangePolicy::Global, 0).with_extra_cache(bad).unwrap_err();
        assert!(e.to_string().starts_with("extra_cache must lie in [0, 1]"), "{e}");
    }
}

#[test]
fn a_pliable_scheme_chooses_within_its_candidates() {
    let mut c = chain(ExchangePolicy::Global, Some(200));
    let pliable = planner_by_name("pliable-greedy", &PlannerOptions::default()).unwrap();
    let drawn = c.draw(&c.all_workers(), 0).unwrap();
    let fixed = drawn.instance.uncoded_transmissions();
    let planned = drawn.plan(pliable.as_ref(), Some(Randomness::Candidates(4))).unwrap();
    planned.verify().unwrap();
    assert!(planned.plan.len() < fixed);
    let owners = planned.owners();
    assert!(planned.randomness(&owners).owner_entropy_bits.is_some());
    c.commit(&planned);
    assert_eq!(c.state().batches[0], planned.instance.assignment(0).to_vec());
}

#[test]
fn next_cache_keeps_the_batch_and_fills_to_capacity_from_the_old_cache() {
    let cache: Vec<u32> = (0..20).collect();
    let batch = vec![3, 30, 31];
    let kept = next_cache(&cache, &batch, 10, 1, 2, 0);
    assert_eq!(kept.len(), 10);
    assert!(batch.iter().all(|p| kept.contains(p)));
    assert!(kept.iter().all(|p| batch.contains(p) || cache.contains(p)));
    assert!(kept.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(kept, next_cache(&cache, &batch, 10, 1, 2, 0));
    assert_ne!(kept, next_cache(&cache, &batch, 10, 1, 3, 0));
    assert_eq!(next_cache(&[1, 2], &[5], 10, 0, 1, 0), vec![1, 2, 5]);
    assert_eq!(next_cache(&[1, 2], &[5, 6], 2, 0, 1, 0), vec![5, 6]);
}

#[test]
fn committing_a_drawn_epoch_is_committing_any_fixed_plan_of_it() {
    let mut planned = chain(ExchangePolicy::PartialLocal { fraction: 0.4 }, Some(180));
    let mut drawn = planned.clone();
    for _ in 0..3 {
        step(&mut planned, "coded");
        let epoch = drawn.draw(&drawn.all_workers(), 0).unwrap();
        drawn.commit_drawn(&epoch);
        assert_eq!(drawn.state(), planned.state());
    }
}
