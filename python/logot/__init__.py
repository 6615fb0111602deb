"""logot — entropic optimal transport in the log domain, from Python.

Sinkhorn distances, plans, barycenters and exact gradients, on the CPU or an NVIDIA GPU
(``backend="cuda"``), computed by the Rust library `logot` (this package's compiled module
``logot._logot``). numpy arrays in and out: float32 stays float32, float64 stays float64
(other inputs are computed in float64), any strides are accepted.

Conventions follow POT: the plan is ``P = diag(u)·exp(−C/ε)·diag(v)`` with ``P·1 = μ``,
``Pᵀ·1 = ν``; potentials ``f = ε log u``, ``g = ε log v``; the "distance" is the transport
cost ``⟨P, C⟩`` (POT's ``sinkhorn2``). Each iteration updates ``g`` then ``f``; the marginal
error is ``‖Pᵀ1 − ν‖₁``.

* :func:`wasserstein`, :func:`solve`, :func:`coupling` — one problem or a batch (μ B×n,
  ν B×m, one cost n×m or B costs B×n×m); the cost may also be a :class:`PointCloud`
  (computed on the fly, never stored; one pair of clouds, or one pair per problem) or a
  :class:`Grid`.
* :func:`wasserstein_gradients`, :func:`plan_gradients`, :func:`point_gradients`,
  :func:`sinkhorn_divergence` — exact gradients (the last two also on batches of pairs of
  clouds, x B×n×d and y B×m×d, as GeomLoss's batch mode).
* :func:`barycenter`, :func:`grid_barycenter` — fixed-support and image barycenters.
* :func:`bistochastic`, :func:`bistochastic_backward`, :func:`svd3`,
  :func:`newton_schulz` — the supporting kernels.
* :func:`emd`, :func:`emd2`, :func:`emd_1d`, :func:`emd2_1d`, :func:`wasserstein_1d`,
  :func:`sliced_wasserstein`, :func:`max_sliced_wasserstein` — exact optimal transport
  (network simplex, assignment, the line, sliced), each exact result with its potentials
  and a certificate (duality gap, largest dual violation, marginal errors).
* :func:`entropic_gromov_wasserstein`, :func:`gromov_wasserstein` and their fused forms
  (``…2`` for the value alone), :func:`point_gromov_wasserstein` — Gromov–Wasserstein:
  mirror descent with log-domain Sinkhorn inner solves, conditional gradient with the
  network simplex, point clouds in linear memory; envelope gradients on request.
* :mod:`logot.pot` — POT's names and signatures; :mod:`logot.torch` — autograd functions.

Bad input raises ``ValueError`` naming the argument (``TypeError`` for an argument of the
wrong type: a float, bool or string where an integer is required, a bool or string where a
number is; nothing is coerced); numerical or device failures raise ``RuntimeError``; both
carry the library's message.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _logot
from ._results import (
    Barycenter,
    BistochasticGradient,
    BistochasticResult,
    CgReport,
    Convergence,
    ConvergenceWarning,
    Coupling,
    OtGradients,
    PlanGradients,
    PointGradients,
    SinkhornDivergence,
    SinkhornResult,
    Svd3,
    Certificate,
    ExactResult,
    SlicedResult,
    GromovReport,
    GromovGradients,
    GromovResult,
    PointGromovResult,
)
from ._exact import emd, emd2, emd_1d, emd2_1d, wasserstein_1d, sliced_wasserstein, max_sliced_wasserstein
from ._gromov import (
    gromov_wasserstein,
    gromov_wasserstein2,
    fused_gromov_wasserstein,
    fused_gromov_wasserstein2,
    entropic_gromov_wasserstein,
    entropic_gromov_wasserstein2,
    entropic_fused_gromov_wasserstein,
    entropic_fused_gromov_wasserstein2,
    point_gromov_wasserstein,
)

__version__ = _logot.__version__

__all__ = [
    "wasserstein",
    "solve",
    "coupling",
    "wasserstein_gradients",
    "plan_gradients",
    "point_gradients",
    "sinkhorn_divergence",
    "barycenter",
    "grid_barycenter",
    "bistochastic",
    "bistochastic_backward",
    "svd3",
    "newton_schulz",
    "emd",
    "emd2",
    "emd_1d",
    "emd2_1d",
    "wasserstein_1d",
    "sliced_wasserstein",
    "max_sliced_wasserstein",
    "gromov_wasserstein",
    "gromov_wasserstein2",
    "fused_gromov_wasserstein",
    "fused_gromov_wasserstein2",
    "entropic_gromov_wasserstein",
    "entropic_gromov_wasserstein2",
    "entropic_fused_gromov_wasserstein",
    "entropic_fused_gromov_wasserstein2",
    "point_gromov_wasserstein",
    "cuda_available",
    "cuda_device_name",
    "PointCloud",
    "Grid",
    "MUON_COEFFICIENTS",
    "CUBIC_COEFFICIENTS",
    "PRECISIONS",
    "Convergence",
    "CgReport",
    "SinkhornResult",
    "Coupling",
    "OtGradients",
    "PlanGradients",
    "PointGradients",
    "SinkhornDivergence",
    "Barycenter",
    "BistochasticResult",
    "BistochasticGradient",
    "Svd3",
    "Certificate",
    "ExactResult",
    "SlicedResult",
    "GromovReport",
    "GromovGradients",
    "GromovResult",
    "PointGromovResult",
    "ConvergenceWarning",
]

#: ``(a, b, c)`` of the quintic Newton–Schulz step used by Muon.
MUON_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
#: ``(a, b, c)`` of the cubic step that converges to the polar factor.
CUBIC_COEFFICIENTS = (1.5, -0.5, 0.0)
#: The CUDA backend's cross-term precisions for float32 point clouds above 16 dimensions
#: (``precision=``), most to least exact: exact float32 products; split TF32 (three
#: tensor-core products, about 2^-21 per product); one TF32 product (about 2^-10); split f16
#: of each cloud scaled by a power of two (the default: about 2^-22 of the cloud's largest
#: |coordinate|); one f16 product (about 2^-11 of it, the fastest). The Rust docs of
#: ``CrossPrecision`` give each one's measured error, benches/README.md their times.
PRECISIONS = ("exact", "tf32x3", "tf32", "f16x2", "f16")

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _dtype(*arrays) -> np.dtype:
    """float32 when every input is float32 (or float16), else float64."""
    dt = np.result_type(*arrays)
    if dt == _F32 or dt == _F64:
        return dt
    if dt.kind == "f" and dt.itemsize < 4:
        return _F32
    if dt.kind in "fiub":
        return _F64
    raise TypeError(f"expected real numbers, got dtype {dt}")


def _array(a, dtype) -> np.ndarray:
    """``a`` as a native-endian array of ``dtype``, without a copy when it already is one
    (strides are kept: the library reads any layout)."""
    return np.asarray(a, dtype=dtype)


# ---------------------------------------------------------------------------------------
# Costs
# ---------------------------------------------------------------------------------------


class PointCloud:
    """The cost between two point clouds, ``C_ij = |x_i − y_j|²`` (``metric="sqeuclidean"``,
    POT's default) or ``|x_i − y_j|`` (``"euclidean"``), computed on the fly by the
    library and never stored: memory O((n + m)·d) whatever n·m.

    ``x`` is n×d (the rows of the plan, weights μ), ``y`` m×d (columns, weights ν): one
    pair shared by every problem of a batch. ``x`` B×n×d with ``y`` B×m×d is one pair per
    problem (GeomLoss's batch mode): problem k transports ``x[k]`` to ``y[k]``, and a 1-D
    ``mu`` or ``nu`` is shared by the B problems.

    ``precision``: how the CUDA backend forms x·y in float32 above 16 dimensions (see
    ``PRECISIONS``); None is the library's default, ``"f16x2"`` (within 1e-5 of the float64
    distance). The CPU and float64 always compute exact products.
    """

    __slots__ = ("x", "y", "metric", "precision")

    def __init__(self, x, y, metric: str = "sqeuclidean", precision: Optional[str] = None):
        self.x = np.asarray(x)
        self.y = np.asarray(y)
        self.metric = metric
        self.precision = precision

    def __repr__(self) -> str:
        extra = "" if self.precision is None else f", precision={self.precision!r}"
        return f"PointCloud(x={self.x.shape}, y={self.y.shape}, metric={self.metric!r}{extra})"

    def dense(self) -> np.ndarray:
        """The n×m cost matrix, or the B×n×m costs of a batch of pairs (small clouds: plots,
        comparisons)."""
        x = np.asarray(self.x, dtype=np.float64)
        y = np.asarray(self.y, dtype=np.float64)
        d2 = ((x[..., :, None, :] - y[..., None, :, :]) ** 2).sum(-1)
        return d2 if self.metric == "sqeuclidean" else np.sqrt(d2)


class Grid:
    """The squared Euclidean cost between the points of a regular grid on the unit cube
    (``linspace(0, 1, N)`` per axis, 1 to 3 axes, row-major flattening), never stored: a
    half-step is one 1-D log-convolution per axis. POT's ``convolutional_barycenter2d``
    kernel for ``shape=(N, M)``."""

    __slots__ = ("shape",)

    def __init__(self, shape: Union[int, Sequence[int]]):
        self.shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)

    def __repr__(self) -> str:
        return f"Grid(shape={self.shape})"

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


def _cost_arg(cost, arrays: list):
    """The cost as the compiled module takes it, and its number of problems when it has one
    per problem (B×n×m, or a batch of point-cloud pairs), else None. Appends the cost's
    arrays to ``arrays`` (for the dtype)."""
    if isinstance(cost, PointCloud):
        _check_clouds(cost.x, cost.y)
        arrays += [cost.x, cost.y]
        arg = ("points", cost.x, cost.y, cost.metric, cost.precision)
        return arg, (cost.x.shape[0] if cost.x.ndim == 3 else None)
    if isinstance(cost, Grid):
        return ("grid", cost.shape), None
    cost = np.asarray(cost)
    arrays.append(cost)
    return cost, (cost.shape[0] if cost.ndim == 3 else None)


def _retype_cost(arg, dtype):
    if isinstance(arg, tuple):
        if arg[0] == "points":
            return ("points", _array(arg[1], dtype), _array(arg[2], dtype), arg[3], arg[4])
        return arg
    return _array(arg, dtype)


# ---------------------------------------------------------------------------------------
# Sinkhorn
# ---------------------------------------------------------------------------------------


# The largest count the library takes (a `usize`).
_MAX_COUNT = 2**64 - 1


def _count(name: str, value) -> int:
    """An integer argument (``int`` or a numpy integer; not a ``bool``, a float or a string),
    in ``0 … 2⁶⁴−1``: ``TypeError`` or ``ValueError`` naming ``name`` otherwise. Its value is
    the library's to judge (e.g. ``max_iters = 0``)."""
    # Exact types first: the ABC checks below cost microseconds per call.
    if type(value) is not int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, numbers.Integral)):
            raise TypeError(f"{name}: expected an integer, got {type(value).__name__} {value!r}")
        value = int(value)
    if not 0 <= value <= _MAX_COUNT:
        raise ValueError(f"{name} = {value}: expected an integer from 0 to {_MAX_COUNT}")
    return value


