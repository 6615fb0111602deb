"""PyTorch autograd functions over logot: Wasserstein losses with exact gradients, Sinkhorn
divergences of point clouds and the bistochastic projection with its implicit backward.

Import it explicitly (``import logot.torch``); ``import logot`` alone never imports torch.

* :func:`wasserstein` — ⟨P, C⟩ with exact (implicit) gradients with respect to the cost and
  both marginals; compose with :func:`sqeuclidean` for gradients with respect to points.
* :func:`coupling` — the plan, differentiable for any downstream loss (implicit).
* :func:`wasserstein_points` — OT_ε of two clouds (cost never stored) with envelope
  gradients for the points and weights, or ⟨P, C⟩ through a dense cost.
* :func:`sinkhorn_divergence` — S_ε of two clouds, differentiable in the points.

  Both point-cloud functions take batches of pairs too (x B×n×d, y B×m×d): a (B,) tensor.
* :func:`bistochastic` — ``SinkhornKnopp(exp(X))`` over the last two axes, with the
  implicit backward (hyper-connection mixing matrices).
* :func:`gromov_wasserstein2`, :func:`entropic_gromov_wasserstein2` — Gromov–Wasserstein
  values with the envelope gradients with respect to the structures and the weights (and
  :func:`gromov_value` for any solved :class:`logot.GromovResult`).
* :func:`sliced_wasserstein`, :func:`max_sliced_wasserstein`, :func:`wasserstein_1d` —
  exact OT losses (sorting on the line) with the library's gradients with respect to the
  points; CUDA tensors go through the host (one copy each way).

Tensors: float32 and float64. CPU tensors share memory with the numpy arrays the library
reads (no copy). CUDA tensors run on the CUDA backend of their device
(``backend="cuda:N"``); :func:`bistochastic`, the dense :func:`wasserstein` (forward and
its exact gradients), :func:`coupling` (forward and backward), :func:`wasserstein_points`
and :func:`sinkhorn_divergence` (``convention="objective"``) compute them in place on the
current stream (see ``CUDA_ZERO_COPY``).
"""

from __future__ import annotations

import threading
import warnings
from typing import Optional

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised where torch is absent
    raise ImportError("logot.torch needs PyTorch (pip install torch)") from e

import numpy as np

import logot as _lg
from ._results import ConvergenceWarning

__all__ = [
    "wasserstein",
    "coupling",
    "wasserstein_points",
    "sinkhorn_divergence",
    "bistochastic",
    "bistochastic_stats",
    "sqeuclidean",
    "gromov_value",
    "gromov_wasserstein2",
    "entropic_gromov_wasserstein2",
    "sliced_wasserstein",
    "max_sliced_wasserstein",
    "wasserstein_1d",
    "CUDA_ZERO_COPY",
]

#: Whether CUDA tensors reach the library without a host copy. True for
#: :func:`bistochastic` (forward and backward): the library reads and writes the tensors'
#: device memory in place and launches on the caller's current CUDA stream
#: (``torch.cuda.current_stream(device)``), and the call never waits for the GPU (the
#: statistics are reported later: :func:`bistochastic_stats`). True for the dense
#: :func:`wasserstein` too (one problem or a batch, the value and the gradients with respect
#: to the cost and both marginals, computed with the forward into tensors torch allocated):
#: only per-problem numbers (the input checks' row sums and ranges, the convergence checks,
#: the distances, the backward's CG coefficients) cross to the host, by a wait on that
#: stream only. So does :func:`coupling` (the plans, and in the backward the implicit
#: gradients, into tensors torch allocated), and :func:`wasserstein_points` (the clouds
#: centred and checked on the device; the value, the point gradients and the potentials into
#: tensors torch allocated), and :func:`sinkhorn_divergence` (its three problems prepared
#: and solved on the device; the points' gradients into tensors torch allocated).
#: ``backend="cpu"`` or another device's name, and the ``"linear"`` conventions' dense costs,
#: take the host path.
CUDA_ZERO_COPY = True


# ---------------------------------------------------------------------------------------
# Tensors <-> numpy
# ---------------------------------------------------------------------------------------


def _backend(tensors, backend: Optional[str]) -> str:
    if backend is not None:
        return backend
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_cuda:
            return f"cuda:{t.device.index or 0}"
    return "cpu"


def _np(t: torch.Tensor) -> np.ndarray:
    """The tensor's data as numpy: shared memory on the CPU; for CUDA tensors the interim
    host copy (see ``CUDA_ZERO_COPY``)."""
    t = t.detach()
    if t.is_cuda:
        t = t.cpu()
    return t.numpy()


def _tensor(a, like: torch.Tensor) -> torch.Tensor:
    out = torch.from_numpy(np.ascontiguousarray(a))
    return out.to(like.device) if like.is_cuda else out


def _dtype_of(*tensors) -> torch.dtype:
    floats = [t.dtype for t in tensors if isinstance(t, torch.Tensor)]
    if floats and all(d == torch.float32 for d in floats):
        return torch.float32
    return torch.float64


def _check_real(x, name: str):
    """A ``TypeError`` naming ``name`` for a complex tensor or array (converting it to a
    real dtype would drop its imaginary part silently), as the numpy API refuses them."""
    dtype = x.dtype if isinstance(x, torch.Tensor) else np.asarray(x).dtype
    if (dtype.is_complex if isinstance(dtype, torch.dtype) else dtype.kind == "c"):
        raise TypeError(f"{name}: expected real numbers, got dtype {dtype}")


def _as_tensors(*xs, names, like=None):
    """Tensors of one floating dtype on one device (numbers and arrays are converted;
    complex ones refused, naming the argument of ``names``)."""
    for x, name in zip(xs, names):
        if x is not None:
            _check_real(x, name)
    ref = like if like is not None else next((x for x in xs if isinstance(x, torch.Tensor)), None)
    dtype = _dtype_of(*xs)
    device = ref.device if ref is not None else torch.device("cpu")
    out = []
    for x in xs:
        if x is None:
            out.append(None)
        elif isinstance(x, torch.Tensor):
            out.append(x.to(dtype))
        else:
            out.append(torch.as_tensor(np.asarray(x), dtype=dtype, device=device))
    return out


def _check_options(options: dict):
    """The solver options of a call checked by type and named before any work (the CUDA
    paths pass them to the compiled module as they are)."""
    _lg._params(1.0, options["max_iters"], options["tol"], options["check_every"], options["eps_scaling"])
    _lg._optional_real("cg_tol", options.get("cg_tol"))
    if "cg_max_iters" in options:
        _lg._count("cg_max_iters", options["cg_max_iters"])


def _warn(conv, what="Sinkhorn"):
    if not conv.converged and conv.tol > 0:
        warnings.warn(
            f"{what} did not converge: marginal error {conv.marginal_error:.3g} > tol {conv.tol:.3g} "
            f"after {conv.iterations} iterations",
            ConvergenceWarning,
            stacklevel=4,
        )


