"""Exact optimal transport: the network simplex and the assignment solver (dense costs or
point clouds) on the CPU, the auction on a GPU for batches of assignment problems, the line
(sorting), sliced and max-sliced Wasserstein distances. Every exact result carries its
potentials and a certificate measured on what is returned."""

from __future__ import annotations

from typing import List, Optional, Union

import numpy as np

from . import _logot
from ._results import Certificate, ExactResult, SlicedResult

__all__ = [
    "emd",
    "emd2",
    "emd_1d",
    "emd2_1d",
    "wasserstein_1d",
    "sliced_wasserstein",
    "max_sliced_wasserstein",
]

_CERTIFICATE_FIELDS = ("primal", "dual", "duality_gap", "relative_gap", "max_violation", "max_slack_on_support",
                       "marginal_error_a", "marginal_error_b", "mass", "max_abs_cost")
_EXACT_FIELDS = ("cost", "n", "m", "rows", "cols", "mass", "f", "g", "iterations", "converged", "exact", "method")
_METHODS = ("auto", "network_simplex", "assignment")


def _lg():
    # The package's argument helpers, imported when first called (the package imports this
    # module).
    import logot

    return logot


def _exact_result(out) -> ExactResult:
    fields = {k: getattr(out, k) for k in _EXACT_FIELDS}
    c = out.certificate
    fields["certificate"] = Certificate(**{k: getattr(c, k) for k in _CERTIFICATE_FIELDS})
    return ExactResult(**fields)


def _weights(w, count: int, name: str, dtype) -> Optional[np.ndarray]:
    """Weights as an array of ``dtype`` (None or an empty list: None, uniform)."""
    if w is None:
        return None
    w = np.asarray(w)
    if w.size == 0 and count > 0:
        return None
    return np.asarray(w, dtype=dtype)


def _dtype(*arrays) -> np.dtype:
    return _lg()._dtype(*[a for a in arrays if a is not None])


def _ndim(a, arg, dims, what):
    _lg()._ndim(a, arg, dims, what)


def _params(max_iters, max_seconds, method, certificate_tol):
    lg = _lg()
    if method not in _METHODS:
        raise ValueError(f"method = {method!r}: expected one of {', '.join(map(repr, _METHODS))}")
    return dict(
        max_iters=None if max_iters is None else lg._count("max_iters", max_iters),
        max_seconds=lg._optional_real("max_seconds", max_seconds),
        method=method,
        certificate_tol=lg._real("certificate_tol", certificate_tol),
    )