def _real(name: str, value) -> float:
    """A real argument (``float``, ``int``, a numpy real or a 0-d real array; not a ``bool``
    nor a string): ``TypeError`` naming ``name`` otherwise. Its value is the library's to
    judge (e.g. ``eps = 0``)."""
    t = type(value)
    if t is float or t is int:
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiu":
        return float(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (np.floating, np.integer, numbers.Real)):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} {value!r}")
    return float(value)


def _optional_real(name: str, value):
    return None if value is None else _real(name, value)


def _params(eps, max_iters, tol, check_every, eps_scaling):
    """``(eps, max_iters, tol, check_every, eps_scaling)`` for the compiled module, each
    checked by type and named (``max_iters=1.5`` or ``True`` is a ``TypeError``,
    ``max_iters=-1`` a ``ValueError``)."""
    if eps_scaling is not None:
        if isinstance(eps_scaling, (bool, np.bool_)):
            eps_scaling = bool(eps_scaling) or None
        else:
            try:
                if isinstance(eps_scaling, (str, bytes)):
                    raise TypeError
                start, factor, per_stage = eps_scaling
            except (TypeError, ValueError):
                raise TypeError(
                    f"eps_scaling: expected None, True or (start, factor, iters_per_stage), got {eps_scaling!r}"
                ) from None
            eps_scaling = (_real("eps_scaling[0] (start)", start), _real("eps_scaling[1] (factor)", factor),
                           _count("eps_scaling[2] (iters_per_stage)", per_stage))
    return (_real("eps", eps), _count("max_iters", max_iters), _optional_real("tol", tol),
            _count("check_every", check_every), eps_scaling)