def _warn_cg(cg):
    if cg.unconverged:
        warnings.warn(
            f"the implicit backward's CG did not converge for {cg.unconverged} of {cg.problems} "
            f"problem(s) (relative residual {cg.max_residual:.3g} > {cg.tol:.3g}); the gradients "
            "are approximate",
            ConvergenceWarning,
            stacklevel=4,
        )


def _sum_to(g: torch.Tensor, shape) -> torch.Tensor:
    """Sum a broadcast gradient back to ``shape`` (leading axes)."""
    while g.dim() > len(shape):
        g = g.sum(0)
    return g


# ---------------------------------------------------------------------------------------
# Wasserstein loss ⟨P, C⟩ with implicit gradients
# ---------------------------------------------------------------------------------------


_to_dlpack = torch.utils.dlpack.to_dlpack


def _dlpack(*tensors):
    """DLPack capsules of CUDA tensors for the compiled module, which reads their device,
    dtype, shape and address from them and uses their memory in place. It launches on the
    current stream of their device, the stream torch produced them on, so their producers'
    work is ordered before its reads without a cross-stream wait (what ``__dlpack__(stream=)``
    would add, and only between different streams)."""
    return tuple(_to_dlpack(t) for t in tensors)


def _dense_fits(mu, nu, cost) -> bool:
    """Whether a dense problem takes the in-place path: tensors on one device with matching
    shapes (anything else takes the host path, whose checks name the argument at fault)."""
    if not (mu.device == nu.device == cost.device and mu.dim() in (1, 2) and nu.dim() in (1, 2)
            and cost.dim() in (2, 3)):
        return False
    n, m = cost.shape[-2], cost.shape[-1]
    if mu.shape[-1] != n or nu.shape[-1] != m:
        return False
    batches = {t.shape[0] for t in (mu, nu) if t.dim() == 2} | ({cost.shape[0]} if cost.dim() == 3 else set())
    return len(batches) <= 1


def _dense_inputs(mu, nu, cost):
    """Contiguous ``μ`` (B×n), ``ν`` (B×m) and cost of a problem that ``_dense_fits`` (a
    stream-ordered device copy only where a tensor is broadcast or not contiguous), the sizes
    ``(B, n, m)`` and whether it is one problem."""
    single = mu.dim() == 1 and nu.dim() == 1 and cost.dim() == 2
    batch = cost.shape[0] if cost.dim() == 3 else max(mu.shape[0] if mu.dim() == 2 else 1,
                                                      nu.shape[0] if nu.dim() == 2 else 1)
    n, m = cost.shape[-2], cost.shape[-1]
    a = mu.detach().expand(batch, n).contiguous()
    b = nu.detach().expand(batch, m).contiguous()
    return a, b, cost.detach().contiguous(), (batch, n, m), single


def _dense_on_device(mu, nu, cost, device, options, grads):
    """``_Wasserstein``'s forward in place on GPU ``device``: contiguous inputs (broadcast to
    B×n and B×m; a stream-ordered copy only when needed), the gradients allocated by torch,
    the library on the current stream; only per-problem numbers come back (distances, the
    reports: the call waits for that stream, never for the whole device). Returns the
    distances as a tensor and the three gradients (None when not asked for)."""
    a, b, c, (batch, n, m), single = _dense_inputs(mu, nu, cost)
    out = None
    if grads:
        out = (torch.empty(batch, n, m, dtype=c.dtype, device=c.device), torch.empty_like(a), torch.empty_like(b))
    solved = _lg._logot._wasserstein_cuda(
        _dlpack(a, b, c), None if out is None else _dlpack(*out), _device_params(options),
        (options["cg_tol"], int(options["cg_max_iters"])), _raw_stream(device))
    _warn(solved.convergence)
    if solved.cg is not None:
        _warn_cg(solved.cg)
    value = torch.tensor(solved.distance, dtype=c.dtype).to(c.device, non_blocking=True)
    if single:
        value = value[0]
        if out is not None:
            out = (out[0][0], out[1][0], out[2][0])
    return value, out


class _Wasserstein(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mu, nu, cost, eps, options):
        ctx.shapes = (mu.shape, nu.shape, cost.shape)
        backend = options.pop("backend", None)
        device = _in_place_device(cost, backend)
        if device is not None and _dense_fits(mu, nu, cost):
            grads = any(ctx.needs_input_grad[:3])
            value, out = _dense_on_device(mu, nu, cost, device, dict(options, eps=eps), grads)
            if out is not None:
                ctx.save_for_backward(*out)
            return value
        backend = _backend((mu, nu, cost), backend)
        a, b, c = _np(mu), _np(nu), _np(cost)
        if any(ctx.needs_input_grad[:3]):
            g = _lg.wasserstein_gradients(a, b, c, eps, backend=backend, **options)
            _warn(g.result.convergence)
            _warn_cg(g.cg)
            ctx.save_for_backward(_tensor(g.cost, cost), _tensor(g.mu, mu), _tensor(g.nu, nu))
            distance = g.result.distance
        else:
            r = _lg.solve(a, b, c, eps, backend=backend,
                          **{k: v for k, v in options.items() if not k.startswith("cg_")})
            _warn(r.convergence)
            distance = r.distance
        return torch.as_tensor(np.asarray(distance), dtype=cost.dtype, device=cost.device)

    @staticmethod
    def backward(ctx, grad):
        d_cost, d_mu, d_nu = ctx.saved_tensors
        mu_shape, nu_shape, cost_shape = ctx.shapes
        batch = grad.dim() == 1
        out = [None, None, None]
        if ctx.needs_input_grad[0]:
            out[0] = _sum_to(d_mu * (grad[:, None] if batch else grad), mu_shape)
        if ctx.needs_input_grad[1]:
            out[1] = _sum_to(d_nu * (grad[:, None] if batch else grad), nu_shape)
        if ctx.needs_input_grad[2]:
            out[2] = _sum_to(d_cost * (grad[:, None, None] if batch else grad), cost_shape)
        return out[0], out[1], out[2], None, None


