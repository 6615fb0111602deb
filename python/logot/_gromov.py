"""Gromov–Wasserstein: entropic GW by mirror descent with log-domain Sinkhorn inner solves,
exact GW by conditional gradient with the network simplex, both also fused with a feature
cost, their envelope gradients, and point-cloud GW in linear memory.

For structures ``C1`` (n×n), ``C2`` (m×m), weights ``p``, ``q``, a feature cost ``M``
(n×m) and ``α ∈ [0, 1]`` the objective of a plan ``T ∈ Π(p, q)`` is
``F(T) = (1 − α)·⟨M, T⟩ + α·Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl`` (POT's conventions, α = 1
without ``M``), with ``L(a, b) = (a − b)²`` (``"square_loss"``) or
``a·log(a/b) − a + b`` (``"kl_loss"``)."""

from __future__ import annotations

import warnings

import numpy as np

from . import _logot
from ._exact import _rename
from ._results import (
    Convergence,
    ConvergenceWarning,
    GromovGradients,
    GromovReport,
    GromovResult,
    PointGromovResult,
)

__all__ = [
    "gromov_wasserstein",
    "gromov_wasserstein2",
    "fused_gromov_wasserstein",
    "fused_gromov_wasserstein2",
    "entropic_gromov_wasserstein",
    "entropic_gromov_wasserstein2",
    "entropic_fused_gromov_wasserstein",
    "entropic_fused_gromov_wasserstein2",
    "point_gromov_wasserstein",
]

_LOSSES = ("square_loss", "kl_loss")
_CONVERGENCE_FIELDS = ("iterations", "marginal_error", "tol", "converged", "marginal_errors", "converged_each",
                       "iterations_each")


def _lg():
    # The package's argument helpers, imported when first called (the package imports this
    # module).
    import logot

    return logot


def _structures(m, c1, c2, p, q, init):
    """The arrays of one problem in one dtype (p, q None: uniform), each of the right rank."""
    lg = _lg()
    c1, c2 = np.asarray(c1), np.asarray(c2)
    lg._ndim(c1, "c1", (2,), "an n×n structure matrix")
    lg._ndim(c2, "c2", (2,), "an m×m structure matrix")
    named = {"p": p, "q": q, "m": m, "init": init}
    arrays = {k: None if v is None else np.asarray(v) for k, v in named.items()}
    dtype = lg._dtype(c1, c2, *[a for a in arrays.values() if a is not None])
    for k, dims, what in (("p", (1,), "weights (n)"), ("q", (1,), "weights (m)"),
                          ("m", (2,), "an n×m feature cost"), ("init", (2,), "an n×m plan")):
        if arrays[k] is not None:
            lg._ndim(arrays[k], k, dims, what)
    if arrays["p"] is None:
        arrays["p"] = np.full(c1.shape[0], 1.0 / max(c1.shape[0], 1))
    if arrays["q"] is None:
        arrays["q"] = np.full(c2.shape[0], 1.0 / max(c2.shape[0], 1))
    cast = {k: None if v is None else np.asarray(v, dtype=dtype) for k, v in arrays.items()}
    return (np.asarray(c1, dtype=dtype), np.asarray(c2, dtype=dtype), cast["p"], cast["q"], cast["m"],
            cast["init"])


def _loss(loss):
    if not isinstance(loss, str) or loss not in _LOSSES:
        raise ValueError(f"loss = {loss!r}: expected 'square_loss' or 'kl_loss'")
    return loss


def _symmetric(symmetric):
    if symmetric is None or isinstance(symmetric, (bool, np.bool_)):
        return None if symmetric is None else bool(symmetric)
    raise TypeError(f"symmetric: expected None, True or False, got {type(symmetric).__name__} {symmetric!r}")


def _alpha(alpha):
    return _lg()._real("alpha", alpha)


