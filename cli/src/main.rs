//! `logot`: entropic optimal transport from the command line. Arrays in and out as .npy,
//! results as one JSON object on stdout, errors on stderr with a non-zero exit code.

/// Run a command body generic over precision `T` and backend `B` on the chosen pair:
/// `dispatch!(dtype, backend_choice, body, args…)` calls `body::<T, B>(backend, args…)`.
macro_rules! dispatch {
    ($dtype:expr, $backend:expr, devices: $devices:expr, $body:ident, $($args:expr),+) => {{
        crate::check_devices($backend, $devices)?;
        match ($dtype, $backend) {
            #[cfg(feature = "cuda")]
            (crate::npy::Dtype::F32, crate::BackendChoice::Cuda) => match crate::gpus($devices)? {
                crate::Gpus::One(be) => $body::<f32, _>(be, $($args),+),
                crate::Gpus::Many(cluster) => $body::<f32, _>(cluster, $($args),+),
            },
            #[cfg(feature = "cuda")]
            (crate::npy::Dtype::F64, crate::BackendChoice::Cuda) => match crate::gpus($devices)? {
                crate::Gpus::One(be) => $body::<f64, _>(be, $($args),+),
                crate::Gpus::Many(cluster) => $body::<f64, _>(cluster, $($args),+),
            },
            (dtype, backend) => dispatch!(dtype, backend, $body, $($args),+),
        }
    }};
    ($dtype:expr, $backend:expr, $body:ident, $($args:expr),+) => {
        match ($dtype, $backend) {
            (crate::npy::Dtype::F32, crate::BackendChoice::Cpu) => {
                $body::<f32, _>(logot::CpuBackend, $($args),+)
            }
            (crate::npy::Dtype::F64, crate::BackendChoice::Cpu) => {
                $body::<f64, _>(logot::CpuBackend, $($args),+)
            }
            #[cfg(feature = "cuda")]
            (crate::npy::Dtype::F32, crate::BackendChoice::Cuda) => {
                $body::<f32, _>(crate::cuda_backend()?, $($args),+)
            }
            #[cfg(feature = "cuda")]
            (crate::npy::Dtype::F64, crate::BackendChoice::Cuda) => {
                $body::<f64, _>(crate::cuda_backend()?, $($args),+)
            }
            #[cfg(not(feature = "cuda"))]
            (_, crate::BackendChoice::Cuda) => Err(crate::no_cuda()),
        }
    };
}

mod barycenter;
mod bench;
mod bench_exact;
mod bench_kernels;
mod bench_sliced;
mod bistochastic;
mod divergence;
mod emd;
mod flags;
mod gw;
mod input;
mod newton_schulz;
mod npy;
mod output;
mod progress;
mod relax;
mod sliced;
mod svd3;
mod wasserstein;