def wasserstein(mu, nu, cost, eps: float, *, max_iters=1000, tol=None, check_every=10, eps_scaling=None,
                cg_tol=None, cg_max_iters=1000, backend=None) -> torch.Tensor:
    """⟨P, C⟩ of the entropic plan between ``mu`` (n, or B×n) and ``nu`` (m, or B×m) for
    ``cost`` (n×m, or B×n×m): a 0-d tensor for one problem, (B,) for a batch.

    Differentiable with respect to ``cost``, ``mu`` and ``nu`` with the exact gradients of
    implicit differentiation through the converged plan (computed with the forward, one
    solve). The marginal gradients are the representative with zero sum over ``mu``: exact
    for perturbations that keep the two masses equal (e.g. through a softmax).

    For points, build the cost in torch: ``wasserstein(a, b, sqeuclidean(x, y), eps)``
    differentiates through ``x`` and ``y`` by the chain rule. Options as
    :func:`logot.solve`; ``cg_tol``/``cg_max_iters`` control the backward's CG.

    CUDA tensors (``backend`` unset or naming their device) are computed in place on the
    current CUDA stream: no host copy of the marginals, the cost or the gradients; the call
    waits for that stream (not the device) to read back the per-problem reports, and warns
    :class:`logot.ConvergenceWarning` from them as the host path does.
    """
    mu, nu, cost = _as_tensors(mu, nu, cost, names=("mu", "nu", "cost"))
    options = dict(max_iters=max_iters, tol=tol, check_every=check_every, eps_scaling=eps_scaling,
                   cg_tol=cg_tol, cg_max_iters=cg_max_iters, backend=backend)
    _check_options(options)
    return _Wasserstein.apply(mu, nu, cost, _lg._real("eps", eps), options)