def emd(mu, nu, cost, *, max_iters=None, max_seconds=None, method="auto",
        certificate_tol=1e-9, backend="cpu") -> Union[ExactResult, List[ExactResult]]:
    """Exact optimal transport ``min ⟨P, C⟩ s.t. P·1 = μ, Pᵀ·1 = ν, P ≥ 0`` (POT's
    ``ot.emd`` / ``ot.emd2``), with the plan, the dual potentials and a certificate.

    ``cost``: an n×m matrix (any sign, ties allowed), B×n×m (one per problem), or a
    :class:`logot.PointCloud` (``"sqeuclidean"`` or ``"euclidean"``; costs computed when
    read, no n×m matrix for large clouds; x B×n×d, y B×m×d for one pair per problem).
    ``mu`` (n or B×n) and ``nu`` (m or B×m): weights, None for uniform; their totals must
    agree within 1e-6 relative (1e-4 in float32), then ``nu`` is scaled to the mass of
    ``mu`` as POT does. Zero weights are allowed. Everything is computed in float64.

    ``method``: ``"auto"`` (the assignment solver for square problems with equal weights
    between clouds of dimension ≥ 8, the network simplex otherwise), ``"network_simplex"``
    or ``"assignment"``. ``max_iters`` (pivots or augmentations) and ``max_seconds`` limit
    one problem: reaching them is reported (``converged`` False), not an error.
    ``certificate_tol``: the relative tolerance of ``exact``.

    ``backend``: ``"cpu"``, or ``"cuda"`` / ``"cuda:N"`` for assignment problems (minibatch
    OT): square, uniform weights (None, or all entries of each histogram equal), n ≤ 4096
   , a dense cost or a ``"sqeuclidean"`` point cloud, ``method``
    ``"auto"`` or ``"assignment"``. The whole batch is solved on the GPU by the auction
    algorithm with ε-scaling (one launch), each result certified in float64 on what is
    handed back; its ``method`` is ``"auction"``, or ``"assignment"`` where the device's
    certificate did not hold within ``certificate_tol`` (or a round limit stopped it) and
    the problem was solved again on the CPU. Other input with a ``"cuda"`` backend raises
    ``ValueError`` naming the argument and why (it never runs on the CPU unannounced);
    ``max_seconds`` bounds the CPU's work only.

    One problem gives an :class:`ExactResult`, a batch a list of them (solved in parallel).
    """
    lg = _lg()
    params = _params(max_iters, max_seconds, method, certificate_tol)
    if isinstance(cost, lg.PointCloud):
        x, y = np.asarray(cost.x), np.asarray(cost.y)
        lg._check_clouds(x, y)
        if cost.metric not in ("sqeuclidean", "euclidean"):
            raise ValueError(f"cost.metric = {cost.metric!r}: expected 'sqeuclidean' or 'euclidean'")
        p = None if cost.metric == "sqeuclidean" else 1.0
        mu = None if mu is None else np.asarray(mu)
        nu = None if nu is None else np.asarray(nu)
        single = x.ndim == 2 and (mu is None or mu.ndim == 1) and (nu is None or nu.ndim == 1)
        dtype = _dtype(x, y, mu, nu)
        x, y = np.asarray(x, dtype=dtype), np.asarray(y, dtype=dtype)
        if x.ndim == 2:
            x, y = x[None], y[None]
        ws = [None if w is None else np.asarray(w, dtype=dtype) for w in (mu, nu)]
        for w, name in zip(ws, ("mu", "nu")):
            if w is not None:
                _ndim(w, name, (1, 2), "weights (n) or a batch of them (B×n)")
        batch = max([x.shape[0]] + [w.shape[0] for w in ws if w is not None and w.ndim == 2])
        if x.shape[0] == 1 and batch > 1:
            x = np.broadcast_to(x, (batch,) + x.shape[1:])
            y = np.broadcast_to(y, (batch,) + y.shape[1:])
        ws = [w if w is None or w.ndim == 2 else np.broadcast_to(w, (batch, w.size)) for w in ws]
        outs = _logot.emd_points(ws[0], ws[1], x, y, p, **params, backend=backend)
    else:
        cost = np.asarray(cost)
        _ndim(cost, "cost", (2, 3), "an n×m cost or a batch of them (B×n×m)")
        n, m = cost.shape[-2:]
        mu = np.full(n, 1.0 / n) if mu is None else np.asarray(mu)
        nu = np.full(m, 1.0 / m) if nu is None else np.asarray(nu)
        _ndim(mu, "mu", (1, 2), "a histogram (n) or a batch of them (B×n)")
        _ndim(nu, "nu", (1, 2), "a histogram (m) or a batch of them (B×m)")
        for w, name, k, side in ((mu, "mu", n, "rows"), (nu, "nu", m, "columns")):
            if w.shape[-1] != k:
                raise ValueError(f"{name}: has {w.shape[-1]} entries but cost has {k} {side}")
        single = mu.ndim == 1 and nu.ndim == 1 and cost.ndim == 2
        dtype = _dtype(mu, nu, cost)
        mu, nu, cost = (np.asarray(v, dtype=dtype) for v in (mu, nu, cost))
        batch = max(cost.shape[0] if cost.ndim == 3 else 1, mu.shape[0] if mu.ndim == 2 else 1,
                    nu.shape[0] if nu.ndim == 2 else 1)
        if mu.ndim == 1:
            mu = np.broadcast_to(mu, (batch, mu.size))
        if nu.ndim == 1:
            nu = np.broadcast_to(nu, (batch, nu.size))
        outs = _logot.emd(mu, nu, cost[None] if cost.ndim == 2 else cost, **params, backend=backend)
    results = [_exact_result(o) for o in outs]
    return results[0] if single else results


