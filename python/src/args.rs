//! Arguments from the Python layer: costs, Sinkhorn parameters, numbers checked by name.

use crate::common::{ndim, OrPyErr};
use logot::grad::CgParams;
use logot::{CostSource, CrossPrecision, EpsScaling, GridCost, PointCloudCost, PointMetric, Real};
use logot::{Relaxation, SinkhornParams, WarmStart};
use numpy::{Element, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple};

/// A count named `name` (a Python `int`, not a `bool`, in `0..=usize::MAX`): a `TypeError`
/// for another type and a `ValueError` for a negative or too large one, each naming it.
pub(crate) fn count(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name}: expected an integer, got {}",
            type_name(obj)
        )));
    }
    obj.extract::<usize>().map_err(|_| {
        PyValueError::new_err(format!(
            "{name} = {obj}: expected an integer from 0 to {}",
            usize::MAX
        ))
    })
}

/// A real number named `name` (a Python `float` or `int`, not a `bool` nor a string): a
/// `TypeError` naming it otherwise. Its value is the library's to check.
pub(crate) fn real(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyBool>()
        || !(obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyInt>())
    {
        return Err(PyTypeError::new_err(format!(
            "{name}: expected a real number, got {}",
            type_name(obj)
        )));
    }
    obj.extract::<f64>()
        .map_err(|_| PyValueError::new_err(format!("{name} = {obj}: not representable as a float")))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}

/// A cost as the Python layer passes it: a dense `n×m` or `B×n×m` array, `("grid", shape)`
/// or `("points", x, y, metric, precision)` with one pair of clouds (`n×d`, `m×d`) shared by
/// the batch or one pair per problem (`B×n×d`, `B×m×d`).
pub(crate) enum CostArg<'py, T: Element> {
    Dense(PyReadonlyArray2<'py, T>),
    DenseBatch(PyReadonlyArray3<'py, T>),
    Grid(GridCost),
    Points(
        PyReadonlyArray2<'py, T>,
        PyReadonlyArray2<'py, T>,
        PointMetric,
        CrossPrecision,
    ),
    PointsBatch(
        PyReadonlyArray3<'py, T>,
        PyReadonlyArray3<'py, T>,
        PointMetric,
        CrossPrecision,
    ),
}

/// `"sqeuclidean"` or `"euclidean"`.
pub(crate) fn point_metric(metric: &str) -> PyResult<PointMetric> {
    match metric {
        "sqeuclidean" => Ok(PointMetric::SqEuclidean),
        "euclidean" => Ok(PointMetric::Euclidean),
        m => Err(PyValueError::new_err(format!(
            "metric = {m:?}: expected \"sqeuclidean\" or \"euclidean\""
        ))),
    }
}

/// `"exact"`, `"tf32x3"`, `"tf32"`, `"f16x2"` or `"f16"` ([`CrossPrecision::name`]); `None`:
/// the library's default.
pub(crate) fn cross_precision(precision: Option<&str>) -> PyResult<CrossPrecision> {
    let Some(name) = precision else {
        return Ok(CrossPrecision::default());
    };
    CrossPrecision::from_name(name).ok_or_else(|| {
        let names: Vec<String> = CrossPrecision::ALL
            .iter()
            .map(|p| format!("{:?}", p.name()))
            .collect();
        PyValueError::new_err(format!(
            "precision = {name:?}: expected one of {}",
            names.join(", ")
        ))
    })
}

/// Whether the clouds `x` and `y` are one pair (`n×d`, `m×d`: false) or a batch of pairs
/// (`B×n×d`, `B×m×d`: true); other dimensions are a `ValueError` naming the argument.
pub(crate) fn clouds_batched(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<bool> {
    let (dx, dy) = (ndim(x, "x")?, ndim(y, "y")?);
    match (dx, dy) {
        (2, 2) => Ok(false),
        (3, 3) => Ok(true),
        (2 | 3, d) => Err(PyValueError::new_err(format!(
            "y: expected {} points like x, got {d} dimensions",
            if dx == 2 { "m×d" } else { "B×m×d" }
        ))),
        (d, _) => Err(PyValueError::new_err(format!(
            "x: expected points n×d or a batch B×n×d, got {d} dimensions"
        ))),
    }
}

impl<'py, T: Element + Real> CostArg<'py, T> {
    pub(crate) fn extract(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(t) = obj.cast::<PyTuple>() {
            let tag: String = t.get_item(0)?.extract()?;
            return match tag.as_str() {
                "grid" => {
                    let shape: Vec<usize> = t.get_item(1)?.extract()?;
                    Ok(CostArg::Grid(GridCost::new(&shape).py()?))
                }
                "points" => {
                    let metric: String = t.get_item(3)?.extract()?;
                    let metric = point_metric(&metric)?;
                    let precision: Option<String> = t.get_item(4)?.extract()?;
                    let precision = cross_precision(precision.as_deref())?;
                    let (x, y) = (t.get_item(1)?, t.get_item(2)?);
                    Ok(if clouds_batched(&x, &y)? {
                        CostArg::PointsBatch(x.extract()?, y.extract()?, metric, precision)
                    } else {
                        CostArg::Points(x.extract()?, y.extract()?, metric, precision)
                    })
                }
                _ => Err(PyValueError::new_err(format!("cost: unknown kind {tag:?}"))),
            };
        }
        let ndim = obj
            .cast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err("cost: expected a numpy array"))?
            .ndim();
        match ndim {
            2 => Ok(CostArg::Dense(obj.extract()?)),
            3 => Ok(CostArg::DenseBatch(obj.extract()?)),
            d => Err(PyValueError::new_err(format!(
                "cost: expected an n×m matrix or a B×n×m batch of them, got {d} dimensions"
            ))),
        }
    }

    pub(crate) fn source(&self) -> PyResult<CostSource<'_, T>> {
        Ok(match self {
            CostArg::Dense(c) => CostSource::Dense(c.as_array()),
            CostArg::DenseBatch(c) => CostSource::DenseBatch(c.as_array()),
            CostArg::Grid(g) => CostSource::Grid(g.clone()),
            CostArg::Points(x, y, metric, precision) => CostSource::PointCloud(
                PointCloudCost::with_metric(x.as_array(), y.as_array(), *metric)
                    .py()?
                    .with_precision(*precision),
            ),
            CostArg::PointsBatch(x, y, metric, precision) => CostSource::PointCloud(
                PointCloudCost::batched_with_metric(x.as_array(), y.as_array(), *metric)
                    .py()?
                    .with_precision(*precision),
            ),
        })
    }
}