def sqeuclidean(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The squared Euclidean cost matrix ``|x_i − y_j|²`` (n×m, or B×n×m for batches of
    clouds ``x`` B×n×d and ``y`` B×m×d) in torch, differentiable (the direct form: exact,
    never negative)."""
    return ((x[..., :, None, :] - y[..., None, :, :]) ** 2).sum(-1)


# ---------------------------------------------------------------------------------------
# The plan, differentiable for any loss
# ---------------------------------------------------------------------------------------


class _Coupling(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mu, nu, cost, eps, options):
        backend = options.pop("backend", None)
        cg = (options.pop("cg_tol"), options.pop("cg_max_iters"))
        ctx.shapes = (mu.shape, nu.shape, cost.shape)
        ctx.device = _in_place_device(cost, backend)
        if ctx.device is not None and _dense_fits(mu, nu, cost):
            # In place on the device: the plans into a tensor torch allocated, the current
            # stream; the report of the potentials read back for the warning.
            a, b, c, (batch, n, m), single = _dense_inputs(mu, nu, cost)
            plan = torch.empty(batch, n, m, dtype=c.dtype, device=c.device)
            conv = _lg._logot._coupling_cuda(_dlpack(a, b, c), _to_dlpack(plan), _device_params(dict(options, eps=eps)),
                                             _raw_stream(ctx.device))
            _warn(conv)
            plan = plan[0] if single else plan
            ctx.save_for_backward(plan)
            ctx.eps, ctx.backend, ctx.cg = eps, backend, cg
            return plan
        ctx.device = None
        backend = _backend((mu, nu, cost), backend)
        c = _lg.coupling(_np(mu), _np(nu), _np(cost), eps, backend=backend, **options)
        _warn(c.convergence)
        plan = _tensor(c.plan, cost)
        ctx.save_for_backward(plan)
        ctx.eps, ctx.backend, ctx.cg = eps, backend, cg
        return plan

    @staticmethod
    def backward(ctx, grad):
        (plan,) = ctx.saved_tensors
        mu_shape, nu_shape, cost_shape = ctx.shapes
        if ctx.device is not None:
            # In place: the plans and ∂L/∂P read on the device, the gradients into tensors
            # torch allocated, on the current stream.
            p = plan.reshape(-1, plan.shape[-2], plan.shape[-1]).contiguous()
            g = grad.reshape(p.shape).to(p.dtype).contiguous()
            batch, n, m = p.shape
            out = (torch.empty_like(p), torch.empty(batch, n, dtype=p.dtype, device=p.device),
                   torch.empty(batch, m, dtype=p.dtype, device=p.device))
            cg = _lg._logot._plan_gradients_cuda(*_dlpack(p, g), _dlpack(*out), ctx.eps, (ctx.cg[0], int(ctx.cg[1])),
                                                 _raw_stream(ctx.device))
            _warn_cg(cg)
            d_cost, d_mu, d_nu = out if plan.dim() == 3 else (out[0][0], out[1][0], out[2][0])
            return (_sum_to(d_mu, mu_shape) if ctx.needs_input_grad[0] else None,
                    _sum_to(d_nu, nu_shape) if ctx.needs_input_grad[1] else None,
                    _sum_to(d_cost, cost_shape) if ctx.needs_input_grad[2] else None, None, None)
        g = _lg.plan_gradients(_np(plan), ctx.eps, _np(grad), cg_tol=ctx.cg[0], cg_max_iters=ctx.cg[1],
                               backend=ctx.backend)
        _warn_cg(g.cg)
        d_mu = _sum_to(_tensor(g.mu, plan), mu_shape) if ctx.needs_input_grad[0] else None
        d_nu = _sum_to(_tensor(g.nu, plan), nu_shape) if ctx.needs_input_grad[1] else None
        d_cost = _sum_to(_tensor(g.cost, plan), cost_shape) if ctx.needs_input_grad[2] else None
        return d_mu, d_nu, d_cost, None, None


def coupling(mu, nu, cost, eps: float, *, max_iters=1000, tol=None, check_every=10, eps_scaling=None,
             cg_tol=None, cg_max_iters=1000, backend=None) -> torch.Tensor:
    """The entropic plan ``P = exp((f ⊕ g − C)/ε)`` (n×m, or B×n×m), differentiable with
    respect to ``cost``, ``mu`` and ``nu`` for any loss of ``P`` (implicit differentiation:
    one adjoint CG solve per backward). Zero-mass bins get a zero marginal gradient.

    CUDA tensors (``backend`` unset or naming their device) are computed in place on the
    current CUDA stream, forward and backward: the plans and the gradients are written into
    tensors torch allocated, only per-problem numbers are read back (the forward's warning
    comes from the report of the potentials)."""
    mu, nu, cost = _as_tensors(mu, nu, cost, names=("mu", "nu", "cost"))
    options = dict(max_iters=max_iters, tol=tol, check_every=check_every, eps_scaling=eps_scaling,
                   cg_tol=cg_tol, cg_max_iters=cg_max_iters, backend=backend)
    _check_options(options)
    return _Coupling.apply(mu, nu, cost, _lg._real("eps", eps), options)


# ---------------------------------------------------------------------------------------
# Point clouds
# ---------------------------------------------------------------------------------------


def _points_fit(x, y, a, b) -> bool:
    """Whether a point-cloud problem takes the in-place path: tensors on one device, one
    pair (``x`` n×d, weights n and m) or a batch of pairs (``x`` B×n×d, weights n or B×n);
    anything else takes the host path."""
    if not (x.device == y.device == a.device == b.device):
        return False
    if x.dim() == 2:
        return a.dim() == 1 and b.dim() == 1
    return x.dim() == 3 and a.dim() in (1, 2) and b.dim() in (1, 2)


def _points_on_device(x, y, a, b, device, options):
    """``_PointOT``'s forward in place on GPU ``device``: contiguous clouds and weights
    (broadcast to B×n and B×m; a stream-ordered copy only when needed), the potentials and
    gradients allocated by torch, the library on the current stream (the clouds centred and
    checked there); only per-problem numbers come back (values, distances, the reports: the
    call waits for that stream, never for the whole device). Returns the values as a tensor
    and ``(∂x, ∂y, f, g)``, shaped as the host path's."""
    c = _DeviceClouds(x, y, a, b)
    f, g = torch.empty_like(c.wa), torch.empty_like(c.wb)
    gx, gy = c.gradients()
    solved = _lg._logot._point_gradients_cuda(c.dlpack(options), _dlpack(f, g, gx, gy), _device_params(options),
                                              _raw_stream(device))
    _warn(solved.convergence)
    value = c.values(solved.value)
    if c.single:
        return value[0], (gx[0], gy[0], f[0], g[0])
    return value, (gx, gy, f, g)


class _DeviceClouds:
    """A point-cloud call's CUDA tensors as the compiled module reads them: the clouds
    contiguous (a stream-ordered copy only when needed), the weights broadcast to B×n and
    B×m; one pair (``single``) or a batch."""

    def __init__(self, x, y, a, b):
        self.single = x.dim() == 2
        self.batch = 1 if self.single else x.shape[0]
        self.n, self.m, self.d = x.shape[-2], y.shape[-2], x.shape[-1]
        self.x, self.y = x.detach().contiguous(), y.detach().contiguous()
        self.wa = a.detach().expand(self.batch, self.n).contiguous()
        self.wb = b.detach().expand(self.batch, self.m).contiguous()

    def dlpack(self, options):
        """``(x, y, a, b, metric, precision)`` as the compiled module reads them (the tensors
        as DLPack capsules)."""
        return _dlpack(self.x, self.y, self.wa, self.wb) + (options["metric"], options["precision"])

    def gradients(self):
        """Fresh B×n×d and B×m×d tensors for the points' gradients."""
        like = dict(dtype=self.x.dtype, device=self.x.device)
        return torch.empty(self.batch, self.n, self.d, **like), torch.empty(self.batch, self.m, self.d, **like)

    def values(self, numbers):
        """The B numbers read back, as a tensor on the clouds' device."""
        return torch.tensor(numbers, dtype=self.x.dtype).to(self.x.device, non_blocking=True)


def _device_params(options):
    return _lg._params(options["eps"], options["max_iters"], options["tol"], options["check_every"],
                       options["eps_scaling"])


def _divergence_on_device(x, y, a, b, device, options):
    """``_Divergence``'s forward in place on GPU ``device`` (as :func:`_points_on_device`):
    the three problems on the current stream, ``∂S/∂x`` and ``∂S/∂y`` written into tensors
    torch allocated; only per-problem numbers come back. Returns the values as a tensor and
    ``(∂x, ∂y)``, shaped as the host path's."""
    c = _DeviceClouds(x, y, a, b)
    gx, gy = c.gradients()
    solved = _lg._logot._sinkhorn_divergence_cuda(c.dlpack(options), _dlpack(gx, gy), _device_params(options),
                                                  _raw_stream(device))
    for conv in solved.convergence:
        _warn(conv)
    value = c.values(solved.value)
    if c.single:
        return value[0], (gx[0], gy[0])
    return value, (gx, gy)


def _centred_potentials(f, g):
    """``∂OT_ε/∂a = f``, ``∂OT_ε/∂b = g`` hold up to a shift c on f and −c on g (admissible
    perturbations keep the masses equal): f centred over the support (its finite entries),
    per problem, in torch (one computation for both paths)."""
    finite = torch.isfinite(f)
    shift = torch.where(finite, f, torch.zeros((), dtype=f.dtype, device=f.device)).sum(-1, keepdim=True)
    shift = shift / finite.sum(-1, keepdim=True).clamp_min(1).to(f.dtype)
    return f - shift, g + shift


class _PointOT(torch.autograd.Function):
    """OT_ε of two clouds and its envelope gradients (points and weights)."""

    @staticmethod
    def forward(ctx, x, y, a, b, eps, options):
        backend = options.pop("backend", None)
        device = _in_place_device(x, backend)
        if device is not None and _points_fit(x, y, a, b):
            value, (gx, gy, f, gpot) = _points_on_device(x, y, a, b, device, dict(options, eps=eps))
        else:
            backend = _backend((x, y), backend)
            g = _lg.point_gradients(_np(x), _np(y), eps, _np(a), _np(b), backend=backend, **options)
            _warn(g.result.convergence)
            f, gpot = _tensor(g.result.f, x), _tensor(g.result.g, y)
            gx, gy = _tensor(g.x, x), _tensor(g.y, y)
            value = torch.as_tensor(np.asarray(g.value), dtype=x.dtype, device=x.device)
        f, gpot = _centred_potentials(f, gpot)
        ctx.save_for_backward(gx, gy, f, gpot)
        ctx.shapes = (a.shape, b.shape)
        return value

    @staticmethod
    def backward(ctx, grad):
        gx, gy, fa, gb = ctx.saved_tensors
        a_shape, b_shape = ctx.shapes
        need = ctx.needs_input_grad
        # One value per problem for a batch of pairs: grad (B,) scales problem k's gradients.
        gp = grad[:, None, None] if grad.dim() == 1 else grad
        gw = grad[:, None] if grad.dim() == 1 else grad
        return (
            gp * gx if need[0] else None,
            gp * gy if need[1] else None,
            _sum_to(gw * fa, a_shape) if need[2] else None,
            _sum_to(gw * gb, b_shape) if need[3] else None,
            None,
            None,
        )


def _uniform(w, n, like):
    if w is None:
        return torch.full((n,), 1.0 / n, dtype=like.dtype, device=like.device)
    return w


def _shape(t: torch.Tensor) -> np.ndarray:
    """A numpy array of ``t``'s shape holding no memory (for the numpy layer's checks)."""
    return np.broadcast_to(np.empty(()), tuple(t.shape))


def _clouds(x, y, a, b):
    """Tensors of one dtype, uniform weights where None (those of one cloud: shared by a
    batch). ``x`` and ``y`` are checked as :func:`logot.point_gradients` checks them: n×d
    and m×d, or B×n×d and B×m×d with weights B×n or n (B×m or m)."""
    x, y, a, b = _as_tensors(x, y, a, b, names=("x", "y", "a", "b"))
    _lg._check_clouds(_shape(x), _shape(y))
    a, b = _uniform(a, x.shape[-2], x), _uniform(b, y.shape[-2], y)
    if x.dim() == 3:
        # ValueError naming a or b for weights that fit neither n nor B×n.
        _lg._batch_weights(_shape(a), "a", _shape(x))
        _lg._batch_weights(_shape(b), "b", _shape(y))
    return x, y, a, b


def wasserstein_points(x, y, eps: float, a=None, b=None, *, metric="sqeuclidean", precision=None,
                       convention="objective", max_iters=1000, tol=None, check_every=10, eps_scaling=None,
                       backend=None) -> torch.Tensor:
    """Entropic OT between the clouds ``x`` (n×d, weights ``a``, uniform by default) and
    ``y`` (m×d, weights ``b``), a 0-d tensor; for a batch of pairs (``x`` B×n×d, ``y``
    B×m×d, weights B×n and B×m or n and m shared, GeomLoss's batch mode) a (B,) tensor,
    problem k on ``x[k]``, ``y[k]``, each value differentiable in its own clouds.

    ``convention="objective"`` (default): ``OT_ε = ⟨f, a⟩ + ⟨g, b⟩ − ε ΣP``, the regularised
    objective, with the cost computed on the fly (memory O((n + m)·d)); gradients by the
    envelope theorem (exact at convergence): ``∂/∂x_i = Σ_j P_ij ∇_x c(x_i, y_j)``,
    ``∂/∂a = f``, ``∂/∂b = g`` (zero-mass weights give −∞ there, the one-sided derivative).
    ``convention="linear"``: the transport cost ⟨P, C⟩, through a dense cost built in torch
    (memory O(n·m)) and :func:`wasserstein`'s implicit gradients.

    CUDA tensors (``backend`` unset or naming their device) are computed in place on the
    current CUDA stream (``convention="objective"``): no host copy of the clouds, the weights
    or the gradients; the call waits for that stream (not the device) to read back the
    per-problem numbers, and warns :class:`logot.ConvergenceWarning` from them.
    ``precision`` (one of :data:`logot.PRECISIONS`, None for the default ``"f16x2"``): how
    the CUDA backend forms x·y in float32 above 16 dimensions with ``"objective"``.
    """
    x, y, a, b = _clouds(x, y, a, b)
    if convention == "objective":
        options = dict(metric=metric, precision=precision, max_iters=max_iters, tol=tol,
                       check_every=check_every, eps_scaling=eps_scaling, backend=backend)
        _check_options(options)
        return _PointOT.apply(x, y, a, b, _lg._real("eps", eps), options)
    if convention == "linear":
        cost = sqeuclidean(x, y)
        if metric == "euclidean":
            cost = cost.clamp_min(torch.finfo(cost.dtype).tiny).sqrt()
        elif metric != "sqeuclidean":
            raise ValueError(f"metric = {metric!r}: expected \"sqeuclidean\" or \"euclidean\"")
        return wasserstein(a, b, cost, eps, max_iters=max_iters, tol=tol, check_every=check_every,
                           eps_scaling=eps_scaling, backend=backend)
    raise ValueError(f"convention = {convention!r}: expected \"objective\" or \"linear\"")


class _Divergence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, a, b, eps, options):
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            raise ValueError(
                "a, b: gradients with respect to the weights are not available with "
                "convention='objective' (use convention='linear', or weights without grad)"
            )
        backend = options.pop("backend", None)
        device = _in_place_device(x, backend)
        if device is not None and _points_fit(x, y, a, b):
            value, (gx, gy) = _divergence_on_device(x, y, a, b, device, dict(options, eps=eps))
            ctx.save_for_backward(gx, gy)
            return value
        backend = _backend((x, y), backend)
        s = _lg.sinkhorn_divergence(_np(x), _np(y), eps, _np(a), _np(b), backend=backend, **options)
        for conv in s.convergence:
            for c in (conv,) if isinstance(conv, _lg.Convergence) else conv:
                _warn(c)
        ctx.save_for_backward(_tensor(s.grad_x, x), _tensor(s.grad_y, y))
        return torch.as_tensor(np.asarray(s.value), dtype=x.dtype, device=x.device)

    @staticmethod
    def backward(ctx, grad):
        gx, gy = ctx.saved_tensors
        need = ctx.needs_input_grad
        # One value per problem for a batch of pairs: grad (B,) scales problem k's gradients.
        g = grad[:, None, None] if grad.dim() == 1 else grad
        return (g * gx if need[0] else None, g * gy if need[1] else None, None, None, None, None)