def emd2(mu, nu, cost, **kwargs) -> Union[float, np.ndarray]:
    """The exact transport cost ``⟨P, C⟩`` of :func:`emd` (same arguments): a float, or one
    per problem of a batch. Check ``emd(...).exact`` where a limit may stop the solver."""
    r = emd(mu, nu, cost, **kwargs)
    if isinstance(r, list):
        return np.array([x.cost for x in r])
    return r.cost


def _line(x_a, x_b, a, b, names):
    x_a, x_b = np.asarray(x_a), np.asarray(x_b)
    a = None if a is None else np.asarray(a)
    b = None if b is None else np.asarray(b)
    dtype = _dtype(x_a, x_b, a, b)
    out = []
    for v, name in zip((x_a, x_b, a, b), names):
        if v is not None:
            v = np.asarray(v, dtype=dtype)
            _ndim(v, name, (1,), "a vector")
        out.append(v)
    return out


def _power(p):
    """The library's metric for ``|x − y|^p``: None (``|x − y|²`` as a product) for p = 2."""
    p = _lg()._real("p", p)
    return None if p == 2.0 else p


def emd_1d(x_a, x_b, a=None, b=None, *, p=2.0) -> ExactResult:
    """Exact OT on the line between the points ``x_a`` (n) and ``x_b`` (m) with weights
    ``a``, ``b`` (None: uniform) for the cost ``|x − y|^p``, ``p ≥ 1``: the monotone plan by
    sorting and a merge, O((n + m) log(n + m)), with potentials and certificate (POT's
    ``emd_1d``; ``cost`` is ``emd2_1d``)."""
    x_a, x_b, a, b = _line(x_a, x_b, a, b, ("x_a", "x_b", "a", "b"))
    with _rename(metric="p"):
        return _exact_result(_logot.emd_1d(x_a, x_b, a, b, _power(p)))


def emd2_1d(x_a, x_b, a=None, b=None, *, p=2.0) -> float:
    """The cost of :func:`emd_1d` alone (no plan, potentials nor certificate)."""
    x_a, x_b, a, b = _line(x_a, x_b, a, b, ("x_a", "x_b", "a", "b"))
    with _rename(metric="p"):
        return _logot.emd2_1d(x_a, x_b, a, b, _power(p))


def wasserstein_1d(u_values, v_values, u_weights=None, v_weights=None, p=1.0) -> Union[float, np.ndarray]:
    """``W_p^p = ∫₀¹ |F⁻¹(q) − G⁻¹(q)|^p dq`` on the line (the p-th power, POT's
    ``wasserstein_1d``), ``p ≥ 1``. ``u_values`` (n) against ``v_values`` (m), or a batch:
    row k of ``u_values`` (B×n) against row k of ``v_values`` (B×m), weights B×n and B×m
    (or n and m shared by the rows; None: uniform); a float, or an array of B."""
    lg = _lg()
    u, v = np.asarray(u_values), np.asarray(v_values)
    uw = None if u_weights is None else np.asarray(u_weights)
    vw = None if v_weights is None else np.asarray(v_weights)
    _ndim(u, "u_values", (1, 2), "values (n) or a batch of them (B×n)")
    _ndim(v, "v_values", (u.ndim,), f"values of {u.ndim} dimension(s), as u_values")
    single = u.ndim == 1
    dtype = _dtype(u, v, uw, vw)
    u, v = np.asarray(u, dtype=dtype), np.asarray(v, dtype=dtype)
    if single:
        u, v = u[None], v[None]
    ws = []
    for w, name, x in ((uw, "u_weights", u), (vw, "v_weights", v)):
        if w is not None:
            w = np.asarray(w, dtype=dtype)
            _ndim(w, name, (1, 2), "weights (n) or a batch of them (B×n)")
            if w.ndim == 1:
                w = np.broadcast_to(w, (x.shape[0], w.size))
        ws.append(w)
    out = _logot.wasserstein_1d(u, v, ws[0], ws[1], lg._real("p", p))
    return float(out[0]) if single else out


def _projections(x_s, projections, n_projections, seed):
    lg = _lg()
    n_projections = lg._count("n_projections", n_projections)
    seed = lg._count("seed", seed)
    if seed >= 2**32:
        raise ValueError(f"seed = {seed}: expected an integer from 0 to 2**32 - 1 (NumPy's RandomState)")
    if projections is not None:
        projections = np.asarray(projections, dtype=np.float64)
        _ndim(projections, "projections", (2,), "directions as columns (d×L)")
    return projections, n_projections, seed