/// The largest cost, for ε-scaling from the cost (`eps_scaling=True`).
pub(crate) fn max_cost<T: Real>(cost: &CostSource<'_, T>) -> f64 {
    match cost {
        CostSource::Dense(c) => c.iter().fold(0.0, |m, v| m.max(v.f64().abs())),
        CostSource::DenseBatch(c) => c.iter().fold(0.0, |m, v| m.max(v.f64().abs())),
        // The unit cube's squared diagonal: one per axis.
        CostSource::Grid(g) => g.shape().len() as f64,
        CostSource::PointCloud(p) => p.max_cost(),
        _ => 1.0,
    }
}

/// How ε-scaling is asked for.
enum Scaling {
    /// From the largest cost (`eps_scaling=True`).
    FromMaxCost,
    /// `(start, factor, iters_per_stage)`.
    Schedule(EpsScaling),
}

/// Sinkhorn parameters as the Python layer passes them:
/// `(eps, max_iters, tol, check_every, eps_scaling)` with `tol` `None` for the precision's
/// default and `eps_scaling` `None`, `True` (from the largest cost) or
/// `(start, factor, iters_per_stage)`. Each field is checked by type and named in the error
/// (`max_iters=1.5` or `True` is a `TypeError`, `max_iters=-1` a `ValueError`); the values
/// are the library's to judge.
pub(crate) struct ParamsArg {
    eps: f64,
    max_iters: usize,
    tol: Option<f64>,
    check_every: usize,
    scaling: Option<Scaling>,
}