def sinkhorn_divergence(x, y, eps: float, a=None, b=None, *, metric="sqeuclidean", precision=None,
                        convention="objective", max_iters=1000, tol=None, check_every=10, eps_scaling=None,
                        backend=None) -> torch.Tensor:
    """The Sinkhorn divergence ``S_ε = W(a, b) − ½ W(a, a) − ½ W(b, b)`` of the clouds ``x``
    (n×d, weights ``a``) and ``y`` (m×d, weights ``b``), a 0-d tensor; for a batch of pairs
    (``x`` B×n×d, ``y`` B×m×d, weights B×n and B×m or n and m shared, GeomLoss's batch
    mode) a (B,) tensor, problem k on ``x[k]``, ``y[k]``.

    ``convention="objective"`` (default, GeomLoss's): ``W = OT_ε``, cost on the fly, the
    library's gradients with respect to the points (not the weights); CUDA tensors
    (``backend`` unset or naming their device) are computed in place on the current CUDA
    stream, as :func:`wasserstein_points`. ``"linear"`` (POT's
    ``empirical_sinkhorn_divergence``, without its clipping at 0): ``W = ⟨P, C⟩`` through
    dense costs, differentiable in points and weights (implicit gradients). ``precision``:
    as :func:`wasserstein_points`'s.
    """
    x, y, a, b = _clouds(x, y, a, b)
    if convention == "objective":
        options = dict(metric=metric, precision=precision, max_iters=max_iters, tol=tol,
                       check_every=check_every, eps_scaling=eps_scaling, backend=backend)
        _check_options(options)
        return _Divergence.apply(x, y, a, b, _lg._real("eps", eps), options)
    if convention == "linear":
        kw = dict(metric=metric, convention="linear", max_iters=max_iters, tol=tol, check_every=check_every,
                  eps_scaling=eps_scaling, backend=backend)
        return (wasserstein_points(x, y, eps, a, b, **kw)
                - 0.5 * wasserstein_points(x, x, eps, a, a, **kw)
                - 0.5 * wasserstein_points(y, y, eps, b, b, **kw))
    raise ValueError(f"convention = {convention!r}: expected \"objective\" or \"linear\"")


# ---------------------------------------------------------------------------------------
# Bistochastic projection
# ---------------------------------------------------------------------------------------


def _in_place_device(t: torch.Tensor, backend: Optional[str]) -> Optional[int]:
    """The GPU ordinal when ``t`` is a CUDA tensor that the library computes in place
    (``backend`` unset or naming its device), else None (the host-copy path)."""
    if not t.is_cuda:
        return None
    idx = t.get_device()
    if backend is None or backend == f"cuda:{idx}" or (backend == "cuda" and idx == 0):
        return idx
    return None


