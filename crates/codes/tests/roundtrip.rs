//! Real bytes through every built-in planner: encode at the master, decode at every worker in
//! an arbitrary order, and compare each new record byte for byte with the master's.

#![allow(clippy::unwrap_used)] // a test that unwraps fails loudly, which is what it should do

use proptest::prelude::*;
use ubershuffle_codes::{DecodeError, Decoder, Encoder, PacketBatch, Records};
use ubershuffle_core::arbitrary_instance;
use ubershuffle_core::rng::{seeded, shuffle};
use ubershuffle_core::{
    GeneratorParams, Part, Plan, PlanError, PlannerOptions, ShuffleInstance, ShufflePlanner,
};
use ubershuffle_planners::builtin_planners;
use ubershuffle_planners::planners::UncodedPlanner;

/// Encodes `plan`, delivers every packet to every worker in an order drawn from `order_seed`
/// (each through the wire form, a batch of one), and checks every worker's new records.
fn round_trip(inst: &ShuffleInstance, plan: &Plan, width: usize, order_seed: u64) {
    let records = Records::random(inst.points(), width, 77).unwrap();
    let encoder = Encoder::new(plan, &records).unwrap();
    let wire: Vec<Vec<u8>> =
        encoder.packets().map(|p| PacketBatch::of_packets(&[p], width).unwrap()).collect();
    for worker in 0..inst.workers() {
        let store = records.store_of(inst.cache(worker)).unwrap();
        let mut decoder = Decoder::new(worker, plan, store, inst.needs(worker)).unwrap();
        let mut order: Vec<usize> = (0..wire.len()).collect();
        shuffle(&mut seeded(order_seed ^ worker as u64), &mut order);
        for k in order {
            decoder.receive_batch(&PacketBatch::from_bytes(&wire[k], width).unwrap()).unwrap();
        }
        let decoded = decoder.finish().unwrap();
        let got: Vec<u32> = decoded.new_records().map(|(p, _)| p).collect();
        assert_eq!(got, inst.needs(worker).to_vec(), "worker {worker} decoded other points");
        for (point, bytes) in decoded.new_records() {
            assert_eq!(Some(bytes), records.get(point), "worker {worker}, point {point}");
        }
    }
}

/// Every built-in planner's plan of `inst` round trips; a planner built for a narrower model
/// (no excess storage, say) may refuse an instance outside it with `PlanError::Unsupported`.
fn every_planner_round_trips(inst: &ShuffleInstance, width: usize, order_seed: u64) {
    for entry in builtin_planners() {
        let plan = match (entry.build)(&PlannerOptions::default()).plan(inst, &mut seeded(1)) {
            Err(PlanError::Unsupported { .. }) => continue,
            result => result.unwrap(),
        };
        round_trip(inst, &plan, width, order_seed);
    }
}

/// Every pliable planner's choice of assignment and its plan round trip: the workers decode
/// the batches the master chose (for each randomness level, and the paper's fresh setting).
#[test]
fn pliable_choices_round_trip() {
    use ubershuffle_core::pliable::{PliableRequest, Randomness};
    use ubershuffle_planners::PaperSetting;
    let inst = GeneratorParams { workers: 6, points: 240, alpha: 0.35, seed: 8 }.check().unwrap().generate();
    let mut requests: Vec<PliableRequest> = [1, 2, 4]
        .into_iter()
        .map(Randomness::Candidates)
        .chain([Randomness::All])
        .map(|r| PliableRequest::new(inst.clone(), r, &mut seeded(3)).unwrap())
        .collect();
    requests.push(PaperSetting { messages: 120, workers: 8, cache: 40, seed: 2 }.request().unwrap());
    for request in &requests {
        for entry in builtin_planners() {
            let planner = (entry.build)(&PlannerOptions::default());
            let Some(pliable) = planner.as_pliable() else { continue };
            let planned = pliable.plan_pliable(request, &mut seeded(5)).unwrap();
            round_trip(&planned.instance, &planned.plan, 40, 9);
        }
    }
}

#[test]
fn paper_example_bytes() {
    every_planner_round_trips(&ShuffleInstance::paper_example(), 64, 3);
}

#[test]
fn two_step_decoding_in_either_order() {
    // Attia-Tandon's leftover example: worker 2 learns point 0 from the first packet and uses it
    // on the second; it must work whichever packet arrives first.
    let inst =
        ShuffleInstance::new(3, 3, vec![vec![0], vec![1], vec![2]], vec![vec![2], vec![0], vec![1]]).unwrap();
    let mut plan = Plan::new();
    plan.push(&[Part::new(2, 0), Part::new(0, 1)]);
    plan.push(&[Part::new(0, 1), Part::new(1, 2)]);
    for seed in 0..8 {
        round_trip(&inst, &plan, 37, seed);
    }
}