def _problem(mu, nu, cost):
    """Marginals as B×n, B×m arrays of one dtype, the cost argument, and whether the caller
    asked for one problem (results are then squeezed)."""
    # The common call (1-D weights and a dense n×m cost, native float64 or float32 arrays of
    # one dtype) needs no conversion: answered first, in a few attribute reads.
    if (type(mu) is np.ndarray and type(nu) is np.ndarray and type(cost) is np.ndarray
            and mu.ndim == 1 and nu.ndim == 1 and cost.ndim == 2
            and (mu.dtype == _F64 or mu.dtype == _F32) and nu.dtype == mu.dtype and cost.dtype == mu.dtype):
        return mu[None, :], nu[None, :], cost, True
    mu = np.asarray(mu)
    nu = np.asarray(nu)
    arrays = [mu, nu]
    cost_arg, batch = _cost_arg(cost, arrays)
    dtype = _dtype(*arrays)
    single = mu.ndim == 1 and nu.ndim == 1 and batch is None
    mu = _array(mu, dtype)
    nu = _array(nu, dtype)
    if mu.ndim == 1 and nu.ndim == 1:
        if batch is not None:
            mu, nu = np.broadcast_to(mu, (batch, mu.size)), np.broadcast_to(nu, (batch, nu.size))
        else:
            mu, nu = mu[None, :], nu[None, :]
    elif mu.ndim == 1 and nu.ndim == 2:
        mu = np.broadcast_to(mu, (nu.shape[0], mu.size))
    elif mu.ndim == 2 and nu.ndim == 1:
        nu = np.broadcast_to(nu, (mu.shape[0], nu.size))
    elif mu.ndim != 2 or nu.ndim != 2:
        bad, arr = ("mu", mu) if mu.ndim not in (1, 2) else ("nu", nu)
        raise ValueError(f"{bad}: expected a histogram (n) or a batch of them (B×n), got shape {arr.shape}")
    return mu, nu, _retype_cost(cost_arg, dtype), single


def _warm(warm_start, single):
    if warm_start is None:
        return None
    f, g = warm_start
    f = np.asarray(f, dtype=np.float64)
    g = np.asarray(g, dtype=np.float64)
    if single:
        f, g = f.reshape(1, -1), g.reshape(1, -1)
    return f, g


_CONVERGENCE_FIELDS = ("iterations", "marginal_error", "tol", "converged", "marginal_errors", "converged_each",
                       "iterations_each")
_CG_FIELDS = ("problems", "max_iterations", "max_residual", "unconverged", "first_unconverged", "tol")


def _convergence(report) -> Convergence:
    """The public :class:`Convergence` of a report of the compiled module."""
    return Convergence(**{k: getattr(report, k) for k in _CONVERGENCE_FIELDS})


def _cg_report(summary) -> CgReport:
    """The public :class:`CgReport` of a CG summary of the compiled module."""
    return CgReport(**{k: getattr(summary, k) for k in _CG_FIELDS})


def _result(out, eps, single, cls=SinkhornResult, **extra) -> SinkhornResult:
    """The public result of a solved batch (``out``: the compiled module's
    ``SinkhornOutput``), squeezed for one problem."""
    distance, f, g, objective = out.distance, out.f, out.g, out.objective
    if single:
        distance, f, g = float(distance[0]), f[0], g[0]
        objective = None if objective is None else float(objective[0])
    return cls(**extra, distance=distance, f=f, g=g, eps=float(eps), convergence=_convergence(out.convergence),
               objective=objective)


