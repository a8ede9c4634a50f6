//! Broadcasts the coded packets of a real shuffle plan from rank 0 with `MPI_Bcast`, decodes
//! them at every worker rank with `ubershuffle_codes::Decoder`, and checks every new record byte for byte.
//!
//! Run under mpirun (what `cargo xtask mpi-test` does):
//! `mpirun -np 4 target/debug/examples/mpi_coded_broadcast [POINTS] [RECORD_BYTES] [SEED]`.
//! Every rank draws the same instance and plan from the seed (the generator and planners are
//! deterministic); rank 0 encodes and broadcasts, each worker verifies the packets' headers
//! against the plan while decoding.

use std::process::ExitCode;

use ubershuffle_codes::{Decoder, Encoder, PacketBatch, Records};
use ubershuffle_core::{GeneratorParams, PlannerOptions, rng::seeded_stream, verify};
use ubershuffle_planners::planner_by_name;
use ubershuffle_transport::Transport;
use ubershuffle_transport::mpi::MpiTransport;

const REPORT: u16 = 1;

fn arg(n: usize, default: u64) -> Result<u64, String> {
    std::env::args()
        .nth(n)
        .map_or(Ok(default), |a| a.parse().map_err(|_| format!("argument {n}: '{a}' is not a number")))
}

fn run(t: &mut MpiTransport) -> Result<String, String> {
    let (points, width, seed) = (arg(1, 2000)? as usize, arg(2, 256)? as usize, arg(3, 7)?);
    let workers = t.size().checked_sub(1).filter(|&w| w > 0).ok_or("run with at least 2 ranks")?;
    let inst =
        GeneratorParams { workers, points, alpha: 0.4, seed }.check().map_err(|e| e.to_string())?.generate();
    let planner = planner_by_name("coded", &PlannerOptions::default()).map_err(|e| e.to_string())?;
    let plan = planner.plan(&inst, &mut seeded_stream(seed, 1)).map_err(|e| e.to_string())?;
    verify(&inst, &plan).and_then(|r| r.ensure_valid()).map_err(|e| format!("plan does not verify: {e}"))?;
    let records = Records::random(points, width, seed).map_err(|e| e.to_string())?;

    let mut buf = Vec::new();
    if t.rank() == 0 {
        let encoder = Encoder::new(&plan, &records).map_err(|e| e.to_string())?;
        let packets: Vec<_> = encoder.packets().collect();
        buf = PacketBatch::of_packets(&packets, width).map_err(|e| e.to_string())?;
    }
    t.broadcast(0, &mut buf).map_err(|e| e.to_string())?;

    if t.rank() == 0 {
        let mut lines = vec![format!(
            "rank 0: broadcast {} coded packets ({} bytes) of a verified coded plan (n = {workers}, q = {points}, {width}-byte records) with MPI_Bcast",
            plan.len(),
            buf.len()
        )];
        for _ in 1..t.size() {
            let (from, report) =
                t.recv_any(&(1..t.size()).collect::<Vec<_>>(), REPORT).map_err(|e| e.to_string())?;
            let report = String::from_utf8_lossy(&report).into_owned();
            if !report.starts_with("ok") {
                return Err(format!("rank {from}: {report}"));
            }
            lines.push(format!("rank {from}: {report}"));
        }
        return Ok(lines.join("\n"));
    }
    let worker = t.rank() - 1;
    let outcome = (|| {
        let batch = PacketBatch::from_bytes(&buf, width).map_err(|e| e.to_string())?;
        let store = records.store_of(inst.cache(worker)).map_err(|e| e.to_string())?;
        let mut decoder =
            Decoder::new(worker, &plan, store, inst.needs(worker)).map_err(|e| e.to_string())?;
        decoder.receive_batch(&batch).map_err(|e| e.to_string())?;
        let decoded = decoder.finish().map_err(|e| e.to_string())?;
        let mut count = 0;
        for (point, bytes) in decoded.new_records() {
            if Some(bytes) != records.get(point) {
                return Err(format!("worker {worker} decoded point {point} wrongly"));
            }
            count += 1;
        }
        if count != inst.needs(worker).iter().filter(|p| !inst.cache(worker).contains(*p)).count() {
            return Err(format!("worker {worker} decoded {count} points, fewer than it needs"));
        }
        Ok(format!("ok: decoded {count} new points byte for byte from {} packets", batch.len()))
    })();
    let report = outcome.clone().unwrap_or_else(|e| format!("FAILED: {e}"));
    t.send(0, REPORT, report.as_bytes()).map_err(|e| e.to_string())?;
    outcome
}

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("error: MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    let mut t = MpiTransport::new(universe.world());
    match run(&mut t) {
        Ok(summary) => {
            if t.rank() == 0 {
                println!("{summary}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: rank {}: {e}", t.rank());
            ExitCode::FAILURE
        }
    }
}