# Statistics of the in-place CUDA calls, deferred: each call leaves its statistics words in a
# small int64 device tensor, and the binding queues their copy (stream-ordered, asynchronous)
# into a row of page-locked memory (the library's WordsMailbox, one per GPU) with an event
# after it; nothing waits. Every call returns the reports of the earlier calls whose copy has
# completed (in call order); bistochastic_stats() waits for the rest. The decoding, the rows
# and the events live in the compiled module, under its own lock (the backward runs on
# autograd's device threads).
_LATEST: dict = {}  # the latest reported statistics of each kind (by a call or by bistochastic_stats)
_WORDS: dict = {}
# torch's current stream of a device as a raw CUstream (the private accessor Triton uses:
# no Stream object per call), else through torch.cuda.current_stream.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda device: torch.cuda.current_stream(device).cuda_stream)


def _report(reports, stacklevel):
    """Record the latest statistics of each kind and warn about the reports that call for it
    (`(kind, statistics or None, error or None, tol, batch)` from the compiled module)."""
    for kind, stats, error, tol, batch in reports:
        message = error
        if kind == "forward" and stats is not None:
            iterations, marginal_error, unconverged = stats
            stats = dict(iterations=iterations, marginal_error=marginal_error, unconverged=unconverged)
            if tol > 0 and unconverged:
                message = (f"the bistochastic projection did not converge for {unconverged} of {batch} matrices "
                           f"(column error {marginal_error:.3g} > tol {tol:.3g} after {iterations} iterations)")
        elif kind == "backward" and stats is not None:
            stats = _lg._cg_report(stats)
            if stats.unconverged:
                message = (f"the implicit backward's CG did not converge for {stats.unconverged} of {stats.problems} "
                           f"problem(s) (relative residual {stats.max_residual:.3g} > {stats.tol:.3g}); the "
                           "gradients are approximate")
        _LATEST[kind] = stats
        if message is not None:
            warnings.warn(f"logot.torch.bistochastic ({kind}, reported late): {message}", ConvergenceWarning,
                          stacklevel=stacklevel)


def bistochastic_stats() -> dict:
    """Wait for the statistics of every in-place CUDA :func:`bistochastic` call (forward and
    backward) not yet reported, issue their warnings (:class:`logot.ConvergenceWarning`) and
    return the latest of each kind, whether reported here or by an earlier call:
    ``{"forward": {"iterations", "marginal_error", "unconverged"}, "backward": CgReport}``
    (a kind absent when no such call has run; ``None`` when that call's statistics were an
    error, which is then the warning's text).

    The in-place calls never wait for the GPU: their statistics stay on the device and are
    copied back asynchronously, so they are reported at the first :func:`bistochastic` call
    after their copy has completed, or here. Waits only for those copies (events on the
    streams the calls ran on), never for the whole device."""
    _report(_lg._logot._bistochastic_reports(True), stacklevel=3)
    return dict(_LATEST)


def _words(batch: int, device: int):
    key = (batch, device)
    w = _WORDS.get(key)
    if w is None:
        w = _WORDS[key] = _lg._logot._bistochastic_words(batch, device)
    return w


# The statistics words (and the backward's scratch) of eager in-place calls, reused per thread,
# device, stream and length: a call's kernels and the words' copy are queued on its stream
# before it returns, so the next call of the thread on that stream finds them free (stream
# order); calls captured into a CUDA graph take tensors of their own from torch (the graph's
# pool), which the replays keep.
_SCRATCH = threading.local()


def _scratch(nwords: int, device: int, stream: int, like: torch.Tensor, capturing: bool) -> torch.Tensor:
    if capturing:
        return torch.empty(nwords, dtype=torch.int64, device=like.device)
    cache = getattr(_SCRATCH, "words", None)
    if cache is None or len(cache) > 64:
        cache = _SCRATCH.words = {}
    key = (nwords, device, stream)
    w = cache.get(key)
    if w is None:
        w = cache[key] = torch.empty(nwords, dtype=torch.int64, device=like.device)
    return w


def _launch(t: torch.Tensor, n: int, device: int, which: int):
    """``(stream, capturing, words)`` of an in-place call on the n×n matrices of ``t``: the
    current raw stream, whether it is capturing a CUDA graph, and the statistics words of the
    forward (``which = 0``) or the backward (1)."""
    stream = _raw_stream(device)
    capturing = torch.cuda.is_current_stream_capturing()
    nwords = _words(t.numel() // (n * n), device)[which]
    return stream, capturing, _scratch(nwords, device, stream, t, capturing)


class _Bistochastic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, iters, tol, cg_tol, cg_max_iters, backend):
        n = x.shape[-1]
        device = _in_place_device(x, backend)
        if device is None:
            backend = _backend((x,), backend)
        ctx.options = (cg_tol, cg_max_iters, backend, device)
        if device is not None:
            # In place on the device: contiguous logits (a stream-ordered copy when needed),
            # R allocated by torch in x's shape, kernels on the current stream, the
            # statistics copied back without waiting (see bistochastic_stats). Captured into
            # a CUDA graph: only the kernels (replayed with the graph); no statistics.
            xc = x if x.is_contiguous() else x.contiguous()
            out = torch.empty_like(xc)
            if xc.numel():
                stream, capturing, stats = _launch(xc, n, device, 0)
                reports = _lg._logot._bistochastic_cuda(_to_dlpack(xc), _dlpack(out, stats), iters, tol, stream,
                                                        not capturing)
                if reports:
                    _report(reports, stacklevel=5)
        else:
            r = _lg.bistochastic(_np(x.reshape(-1, n, n)), iters, tol, backend=backend).r
            out = _tensor(r, x).reshape(x.shape)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (r,) = ctx.saved_tensors
        cg_tol, cg_max_iters, backend, device = ctx.options
        n = r.shape[-1]
        if device is not None:
            g = grad if grad.dtype == r.dtype else grad.to(r.dtype)
            g = g if g.is_contiguous() else g.contiguous()
            dx = torch.empty_like(r)
            if r.numel():
                stream, capturing, words = _launch(r, n, device, 1)
                reports = _lg._logot._bistochastic_backward_cuda(*_dlpack(r, g), _dlpack(dx, words), (cg_tol, int(cg_max_iters)),
                                                                 stream, not capturing)
                if reports:
                    _report(reports, stacklevel=3)
            return dx, None, None, None, None, None
        g = _lg.bistochastic_backward(_np(r.reshape(-1, n, n)), _np(grad.reshape(-1, n, n)), cg_tol=cg_tol,
                                      cg_max_iters=cg_max_iters, backend=backend)
        _warn_cg(g.cg)
        return _tensor(g.dx, r).reshape(r.shape), None, None, None, None, None


