//! `ubershuffle run --transport mpi` under `mpirun -np N+1`: rank 0 is the master, the other
//! ranks run the worker loop. Everything runs on the main thread (the MPI communicator is not
//! `Send`). Every rank checks the same flags, so a bad flag fails everywhere at once.

use std::process::ExitCode;

use ::mpi::topology::Communicator;
use anyhow::{Context, bail};
use ubershuffle_runtime::{WorkerExit, WorkerOptions, run_worker};
use ubershuffle_transport::Transport;
use ubershuffle_transport::mpi::MpiTransport;

use super::{drive_master, prepare};
use crate::cli::RunSettings;
use crate::output::one_line;

/// Runs this rank's part.
pub fn run(settings: &RunSettings) -> anyhow::Result<ExitCode> {
    let Some(universe) = ::mpi::initialize() else { bail!("MPI could not be initialised") };
    let mut t = MpiTransport::new(universe.world());
    let (rank, size) = (t.rank(), t.size());
    if size < 2 {
        bail!("--transport mpi needs a master and at least one worker: mpirun -np N+1 ubershuffle run ...");
    }
    let r = settings.resolve(Some(size))?;
    t.set_timeout(r.timeout);
    if rank > 0 {
        let summary = run_worker(t, &WorkerOptions::default()).with_context(|| format!("rank {rank}"))?;
        if summary.exit == WorkerExit::Stopped {
            eprintln!("rank {rank}: worker {} finished {} epochs", summary.worker, summary.epochs);
        }
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "MPI job of {size} ranks: the master and {} workers; running {} epochs",
        size - 1,
        r.run.config.epochs
    );
    let result = prepare(&r).and_then(|prepared| drive_master(t, &r, prepared, None));
    if let Err(e) = &result {
        // The workers would wait for orders that never come: end the whole job.
        eprintln!("error: {}", one_line(e));
        universe.world().abort(1);
    }
    result
}
