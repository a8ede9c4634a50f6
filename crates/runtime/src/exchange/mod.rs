//! The coded exchange: the epoch loop as a data plane. The master holds a whole data set of
//! records of any size ([`record_files`] reads them) and, each epoch, delivers to every worker
//! the records of its new batch that it lacks, by the run's coded delivery, planned and coded
//! on the records' segments ([`plan_segment_epoch`]) (the same [`crate::Master`] and
//! [`crate::run_worker`] as any run, with a learner that trains nothing:
//! [`RecordsLearner`]). A worker hands what it received to a [`RecordSink`] (the Python
//! package's `ubershuffle.Exchange` fills its record store from one) before it acknowledges
//! the epoch, so the master never runs more than the epoch in flight ahead of the caller.

mod learner;
mod receiver_part;
pub mod record_files;
mod segment_epoch;
mod serve;
mod sink;
mod store_rounds;

pub use learner::RecordsLearner;
pub use receiver_part::{ReceiverPart, read_part};
pub use segment_epoch::{SegmentEpoch, SegmentEpochError, plan_segment_epoch, plan_segment_epoch_without};
pub use serve::{ServeError, ServeOptions, Serving, serve};
pub use sink::{Delivery, DeliveryFigures, NoSink, RecordSink};
pub use store_rounds::{RouteFigures, StoreRounds, StoreRoundsError};
