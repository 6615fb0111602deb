//! `logot sliced`: the sliced Wasserstein distance (POT's `ot.sliced_wasserstein_distance`)
//! of two point clouds, or of a batch of pairs, over given or seeded directions; the
//! distances and each direction's `W_p^p` as JSON, the gradients with respect to the points
//! written as .npy.

use crate::output::Outputs;
use crate::{flags, input, npy, BackendChoice, Json};
use logot::exact::{
    sliced_wasserstein_batch, sliced_wasserstein_distance, sliced_wasserstein_grad,
    sliced_wasserstein_grad_batch, Projections, SlicedGrad,
};
use logot::{Error, Real, Result};
use ndarray::{Array2, Array3, ArrayD, Axis, Ix1, Ix2, Ix3};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct SlicedArgs {
    /// Source points: n×d, or B×n×d for a batch of pairs; .npy float32/float64, or a .npz
    /// member as FILE.npz:NAME.
    #[arg(long)]
    pub x: String,
    /// Target points: m×d, or B×m×d.
    #[arg(long)]
    pub y: String,
    /// Weights of the source points: n, or B×n (default: uniform, 1/n).
    #[arg(long)]
    pub mu: Option<String>,
    /// Weights of the target points: m or B×m, of the same total as --mu (1e-6 relative in
    /// float64, 1e-4 in float32), then scaled to it (default: uniform, 1/m).
    #[arg(long)]
    pub nu: Option<String>,
    /// The directions, one per column (d×L, used as they are); the default draws
    /// --n-projections of them from --seed.
    #[arg(long, conflicts_with_all = ["n_projections", "seed"])]
    pub projections: Option<String>,
    /// How many random directions (POT's n_projections).
    #[arg(long, default_value_t = 50)]
    pub n_projections: usize,
    /// The seed of the random directions: POT's directions for the same seed (NumPy's
    /// RandomState(seed).randn(d, L), each column normalised).
    #[arg(long, default_value_t = 0)]
    pub seed: u32,
    /// The exponent p ≥ 1 of the ground cost |x − y|^p: SW_p = ((1/L) Σ_l W_p^p(θ_l))^{1/p}.
    #[arg(long, default_value_t = 2.0)]
    pub p: f64,
    /// Output .npy for ∂SW_p/∂x: n×d, or B×n×d.
    #[arg(long)]
    pub grad_x: Option<String>,
    /// Output .npy for ∂SW_p/∂y: m×d, or B×m×d.
    #[arg(long)]
    pub grad_y: Option<String>,
    /// Read the inputs and write the outputs in float32 whatever their dtypes (the sums are
    /// in float64).
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Write the outputs in float64 whatever the input dtypes (default: float64 when any
    /// input is float64, float32 when all are).
    #[arg(long)]
    pub f64: bool,
    /// Where to compute: the CPU (rayon over directions) or the GPU (the projections,
    /// sorts, merges and gradients on the device, in float64; a batch one pair at a time).
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
}

impl SlicedArgs {
    fn inputs(&self) -> [(&'static str, Option<&str>); 5] {
        [
            ("--x", Some(self.x.as_str())),
            ("--y", Some(self.y.as_str())),
            ("--mu", self.mu.as_deref()),
            ("--nu", self.nu.as_deref()),
            ("--projections", self.projections.as_deref()),
        ]
    }
}

/// The library's names of the sliced arguments and this command's flags.
const FLAGS: &[(&str, &str)] = &[
    ("x_s", "--x"),
    ("x_t", "--y"),
    ("a", "--mu"),
    ("b", "--nu"),
    ("p", "--p"),
    ("n_projections", "--n-projections"),
    ("projections", "--projections"),
];

/// A library error in this command's names: the argument, and the other cloud a shape
/// error compares it with.
fn cli_error(e: Error) -> Error {
    flags::command_error(e, FLAGS, &[("x_s", "--x"), ("x_t", "--y")])
}

/// An input of one problem (`ndim` axes) or a batch (`ndim + 1`), with the batch axis
/// added to a single problem's array, and whether it held one problem.
fn read_batch<T: Real>(spec: &str, arg: &str, ndim: usize) -> Result<(ArrayD<T>, bool)> {
    let a = input::read::<T>(spec, arg, &[ndim, ndim + 1])?;
    Ok(if a.ndim() == ndim {
        (a.insert_axis(Axis(0)), true)
    } else {
        (a, false)
    })
}

/// Weights `B×n` of an optional input (`n`, or `B×n` for a batch).
fn weights<T: Real>(spec: Option<&str>, arg: &str, single: bool) -> Result<Option<Array2<T>>> {
    spec.map(|s| {
        let a = input::read::<T>(s, arg, if single { &[1] } else { &[2] })?;
        Ok(if single {
            npy::fixed::<T, Ix1>(a, arg)?.insert_axis(Axis(0))
        } else {
            npy::fixed::<T, Ix2>(a, arg)?
        })
    })
    .transpose()
}

/// What a run computed: the distances, each direction's `W_p^p` (one problem), the
/// gradients (when asked for), and the number of directions.
struct Run {
    distance: Vec<f64>,
    projected: Option<Vec<f64>>,
    grads: Option<(Array3<f64>, Array3<f64>)>,
    directions: usize,
}

/// Where the problems are solved.
enum On {
    Cpu,
    #[cfg(feature = "cuda")]
    Cuda(logot::backend::cuda::CudaBackend),
}

impl On {
    fn new(choice: BackendChoice) -> Result<On> {
        match choice {
            BackendChoice::Cpu => Ok(On::Cpu),
            #[cfg(feature = "cuda")]
            BackendChoice::Cuda => Ok(On::Cuda(crate::cuda_backend()?)),
            #[cfg(not(feature = "cuda"))]
            BackendChoice::Cuda => Err(crate::no_cuda()),
        }
    }
}

/// The library's function `$f` on the CPU, or the GPU's method of the same name and
/// arguments.
macro_rules! on {
    ($on:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $on {
            On::Cpu => $f($($arg),*),
            #[cfg(feature = "cuda")]
            On::Cuda(be) => be.$f($($arg),*),
        }
    };
}

/// `f` on each pair of a batch in turn (`B×n×d`, `B×m×d`, weights `B×n`, `B×m`), an
/// error naming the problem.
#[cfg(feature = "cuda")]
fn each<'a, T: Real, R>(
    x: ndarray::ArrayView3<'a, T>,
    y: ndarray::ArrayView3<'a, T>,
    mu: Option<ndarray::ArrayView2<'a, T>>,
    nu: Option<ndarray::ArrayView2<'a, T>>,
    f: impl Fn(
        ndarray::ArrayView2<'a, T>,
        ndarray::ArrayView2<'a, T>,
        Option<ndarray::ArrayView1<'a, T>>,
        Option<ndarray::ArrayView1<'a, T>>,
    ) -> Result<R>,
) -> Result<Vec<R>> {
    (0..x.dim().0)
        .map(|k| {
            let row =
                |w: Option<ndarray::ArrayView2<'a, T>>| w.map(|w| w.index_axis_move(Axis(0), k));
            f(
                x.index_axis_move(Axis(0), k),
                y.index_axis_move(Axis(0), k),
                row(mu),
                row(nu),
            )
            .map_err(|e| e.rename_arg(|s| format!("{s}[{k}]")))
        })
        .collect()
}

fn solve<T: Real>(a: &SlicedArgs, want_grads: bool) -> Result<(Run, bool)> {
    let on = On::new(a.backend)?;
    let (x, single) = read_batch::<T>(&a.x, "--x", 2)?;
    let x = npy::fixed::<T, Ix3>(x, "--x")?;
    let (y, y_single) = read_batch::<T>(&a.y, "--y", 2)?;
    let y = npy::fixed::<T, Ix3>(y, "--y")?;
    if single != y_single {
        return Err(Error::shape(
            "--y",
            format!(
                "has {} axes but --x has {} (both n×d, or both B×n×d)",
                y.ndim() - usize::from(y_single),
                x.ndim() - usize::from(single)
            ),
        ));
    }
    let mu = weights::<T>(a.mu.as_deref(), "--mu", single)?;
    let nu = weights::<T>(a.nu.as_deref(), "--nu", single)?;
    let given = a
        .projections
        .as_deref()
        .map(|s| {
            npy::fixed::<f64, Ix2>(
                input::read::<f64>(s, "--projections", &[2])?,
                "--projections",
            )
        })
        .transpose()?;
    let dirs = match &given {
        Some(p) => Projections::Given(p.view()),
        None => Projections::Random {
            count: a.n_projections,
            seed: a.seed,
        },
    };
    let directions = given.as_ref().map_or(a.n_projections, |p| p.ncols());
    let (mu, nu) = (mu.as_ref().map(|w| w.view()), nu.as_ref().map(|w| w.view()));
    let run = if single {
        let (x0, y0) = (x.index_axis(Axis(0), 0), y.index_axis(Axis(0), 0));
        let (mu0, nu0) = (
            mu.map(|w| w.index_axis_move(Axis(0), 0)),
            nu.map(|w| w.index_axis_move(Axis(0), 0)),
        );
        let r = on!(
            &on,
            sliced_wasserstein_distance(x0, y0, mu0, nu0, &dirs, a.p)
        )?;
        let grads = if want_grads {
            let g = on!(&on, sliced_wasserstein_grad(x0, y0, mu0, nu0, &dirs, a.p))?;
            Some((
                g.grad_x_s.insert_axis(Axis(0)),
                g.grad_x_t.insert_axis(Axis(0)),
            ))
        } else {
            None
        };
        Run {
            distance: vec![r.distance],
            projected: Some(r.projected.to_vec()),
            grads,
            directions,
        }
    } else if want_grads {
        let gs = match on {
            On::Cpu => sliced_wasserstein_grad_batch(x.view(), y.view(), mu, nu, &dirs, a.p)?,
            #[cfg(feature = "cuda")]
            On::Cuda(_) => each(x.view(), y.view(), mu, nu, |x, y, mu, nu| {
                on!(&on, sliced_wasserstein_grad(x, y, mu, nu, &dirs, a.p))
            })?,
        };
        let stack = |f: fn(&SlicedGrad) -> &Array2<f64>| {
            let views: Vec<_> = gs.iter().map(|g| f(g).view()).collect();
            ndarray::stack(Axis(0), &views).expect("clouds of one shape")
        };
        Run {
            distance: gs.iter().map(|g| g.distance).collect(),
            projected: None,
            grads: Some((stack(|g| &g.grad_x_s), stack(|g| &g.grad_x_t))),
            directions,
        }
    } else {
        let sw = match on {
            On::Cpu => sliced_wasserstein_batch(x.view(), y.view(), mu, nu, &dirs, a.p)?.to_vec(),
            #[cfg(feature = "cuda")]
            On::Cuda(_) => each(x.view(), y.view(), mu, nu, |x, y, mu, nu| {
                on!(&on, sliced_wasserstein_distance(x, y, mu, nu, &dirs, a.p)).map(|r| r.distance)
            })?,
        };
        Run {
            distance: sw,
            projected: None,
            grads: None,
            directions,
        }
    };
    Ok((run, single))
}

fn run<T: Real>(a: &SlicedArgs, outs: &mut Outputs) -> Json {
    let want_grads = outs.has("--grad-x") || outs.has("--grad-y");
    let (r, single) = solve::<T>(a, want_grads).map_err(cli_error)?;
    if let Some((gx, gy)) = &r.grads {
        let (gx, gy) = (gx.mapv(T::of), gy.mapv(T::of));
        if single {
            outs.write("--grad-x", gx.index_axis(Axis(0), 0))?;
            outs.write("--grad-y", gy.index_axis(Axis(0), 0))?;
        } else {
            outs.write("--grad-x", gx.view())?;
            outs.write("--grad-y", gy.view())?;
        }
    }
    let mut out = json!({
        "distance": r.distance,
        "p": a.p,
        "projections": r.directions,
        "dtype": T::NAME,
        "backend": a.backend.name(),
    });
    if let Some(v) = r.projected {
        out["projected"] = v.into();
    }
    if a.projections.is_none() {
        out["seed"] = a.seed.into();
    }
    Ok(out)
}

pub fn sliced(a: &SlicedArgs) -> Json {
    let inputs = a.inputs();
    let mut outs = Outputs::prepare(
        &inputs,
        &[
            ("--grad-x", a.grad_x.as_deref()),
            ("--grad-y", a.grad_y.as_deref()),
        ],
    )?;
    let mut out = match input::precision(a.f32, a.f64, &inputs[..4])? {
        npy::Dtype::F32 => run::<f32>(a, &mut outs)?,
        npy::Dtype::F64 => run::<f64>(a, &mut outs)?,
    };
    out["outputs"] = outs.commit()?;
    Ok(out)
}