def bistochastic(x: torch.Tensor, iters: int = 20, tol: float = 0.0, *, cg_tol=None, cg_max_iters=1000,
                 backend=None) -> torch.Tensor:
    """``R = SinkhornKnopp(exp(X))`` over the last two axes of ``x`` (``…×n×n``, n ≤ 32):
    ``iters`` column-then-row normalisations in the log domain (or until the column error
    is ``≤ tol`` when ``tol > 0``). The backward is the implicit gradient
    ``∂L/∂X = (G − a1ᵀ − 1bᵀ)⊙R`` with ``(I − RᵀR) b = (G⊙R)ᵀ1 − Rᵀ(G⊙R)1`` solved by
    matrix-free CG: the exact gradient of the exact projection (with a fixed ``iters``, R
    is bistochastic to its column error, and so is the gradient).

    CUDA tensors are computed in place (no host copy) on the current CUDA stream of their
    device, forward and backward, and the call does not wait for the GPU (as a torch operator:
    like any, it waits when torch's caching allocator must grow, cudaMalloc synchronising, and
    the first call allocates the page-locked rows the statistics come back through):
    the statistics (the projection's convergence when ``tol > 0``, the backward's CG, and
    errors such as non-finite logits or gradients, which leave NaN in the result) stay on the
    device and are copied back asynchronously; they are reported, as
    :class:`logot.ConvergenceWarning`, by the first call after their copy has completed, or
    at once by :func:`bistochastic_stats` (which waits for them).

    CUDA graphs: the in-place calls can be captured (``torch.cuda.graph``, e.g. a whole
    training step, forward and backward, after warm-up calls outside the capture): the
    replays run the same kernels on the captured tensors with no host work per call.
    Captured calls report no statistics (set ``iters`` and use ``tol = 0``, the usual
    setting); run the step eagerly to check them."""
    _check_real(x, "x")
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x))
    if x.dtype not in (torch.float32, torch.float64):
        x = x.to(torch.float64)
    if x.dim() < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"x: expected square matrices in the last two axes, got shape {tuple(x.shape)}")
    return _Bistochastic.apply(x, _lg._count("iters", iters), _lg._real("tol", tol), _lg._optional_real("cg_tol", cg_tol),
                               _lg._count("cg_max_iters", cg_max_iters), backend)


# ---------------------------------------------------------------------------------------
# Gromov–Wasserstein values
# ---------------------------------------------------------------------------------------


class _GromovValue(torch.autograd.Function):
    """A solved value with its gradients given (the envelope theorem: the plan held fixed)."""

    @staticmethod
    def forward(ctx, value, grads, *inputs):
        ctx.grads = grads
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        return (None, None) + tuple(grad * g for g in ctx.grads)


def gromov_value(result, c1, c2, p=None, q=None, m=None) -> torch.Tensor:
    """``result.value`` (a :class:`logot.GromovResult` solved with ``gradients=True``) as a
    0-d tensor of ``c1``'s dtype and device whose gradients with respect to the tensors among
    ``c1``, ``c2``, ``p``, ``q`` and the feature cost ``m`` are the result's envelope
    gradients (POT's ``set_gradients`` of ``gromov_wasserstein2``): the plan is held fixed,
    ``p``, ``q`` get the centred potentials. Exact where the plan is a stationary point that
    moves smoothly with the inputs (see :class:`logot.GromovGradients`)."""
    g = result.gradients
    if g is None:
        raise ValueError("result: solved without gradients=True, so it has no gradients to attach")
    tensors, grads = [], []
    for t, a in zip((c1, c2, p, q, m), (g.c1, g.c2, g.p, g.q, g.m)):
        if isinstance(t, torch.Tensor) and a is not None:
            tensors.append(t)
            grads.append(torch.as_tensor(np.ascontiguousarray(a), dtype=t.dtype, device=t.device))
    value = torch.as_tensor(result.value, dtype=c1.dtype, device=c1.device)
    return _GromovValue.apply(value, grads, *tensors)


def _gromov_inputs(c1, c2, p, q):
    return [None if t is None else (_np(t) if isinstance(t, torch.Tensor) else t) for t in (c1, c2, p, q)]


def gromov_wasserstein2(c1, c2, p=None, q=None, **options) -> torch.Tensor:
    """The exact GW value of :func:`logot.gromov_wasserstein` (same options) for tensors,
    differentiable with respect to ``c1``, ``c2``, ``p``, ``q`` (:func:`gromov_value`)."""
    a = _gromov_inputs(c1, c2, p, q)
    r = _lg.gromov_wasserstein(*a, gradients=True, **options)
    return gromov_value(r, c1, c2, p, q)


def entropic_gromov_wasserstein2(c1, c2, eps: float, p=None, q=None, **options) -> torch.Tensor:
    """The entropic GW value of :func:`logot.entropic_gromov_wasserstein` (same options)
    for tensors, differentiable with respect to ``c1``, ``c2``, ``p``, ``q`` (the envelope
    gradients of the regularised value at the returned plan, :func:`gromov_value`)."""
    a = _gromov_inputs(c1, c2, p, q)
    r = _lg.entropic_gromov_wasserstein(a[0], a[1], eps, a[2], a[3], gradients=True, **options)
    return gromov_value(r, c1, c2, p, q)


# ---------------------------------------------------------------------------------------
# Exact OT losses: sliced, max-sliced and 1-D Wasserstein
# ---------------------------------------------------------------------------------------


class _ExactLoss(torch.autograd.Function):
    """A loss whose value and gradients with respect to two point sets ``solve`` computes on
    the host (numpy in; ``(value, grad_x, grad_y)`` out, float64, a value per problem of a
    batch); the backward scales those gradients by the incoming one."""

    @staticmethod
    def forward(ctx, solve, x, y):
        value, gx, gy = solve(_np(x), _np(y))
        def as_t(a, like):
            return torch.as_tensor(np.array(a, dtype=np.float64, order="C"), dtype=like.dtype, device=like.device)

        ctx.save_for_backward(as_t(gx, x), as_t(gy, y))
        return as_t(value, x)

    @staticmethod
    def backward(ctx, grad):
        gx, gy = ctx.saved_tensors

        def scaled(g):
            return grad.reshape(grad.shape + (1,) * (g.dim() - grad.dim())) * g

        return None, scaled(gx) if ctx.needs_input_grad[1] else None, scaled(gy) if ctx.needs_input_grad[2] else None


def _fixed_weights(weights, names, like: torch.Tensor):
    """Weights as numpy arrays of the dtype of ``like`` (float32, else float64; None:
    uniform). Their gradients are not computed: a weight tensor that requires one is
    refused, naming it."""
    dtype = np.float32 if like.dtype == torch.float32 else np.float64
    out = []
    for w, name in zip(weights, names):
        if isinstance(w, torch.Tensor):
            if w.requires_grad:
                raise ValueError(f"{name}: gradients with respect to the weights are not computed here; "
                                 "pass a tensor that does not require grad (w.detach())")
            w = _np(w)
        if w is not None:
            _check_real(w, name)
        out.append(None if w is None else np.asarray(w, dtype=dtype))
    return out