use clap::{Parser, Subcommand, ValueEnum};
use logot::{Error, Result};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "logot",
    version,
    about = "Entropic optimal transport in the log domain (CPU and CUDA)"
)]
struct Cli {
    /// Keep the compiled CUDA kernels in DIR (created if missing), so that later runs load
    /// them instead of compiling them again with NVRTC (e.g. ~/.cache/logot). Without it,
    /// each run compiles the kernel modules it uses.
    #[arg(long, global = true, value_name = "DIR")]
    kernel_cache: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// `--kernel-cache`, set once from the command line before any backend starts.
static KERNEL_CACHE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

#[derive(Subcommand)]
enum Command {
    /// Entropic transport cost ⟨P, C⟩ of one problem or a batch; prints JSON. With
    /// --reg-m (or --reg-m-mu/--reg-m-nu) the marginals are relaxed to KL penalties
    /// (unbalanced OT, POT's sinkhorn_unbalanced): unequal masses are allowed and the JSON
    /// adds the unbalanced "objective" and the transported "mass".
    Wasserstein(wasserstein::WassersteinArgs),
    /// The entropic plan P, written to --out as .npy (and the potentials to --out-f/--out-g);
    /// prints the same JSON as wasserstein (--reg-m* for unbalanced plans).
    Coupling(wasserstein::CouplingArgs),
    /// Sinkhorn divergence S_ε(μ, ν) = OT_ε(μ, ν) − ½ OT_ε(μ, μ) − ½ OT_ε(ν, ν) of two point
    /// clouds (uniform weights unless --mu/--nu), with its gradients; prints JSON.
    Divergence(divergence::DivergenceArgs),
    /// Exact optimal transport (POT's ot.emd / ot.emd2) of one problem or a batch, from a
    /// dense --cost or point clouds --x/--y: costs, potentials and each result's optimality
    /// certificate (duality gap, dual violation, marginal errors) as JSON; the plan (dense
    /// or its nonzero entries) and the potentials to .npy.
    Emd(emd::EmdArgs),
    /// Sliced Wasserstein distance (POT's ot.sliced_wasserstein_distance) of two point
    /// clouds or a batch of pairs, over given (--projections) or seeded directions, each
    /// projected problem solved exactly on the line; prints the distances and each
    /// direction's W_p^p as JSON, writes the gradients with respect to the points.
    Sliced(sliced::SlicedArgs),
    /// Gromov–Wasserstein (POT's ot.gromov) between structure matrices --c1/--c2, or point
    /// clouds --x/--y (squared-Euclidean structures, linear memory): entropic with --eps
    /// (mirror descent), exact without (conditional gradient); the value, its linear and
    /// quadratic parts and the report of the returned plan as JSON, the plan to --plan.
    Gw(gw::GwArgs),
    /// Fused Gromov–Wasserstein: gw on --c1/--c2 with a feature cost --m (n×m) and the
    /// structure weight --alpha, F(T) = (1 − α)·⟨M, T⟩ + α·⟨L⊗T, T⟩.
    Fgw(gw::FgwArgs),
    /// Wasserstein barycenter of K histograms (dense --cost or --grid), written to --out;
    /// prints iterations, error and convergence as JSON.
    Barycenter(barycenter::BarycenterArgs),
    /// Bistochastic projection R = SinkhornKnopp(exp(X)) of n×n matrices (and its backward).
    Bistochastic(bistochastic::BistochasticArgs),
    /// Time a canonical benchmark problem (median of repeated runs after warm-up).
    Bench(bench::BenchArgs),
    /// Thin SVD of M×3 matrices (one, or a batch B×M×3) through the 3×3 Gram matrix.
    Svd3(svd3::Svd3Args),
    /// Newton–Schulz orthogonalisation (5 quintic steps by default).
    NewtonSchulz(newton_schulz::NewtonSchulzArgs),
}

/// Where the computation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// The CPU backend (ndarray + rayon).
    Cpu,
    /// The CUDA backend (needs a build with `--features cuda` and an NVIDIA GPU).
    Cuda,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
        }
    }
}

/// The CUDA backend on GPU 0, with the compiled kernels kept in `--kernel-cache`.
#[cfg(feature = "cuda")]
pub fn cuda_backend() -> Result<logot::backend::cuda::CudaBackend> {
    cuda_device(0)
}

/// The CUDA backend on GPU `ordinal`, with the compiled kernels kept in `--kernel-cache`.
#[cfg(feature = "cuda")]
fn cuda_device(ordinal: usize) -> Result<logot::backend::cuda::CudaBackend> {
    use logot::backend::cuda::CudaBackend;
    match KERNEL_CACHE.get().cloned().flatten() {
        Some(dir) => CudaBackend::with_kernel_cache(ordinal, dir),
        None => CudaBackend::with_device(ordinal),
    }
}

/// The GPUs of `--devices`: one backend, or several joined by NCCL.
#[cfg(feature = "cuda")]
pub enum Gpus {
    One(logot::backend::cuda::CudaBackend),
    Many(logot::CudaCluster),
}

