//! The `logot` command line, driven as a user drives it (the binary, .npy files in and out,
//! JSON on stdout): one test binary, each module one command or concern.

#[path = "../common/mod.rs"]
mod common;

mod barycenter;
mod basics;
mod bench;
mod emd;
mod grad;
mod gw;
mod input_checks;
mod limits;
mod linalg;
mod options;
mod outputs;
mod pointcloud;
mod reports;
mod sliced;
mod unbalanced;