def _batch_of(w, batch: int):
    """Weights of a batch: B×n as they are, n shared by the B problems (broadcast)."""
    if w is None or w.ndim != 1:
        return w
    return np.ascontiguousarray(np.broadcast_to(w, (batch, w.size)))


def _host_projections(projections):
    return None if projections is None else np.asarray(_np(projections) if isinstance(projections, torch.Tensor)
                                                       else projections, dtype=np.float64)


def sliced_wasserstein(x, y, a=None, b=None, *, n_projections=50, seed=0, projections=None, p=2) -> torch.Tensor:
    """The sliced Wasserstein distance ``SW_p = ((1/L) Σ_l W_p^p(θ_l#μ, θ_l#ν))^{1/p}`` of
    :func:`logot.sliced_wasserstein` (POT's ``sliced_wasserstein_distance``: the same
    directions for the same ``seed``, or ``projections`` d×L) as a differentiable loss:
    ``x`` (n×d) against ``y`` (m×d), weights ``a``, ``b`` (None: uniform; no gradient),
    a 0-d tensor; or a batch, ``x`` B×n×d against ``y`` B×m×d (weights B×n, B×m or shared
    n, m), a (B,) tensor, every pair along the same directions.

    The backward is the library's gradient with respect to the points (each projection's
    sorted plan held fixed: exact where the projected values of each side are distinct;
    zero where ``SW_p = 0``). The dtype of ``x`` is kept (float32 or float64; computed in
    float64). CUDA tensors go through the host: one copy of the points to it, one of the
    value and gradients back."""
    x, y = _as_tensors(x, y, names=("x", "y"))
    a, b = _fixed_weights((a, b), ("a", "b"), x)
    projections = _host_projections(projections)
    with _lg._exact._rename(x_s="x", x_t="y"):
        if x.dim() == 3:
            projections, n_projections, seed = _lg._exact._projections(None, projections, n_projections, seed)
            if y.dim() != 3:
                raise ValueError(f"y: expected B×m×d point clouds as x is a batch, got shape {tuple(y.shape)}")
            p = _lg._real("p", p)
            a, b = _batch_of(a, x.shape[0]), _batch_of(b, x.shape[0])

            def solve(xs, ys):
                return _lg._logot.sliced_wasserstein_grad_batched(xs, ys, a, b, projections, n_projections, seed, p)
        else:

            def solve(xs, ys):
                r = _lg.sliced_wasserstein(xs, ys, a, b, n_projections=n_projections, seed=seed,
                                           projections=projections, p=p, gradients=True)
                return r.distance, r.grad_x_s, r.grad_x_t

        return _ExactLoss.apply(solve, x, y)


def max_sliced_wasserstein(x, y, a=None, b=None, *, n_projections=50, seed=0, projections=None, p=2,
                           ascent_steps=None, step=0.5) -> torch.Tensor:
    """The max-sliced distance ``max_θ W_p(θ#μ, θ#ν)`` of :func:`logot.max_sliced_wasserstein`
    (POT's ``max_sliced_wasserstein_distance`` over the same directions; with
    ``ascent_steps``, refined by projected gradient ascent on the sphere) as a
    differentiable loss, arguments and batches as :func:`sliced_wasserstein` (a batch is
    solved problem by problem). The backward is the library's gradient with respect to the
    points at the best direction found (the envelope theorem: the direction and its sorted
    plan held fixed)."""
    x, y = _as_tensors(x, y, names=("x", "y"))
    a, b = _fixed_weights((a, b), ("a", "b"), x)
    projections = _host_projections(projections)

    def one(xs, ys, a, b):
        r = _lg.max_sliced_wasserstein(xs, ys, a, b, n_projections=n_projections, seed=seed, projections=projections,
                                       p=p, ascent_steps=ascent_steps, step=step, gradients=True)
        return r.distance, r.grad_x_s, r.grad_x_t

    with _lg._exact._rename(x_s="x", x_t="y"):
        if x.dim() == 3:
            if y.dim() != 3 or y.shape[0] != x.shape[0]:
                raise ValueError(f"y: expected {x.shape[0]}×m×d point clouds as x, got shape {tuple(y.shape)}")
            a, b = _batch_of(a, x.shape[0]), _batch_of(b, x.shape[0])

            def solve(xs, ys):
                each = [one(xs[k], ys[k], None if a is None else a[k], None if b is None else b[k])
                        for k in range(xs.shape[0])]
                return tuple(np.stack([e[i] for e in each]) for i in range(3))
        else:

            def solve(xs, ys):
                return one(xs, ys, a, b)

        return _ExactLoss.apply(solve, x, y)


def wasserstein_1d(u_values, v_values, u_weights=None, v_weights=None, p=1) -> torch.Tensor:
    """``W_p^p = ∫₀¹ |F⁻¹(q) − G⁻¹(q)|^p dq`` on the line (the p-th power, as POT's
    ``wasserstein_1d`` and :func:`logot.wasserstein_1d`), ``p ≥ 1``, as a differentiable
    loss: ``u_values`` (n) against ``v_values`` (m), a 0-d tensor; or a batch, row k of
    ``u_values`` (B×n) against row k of ``v_values`` (B×m), a (B,) tensor (POT's batches
    are columns: ``ot.wasserstein_1d(u.T, v.T)``). Weights n and m (or B×n, B×m; None:
    uniform) get no gradient. The backward is the library's gradient with respect to the
    values, ``Σ_j P_ij h'(u_i − v_j)`` with the monotone plan held fixed (exact where the
    values of each side are distinct). The dtype is kept; CUDA tensors go through the host
    (one copy each way)."""
    u, v = _as_tensors(u_values, v_values, names=("u_values", "v_values"))
    uw, vw = _fixed_weights((u_weights, v_weights), ("u_weights", "v_weights"), u)
    if u.dim() not in (1, 2):
        raise ValueError(f"u_values: expected values (n) or a batch of them (B×n), got shape {tuple(u.shape)}")
    if v.dim() != u.dim():
        raise ValueError(f"v_values: expected {u.dim()} dimension(s) as u_values, got shape {tuple(v.shape)}")
    single = u.dim() == 1
    batch = 1 if single else u.shape[0]
    uw, vw = _batch_of(uw, batch), _batch_of(vw, batch)
    p = _lg._real("p", p)

    def solve(us, vs):
        values, gu, gv = _lg._logot.wasserstein_1d_grad(us[None] if single else us, vs[None] if single else vs,
                                                        uw, vw, p)
        return (values[0], gu[0], gv[0]) if single else (values, gu, gv)

    return _ExactLoss.apply(solve, u, v)