def _clouds(x_s, x_t, a, b):
    x_s, x_t = np.asarray(x_s), np.asarray(x_t)
    a = None if a is None else np.asarray(a)
    b = None if b is None else np.asarray(b)
    dtype = _dtype(x_s, x_t, a, b)
    _ndim(x_s, "x_s", (2,), "points n×d")
    _ndim(x_t, "x_t", (2,), "points m×d")
    out = [np.asarray(x_s, dtype=dtype), np.asarray(x_t, dtype=dtype)]
    for w, name in ((a, "a"), (b, "b")):
        if w is not None:
            w = np.asarray(w, dtype=dtype)
            _ndim(w, name, (1,), "weights (a vector)")
        out.append(w)
    return out


def sliced_wasserstein(x_s, x_t, a=None, b=None, *, n_projections=50, seed=0, projections=None, p=2.0,
                       gradients=False) -> SlicedResult:
    """The sliced Wasserstein distance ``SW_p = ((1/L) Σ_l W_p^p(θ_l#μ, θ_l#ν))^{1/p}``
    between the points ``x_s`` (n×d, weights ``a``) and ``x_t`` (m×d, weights ``b``; None:
    uniform), each projected problem solved exactly on the line (POT's
    ``sliced_wasserstein_distance``). The directions: ``projections`` (d×L, columns used
    as they are), or ``n_projections`` drawn from ``seed`` as ``np.random.RandomState(seed)``
    draws POT's (normal, each column normalised), so a seed gives POT's directions. With
    ``gradients``: ``grad_x_s``, ``grad_x_t`` of ``distance`` with respect to the points
    (each projection's sorted plan held fixed; exact where the projected values of each side
    are distinct). Deterministic whatever the number of threads."""
    x_s, x_t, a, b = _clouds(x_s, x_t, a, b)
    projections, n_projections, seed = _projections(x_s, projections, n_projections, seed)
    out = _logot.sliced_wasserstein(x_s, x_t, a, b, projections, n_projections, seed, _lg()._real("p", p),
                                    bool(gradients))
    return SlicedResult(distance=out.distance, projected=out.projected, projections=projections,
                        grad_x_s=out.grad_x_s, grad_x_t=out.grad_x_t)


def max_sliced_wasserstein(x_s, x_t, a=None, b=None, *, n_projections=50, seed=0, projections=None, p=2.0,
                           ascent_steps=None, step=0.5, gradients=False) -> SlicedResult:
    """The max-sliced distance ``max_θ W_p(θ#μ, θ#ν)`` over the directions (given or drawn
    as in :func:`sliced_wasserstein`; POT's ``max_sliced_wasserstein_distance``). With
    ``ascent_steps``, the best of them is refined by projected gradient ascent on the
    sphere (first step length ``step``, a step kept only when it increases ``W_p^p``).
    ``direction`` is the best direction found; gradients as in :func:`sliced_wasserstein`,
    at that direction."""
    lg = _lg()
    x_s, x_t, a, b = _clouds(x_s, x_t, a, b)
    projections, n_projections, seed = _projections(x_s, projections, n_projections, seed)
    steps = None if ascent_steps is None else lg._count("ascent_steps", ascent_steps)
    out = _logot.max_sliced_wasserstein(x_s, x_t, a, b, projections, n_projections, seed, lg._real("p", p), steps,
                                        lg._real("step", step), bool(gradients))
    return SlicedResult(distance=out.distance, projected=out.projected, projections=projections,
                        direction=out.direction, steps=out.steps, grad_x_s=out.grad_x_s, grad_x_t=out.grad_x_t)


class _rename:
    """Rename the library's argument names (the prefix of its messages)."""

    def __init__(self, **mapping):
        self.mapping = mapping

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if kind is not None and issubclass(kind, (ValueError, TypeError)):
            msg = str(e)
            for lib, new in self.mapping.items():
                for sep in (":", " ="):
                    if msg.startswith(lib + sep):
                        raise kind(new + msg[len(lib):]) from None
        return False
