//! Fuzz bodies for logot's input paths: the command line's .npy reader (compiled here from
//! the binary's own source file) and the `logot` binary itself.

#[allow(dead_code)]
#[path = "../../cli/src/npy.rs"]
pub mod npy;

pub mod bodies;
