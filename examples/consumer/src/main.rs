//! What a library consumer does with the core and codec crates: draw a seeded instance, plan it
//! with several built-in schemes, verify each plan, encode real records into packets, carry the
//! packets as bytes, decode them at every worker and compare each decoded record byte for byte
//! with the master's. Prints one line per scheme; exits non-zero on any mismatch.

use std::error::Error;
use std::process::ExitCode;

use ubershuffle_codes::{Decoder, Encoder, PacketBatch, Records};
use ubershuffle_core::{GeneratorParams, Plan, PlannerOptions, ShuffleInstance, seeded, verify};
use ubershuffle_planners::planner_by_name;

/// The schemes tried, all built in.
const SCHEMES: [&str; 3] = ["uncoded", "coded", "ubershuffle"];
/// Bytes per data point.
const RECORD_BYTES: usize = 256;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let inst = GeneratorParams { workers: 6, points: 1200, alpha: 0.4, seed: 42 }.check()?.generate();
    let records = Records::random(inst.points(), RECORD_BYTES, 7)?;
    println!(
        "instance: {} workers, {} points, {} points to deliver uncoded",
        inst.workers(),
        inst.points(),
        inst.uncoded_transmissions()
    );
    for scheme in SCHEMES {
        let planner = planner_by_name(scheme, &PlannerOptions::default()).expect("a built-in scheme");
        let plan = planner.plan(&inst, &mut seeded(1))?;
        verify(&inst, &plan)?.ensure_valid()?;
        let (bytes_sent, records_checked) = round_trip(&inst, &plan, &records)?;
        println!(
            "{scheme:>12}: {} transmissions ({:.2}x uncoded), {bytes_sent} bytes sent, {records_checked} records decoded and equal",
            plan.len(),
            plan.len() as f64 / inst.uncoded_transmissions() as f64,
        );
    }
    Ok(())
}

/// Encodes `plan` over `records`, carries every packet as bytes to every worker, decodes, and
/// compares each worker's new records with the master's. Returns the bytes on the wire (once
/// per packet, as a broadcast sends them) and the number of records compared.
fn round_trip(
    inst: &ShuffleInstance,
    plan: &Plan,
    records: &Records,
) -> Result<(usize, usize), Box<dyn Error>> {
    let encoder = Encoder::new(plan, records)?;
    let width = records.width();
    let wire: Vec<Vec<u8>> =
        encoder.packets().map(|p| PacketBatch::of_packets(&[p], width)).collect::<Result<_, _>>()?;
    let mut checked = 0;
    for worker in 0..inst.workers() {
        let needs = inst.needs(worker);
        let mut decoder = Decoder::new(worker, plan, records.store_of(inst.cache(worker))?, needs)?;
        for bytes in &wire {
            decoder.receive_batch(&PacketBatch::from_bytes(bytes, width)?)?;
        }
        let decoded = decoder.finish()?;
        let mut got = 0;
        for (point, bytes) in decoded.new_records() {
            if records.get(point) != Some(bytes) {
                return Err(format!("worker {worker} decoded point {point} wrongly").into());
            }
            got += 1;
        }
        if got != needs.len() {
            return Err(format!("worker {worker} decoded {got} of its {} new points", needs.len()).into());
        }
        checked += got;
    }
    Ok((wire.iter().map(Vec::len).sum(), checked))
}