def _reg_m(reg_m):
    """POT's ``reg_m`` as ``(ρ_μ, ρ_ν)``: None (balanced), a scalar for both sides, or a
    pair (an indexable of length 1 is a scalar, as in POT); ``inf`` keeps that side exact.
    ρ ≤ 0 or NaN raises ValueError, a non-number (a bool, a string) TypeError, naming
    ``reg_m``."""
    if reg_m is None:
        return None
    if np.isscalar(reg_m):
        names, values = ("reg_m", "reg_m"), [reg_m, reg_m]
    else:
        values = list(np.ravel(np.asarray(reg_m, dtype=object)))
        if len(values) == 1:
            names, values = ("reg_m", "reg_m"), values * 2
        elif len(values) == 2:
            names = ("reg_m[0]", "reg_m[1]")
        else:
            raise ValueError(f"reg_m = {reg_m!r}: expected a scalar or a pair (rho_mu, rho_nu)")
    out = []
    for name, v in zip(names, values):
        if type(v) is not float and (isinstance(v, (bool, np.bool_))
                                     or not isinstance(v, (int, np.floating, np.integer, numbers.Real))):
            raise TypeError(f"{name}: expected a real number (float('inf') keeps that marginal exact), "
                            f"got {type(v).__name__} {v!r}")
        rho = float(v)
        if not rho > 0:  # NaN included
            raise ValueError(f"{name} = {rho}: the marginal penalty must be > 0 (float('inf') keeps that marginal exact)")
        out.append(rho)
    return tuple(out)


def _warn_unconverged(conv, asked_tol, what: str = "Sinkhorn"):
    # tol=0 asks for all max_iters iterations: the report still judges the result against
    # the precision's default tolerance, but the caller chose not to stop on it.
    if not conv.converged and asked_tol != 0:
        warnings.warn(
            f"{what} did not converge: marginal error {conv.marginal_error:.3g} > tol "
            f"{conv.tol:.3g} after {conv.iterations} iterations (raise max_iters or eps, "
            "or use eps_scaling=True)",
            ConvergenceWarning,
            stacklevel=3,
        )


_SINKHORN_OPTIONS = """
    max_iters : int, default 1000
        Maximum number of iterations (each is a ``g`` and an ``f`` half-step).
    tol : float or None
        Target marginal error ``‖P_bᵀ1 − ν_b‖₁ / mass_b`` of every problem (relative to its
        total mass); None: 1e-9 (float64) or 1e-5 (float32); 0 runs all ``max_iters``
        iterations, and ``converged`` then says whether the default tolerance was met
        (no warning is issued).
    check_every : int, default 10
        Iterations between convergence checks.
    eps_scaling : None, True or (start, factor, iters_per_stage)
        Anneal ε geometrically down to ``eps`` before the main loop; True starts from the
        largest cost, halving with 3 iterations per stage.
    warm_start : (f, g) or None
        Starting potentials (n and m, or B×n and B×m) instead of zeros.
    backend : "cpu", "cuda" or "cuda:N"
    reg_m : None, float or (float, float)
        (:func:`solve`, :func:`wasserstein`, :func:`coupling`) Unbalanced OT, POT's
        ``reg_m``: the marginal constraints become penalties ``ρ_μ·KL(P1 ‖ μ) + ρ_ν·KL(Pᵀ1 ‖ ν)``
        (a scalar for both sides, or ``(ρ_μ, ρ_ν)``; ``float('inf')`` keeps that side exact),
        so the masses may differ. ``distance`` stays ⟨P, C⟩ (POT's ``returnCost="linear"``);
        the result's ``objective`` is ``⟨P,C⟩ + ε·KL(P ‖ μ⊗ν) + ρ_μ·KL(P1 ‖ μ) + ρ_ν·KL(Pᵀ1 ‖ ν)``
        with the generalized KL ``Σ x log(x/y) − x + y`` (None for balanced problems), and
        ``tol`` bounds the violation of the unbalanced optimality conditions.
"""


def solve(mu, nu, cost, eps, *, max_iters=1000, tol=None, check_every=10, eps_scaling=None,
          warm_start=None, backend="cpu", reg_m=None) -> SinkhornResult:
    """Solve entropic OT between ``mu`` and ``nu`` for ``cost`` at regularisation ``eps``:
    the distances ⟨P, C⟩, the potentials and the convergence report.

    ``mu`` (n) and ``nu`` (m) with an n×m ``cost`` is one problem (``distance`` a float);
    ``mu`` B×n and ``nu`` B×m (either may be 1-D, shared) or a B×n×m cost is a batch
    (``distance`` an array of B). ``cost`` may be an array, a :class:`PointCloud` or a
    :class:`Grid`.
    """
    rho = _reg_m(reg_m)
    mu, nu, cost, single = _problem(mu, nu, cost)
    params = _params(eps, max_iters, tol, check_every, eps_scaling)
    out = _logot.solve(mu, nu, cost, params, _warm(warm_start, single), backend, rho)
    return _result(out, eps, single)


solve.__doc__ += "\n    Options\n    -------" + _SINKHORN_OPTIONS