def _result(out, eps, loss) -> GromovResult:
    inner = None if out.inner is None else Convergence(**{k: getattr(out.inner, k) for k in _CONVERGENCE_FIELDS})
    report = GromovReport(iterations=out.iterations, converged=out.converged, marginal_error=out.marginal_error,
                          step=out.step, steps=list(out.steps), stationarity=out.stationarity,
                          inner_iterations=out.inner_iterations, inner_unconverged=out.inner_unconverged,
                          newton_steps=out.newton_steps, inner=inner, gap=out.gap, losses=list(out.losses))
    grads = None
    if out.gradients is not None:
        g = out.gradients
        grads = GromovGradients(c1=g.c1, c2=g.c2, p=g.p, q=g.q, m=g.m, alpha=g.alpha)
    return GromovResult(plan=out.plan, value=out.value, linear=out.linear, quadratic=out.quadratic, f=out.f,
                        g=out.g, eps=None if eps is None else float(eps), loss=loss, symmetric=out.symmetric,
                        report=report, gradients=grads)


def _entropic(m, c1, c2, eps, p, q, alpha, loss, symmetric, init, max_iters, tol, check_every, inner_max_iters,
              inner_tol, inner_check_every, backend, gradients) -> GromovResult:
    lg = _lg()
    c1, c2, p, q, m, init = _structures(m, c1, c2, p, q, init)
    loss = _loss(loss)
    with _rename(g0="init"):
        out = _logot.entropic_gromov(
            c1, c2, p, q, lg._real("eps", eps), m, 1.0 if m is None else _alpha(alpha), init, loss,
            _symmetric(symmetric), lg._count("max_iters", max_iters), lg._real("tol", tol),
            lg._count("check_every", check_every), lg._count("inner_max_iters", inner_max_iters),
            lg._optional_real("inner_tol", inner_tol), lg._count("inner_check_every", inner_check_every), backend,
            bool(gradients))
    return _result(out, eps, loss)


def _exact(m, c1, c2, p, q, alpha, loss, symmetric, init, max_iters, tol_rel, tol_abs, backend,
           gradients) -> GromovResult:
    lg = _lg()
    c1, c2, p, q, m, init = _structures(m, c1, c2, p, q, init)
    loss = _loss(loss)
    with _rename(g0="init"):
        out = _logot.exact_gromov(
            c1, c2, p, q, m, 1.0 if m is None else _alpha(alpha), init, loss, _symmetric(symmetric),
            lg._count("max_iters", max_iters), lg._real("tol_rel", tol_rel), lg._real("tol_abs", tol_abs), backend,
            bool(gradients))
    return _result(out, None, loss)


def _warn(r: GromovResult, tol, what: str):
    if not r.report.converged and tol != 0:
        warnings.warn(f"{what} did not converge after {r.report.iterations} iterations (see the report of the "
                      "function without 2 for the details)", ConvergenceWarning, stacklevel=3)


_ENTROPIC_OPTIONS = """
    Options: ``loss`` (``"square_loss"`` or ``"kl_loss"``; the latter needs C1 ≥ 0 and
    C2 > 0), ``symmetric`` (None: tested as POT does; False uses the gradient
    ½(L⊗T + Lᵀ⊗T), right for any structures), ``init`` (the initial plan, n×m; None:
    p·qᵀ), ``max_iters`` outer iterations, stopping when ‖T − T_prev‖_F ≤ ``tol`` at the
    iterations 0, ``check_every``, … (POT's rule; ``tol=0`` runs every iteration), each
    inner Sinkhorn solve warm-started from the previous potentials with at most
    ``inner_max_iters`` iterations to the marginal tolerance ``inner_tol`` (relative L1;
    None: 1e-9 in float64, 1e-5 in float32) checked every ``inner_check_every``,
    ``backend`` ("cpu", "cuda", "cuda:N"), ``gradients`` (the envelope gradients,
    :class:`GromovGradients`, of the regularised value F(T) + ε·Σ T·log T at the returned
    plan: exact at a fixed point, ``report.stationarity`` 0).
"""

_EXACT_OPTIONS = """
    Options: ``loss``, ``symmetric`` as in :func:`entropic_gromov_wasserstein`; ``init`` (a
    plan with marginals p and q; None: p·qᵀ), ``max_iters`` Frank–Wolfe iterations,
    stopping when the objective changes by at most ``tol_rel`` (relative) or ``tol_abs``;
    ``backend``; ``gradients`` (envelope gradients of F at the returned plan: exact at a
    local minimum that is a vertex, with the weights' where the linear problem's duals are
    unique). A local method: the value is that of a stationary plan (``report.gap`` 0), not
    necessarily the global minimum.
"""


