"""POT's ``ot.gromov`` names and signatures over logot (``logot.pot.gromov``): exact, fused,
entropic and entropic fused Gromov–Wasserstein, each with its ``…2`` value form.

What is the same: the problem and the algorithm (POT's conditional gradient with the exact
line search; POT's mirror descent, ``solver="PGD"``), argument names, defaults, return
types, ``log=True`` returning ``(result, log_dict)`` with POT's keys, the initial plan
``G0`` (its marginals checked for the conditional gradient, as POT), ``symmetric`` None
tested as POT does. Torch tensors are accepted: the plan comes back as a tensor of the
input's dtype and device, and the ``…2`` values are differentiable with respect to
``C1``, ``C2``, ``p``, ``q`` (and ``M`` for fused problems) through
:func:`logot.torch.gromov_value`, with POT's envelope gradients.

What differs (each function's docstring has its details): ``armijo=True`` and
``solver="PPA"`` are not supported (``ValueError`` naming them); the inner Sinkhorn solves
always run in the log domain, warm-started from the previous potentials (the converged
plan is the same; ``warmstart`` has no effect) and stop on the L1 marginal error
(``stopThr``, POT: L2); ``log`` also has logot's ``report`` (:class:`logot.GromovReport`).
Bad input raises ``ValueError`` naming POT's argument (``C1``, ``C2``, ``p``, ``q``,
``M``, ``alpha``, ``G0``, ``epsilon``, ...).
"""

from __future__ import annotations

import logot as _lg
from ._exact import _rename

__all__ = [
    "gromov_wasserstein",
    "gromov_wasserstein2",
    "fused_gromov_wasserstein",
    "fused_gromov_wasserstein2",
    "entropic_gromov_wasserstein",
    "entropic_gromov_wasserstein2",
    "entropic_fused_gromov_wasserstein",
    "entropic_fused_gromov_wasserstein2",
]

# logot's argument names (the prefix of its messages) to POT's.
_NAMES = dict(c1="C1", c2="C2", m="M", init="G0", loss="loss_fun", eps="epsilon", max_iters="max_iter",
              inner_max_iters="numItermax", inner_tol="stopThr")
# POT's keyword arguments of the conditional gradient's linear step: accepted, no effect.
_CG_IGNORED = frozenset({"numItermaxEmd", "numThreads"})
# POT's keyword arguments of the inner ot.sinkhorn calls, as logot's inner options.
_INNER = {"numItermax": "inner_max_iters", "stopThr": "inner_tol"}


def _is_torch(*xs) -> bool:
    return any(type(x).__module__.startswith("torch") for x in xs if x is not None)


def _host(x):
    """A numpy view of a tensor (detached, on the host), or the array itself."""
    if x is None or not _is_torch(x):
        return x
    return x.detach().cpu().numpy()