def wasserstein(mu, nu, cost, eps, *, max_iters=1000, tol=None, check_every=10, eps_scaling=None,
                warm_start=None, backend="cpu", reg_m=None):
    """The entropic transport cost ⟨P, C⟩ (POT's ``sinkhorn2`` value): a float for one
    problem, an array of B for a batch (see :func:`solve` for the shapes and options).

    Warns :class:`ConvergenceWarning` when the tolerance was not met (use :func:`solve` for
    the full report).
    """
    rho = None if reg_m is None else _reg_m(reg_m)
    mu, nu, cost, single = _problem(mu, nu, cost)
    params = _params(eps, max_iters, tol, check_every, eps_scaling)
    warm = None if warm_start is None else _warm(warm_start, single)
    out = _logot.wasserstein(mu, nu, cost, params, warm, backend, rho)
    if not out.converged:
        _warn_unconverged(out, tol)
    return float(out.distance[0]) if single else out.distance


def coupling(mu, nu, cost, eps, *, max_iters=1000, tol=None, check_every=10, eps_scaling=None,
             warm_start=None, backend="cpu", reg_m=None) -> Coupling:
    """The entropic plan ``P = exp((f ⊕ g − C)/ε)`` (n×m, or B×n×m for a batch) with the
    distances, potentials and convergence report (see :func:`solve`)."""
    rho = _reg_m(reg_m)
    mu, nu, cost, single = _problem(mu, nu, cost)
    params = _params(eps, max_iters, tol, check_every, eps_scaling)
    out = _logot.coupling(mu, nu, cost, params, _warm(warm_start, single), backend, rho)
    return _result(out.result, eps, single, Coupling, plan=out.plan[0] if single else out.plan)


def wasserstein_gradients(mu, nu, cost, eps, *, max_iters=1000, tol=None, check_every=10,
                          eps_scaling=None, warm_start=None, cg_tol=None, cg_max_iters=1000,
                          backend="cpu") -> OtGradients:
    """⟨P, C⟩ with its exact gradients with respect to the cost, ``mu`` and ``nu``, by
    implicit differentiation through the converged plan (dense costs).

    With ``G = ∂L/∂P`` the adjoint system ``[diag(μ) P; Pᵀ diag(ν)]·[a; b] = [(G⊙P)1;
    (G⊙P)ᵀ1]`` gives ``∂L/∂C = −(1/ε)(G − a1ᵀ − 1bᵀ)⊙P`` (plus ``P`` for the explicit
    term), ``∂L/∂μ = a`` and ``∂L/∂ν = b`` in the representative with ``Σ ∂L/∂μ = 0``
    (only ``a_i + b_j`` is determined: admissible perturbations keep the masses equal).

    ``cg_tol`` (relative residual; None: 1e-10 in float64, 1e-5 in float32) and
    ``cg_max_iters`` control the adjoint solve; check ``result.convergence`` and ``cg``.
    """
    mu, nu, cost, single = _problem(mu, nu, cost)
    params = _params(eps, max_iters, tol, check_every, eps_scaling)
    out = _logot.wasserstein_gradients(
        mu, nu, cost, params, _warm(warm_start, single), _optional_real("cg_tol", cg_tol),
        _count("cg_max_iters", cg_max_iters), backend
    )
    result = _result(out.result, eps, single)
    d_cost, d_mu, d_nu = out.cost, out.mu, out.nu
    if single:
        d_cost, d_mu, d_nu = d_cost[0], d_mu[0], d_nu[0]
    return OtGradients(cost=d_cost, mu=d_mu, nu=d_nu, result=result, cg=_cg_report(out.cg))


def plan_gradients(plan, eps, upstream, *, cg_tol=None, cg_max_iters=1000, backend="cpu") -> PlanGradients:
    """Exact gradients of any loss ``L(P)`` of entropic plans with respect to the cost and
    the marginals, from the plan (n×m or B×n×m) and ``upstream = ∂L/∂P`` (same shape), by
    implicit differentiation (the system of :func:`wasserstein_gradients`, without the
    explicit term). Zero-mass bins get a zero marginal gradient here (the plan alone does
    not determine their one-sided derivative)."""
    plan = np.asarray(plan)
    upstream = np.asarray(upstream)
    dtype = _dtype(plan, upstream)
    _ndim(plan, "plan", (2, 3), "an n×m plan or a B×n×m batch")
    _ndim(upstream, "upstream", (plan.ndim,), f"the shape of the plan, {plan.shape}")
    single = plan.ndim == 2
    plan = _array(plan, dtype)
    upstream = _array(upstream, dtype)
    if single:
        plan, upstream = plan[None], upstream[None]
    out = _logot.plan_gradients(plan, _real("eps", eps), upstream, _optional_real("cg_tol", cg_tol),
                                _count("cg_max_iters", cg_max_iters), backend)
    d_cost, d_mu, d_nu = out.cost, out.mu, out.nu
    if single:
        d_cost, d_mu, d_nu = d_cost[0], d_mu[0], d_nu[0]
    return PlanGradients(cost=d_cost, mu=d_mu, nu=d_nu, cg=_cg_report(out.cg))


def _ndim(a: np.ndarray, arg: str, dims: Tuple[int, ...], what: str) -> None:
    if a.ndim not in dims:
        raise ValueError(f"{arg}: expected {what}, got shape {a.shape}")


def _weights(w, n, dtype):
    """Weights of n points, uniform when None."""
    if w is None:
        return np.full(n, 1.0 / max(n, 1), dtype=dtype)
    return _array(w, dtype)