def entropic_gromov_wasserstein(c1, c2, eps, p=None, q=None, *, loss="square_loss", symmetric=None, init=None,
                                max_iters=1000, tol=1e-9, check_every=10, inner_max_iters=1000, inner_tol=None,
                                inner_check_every=10, backend="cpu", gradients=False) -> GromovResult:
    """Entropic Gromov–Wasserstein between ``(c1, p)`` and ``(c2, q)`` (POT's
    ``entropic_gromov_wasserstein``, ``solver="PGD"``): from ``T₀``, the mirror descent
    ``T_{k+1} = Sinkhorn(p, q, ∇F(T_k), eps)``, whose fixed points are the stationary plans
    of F(T) − eps·H(T). ``p``, ``q`` None: uniform. Returns a :class:`GromovResult` (the
    plan, ``value`` = F(T) without the entropy, POT's ``gw_dist``, and the report)."""
    return _entropic(None, c1, c2, eps, p, q, 1.0, loss, symmetric, init, max_iters, tol, check_every,
                     inner_max_iters, inner_tol, inner_check_every, backend, gradients)


def entropic_gromov_wasserstein2(c1, c2, eps, p=None, q=None, **options) -> float:
    """The value F(T) of :func:`entropic_gromov_wasserstein` (same arguments); warns
    :class:`ConvergenceWarning` when the outer loop stopped at ``max_iters`` (unless
    ``tol=0``)."""
    r = entropic_gromov_wasserstein(c1, c2, eps, p, q, **options)
    _warn(r, options.get("tol", 1e-9), "Entropic Gromov–Wasserstein")
    return r.value


def entropic_fused_gromov_wasserstein(m, c1, c2, eps, p=None, q=None, *, alpha=0.5, loss="square_loss",
                                      symmetric=None, init=None, max_iters=1000, tol=1e-9, check_every=10,
                                      inner_max_iters=1000, inner_tol=None, inner_check_every=10, backend="cpu",
                                      gradients=False) -> GromovResult:
    """Entropic fused Gromov–Wasserstein (POT's ``entropic_fused_gromov_wasserstein``): the
    mirror descent of :func:`entropic_gromov_wasserstein` on F(T) = (1 − α)·⟨m, T⟩ +
    α·⟨L⊗T, T⟩, ``m`` the n×m feature cost, ``alpha`` in [0, 1]. ``value`` is POT's
    ``fgw_dist`` = ``linear`` + ``quadratic``."""
    return _entropic(m, c1, c2, eps, p, q, alpha, loss, symmetric, init, max_iters, tol, check_every,
                     inner_max_iters, inner_tol, inner_check_every, backend, gradients)


def entropic_fused_gromov_wasserstein2(m, c1, c2, eps, p=None, q=None, **options) -> float:
    """The value of :func:`entropic_fused_gromov_wasserstein` (same arguments; warns as
    :func:`entropic_gromov_wasserstein2`)."""
    r = entropic_fused_gromov_wasserstein(m, c1, c2, eps, p, q, **options)
    _warn(r, options.get("tol", 1e-9), "Entropic fused Gromov–Wasserstein")
    return r.value


def gromov_wasserstein(c1, c2, p=None, q=None, *, loss="square_loss", symmetric=None, init=None, max_iters=10000,
                       tol_rel=1e-9, tol_abs=1e-9, backend="cpu", gradients=False) -> GromovResult:
    """Exact Gromov–Wasserstein between ``(c1, p)`` and ``(c2, q)`` by conditional gradient
    (Frank–Wolfe; POT's ``gromov_wasserstein`` with ``armijo=False``): each step solves the
    linearised problem ``argmin_{P ∈ Π(p, q)} ⟨∇F(T), P⟩`` by the network simplex and
    moves along ``P − T`` by the exact line search (F is quadratic along it). ``f``, ``g``:
    the duals of the linear problem at the returned plan; ``report.gap`` the Frank–Wolfe
    gap there."""
    return _exact(None, c1, c2, p, q, 1.0, loss, symmetric, init, max_iters, tol_rel, tol_abs, backend, gradients)


def gromov_wasserstein2(c1, c2, p=None, q=None, **options) -> float:
    """The value of :func:`gromov_wasserstein` (same arguments); warns
    :class:`ConvergenceWarning` when ``max_iters`` stopped it."""
    r = gromov_wasserstein(c1, c2, p, q, **options)
    _warn(r, 1, "Gromov–Wasserstein")
    return r.value


