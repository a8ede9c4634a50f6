//! The data plane's engine: training records carried between the ranks of a job, each epoch
//! the records every rank needs next, in the background of the epoch before.
//!
//! - [`engine`]: the protocol as one state machine without IO (events in, bytes and outcomes
//!   out), the same for every carrier.
//! - [`coded`]: a store's coded delivery: plan, rounds, encoding, relay and decoding.
//! - [`moves`]: which records move from which rank to which (peer mode, catch-ups).
//! - [`store`]: a rank's record store, mapped files every process of the rank reads.
//! - [`schedule`]: where every rank's records are, epoch by epoch (the sampler's chain).
//! - [`liveness`], [`pace`]: who is alive; when a delivery yields to the gradients.
//! - [`wire`]: the messages' byte forms.
//! - [`hub`]: engines of one process wired to each other (tests, the emulator).
//! - [`driver`]: the engine over sealed TCP connections, on threads of its own.

pub mod buffers;
pub mod coded;
pub mod driver;
pub mod engine;
pub mod error;
pub mod hub;
pub mod liveness;
pub mod moves;
pub mod pace;
pub mod reader;
pub mod receiver_part;
pub mod schedule;
pub mod store;
pub mod store_rounds;
pub mod tar;
pub mod wire;

pub use engine::{Engine, EngineConfig, Figure, Figures, Input, Output, Transmit};
pub use error::PlaneError;
pub use schedule::Schedule;