def _check_clouds(x: np.ndarray, y: np.ndarray) -> None:
    """``x`` n×d with ``y`` m×d, or ``x`` B×n×d with ``y`` B×m×d (the library checks the
    sizes)."""
    _ndim(x, "x", (2, 3), "points n×d or a batch of clouds B×n×d")
    if x.ndim == 2:
        _ndim(y, "y", (2,), "points m×d (x is n×d)")
    else:
        _ndim(y, "y", (3,), "a batch of clouds B×m×d (x is B×n×d)")


def _batch_weights(w, arg: str, points: np.ndarray):
    """Weights of the clouds ``points`` (n×d: n weights; B×n×d: B×n, or n shared by the B
    problems, broadcast)."""
    n = points.shape[-2]
    if points.ndim == 2:
        _ndim(w, arg, (1,), f"one weight per point of {'x' if arg == 'a' else 'y'}")
        return w
    batch = points.shape[0]
    _ndim(w, arg, (1, 2), f"weights {n} or {batch}×{n} for clouds {points.shape}")
    if w.shape[-1] != n or (w.ndim == 2 and w.shape[0] != batch):
        raise ValueError(f"{arg}: expected weights {n} or {batch}×{n} for clouds {points.shape}, got shape {w.shape}")
    return np.broadcast_to(w, (batch, n))


def _clouds(x, y, a, b):
    """Points and weights of one dtype: ``x`` n×d, ``y`` m×d, ``a`` n, ``b`` m; or a batch
    ``x`` B×n×d, ``y`` B×m×d, ``a`` B×n, ``b`` B×m (weights of n or m broadcast)."""
    x = np.asarray(x)
    y = np.asarray(y)
    _check_clouds(x, y)
    arrays = [x, y] + [np.asarray(w) for w in (a, b) if w is not None]
    dtype = _dtype(*arrays)
    x, y = _array(x, dtype), _array(y, dtype)
    a, b = _weights(a, x.shape[-2], dtype), _weights(b, y.shape[-2], dtype)
    return x, y, _batch_weights(a, "a", x), _batch_weights(b, "b", y)


def point_gradients(x, y, eps, a=None, b=None, *, metric="sqeuclidean", precision=None, max_iters=1000,
                    tol=None, check_every=10, eps_scaling=None, warm_start=None,
                    backend="cpu") -> PointGradients:
    """The regularised objective ``OT_ε = ⟨f, a⟩ + ⟨g, b⟩ − ε ΣP`` between the clouds ``x``
    (n×d, weights ``a``, uniform by default) and ``y`` (m×d, weights ``b``) and its
    gradients with respect to the points, ``∂OT_ε/∂x_i = Σ_j P_ij ∇_x c(x_i, y_j)``
    (envelope theorem: exact at convergence), with ``P`` applied on the fly, never stored.
    ``result`` holds ⟨P, C⟩, the potentials (``∂OT_ε/∂a = f``, ``∂OT_ε/∂b = g``) and the
    convergence report.

    A batch of pairs (GeomLoss's batch mode): ``x`` B×n×d and ``y`` B×m×d, weights B×n and
    B×m (or n and m shared by the B problems); problem k transports ``x[k]`` to ``y[k]``,
    ``value`` has one entry per problem and the gradients are B×n×d and B×m×d (each
    problem's with respect to its own clouds). ``precision``: the CUDA cross term, as
    :class:`PointCloud`'s."""
    x, y, mu, nu = _clouds(x, y, a, b)
    single = x.ndim == 2
    params = _params(eps, max_iters, tol, check_every, eps_scaling)
    if single:
        mu, nu = mu[None], nu[None]
    out = _logot.point_gradients(
        mu, nu, ("points", x, y, metric, precision), params, _warm(warm_start, single), backend
    )
    if single:
        return PointGradients(value=float(out.value[0]), x=out.x[0], y=out.y[0], result=_result(out.result, eps, True))
    return PointGradients(value=out.value, x=out.x, y=out.y, result=_result(out.result, eps, False))


