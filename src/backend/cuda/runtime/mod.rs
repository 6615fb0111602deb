//! The CUDA runtime every operation runs on: the kernel registry, compilation, the device
//! (context, stream, loaded kernels, buffers, launches), statistics mailboxes, the kernel
//! choices and the multi-GPU group. Nothing here depends on an operation (`ops/`).

pub(in crate::backend::cuda) mod cluster;
pub(in crate::backend::cuda) mod device;
pub(in crate::backend::cuda) mod kernels;
pub(in crate::backend::cuda) mod launch;
pub(in crate::backend::cuda) mod mailbox;
pub(in crate::backend::cuda) mod nvrtc;
pub(in crate::backend::cuda) mod tuning;
