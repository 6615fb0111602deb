//! Exact optimal transport: the network simplex and assignment solvers against POT, brute
//! force and closed forms; 1-D transport and its gradients; sliced and max-sliced
//! Wasserstein.
//!
//! One test binary for the subject; each module is one topic.

mod emd;
mod emd_inputs;
mod one_d;
mod sliced;
mod weight_shapes;