def _iters(v):
    """POT's iteration counts may be floats (``max_iter=1e4``): an integral float is taken."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _options(kwargs: dict, fn: str, allowed) -> tuple:
    backend = kwargs.pop("backend", "cpu")
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"{fn}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    return backend, kwargs


def _loss(loss_fun):
    if loss_fun not in ("square_loss", "kl_loss"):
        raise ValueError(f"Unknown `loss_fun='{loss_fun}'`. Use one of: {{'square_loss', 'kl_loss'}}.")
    return loss_fun


def _exact(M, C1, C2, p, q, loss_fun, symmetric, alpha, armijo, G0, max_iter, tol_rel, tol_abs, kwargs, fn,
           gradients=False):
    if armijo:
        raise ValueError(f"armijo: {fn} runs the exact line search of the square and KL losses (armijo=False)")
    backend, _ = _options(kwargs, fn, _CG_IGNORED)
    args = [_host(a) for a in (M, C1, C2, p, q, G0)]
    with _rename(**_NAMES):
        if M is None:
            return _lg.gromov_wasserstein(
                args[1], args[2], args[3], args[4], loss=_loss(loss_fun), symmetric=symmetric, init=args[5],
                max_iters=_iters(max_iter), tol_rel=tol_rel, tol_abs=tol_abs, backend=backend,
                gradients=gradients)
        return _lg.fused_gromov_wasserstein(
            args[0], args[1], args[2], args[3], args[4], alpha=_host(alpha), loss=_loss(loss_fun),
            symmetric=symmetric, init=args[5], max_iters=_iters(max_iter), tol_rel=tol_rel,
            tol_abs=tol_abs, backend=backend, gradients=gradients)


def _entropic(M, C1, C2, p, q, loss_fun, epsilon, symmetric, alpha, G0, max_iter, tol, solver, kwargs, fn,
              gradients=False):
    if solver != "PGD":
        if solver == "PPA":
            raise ValueError(f"solver: {fn} runs POT's solver='PGD' (mirror descent); 'PPA' is not supported")
        raise ValueError("Unknown solver '%s'. Pick one in ['PGD', 'PPA']." % solver)
    backend, inner = _options(kwargs, fn, _INNER)
    inner = {_INNER[k]: _iters(v) for k, v in inner.items()}
    args = [_host(a) for a in (M, C1, C2, p, q, G0)]
    opts = dict(loss=_loss(loss_fun), symmetric=symmetric, init=args[5], max_iters=_iters(max_iter),
                tol=tol, backend=backend, gradients=gradients, **inner)
    with _rename(**_NAMES):
        if M is None:
            return _lg.entropic_gromov_wasserstein(args[1], args[2], epsilon, args[3], args[4], **opts)
        return _lg.entropic_fused_gromov_wasserstein(args[0], args[1], args[2], epsilon, args[3], args[4],
                                                     alpha=_host(alpha), **opts)


def _plan(r, like):
    """The plan as POT returns it: an array of the inputs' dtype, or a tensor like ``like``."""
    if _is_torch(like):
        import torch

        return torch.as_tensor(r.plan, dtype=like.dtype, device=like.device)
    return r.plan


def _scalar(value, r, like):
    if _is_torch(like):
        import torch

        return torch.as_tensor(value, dtype=like.dtype, device=like.device)
    return r.plan.dtype.type(value)


def _value(r, M, C1, C2, p, q):
    """The value: a numpy scalar, or for tensors a differentiable one (envelope gradients)."""
    if not _is_torch(C1, C2, M, p, q):
        return r.plan.dtype.type(r.value)
    from . import torch as lt

    return lt.gromov_value(r, C1, C2, p, q, M)


def _exact_log(r, fused: bool, like):
    log = {"loss": list(r.report.losses), "u": r.f, "v": r.g, "report": r.report}
    if _is_torch(like):
        import torch

        log["u"], log["v"] = (torch.as_tensor(v, dtype=like.dtype, device=like.device) for v in (r.f, r.g))
    log["fgw_dist" if fused else "gw_dist"] = _scalar(r.value, r, like)
    return log


def _entropic_log(r, fused: bool, like):
    log = {"err": list(r.report.steps), "report": r.report}
    log["fgw_dist" if fused else "gw_dist"] = _scalar(r.value, r, like)
    return log


def _value_log(log, r, fused, like):
    log["T"] = _plan(r, like)
    if fused:
        log["lin_loss"] = _scalar(r.linear, r, like)
        log["quad_loss"] = _scalar(r.quadratic, r, like)
    return log


_EXACT_DIFFERENCES = """
    Differences from POT: ``armijo=True`` raises ``ValueError`` (the exact line search is
    POT's default); ``log["u"]``, ``log["v"]`` are the (centred) duals of the linear step
    at the returned plan (POT's: at the plan before the last step); ``log["report"]`` has
    the Frank–Wolfe gap and the marginal error of the returned plan. ``numItermaxEmd`` and
    ``numThreads`` are accepted and have no effect; ``backend="cuda"`` runs the structure
    products on the GPU.
"""

_ENTROPIC_DIFFERENCES = """
    Differences from POT: ``solver="PPA"`` raises ``ValueError``; the inner solves are
    logot's log-domain Sinkhorn, always warm-started (``warmstart`` and ``verbose`` have no
    effect), with POT's ``numItermax`` and ``stopThr`` keywords (``stopThr`` bounds the L1
    marginal error relative to the mass, POT: L2; default 1e-9 in float64, 1e-5 in
    float32); ``log["report"]`` has the stationarity, marginal error and inner reports;
    ``backend="cuda"`` runs on the GPU.
"""


