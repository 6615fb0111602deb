//! The parts of the `logot` command-line tool that other crates share: the canonical
//! benchmark problems ([`problems`]), which `logot bench` and the library's criterion
//! benches build alike so that both measure the same thing, and the point clouds of the
//! point-cloud benchmarks' data sets ([`clouds`]).

pub mod clouds;
pub mod problems;