impl ParamsArg {
    pub(crate) fn extract(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let t = obj
            .cast::<PyTuple>()
            .ok()
            .filter(|t| t.len() == 5)
            .ok_or_else(|| {
                PyTypeError::new_err(
                    "params: expected (eps, max_iters, tol, check_every, eps_scaling)",
                )
            })?;
        let tol = t.get_item(2)?;
        let scaling = t.get_item(4)?;
        let scaling = if scaling.is_none() {
            None
        } else if scaling.is_instance_of::<PyBool>() {
            scaling.extract::<bool>()?.then_some(Scaling::FromMaxCost)
        } else {
            let s = scaling
                .cast::<PyTuple>()
                .ok()
                .filter(|s| s.len() == 3)
                .ok_or_else(|| {
                    PyTypeError::new_err(
                        "eps_scaling: expected None, True or (start, factor, iters_per_stage)",
                    )
                })?;
            Some(Scaling::Schedule(
                EpsScaling::new(real(&s.get_item(0)?, "eps_scaling[0] (start)")?)
                    .factor(real(&s.get_item(1)?, "eps_scaling[1] (factor)")?)
                    .iters_per_stage(count(&s.get_item(2)?, "eps_scaling[2] (iters_per_stage)")?),
            ))
        };
        Ok(ParamsArg {
            eps: real(&t.get_item(0)?, "eps")?,
            max_iters: count(&t.get_item(1)?, "max_iters")?,
            tol: if tol.is_none() {
                None
            } else {
                Some(real(&tol, "tol")?)
            },
            check_every: count(&t.get_item(3)?, "check_every")?,
            scaling,
        })
    }

    /// The library's parameters, `max_cost` giving the largest cost for `eps_scaling=True`.
    pub(crate) fn params(&self, max_cost: impl FnOnce() -> f64) -> SinkhornParams {
        let p = SinkhornParams::new(self.eps)
            .max_iters(self.max_iters)
            .tol(self.tol)
            .check_every(self.check_every);
        match &self.scaling {
            None => p,
            Some(Scaling::FromMaxCost) => p.eps_scaling(EpsScaling::from_max_cost(max_cost())),
            Some(Scaling::Schedule(s)) => p.eps_scaling(s.clone()),
        }
    }
}

/// The parameters of a call on device memory: `eps_scaling=True` starts from the largest
/// cost, known once the cost is prepared on the device ([`DeviceParams::for_cost`]).
pub(crate) struct DeviceParams {
    arg: ParamsArg,
}

impl DeviceParams {
    pub(crate) fn new(arg: ParamsArg) -> Self {
        DeviceParams { arg }
    }

    /// The parameters before the cost is known (those that prepare it).
    pub(crate) fn initial(&self) -> SinkhornParams {
        self.arg.params(|| 1.0)
    }

    /// The parameters for a prepared cost whose largest entry is `max_cost`.
    pub(crate) fn for_cost(&self, max_cost: f64) -> SinkhornParams {
        self.arg.params(|| max_cost)
    }
}

/// Warm-start potentials `(f B×n, g B×m)`.
pub(crate) fn warm_start(
    warm: Option<(PyReadonlyArray2<'_, f64>, PyReadonlyArray2<'_, f64>)>,
) -> Option<WarmStart> {
    warm.map(|(f, g)| WarmStart::new(f.as_array().to_owned(), g.as_array().to_owned()))
}

/// `reg_m = (ρ_μ, ρ_ν)` as the library's relaxation.
pub(crate) fn relaxation(reg_m: Option<(f64, f64)>) -> Option<Relaxation> {
    reg_m.map(|(rho_mu, rho_nu)| Relaxation::kl_each(rho_mu, rho_nu))
}

pub(crate) fn cg_params(tol: Option<f64>, max_iters: usize) -> CgParams {
    CgParams::default().max_iters(max_iters).tol(tol)
}

/// The implicit backward's CG options as `logot.torch` passes them: `(cg_tol, cg_max_iters)`.
#[derive(FromPyObject)]
pub(crate) struct CgArg(Option<f64>, usize);

impl CgArg {
    pub(crate) fn params(&self) -> CgParams {
        cg_params(self.0, self.1)
    }

    pub(crate) fn tol(&self) -> Option<f64> {
        self.0
    }
}