#[test]
fn missing_packets_and_bad_plans_are_typed_errors() {
    let inst = ShuffleInstance::paper_example();
    let records = Records::random(inst.points(), 16, 1).unwrap();
    let mut plan = Plan::new();
    plan.push(&[Part::new(4, 0), Part::new(1, 2)]);
    // Worker 1 needs 0 and 3; this plan never sends them.
    let err = Decoder::new(1, &plan, records.store_of(inst.cache(1)).unwrap(), inst.needs(1)).unwrap_err();
    assert_eq!(err, DecodeError::Undecodable { worker: 1, points: vec![0, 3] });
    // Worker 0 can decode, but finishing before the packet arrives names what is missing.
    let decoder = Decoder::new(0, &plan, records.store_of(inst.cache(0)).unwrap(), inst.needs(0)).unwrap();
    assert_eq!(decoder.packets_needed(), 1);
    assert_eq!(decoder.finish().unwrap_err(), DecodeError::Missing { worker: 0, points: vec![4] });
    // A packet whose header does not match the plan, or whose payload has the wrong width.
    let mut decoder =
        Decoder::new(0, &plan, records.store_of(inst.cache(0)).unwrap(), inst.needs(0)).unwrap();
    assert!(matches!(
        decoder.receive(0, &[Part::new(4, 0)], &[0; 16]),
        Err(DecodeError::HeaderMismatch { seq: 0 })
    ));
    assert!(matches!(decoder.receive(0, plan.transmission(0), &[0; 3]), Err(DecodeError::WrongWidth { .. })));
    // Packets it does not need are dropped, repeats are harmless.
    assert!(decoder.receive(7, &[Part::new(8, 1)], &[0; 16]).is_ok());
    let packet = Encoder::new(&plan, &records).unwrap().packet(0);
    decoder.receive_packet(&packet).unwrap();
    decoder.receive_packet(&packet).unwrap();
    assert_eq!(decoder.finish().unwrap().new_records().count(), 1);
}

#[test]
fn uncoded_worker_buffers_nothing_it_does_not_need() {
    let inst = GeneratorParams { workers: 5, points: 500, alpha: 0.3, seed: 3 }.check().unwrap().generate();
    let plan = UncodedPlanner.plan(&inst, &mut seeded(0)).unwrap();
    let records = Records::random(inst.points(), 8, 1).unwrap();
    let decoder = Decoder::new(0, &plan, records.store_of(inst.cache(0)).unwrap(), inst.needs(0)).unwrap();
    assert_eq!(decoder.packets_needed(), inst.needs(0).len());
    assert!(!decoder.needs_packet(plan.len() as u32 - 1));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_model_instances_round_trip(
        workers in 1usize..7,
        batch in 1usize..10,
        excess in prop_oneof![Just(0.0), 0.0f64..1.0], // 0: no excess storage, half the cases
        width in 1usize..80,
        seed in any::<u64>(),
    ) {
        let points = workers * batch;
        let alpha = 1.0 / workers as f64 + (1.0 - 1.0 / workers as f64) * excess;
        let inst = GeneratorParams { workers, points, alpha, seed }.check().unwrap().generate();
        every_planner_round_trips(&inst, width, seed);
    }

    #[test]
    fn random_arbitrary_instances_round_trip(
        workers in 1usize..6,
        points in 1usize..40,
        p in 0.0f64..1.0,
        seed in any::<u64>(),
    ) {
        every_planner_round_trips(&arbitrary_instance(workers, points, p, seed), 24, seed);
    }
}

/// The no-excess planners (`worst-case`, `cycle-packing`) on instances laid out from random
/// shuffle matrices, sparse and dense: their chained XORs and the ignored worker's multi-step
/// decoding deliver real bytes, whatever order the packets arrive in.
#[test]
fn no_excess_planners_round_trip_on_random_shuffle_matrices() {
    use ubershuffle_planners::no_excess::{random_no_excess_instance, random_permutation_sum};
    use ubershuffle_planners::planner_by_name;
    let mut draw = seeded(12);
    for case in 0..40u64 {
        let workers = 2 + (case % 7) as usize;
        let inst = if case % 2 == 0 {
            random_permutation_sum(workers, 1 + (case % 3) as usize, &mut draw).to_instance()
        } else {
            random_no_excess_instance(workers, workers * 6, &mut draw).unwrap()
        };
        for scheme in ["worst-case", "cycle-packing"] {
            let plan = planner_by_name(scheme, &PlannerOptions::default())
                .unwrap()
                .plan(&inst, &mut seeded(1))
                .unwrap();
            round_trip(&inst, &plan, 8 + case as usize, case);
        }
    }
}