def gromov_wasserstein(C1, C2, p=None, q=None, loss_fun="square_loss", symmetric=None, log=False, armijo=False,
                       G0=None, max_iter=1e4, tol_rel=1e-9, tol_abs=1e-9, **kwargs):
    """The exact GW plan (n×m), POT's ``ot.gromov.gromov_wasserstein``: conditional gradient
    with the network simplex and the exact line search (:func:`logot.gromov_wasserstein`).
    ``log``: ``gw_dist``, ``loss`` (the objective after each iteration), ``u``, ``v``."""
    r = _exact(None, C1, C2, p, q, loss_fun, symmetric, 1.0, armijo, G0, max_iter, tol_rel, tol_abs, kwargs,
               "gromov_wasserstein")
    T = _plan(r, C1)
    return (T, _exact_log(r, False, C1)) if log else T


def gromov_wasserstein2(C1, C2, p=None, q=None, loss_fun="square_loss", symmetric=None, log=False, armijo=False,
                        G0=None, max_iter=1e4, tol_rel=1e-9, tol_abs=1e-9, **kwargs):
    """The exact GW value ``gw_dist``, POT's ``ot.gromov.gromov_wasserstein2``; for torch
    tensors differentiable with respect to ``C1``, ``C2``, ``p``, ``q`` (POT's envelope
    gradients). ``log`` as :func:`gromov_wasserstein`, with the plan ``T``."""
    r = _exact(None, C1, C2, p, q, loss_fun, symmetric, 1.0, armijo, G0, max_iter, tol_rel, tol_abs, kwargs,
               "gromov_wasserstein2", gradients=_is_torch(C1, C2, p, q))
    value = _value(r, None, C1, C2, p, q)
    return (value, _value_log(_exact_log(r, False, C1), r, False, C1)) if log else value


def fused_gromov_wasserstein(M, C1, C2, p=None, q=None, loss_fun="square_loss", symmetric=None, alpha=0.5,
                             armijo=False, G0=None, log=False, max_iter=1e4, tol_rel=1e-9, tol_abs=1e-9, **kwargs):
    """The exact fused GW plan, POT's ``ot.gromov.fused_gromov_wasserstein``
    (:func:`logot.fused_gromov_wasserstein`). ``log``: ``fgw_dist``, ``loss``, ``u``,
    ``v``."""
    r = _exact(M, C1, C2, p, q, loss_fun, symmetric, alpha, armijo, G0, max_iter, tol_rel, tol_abs, kwargs,
               "fused_gromov_wasserstein")
    T = _plan(r, M)
    return (T, _exact_log(r, True, M)) if log else T


def fused_gromov_wasserstein2(M, C1, C2, p=None, q=None, loss_fun="square_loss", symmetric=None, alpha=0.5,
                              armijo=False, G0=None, log=False, max_iter=1e4, tol_rel=1e-9, tol_abs=1e-9,
                              **kwargs):
    """The exact fused GW value ``fgw_dist``, POT's ``ot.gromov.fused_gromov_wasserstein2``;
    for torch tensors differentiable with respect to ``M``, ``C1``, ``C2``, ``p``, ``q``.
    ``log`` as :func:`fused_gromov_wasserstein`, with ``T``, ``lin_loss``, ``quad_loss``."""
    r = _exact(M, C1, C2, p, q, loss_fun, symmetric, alpha, armijo, G0, max_iter, tol_rel, tol_abs, kwargs,
               "fused_gromov_wasserstein2", gradients=_is_torch(M, C1, C2, p, q))
    value = _value(r, M, C1, C2, p, q)
    return (value, _value_log(_exact_log(r, True, M), r, True, M)) if log else value


