//! The transport conformance suite on MPI: run under mpirun with at least 3 ranks
//! (`cargo xtask mpi-test` runs it with 4).

use std::process::ExitCode;

use ubershuffle_transport::Transport;
use ubershuffle_transport::conformance::run_suite;
use ubershuffle_transport::mpi::MpiTransport;

fn main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("error: MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    let t = MpiTransport::new(universe.world());
    let (rank, size) = (t.rank(), t.size());
    match run_suite(t) {
        Ok(passed) => {
            println!("rank {rank} of {size}: {} checks passed on MPI: {}", passed.len(), passed.join(", "));
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::FAILURE
        }
    }
}