def fused_gromov_wasserstein(m, c1, c2, p=None, q=None, *, alpha=0.5, loss="square_loss", symmetric=None,
                             init=None, max_iters=10000, tol_rel=1e-9, tol_abs=1e-9, backend="cpu",
                             gradients=False) -> GromovResult:
    """Exact fused Gromov–Wasserstein (POT's ``fused_gromov_wasserstein``): the conditional
    gradient of :func:`gromov_wasserstein` on F(T) = (1 − α)·⟨m, T⟩ + α·⟨L⊗T, T⟩."""
    return _exact(m, c1, c2, p, q, alpha, loss, symmetric, init, max_iters, tol_rel, tol_abs, backend, gradients)


def fused_gromov_wasserstein2(m, c1, c2, p=None, q=None, **options) -> float:
    """The value of :func:`fused_gromov_wasserstein` (same arguments; warns as
    :func:`gromov_wasserstein2`)."""
    r = fused_gromov_wasserstein(m, c1, c2, p, q, **options)
    _warn(r, 1, "Fused Gromov–Wasserstein")
    return r.value


for _f in (entropic_gromov_wasserstein, entropic_fused_gromov_wasserstein):
    _f.__doc__ += _ENTROPIC_OPTIONS
for _f in (gromov_wasserstein, fused_gromov_wasserstein):
    _f.__doc__ += _EXACT_OPTIONS
del _f


def point_gromov_wasserstein(x, y, eps, p=None, q=None, *, max_iters=1000, tol=1e-9, inner_max_iters=1000,
                             inner_tol=None, inner_check_every=10, backend="cpu", plan=False) -> PointGromovResult:
    """Entropic Gromov–Wasserstein between the clouds ``x`` (n×d, weights ``p``) and ``y``
    (m×d', any d', weights ``q``; None: uniform) for the structures |x_i − x_k|² and
    |y_j − y_l|² and the square loss, in memory O((n + m)·(d + d')): no n×n, m×m or n×m
    matrix. The cross term C1·T·C2 factors through the plan's moments Φᵀ·T·Ψ (Φ =
    (x, |x|², 1)), so each outer step is a point-cloud Sinkhorn solve on transformed clouds
    of dimension d' + 1. The iterates are those of :func:`entropic_gromov_wasserstein` on
    the same clouds from p·qᵀ; the loop stops when the moments' relative change is at
    most ``tol``. ``plan=True`` also forms the n×m plan (small problems)."""
    lg = _lg()
    x, y = np.asarray(x), np.asarray(y)
    lg._ndim(x, "x", (2,), "points n×d")
    lg._ndim(y, "y", (2,), "points m×d'")
    ws = [None if w is None else np.asarray(w) for w in (p, q)]
    dtype = lg._dtype(x, y, *[w for w in ws if w is not None])
    for w, name in zip(ws, ("p", "q")):
        if w is not None:
            lg._ndim(w, name, (1,), "weights (a vector)")
    p = np.full(x.shape[0], 1.0 / max(x.shape[0], 1)) if ws[0] is None else ws[0]
    q = np.full(y.shape[0], 1.0 / max(y.shape[0], 1)) if ws[1] is None else ws[1]
    x, y, p, q = (np.asarray(v, dtype=dtype) for v in (x, y, p, q))
    out = _logot.point_gromov(x, y, p, q, lg._real("eps", eps), lg._count("max_iters", max_iters),
                              lg._real("tol", tol), lg._count("inner_max_iters", inner_max_iters),
                              lg._optional_real("inner_tol", inner_tol),
                              lg._count("inner_check_every", inner_check_every), backend, bool(plan))
    inner = Convergence(**{k: getattr(out.inner, k) for k in _CONVERGENCE_FIELDS})
    report = GromovReport(iterations=out.iterations, converged=out.converged, marginal_error=out.marginal_error,
                          step=out.step, steps=[], stationarity=out.stationarity,
                          inner_iterations=out.inner_iterations, inner_unconverged=out.inner_unconverged,
                          newton_steps=0, inner=inner, gap=None, losses=[])
    return PointGromovResult(value=out.value, f=out.f, g=out.g, x_tilde=out.x_tilde, y_tilde=out.y_tilde,
                             moments=out.moments, eps=float(eps), report=report, plan=out.plan)