def sinkhorn_divergence(x, y, eps, a=None, b=None, *, metric="sqeuclidean", precision=None,
                        convention="objective", max_iters=1000, tol=None, check_every=10,
                        eps_scaling=None, backend="cpu", reg_m=None) -> SinkhornDivergence:
    """The Sinkhorn divergence ``S_ε = W(a, b) − ½ W(a, a) − ½ W(b, b)`` between the clouds
    ``x`` (n×d, weights ``a``, uniform by default) and ``y`` (m×d, weights ``b``), with the
    cost computed on the fly.

    ``convention="objective"`` (default, as GeomLoss): ``W = OT_ε``, the regularised
    objective; ``S_ε ≥ 0``, zero iff the measures are equal; ``grad_x``, ``grad_y`` are its
    gradients with respect to the points (the self terms by the symmetric iteration).
    ``convention="linear"`` (POT's ``empirical_sinkhorn_divergence``): ``W = ⟨P, C⟩`` of each
    of the three plans; no gradients (``grad_x = grad_y = None``; see
    :func:`logot.torch.sinkhorn_divergence` for them).

    ``reg_m=ρ`` (a scalar, > 0): the unbalanced divergence of GeomLoss (``reach``): ``W`` the
    unbalanced objective with ``ρ·KL`` on both marginals, plus ``(ε/2)(Σa − Σb)²``, so the
    masses may differ and ``S_ε(a, a) = 0``. GeomLoss's ``SamplesLoss("sinkhorn", p=2,
    blur=σ, reach=r)`` (cost ``|x − y|²/2``) is half of this with ``eps = 2σ²``,
    ``reg_m = 2r²``. Objective convention only; one ρ for both sides.

    A batch of pairs (GeomLoss's batch mode): ``x`` B×n×d and ``y`` B×m×d, weights B×n and
    B×m (or n and m shared by the B problems); problem k compares ``x[k]`` with ``y[k]``.
    ``value`` is then an array of B, ``grad_x`` B×n×d, ``grad_y`` B×m×d, ``terms`` B×3 and
    ``convergence`` one triple of reports per problem. ``precision``: the CUDA cross term, as
    :class:`PointCloud`'s.
    """
    x, y, a, b = _clouds(x, y, a, b)
    params = _params(eps, max_iters, tol, check_every, eps_scaling)
    rho = _reg_m(reg_m)
    if convention in ("objective", "linear"):
        out = _logot.sinkhorn_divergence(x, y, a, b, metric, precision, params, backend, convention, rho)
        if x.ndim == 2:
            convergence = tuple(_convergence(c) for c in out.convergence)
        else:
            convergence = tuple(tuple(_convergence(c) for c in triple) for triple in out.convergence)
        return SinkhornDivergence(
            value=out.value, grad_x=out.grad_x, grad_y=out.grad_y, terms=out.terms, convergence=convergence,
            convention=convention,
        )
    raise ValueError(f"convention = {convention!r}: expected \"objective\" or \"linear\"")


# ---------------------------------------------------------------------------------------
# Barycenters
# ---------------------------------------------------------------------------------------


def _barycenter(histograms, weights, cost_arg, eps, max_iters, tol, check_every, backend):
    single = histograms.ndim == 2
    if single:
        histograms, weights = histograms[None], weights[None]
    params = (_real("eps", eps), None if max_iters is None else _count("max_iters", max_iters), _real("tol", tol),
              _count("check_every", check_every))
    out = _logot.barycenter(histograms, weights, cost_arg, params, backend)
    hist, iterations, errors, converged = out.histograms, out.iterations, out.errors, out.converged
    if single:
        return Barycenter(histogram=hist[0], iterations=iterations, error=errors[0], converged=converged[0])
    return Barycenter(histogram=hist, iterations=iterations, error=np.asarray(errors),
                      converged=np.asarray(converged))


def barycenter(histograms, weights, cost, eps, *, max_iters=None, tol=1e-4, check_every=10,
               backend="cpu") -> Barycenter:
    """The entropic Wasserstein barycenter ``argmin_b Σ_k w_k OT_ε(a_k, b)`` of the rows of
    ``histograms`` (K×n) with ``weights`` (K, summing to 1; None: uniform), for a cost with
    n rows (``b`` has one bin per column): iterative Bregman projections in the log domain
    (POT's ``ot.bregman.barycenter(..., method="sinkhorn_log")`` with its error and check
    schedule). A P×K×n ``histograms`` with P×K ``weights`` solves P problems at once.

    ``cost`` is an n×m array or a :class:`Grid`; ``max_iters`` None is POT's default (1000
    for a dense cost, 10000 for a grid); the loop stops when POT's spread error
    ``Σ_x std_k (K_k-marginals)`` falls below ``tol``.
    """
    histograms = np.asarray(histograms)
    _ndim(histograms, "histograms", (2, 3), "K×n histograms (or P×K×n)")
    arrays = [histograms]
    cost_arg, batch = _cost_arg(cost, arrays)
    if batch is not None:
        raise ValueError("cost: a barycenter needs one n×m cost shared by its inputs")
    if weights is not None:
        arrays.append(np.asarray(weights))
    dtype = _dtype(*arrays)
    histograms = _array(histograms, dtype)
    if weights is None:
        k = histograms.shape[-2] if histograms.ndim >= 2 else 1
        weights = np.full(histograms.shape[:-1], 1.0 / k, dtype=dtype)
    weights = _array(weights, dtype)
    _ndim(weights, "weights", (histograms.ndim - 1,), f"one weight per histogram ({'K' if histograms.ndim == 2 else 'P×K'})")
    return _barycenter(histograms, weights, _retype_cost(cost_arg, dtype), eps, max_iters, tol,
                       check_every, backend)


def grid_barycenter(images, weights, eps, *, max_iters=None, tol=1e-4, check_every=10,
                    backend="cpu") -> Barycenter:
    """The barycenter of ``images`` (K×N, K×N×M or K×N×M×L) on the regular grid of their
    shape over the unit cube, with the separable kernel ``exp(−|x − y|²/ε)`` (POT's
    ``convolutional_barycenter2d(..., method="sinkhorn_log")`` for K×N×M): a 2-D step is two
    1-D log-convolutions, O(N³) instead of O(N⁴). ``histogram`` has the images' shape."""
    images = np.asarray(images)
    arrays = [images] + ([np.asarray(weights)] if weights is not None else [])
    dtype = _dtype(*arrays)
    images = _array(images, dtype)
    if images.ndim not in (2, 3, 4):
        raise ValueError(f"images: shape {images.shape}: expected K×N, K×N×M or K×N×M×L")
    k, shape = images.shape[0], images.shape[1:]
    if weights is None:
        weights = np.full(k, 1.0 / k, dtype=dtype)
    weights = _array(weights, dtype)
    _ndim(weights, "weights", (1,), "one weight per image (K)")
    flat = images.reshape(k, -1)
    try:
        bar = _barycenter(flat, weights, ("grid", shape), eps, max_iters, tol, check_every, backend)
    except ValueError as e:  # the library checks the flattened images as "histograms"
        msg = str(e)
        if msg.startswith("histograms"):
            raise ValueError("images" + msg[len("histograms"):]) from None
        raise
    bar.histogram = bar.histogram.reshape(shape)
    return bar