def entropic_gromov_wasserstein(C1, C2, p=None, q=None, loss_fun="square_loss", epsilon=0.1, symmetric=None,
                                G0=None, max_iter=1000, tol=1e-9, solver="PGD", warmstart=False, verbose=False,
                                log=False, **kwargs):
    """The entropic GW plan, POT's ``ot.gromov.entropic_gromov_wasserstein``: mirror descent
    with a Sinkhorn solve per outer iteration (:func:`logot.entropic_gromov_wasserstein`).
    ``log``: ``err`` (the steps ‖T − T_prev‖_F at the checks), ``gw_dist``."""
    r = _entropic(None, C1, C2, p, q, loss_fun, epsilon, symmetric, 1.0, G0, max_iter, tol, solver, kwargs,
                  "entropic_gromov_wasserstein")
    T = _plan(r, C1)
    return (T, _entropic_log(r, False, C1)) if log else T


def entropic_gromov_wasserstein2(C1, C2, p=None, q=None, loss_fun="square_loss", epsilon=0.1, symmetric=None,
                                 G0=None, max_iter=1000, tol=1e-9, solver="PGD", warmstart=False, verbose=False,
                                 log=False, **kwargs):
    """The entropic GW value ``gw_dist`` (without the entropy), POT's
    ``ot.gromov.entropic_gromov_wasserstein2``; for torch tensors differentiable with
    respect to ``C1``, ``C2``, ``p``, ``q`` (the envelope gradients of the regularised value
    at the returned plan). ``log`` as :func:`entropic_gromov_wasserstein`, with ``T``."""
    r = _entropic(None, C1, C2, p, q, loss_fun, epsilon, symmetric, 1.0, G0, max_iter, tol, solver, kwargs,
                  "entropic_gromov_wasserstein2", gradients=_is_torch(C1, C2, p, q))
    value = _value(r, None, C1, C2, p, q)
    return (value, _value_log(_entropic_log(r, False, C1), r, False, C1)) if log else value


def entropic_fused_gromov_wasserstein(M, C1, C2, p=None, q=None, loss_fun="square_loss", epsilon=0.1,
                                      symmetric=None, alpha=0.5, G0=None, max_iter=1000, tol=1e-9, solver="PGD",
                                      warmstart=False, verbose=False, log=False, **kwargs):
    """The entropic fused GW plan, POT's ``ot.gromov.entropic_fused_gromov_wasserstein``
    (:func:`logot.entropic_fused_gromov_wasserstein`). ``log``: ``err``, ``fgw_dist``."""
    r = _entropic(M, C1, C2, p, q, loss_fun, epsilon, symmetric, alpha, G0, max_iter, tol, solver, kwargs,
                  "entropic_fused_gromov_wasserstein")
    T = _plan(r, M)
    return (T, _entropic_log(r, True, M)) if log else T


def entropic_fused_gromov_wasserstein2(M, C1, C2, p=None, q=None, loss_fun="square_loss", epsilon=0.1,
                                       symmetric=None, alpha=0.5, G0=None, max_iter=1000, tol=1e-9, solver="PGD",
                                       warmstart=False, verbose=False, log=False, **kwargs):
    """The entropic fused GW value ``fgw_dist``, POT's
    ``ot.gromov.entropic_fused_gromov_wasserstein2``; for torch tensors differentiable with
    respect to ``M``, ``C1``, ``C2``, ``p``, ``q``. ``log`` as
    :func:`entropic_fused_gromov_wasserstein`, with ``T``, ``lin_loss``, ``quad_loss``."""
    r = _entropic(M, C1, C2, p, q, loss_fun, epsilon, symmetric, alpha, G0, max_iter, tol, solver, kwargs,
                  "entropic_fused_gromov_wasserstein2", gradients=_is_torch(M, C1, C2, p, q))
    value = _value(r, M, C1, C2, p, q)
    return (value, _value_log(_entropic_log(r, True, M), r, True, M)) if log else value


for _f in (gromov_wasserstein, gromov_wasserstein2, fused_gromov_wasserstein, fused_gromov_wasserstein2):
    _f.__doc__ += _EXACT_DIFFERENCES
for _f in (entropic_gromov_wasserstein, entropic_gromov_wasserstein2, entropic_fused_gromov_wasserstein,
           entropic_fused_gromov_wasserstein2):
    _f.__doc__ += _ENTROPIC_DIFFERENCES
del _f
