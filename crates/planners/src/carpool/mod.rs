//! Machinery shared by the UberShuffle planners: the encoding tables in a compact mutable form
//! ([`CarpoolTables`]), a fast index from worker sets to tables, the enumeration of subsets, and the packing of full rows used by `ubershuffle-opt`.

mod combinations;
mod full_rows;
mod iterated_greedy;
mod layer_counts;
mod lowering;
mod mask_index;
mod needed;
mod room_index;
mod rows;
mod tables;
mod tabu_partition;

pub(crate) use combinations::for_each_combination;
pub(crate) use full_rows::{PACK_MAX_WORKERS, PackOrder, pack_full_rows};
pub(crate) use iterated_greedy::repack;
pub(crate) use lowering::lower_tables;
pub(crate) use room_index::RoomIndex;
pub(crate) use rows::Rows;
pub(crate) use tables::CarpoolTables;
pub(crate) use tabu_partition::tabu_repack;