# ---------------------------------------------------------------------------------------
# Bistochastic projection and linear algebra
# ---------------------------------------------------------------------------------------


def bistochastic(x, iters=None, tol=0.0, *, backend="cpu") -> BistochasticResult:
    """``R = SinkhornKnopp(exp(X))`` for each n×n matrix of ``x`` (n×n or B×n×n, n ≤ 32),
    in the log domain: alternately normalise columns and rows ``iters`` times (default 20),
    or, with ``tol > 0``, until the column error ``Σ_j |Σ_i R_ij − 1|`` is ``≤ tol`` (at most
    ``iters``, default 100 000). Rows of ``r`` sum to 1."""
    if iters is None:
        iters = 20 if tol == 0 else 100_000
    x = np.asarray(x)
    x = _array(x, _dtype(x))
    _ndim(x, "x", (2, 3), "an n×n matrix or a B×n×n batch")
    single = x.ndim == 2
    out = _logot.bistochastic(x[None] if single else x, _count("iters", iters), _real("tol", tol), backend)
    return BistochasticResult(r=out.r[0] if single else out.r, convergence=_convergence(out.convergence))


def bistochastic_backward(r, g, *, cg_tol=None, cg_max_iters=1000, backend="cpu") -> BistochasticGradient:
    """``∂L/∂X`` of the projection from its result ``r`` and ``g = ∂L/∂R``, by implicit
    differentiation: ``∂L/∂X = (G − a1ᵀ − 1bᵀ)⊙R`` with ``(I − RᵀR) b = (G⊙R)ᵀ1 −
    Rᵀ(G⊙R)1``, ``a = (G⊙R)1 − Rb``, solved matrix-free by CG. Exact for the exact
    projection (run the forward to a tolerance for exact gradients)."""
    r = np.asarray(r)
    g = np.asarray(g)
    dtype = _dtype(r, g)
    r, g = _array(r, dtype), _array(g, dtype)
    _ndim(r, "r", (2, 3), "an n×n matrix or a B×n×n batch")
    _ndim(g, "g", (r.ndim,), f"the shape of r, {r.shape}")
    single = r.ndim == 2
    if single:
        r, g = r[None], g[None]
    out = _logot.bistochastic_backward(r, g, _optional_real("cg_tol", cg_tol), _count("cg_max_iters", cg_max_iters),
                                         backend)
    return BistochasticGradient(dx=out.dx[0] if single else out.dx, cg=_cg_report(out.cg))


def svd3(a, *, backend="cpu") -> Svd3:
    """Thin SVD ``A = U·diag(S)·Vᵀ`` of an M×3 matrix or a B×M×3 batch, through the 3×3 Gram
    matrix (cyclic Jacobi); singular values descending."""
    a = np.asarray(a)
    a = _array(a, _dtype(a))
    _ndim(a, "a", (2, 3), "an M×3 matrix or a B×M×3 batch")
    single = a.ndim == 2
    out = _logot.svd3(a[None] if single else a, backend)
    u, s, vt = out.u, out.s, out.vt
    if single:
        u, s, vt = u[0], s[0], vt[0]
    return Svd3(u=u, s=s, vt=vt)


def newton_schulz(x, steps=5, *, coefficients=MUON_COEFFICIENTS, polish_steps=0, backend="cpu") -> np.ndarray:
    """Newton–Schulz orthogonalisation of ``x`` (r×c): ``x`` scaled by its Frobenius norm,
    then ``steps`` steps ``X ← aX + b(XXᵀ)X + c(XXᵀ)²X`` with ``coefficients = (a, b, c)``
    (Muon's quintic by default), then ``polish_steps`` cubic steps (converging to the polar
    factor ``U·Vᵀ``)."""
    x = np.asarray(x)
    x = _array(x, _dtype(x))
    _ndim(x, "x", (2,), "a matrix")
    coefficients = tuple(_real(f"coefficients[{k}]", c) for k, c in enumerate(coefficients))
    return _logot.newton_schulz(x, _count("steps", steps), coefficients, _count("polish_steps", polish_steps), backend)


# ---------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------


def cuda_device_name(ordinal: int = 0) -> str:
    """The name of GPU ``ordinal``; ``RuntimeError`` with the reason when the CUDA backend
    cannot run (no driver, no GPU, NVRTC missing). The first call compiles the kernels."""
    return _logot.cuda_device_name(_count("ordinal", ordinal))


def cuda_available(ordinal: int = 0) -> bool:
    """Whether ``backend="cuda"`` (GPU ``ordinal``) can run here."""
    try:
        _logot.cuda_device_name(_count("ordinal", ordinal))
        return True
    except RuntimeError:
        return False


def __getattr__(name):
    # `logot.torch` after a plain `import logot`, imported on first use (never at import).
    if name in ("torch", "pot"):
        import importlib

        return importlib.import_module(f"logot.{name}")
    raise AttributeError(f"module 'logot' has no attribute {name!r}")