/// `--devices LIST` (default: GPU 0), each GPU with the compiled kernels kept in
/// `--kernel-cache`.
#[cfg(feature = "cuda")]
pub fn gpus(devices: &Option<Vec<usize>>) -> Result<Gpus> {
    match devices.as_deref() {
        None => Ok(Gpus::One(cuda_backend()?)),
        Some([o]) => Ok(Gpus::One(cuda_device(*o)?)),
        Some(list) => {
            let members = list
                .iter()
                .map(|&o| cuda_device(o))
                .collect::<Result<Vec<_>>>()?;
            Ok(Gpus::Many(logot::Cluster::new(members)?))
        }
    }
}

/// `--devices` names GPUs: only with `--backend cuda`, and not empty.
pub fn check_devices(backend: BackendChoice, devices: &Option<Vec<usize>>) -> Result<()> {
    match devices {
        Some(list) if backend != BackendChoice::Cuda => Err(Error::parameter(
            "--devices",
            format!("{list:?}"),
            "lists GPUs: use it with --backend cuda",
        )),
        Some(list) if list.is_empty() => Err(Error::parameter(
            "--devices",
            "an empty list",
            "name at least one GPU (e.g. --devices 0,1)",
        )),
        _ => Ok(()),
    }
}

/// The error for `--backend cuda` in a build without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub fn no_cuda() -> Error {
    Error::Unavailable("--backend cuda: this logot was built without CUDA support; rebuild with `cargo build --release --features cuda`".into())
}

/// Let a write past a file-size limit (`ulimit -f`) fail with EFBIG, which the output plan
/// cleans up after, instead of killing the process (SIGXFSZ's default) with its
/// temporaries left behind.
fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code; it is
    // done once, before any other thread starts.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn main() -> ExitCode {
    ignore_file_size_signal();
    let cli = Cli::parse();
    let _ = KERNEL_CACHE.set(cli.kernel_cache);
    let out = match cli.command {
        Command::Wasserstein(a) => wasserstein::wasserstein(&a),
        Command::Coupling(a) => wasserstein::coupling(&a),
        Command::Divergence(a) => divergence::divergence(&a),
        Command::Emd(a) => emd::emd(&a),
        Command::Sliced(a) => sliced::sliced(&a),
        Command::Gw(a) => gw::gw(&a),
        Command::Fgw(a) => gw::fgw(&a),
        Command::Barycenter(a) => barycenter::barycenter(&a),
        Command::Bistochastic(a) => bistochastic::bistochastic(&a),
        Command::Bench(a) => bench_command(&a),
        Command::Svd3(a) => svd3::svd3(&a),
        Command::NewtonSchulz(a) => newton_schulz::newton_schulz_cmd(&a),
    };
    match out {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let msg = flags::cli_names(e).to_string();
            eprintln!("logot: error: {}", flags::short_numbers(&msg));
            ExitCode::from(2)
        }
    }
}

/// `logot bench`: each problem runs in the module of its kind (the modules share
/// `bench`'s arguments and timers, and none calls another).
fn bench_command(a: &bench::BenchArgs) -> Json {
    use bench::BenchProblem::{Bary64, Bary64Dense, EmdBatch, Gw, Gwpc, Sliced};
    let dtype = bench::checked(a)?;
    match a.problem {
        p @ (Bary64 | Bary64Dense) => barycenter::bench(dtype, a, p == Bary64Dense),
        Gw | Gwpc => gw::bench(dtype, a),
        EmdBatch => bench_exact::bench(dtype, a),
        Sliced => bench_sliced::bench(dtype, a),
        p if p.on_kernels() => bench_kernels::bench(dtype, a),
        _ => bench::bench(dtype, a),
    }
}

/// Result type of a command: the JSON object it prints.
pub type Json = Result<serde_json::Value>;
