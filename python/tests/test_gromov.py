"""Gromov–Wasserstein from Python (`logot.entropic_gromov_wasserstein`,
`logot.gromov_wasserstein`, their fused and value forms, `logot.point_gromov_wasserstein`)
and the drop-ins `logot.pot.gromov.*` against POT on seeded held-out problems from the same
initial plan; values recomputed in numpy by brute force; permutation recovery on isometric
copies; envelope gradients against central finite differences; bad input named."""

import inspect
import warnings

import numpy as np
import ot
import pytest

import logot
from logot import pot

# POT's inner Sinkhorn solves and logot's run to a tight tolerance, so that both compute
# the exact mirror descent (the outer iterates then agree to rounding).
POT_INNER = dict(numItermax=200000, stopThr=1e-15)
INNER = dict(inner_max_iters=100000, inner_tol=1e-13)


def weights(rng, n):
    w = rng.uniform(0.2, 1.0, n)
    return w / w.sum()


def sqdist(x):
    c = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    return c / c.max()


def structures(rng, n, m, sym=True, kl=False):
    if sym:
        c1, c2 = sqdist(rng.normal(size=(n, 2))), sqdist(rng.normal(size=(m, 3)))
    else:
        c1, c2 = rng.uniform(0.0, 1.0, (n, n)), rng.uniform(0.0, 1.0, (m, m))
    if kl:
        c2 = c2 + 0.2  # C2 > 0: the KL loss is infinite at b = 0 < a
    return c1, c2


def loss_tensor(c1, c2, loss):
    """L(C1_ik, C2_jl) as an n×m×n×m array (indices i, j, k, l)."""
    a = c1[:, None, :, None]
    b = c2[None, :, None, :]
    if loss == "square_loss":
        return (a - b) ** 2
    safe = np.where(a > 0, a, 1.0)
    return np.where(a > 0, a * np.log(safe), 0.0) - a * np.log(b) - a + b


def brute_value(c1, c2, T, loss="square_loss", M=None, alpha=1.0):
    """(1 − α)·⟨M, T⟩ + α·Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl by the four-index sum."""
    quad = np.einsum("ijkl,ij,kl->", loss_tensor(c1, c2, loss), T, T)
    lin = 0.0 if M is None else (M * T).sum()
    return (1 - alpha) * lin + alpha * quad


def brute_gradient(c1, c2, T, loss="square_loss", M=None, alpha=1.0):
    """∇F(T) = (1 − α)·M + α·Σ_kl (L_ijkl + L_klij)·T_kl by the four-index sums."""
    L = loss_tensor(c1, c2, loss)
    quad = np.einsum("ijkl,kl->ij", L, T) + np.einsum("klij,kl->ij", L, T)
    return (0.0 if M is None else (1 - alpha) * M) + alpha * quad


# ---------------------------------------------------------------------------------------
# Entropic GW against POT from the same initial plan
# ---------------------------------------------------------------------------------------

ENTROPIC_CASES = [
    # (seed, n, m, loss, eps, iterations, symmetric structures, fused alpha, given G0)
    (101, 8, 10, "square_loss", 0.03, 30, True, None, False),
    (102, 9, 6, "kl_loss", 0.05, 25, True, None, False),
    (103, 6, 7, "square_loss", 0.05, 20, False, None, True),
    (104, 7, 9, "square_loss", 0.04, 25, True, 0.4, False),
    (105, 7, 6, "kl_loss", 0.1, 20, False, 0.7, True),
]


@pytest.mark.parametrize("case", ENTROPIC_CASES)
def test_entropic_gw_equals_pot_from_the_same_init(case):
    seed, n, m, loss, eps, iters, sym, alpha, given = case
    rng = np.random.default_rng(seed)
    c1, c2 = structures(rng, n, m, sym, loss == "kl_loss")
    p, q = weights(rng, n), weights(rng, m)
    G0 = None
    if given:
        G0 = rng.uniform(0.1, 1.0, (n, m))
        G0 /= G0.sum()
    M = None if alpha is None else rng.uniform(0.0, 1.0, (n, m))
    if M is None:
        T_pot, log = ot.gromov.entropic_gromov_wasserstein(c1, c2, p, q, loss, eps, G0=G0, max_iter=iters, tol=0.0,
                                                            log=True, **POT_INNER)
        value_pot = log["gw_dist"]
        r = logot.entropic_gromov_wasserstein(c1, c2, eps, p, q, loss=loss, init=G0, max_iters=iters, tol=0.0,
                                              **INNER)
        T_drop, log_drop = pot.gromov.entropic_gromov_wasserstein(c1, c2, p, q, loss, eps, G0=G0, max_iter=iters,
                                                                   tol=0.0, log=True, **POT_INNER)
        value_drop = log_drop["gw_dist"]
    else:
        T_pot, log = ot.gromov.entropic_fused_gromov_wasserstein(M, c1, c2, p, q, loss, eps, alpha=alpha, G0=G0,
                                                                  max_iter=iters, tol=0.0, log=True, **POT_INNER)
        value_pot = log["fgw_dist"]
        r = logot.entropic_fused_gromov_wasserstein(M, c1, c2, eps, p, q, alpha=alpha, loss=loss, init=G0,
                                                    max_iters=iters, tol=0.0, **INNER)
        T_drop, log_drop = pot.gromov.entropic_fused_gromov_wasserstein(
            M, c1, c2, p, q, loss, eps, alpha=alpha, G0=G0, max_iter=iters, tol=0.0, log=True, **POT_INNER)
        value_drop = log_drop["fgw_dist"]
    scale = T_pot.max()
    for T, value in ((r.plan, r.value), (T_drop, value_drop)):
        assert np.abs(T - T_pot).max() <= 1e-8 * scale
        assert abs(value - value_pot) <= 1e-8 * abs(value_pot)
    # POT's step checks at iterations 0, 10, 20, ...
    np.testing.assert_allclose(r.report.steps, log["err"], rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(log_drop["err"], log["err"], rtol=1e-6, atol=1e-12)
    # The value is F of the returned plan (four-index sum), the report describes that plan.
    assert abs(r.value - brute_value(c1, c2, r.plan, loss, M, 1.0 if alpha is None else alpha)) <= 1e-10 * abs(r.value)
    merr = max(np.abs(r.plan.sum(1) - p).sum(), np.abs(r.plan.sum(0) - q).sum())
    assert abs(merr - r.report.marginal_error) <= 1e-14
    assert r.report.iterations == iters and r.report.inner_unconverged == 0
    assert r.symmetric == sym


def test_entropic_gw_stops_as_pot_does():
    """With POT's tolerance the loop stops at the same check, and the report says so."""
    rng = np.random.default_rng(111)
    c1, c2 = structures(rng, 8, 6)
    p, q = weights(rng, 8), weights(rng, 6)
    _, log = ot.gromov.entropic_gromov_wasserstein(c1, c2, p, q, "square_loss", 0.05, tol=1e-9, log=True,
                                                    **POT_INNER)
    r = logot.entropic_gromov_wasserstein(c1, c2, 0.05, p, q, tol=1e-9, **INNER)
    assert len(r.report.steps) == len(log["err"])
    assert r.report.converged and r.report.steps[-1] <= 1e-9
    # A fixed point: the gradient of the returned plan is the one its Sinkhorn solve used.
    assert r.report.stationarity < 1e-6


def test_entropic_float32_runs_in_float32():
    rng = np.random.default_rng(112)
    c1, c2 = structures(rng, 10, 12)
    p, q = weights(rng, 10), weights(rng, 12)
    r64 = logot.entropic_gromov_wasserstein(c1, c2, 0.05, p, q)
    r32 = logot.entropic_gromov_wasserstein(*(a.astype(np.float32) for a in (c1, c2)), 0.05,
                                            p.astype(np.float32), q.astype(np.float32))
    assert r32.plan.dtype == np.float32 and r64.plan.dtype == np.float64
    assert abs(r32.value - r64.value) <= 1e-4 * abs(r64.value)
    assert r32.report.marginal_error <= 1e-4


# ---------------------------------------------------------------------------------------
# Exact GW: POT's local optimum or better
# ---------------------------------------------------------------------------------------

EXACT_CASES = [
    # (seed, n, m, loss, symmetric, fused alpha)
    (201, 9, 9, "square_loss", True, None),
    (202, 8, 11, "square_loss", True, 0.5),
    (203, 7, 6, "square_loss", False, None),
    (204, 8, 7, "kl_loss", True, None),
    (205, 10, 8, "square_loss", False, 0.3),
]


@pytest.mark.parametrize("case", EXACT_CASES)
def test_exact_gw_is_pot_local_optimum_or_better(case):
    seed, n, m, loss, sym, alpha = case
    rng = np.random.default_rng(seed)
    c1, c2 = structures(rng, n, m, sym, loss == "kl_loss")
    p, q = weights(rng, n), weights(rng, m)
    M = None if alpha is None else rng.uniform(0.0, 1.0, (n, m))
    if M is None:
        T_pot, log = ot.gromov.gromov_wasserstein(c1, c2, p, q, loss, log=True)
        value_pot = log["gw_dist"]
        r = logot.gromov_wasserstein(c1, c2, p, q, loss=loss)
        value_drop = pot.gromov.gromov_wasserstein2(c1, c2, p, q, loss)
        T_drop = pot.gromov.gromov_wasserstein(c1, c2, p, q, loss)
    else:
        T_pot, log = ot.gromov.fused_gromov_wasserstein(M, c1, c2, p, q, loss, alpha=alpha, log=True)
        value_pot = log["fgw_dist"]
        r = logot.fused_gromov_wasserstein(M, c1, c2, p, q, alpha=alpha, loss=loss)
        value_drop = pot.gromov.fused_gromov_wasserstein2(M, c1, c2, p, q, loss, alpha=alpha)
        T_drop = pot.gromov.fused_gromov_wasserstein(M, c1, c2, p, q, loss, alpha=alpha)
    a = 1.0 if alpha is None else alpha
    assert r.value <= value_pot + 1e-10 * abs(value_pot) + 1e-14
    assert value_drop == pytest.approx(r.value, rel=1e-14, abs=1e-15)
    np.testing.assert_array_equal(T_drop, r.plan)
    # The value is F of the returned plan, which is a transport plan.
    assert abs(r.value - brute_value(c1, c2, r.plan, loss, M, a)) <= 1e-10 * max(abs(r.value), 1e-12)
    assert r.report.marginal_error <= 1e-14 and (r.plan >= 0).all()
    assert r.report.converged
    # The duals of the linear step at the returned plan are feasible for the brute-force
    # gradient there, and LP duality gives the reported Frank–Wolfe gap.
    grad = brute_gradient(c1, c2, r.plan, loss, M, a)
    scale = np.abs(grad).max()
    assert (r.f[:, None] + r.g[None, :] - grad).max() <= 1e-12 * scale
    gap = (grad * r.plan).sum() - p @ r.f - q @ r.g
    assert gap >= -1e-12 * scale and abs(gap - r.report.gap) <= 1e-11 * scale
    # Started from POT's plan, logot stays there (the same stationary point).
    r2 = logot.fused_gromov_wasserstein(M, c1, c2, p, q, alpha=a, loss=loss, init=T_pot) if M is not None else \
        logot.gromov_wasserstein(c1, c2, p, q, loss=loss, init=T_pot)
    assert r2.value <= value_pot + 1e-10 * abs(value_pot) + 1e-14


# ---------------------------------------------------------------------------------------
# Permutation recovery
# ---------------------------------------------------------------------------------------


def rotated_permuted_copy(seed, n):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)) * np.array([1.0, 0.5, 0.25])
    q_, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    perm = rng.permutation(n)
    y = np.empty_like(x)
    y[perm] = x @ q_.T + 2.5
    return x, y, perm


def test_exact_gw_recovers_the_permutation():
    x, y, perm = rotated_permuted_copy(301, 25)
    c1 = ((x[:, None] - x[None]) ** 2).sum(-1)
    c2 = ((y[:, None] - y[None]) ** 2).sum(-1)
    s = c1.max()
    r = logot.gromov_wasserstein(c1 / s, c2 / s)
    want = np.zeros((25, 25))
    want[np.arange(25), perm] = 1 / 25
    np.testing.assert_allclose(r.plan, want, atol=1e-12)
    assert abs(r.value) < 1e-12


def test_entropic_and_point_gw_recover_the_permutation():
    n = 24
    x, y, perm = rotated_permuted_copy(302, n)
    c1 = ((x[:, None] - x[None]) ** 2).sum(-1)
    c2 = ((y[:, None] - y[None]) ** 2).sum(-1)
    s = c1.max()
    r = logot.entropic_gromov_wasserstein(c1 / s, c2 / s, 5e-4, max_iters=40, inner_tol=1e-7,
                                          inner_max_iters=20000)
    assert (r.plan.argmax(1) == perm).all()
    # Sinkhorn stalls at this ε; the inner solves it does not end are finished by Newton
    # steps, so every one meets its tolerance, and the plan its marginals.
    assert r.report.converged and r.report.inner_unconverged == 0 and r.report.newton_steps > 0
    merr = max(np.abs(r.plan.sum(1) - 1 / n).sum(), np.abs(r.plan.sum(0) - 1 / n).sum())
    assert merr <= 1e-7 and abs(merr - r.report.marginal_error) <= 1e-15
    # The same clouds in linear memory: the same iteration (ε in the units of the
    # unnormalised structures), the same matching.
    pr = logot.point_gromov_wasserstein(x, y, 5e-4 * s * s, max_iters=40, tol=0.0, inner_tol=1e-7,
                                        inner_max_iters=20000, plan=True)
    assert (pr.plan.argmax(1) == perm).all()


def test_point_gw_equals_dense_entropic_gw():
    """Point-cloud GW runs the dense mirror descent on the clouds' squared distances: the
    same plan and value after the same outer iterations from p·qᵀ."""
    rng = np.random.default_rng(303)
    x, y = rng.normal(size=(12, 2)), rng.normal(size=(10, 3))
    p, q = weights(rng, 12), weights(rng, 10)
    c1 = ((x[:, None] - x[None]) ** 2).sum(-1)
    c2 = ((y[:, None] - y[None]) ** 2).sum(-1)
    dense = logot.entropic_gromov_wasserstein(c1, c2, 0.5, p, q, max_iters=15, tol=0.0, **INNER)
    pts = logot.point_gromov_wasserstein(x, y, 0.5, p, q, max_iters=15, tol=0.0, plan=True, **INNER)
    assert np.abs(pts.plan - dense.plan).max() <= 1e-7 * dense.plan.max()
    assert abs(pts.value - dense.value) <= 1e-7 * abs(dense.value)
    assert pts.report.iterations == 15 and pts.report.marginal_error < 1e-10


# ---------------------------------------------------------------------------------------
# Gradients against central finite differences
# ---------------------------------------------------------------------------------------


def regularised(c1, c2, p, q, eps, M=None, alpha=1.0):
    """E = F(T) + ε·Σ T·log T at the converged mirror descent (symmetric=False: the gradient
    formula valid for any structures, so a one-entry perturbation keeps the iteration)."""
    opts = dict(symmetric=False, max_iters=5000, tol=1e-13, check_every=1, inner_max_iters=100000, inner_tol=1e-14)
    if M is None:
        r = logot.entropic_gromov_wasserstein(c1, c2, eps, p, q, **opts)
    else:
        r = logot.entropic_fused_gromov_wasserstein(M, c1, c2, eps, p, q, alpha=alpha, **opts)
    T = r.plan
    return r.value + eps * (T * np.log(T)).sum()


@pytest.mark.parametrize("fused", [False, True])
def test_entropic_gradients_match_finite_differences(fused):
    rng = np.random.default_rng(401 + fused)
    n, m, eps, alpha = 6, 5, 0.2, 0.6
    c1, c2 = structures(rng, n, m)
    p, q = weights(rng, n), weights(rng, m)
    M = rng.uniform(size=(n, m)) if fused else None
    opts = dict(symmetric=False, max_iters=5000, tol=1e-13, check_every=1, inner_max_iters=100000, inner_tol=1e-14,
                gradients=True)
    if fused:
        r = logot.entropic_fused_gromov_wasserstein(M, c1, c2, eps, p, q, alpha=alpha, **opts)
    else:
        r = logot.entropic_gromov_wasserstein(c1, c2, eps, p, q, **opts)
    assert r.report.converged and r.report.stationarity < 1e-10
    g = r.gradients
    a = alpha if fused else 1.0
    h = 1e-5

    def fd(perturb):
        """Central difference of E along ``perturb(t)`` = (c1, c2, p, q, M) at t = ±h."""
        plus, minus = perturb(h), perturb(-h)
        return (regularised(*plus[:4], eps, plus[4], a) - regularised(*minus[:4], eps, minus[4], a)) / (2 * h)

    def close(got, want):
        assert abs(got - want) <= 1e-5 * max(abs(want), 1e-3), (got, want)

    for (i, k) in [(0, 1), (2, 2), (4, 3)]:
        e = np.zeros((n, n))
        e[i, k] = 1
        close(g.c1[i, k], fd(lambda t: (c1 + t * e, c2, p, q, M)))
    for (j, l) in [(1, 0), (3, 3)]:
        e = np.zeros((m, m))
        e[j, l] = 1
        close(g.c2[j, l], fd(lambda t: (c1, c2 + t * e, p, q, M)))
    # Weights: along a direction that keeps the totals equal (p_i up, p_k down).
    d = np.zeros(n)
    d[1], d[4] = 1, -1
    close(g.p @ d, fd(lambda t: (c1, c2, p + t * d, q, M)))
    d = np.zeros(m)
    d[0], d[3] = 1, -1
    close(g.q @ d, fd(lambda t: (c1, c2, p, q + t * d, M)))
    assert abs(g.p.sum()) < 1e-12 and abs(g.q.sum()) < 1e-12
    if fused:
        e = np.zeros((n, m))
        e[2, 1] = 1
        close(g.m[2, 1], fd(lambda t: (c1, c2, p, q, M + t * e)))
        plus = regularised(c1, c2, p, q, eps, M, a + h)
        minus = regularised(c1, c2, p, q, eps, M, a - h)
        close(g.alpha, (plus - minus) / (2 * h))
    else:
        assert g.m is None and g.alpha is None


def test_exact_gradients_match_finite_differences():
    """At a stationary plan (Frank–Wolfe gap 0) the envelope gradient with respect to the
    structures is the derivative of F with the plan held fixed: central differences of the
    four-index sum at the returned plan."""
    rng = np.random.default_rng(411)
    n, m = 7, 7  # uniform weights on 7 points: the conditional gradient stops with a zero gap
    c1, c2 = structures(rng, n, m)
    M = rng.uniform(size=(n, m))
    for fused in (False, True):
        if fused:
            r = logot.fused_gromov_wasserstein(M, c1, c2, alpha=0.4, symmetric=False, gradients=True)
        else:
            r = logot.gromov_wasserstein(c1, c2, symmetric=False, gradients=True)
        a, mf = (0.4, M) if fused else (1.0, None)
        T, h = r.plan, 1e-6
        assert abs(r.report.gap) <= 1e-9 * abs(r.value) + 1e-15

        def value(a1, a2):
            return brute_value(a1, a2, T, "square_loss", mf, a)

        for (i, k) in [(0, 1), (3, 3), (5, 2)]:
            e1, e2 = np.zeros((n, n)), np.zeros((m, m))
            e1[i, k] = e2[i, k] = 1
            want = (value(c1 + h * e1, c2) - value(c1 - h * e1, c2)) / (2 * h)
            assert abs(r.gradients.c1[i, k] - want) <= 1e-7 * max(abs(want), 1e-3)
            want = (value(c1, c2 + h * e2) - value(c1, c2 - h * e2)) / (2 * h)
            assert abs(r.gradients.c2[i, k] - want) <= 1e-7 * max(abs(want), 1e-3)
        if fused:
            np.testing.assert_allclose(r.gradients.m, (1 - a) * T, rtol=1e-14, atol=1e-17)
            assert r.gradients.alpha == pytest.approx(brute_value(c1, c2, T) - (M * T).sum(), rel=1e-10)


# ---------------------------------------------------------------------------------------
# Drop-ins: POT's signatures and calls
# ---------------------------------------------------------------------------------------

DROP_INS = ["gromov_wasserstein", "gromov_wasserstein2", "fused_gromov_wasserstein", "fused_gromov_wasserstein2",
            "entropic_gromov_wasserstein", "entropic_gromov_wasserstein2", "entropic_fused_gromov_wasserstein",
            "entropic_fused_gromov_wasserstein2"]


@pytest.mark.parametrize("name", DROP_INS)
def test_drop_in_signatures_are_pots(name):
    ours = inspect.signature(getattr(pot.gromov, name))
    theirs = inspect.signature(getattr(ot.gromov, name))
    assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == \
        [(p.name, p.default, p.kind) for p in theirs.parameters.values()]
    assert getattr(pot, name) is getattr(pot.gromov, name)


def test_drop_ins_accept_pots_calls():
    rng = np.random.default_rng(501)
    c1, c2 = structures(rng, 6, 7)
    M = rng.uniform(size=(6, 7))
    p, q = ot.unif(6), ot.unif(7)
    # Positional as POT's examples write them, weights left out, POT's float max_iter.
    T = pot.gromov.gromov_wasserstein(c1, c2, p, q, "square_loss", max_iter=1e4)
    assert T.shape == (6, 7) and T.dtype == np.float64
    value, log = pot.gromov.gromov_wasserstein2(c1, c2, log=True)
    assert set(log) >= {"gw_dist", "loss", "u", "v", "T"} and log["gw_dist"] == value
    np.testing.assert_allclose(log["T"].sum(0), q, atol=1e-14)
    value, log = pot.gromov.fused_gromov_wasserstein2(M, c1, c2, p, q, alpha=0.3, log=True)
    assert value == pytest.approx(log["lin_loss"] + log["quad_loss"], rel=1e-14)
    T, log = pot.gromov.entropic_gromov_wasserstein(c1, c2, p, q, "square_loss", 0.1, log=True, warmstart=True,
                                                    numItermax=500, stopThr=1e-9)
    assert set(log) >= {"err", "gw_dist"}
    value = pot.gromov.entropic_fused_gromov_wasserstein2(M, c1, c2, p, q, "square_loss", 0.1, alpha=0.5)
    assert np.isfinite(value)
    # The value forms: POT's value on the same call (default tolerances: close, not equal).
    ours = pot.entropic_gromov_wasserstein2(c1, c2, p, q, epsilon=0.1)
    theirs = ot.gromov.entropic_gromov_wasserstein2(c1, c2, p, q, epsilon=0.1)
    assert ours == pytest.approx(theirs, rel=1e-6)


def test_drop_ins_name_unsupported_arguments():
    rng = np.random.default_rng(502)
    c1, c2 = structures(rng, 5, 5)
    with pytest.raises(ValueError, match="^armijo"):
        pot.gromov.gromov_wasserstein(c1, c2, armijo=True)
    with pytest.raises(ValueError, match="^solver"):
        pot.gromov.entropic_gromov_wasserstein(c1, c2, solver="PPA")
    with pytest.raises(ValueError, match="Unknown solver"):
        pot.gromov.entropic_gromov_wasserstein(c1, c2, solver="XYZ")
    with pytest.raises(ValueError, match="loss_fun"):
        pot.gromov.gromov_wasserstein(c1, c2, loss_fun="hinge")
    with pytest.raises(TypeError, match="numItermaxx"):
        pot.gromov.entropic_gromov_wasserstein(c1, c2, numItermaxx=10)
    with pytest.raises(ValueError, match="^G0"):
        pot.gromov.gromov_wasserstein(c1, c2, G0=np.full((5, 5), 0.1))  # marginals 0.5, not 0.2
    with pytest.raises(ValueError, match="^C2"):
        pot.gromov.gromov_wasserstein(c1, c2[:, :4])
    with pytest.raises(ValueError, match="^epsilon"):
        pot.gromov.entropic_gromov_wasserstein(c1, c2, epsilon=0.0)
    with pytest.raises(ValueError, match="^alpha"):
        pot.gromov.fused_gromov_wasserstein(np.zeros((5, 5)), c1, c2, alpha=1.5)


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


def test_bad_input_raises_naming_the_argument():
    rng = np.random.default_rng(601)
    c1, c2 = structures(rng, 5, 4)
    p, q = ot.unif(5), ot.unif(4)
    cases = [
        (lambda: logot.gromov_wasserstein(c1[:, :3], c2), "c1"),
        (lambda: logot.gromov_wasserstein(c1, c2, p, ot.unif(5)), "q"),
        (lambda: logot.gromov_wasserstein(c1, c2, p, 2 * q), "q"),
        (lambda: logot.gromov_wasserstein(c1, c2, -p, q), "p"),
        (lambda: logot.gromov_wasserstein(np.where(c1 > 0.5, np.nan, c1), c2), "c1"),
        (lambda: logot.gromov_wasserstein(c1, c2, loss="kl_loss"), "c2"),  # C2 has zeros
        (lambda: logot.gromov_wasserstein(c1, c2, loss="hinge"), "loss"),
        (lambda: logot.gromov_wasserstein(c1, c2, init=np.ones((4, 5))), "init"),
        (lambda: logot.gromov_wasserstein(c1, c2, max_iters=0), "max_iters"),
        (lambda: logot.entropic_gromov_wasserstein(c1, c2, -1.0), "eps"),
        (lambda: logot.entropic_gromov_wasserstein(c1, c2, 0.1, init=-np.ones((5, 4))), "init"),
        (lambda: logot.entropic_gromov_wasserstein(c1, c2, 0.1, tol=-1.0), "tol"),
        (lambda: logot.entropic_gromov_wasserstein(c1, c2, 0.1, inner_tol=float("nan")), "inner_tol"),
        (lambda: logot.entropic_fused_gromov_wasserstein(np.ones((5, 3)), c1, c2, 0.1), "m"),
        (lambda: logot.fused_gromov_wasserstein(np.ones((5, 4)), c1, c2, alpha=-0.1), "alpha"),
        (lambda: logot.point_gromov_wasserstein(np.ones((5, 2)), np.ones((4, 2)), 0.1, p, p), "q"),
        (lambda: logot.point_gromov_wasserstein(np.ones((0, 2)), np.ones((4, 2)), 0.1), "x"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value).startswith(name), (name, str(e.value))
    with pytest.raises(TypeError, match="^symmetric"):
        logot.gromov_wasserstein(c1, c2, symmetric="yes")
    with pytest.raises(TypeError, match="^max_iters"):
        logot.entropic_gromov_wasserstein(c1, c2, 0.1, max_iters=1.5)


def test_value_forms_warn_when_stopped_early():
    rng = np.random.default_rng(602)
    c1, c2 = structures(rng, 6, 6)
    with pytest.warns(logot.ConvergenceWarning):
        logot.entropic_gromov_wasserstein2(c1, c2, 0.05, max_iters=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logot.entropic_gromov_wasserstein2(c1, c2, 0.05, max_iters=3, tol=0.0)


def test_torch_values_carry_the_envelope_gradients():
    torch = pytest.importorskip("torch")
    import logot.torch as lt

    rng = np.random.default_rng(701)
    c1, c2 = structures(rng, 6, 5)
    p, q = weights(rng, 6), weights(rng, 5)
    C1, C2, P, Q = (torch.tensor(a, requires_grad=True) for a in (c1, c2, p, q))
    value = pot.gromov.gromov_wasserstein2(C1, C2, P, Q)
    value.backward()
    r = logot.gromov_wasserstein(c1, c2, p, q, gradients=True)
    assert float(value) == pytest.approx(r.value, rel=1e-14)
    np.testing.assert_allclose(C1.grad.numpy(), r.gradients.c1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(Q.grad.numpy(), r.gradients.q, rtol=1e-12, atol=1e-15)
    v = lt.entropic_gromov_wasserstein2(C1, C2, 0.1, P, Q)
    v.backward()
    assert C1.grad is not None


@pytest.mark.skipif(not logot.cuda_available(), reason="no CUDA GPU")
def test_cuda_backend_equals_the_cpu():
    """The same solves on the CUDA backend: float64 to rounding (amplified by the outer
    iterations), float32 to its precision."""
    rng = np.random.default_rng(801)
    c1, c2 = structures(rng, 30, 25)
    p, q = weights(rng, 30), weights(rng, 25)
    M = rng.uniform(size=(30, 25))
    opts = dict(max_iters=20, tol=0.0, **INNER)
    cpu = logot.entropic_fused_gromov_wasserstein(M, c1, c2, 0.02, p, q, alpha=0.5, gradients=True, **opts)
    gpu = logot.entropic_fused_gromov_wasserstein(M, c1, c2, 0.02, p, q, alpha=0.5, gradients=True, backend="cuda",
                                                  **opts)
    assert np.abs(gpu.plan - cpu.plan).max() <= 1e-8 * cpu.plan.max()
    assert abs(gpu.value - cpu.value) <= 1e-8 * abs(cpu.value)
    np.testing.assert_allclose(gpu.gradients.c1, cpu.gradients.c1, rtol=1e-6, atol=1e-10)
    ex_cpu = logot.gromov_wasserstein(c1, c2, p, q)
    ex_gpu = logot.gromov_wasserstein(c1, c2, p, q, backend="cuda")
    assert abs(ex_gpu.value - ex_cpu.value) <= 1e-8 * abs(ex_cpu.value)
    x, y = rng.normal(size=(40, 3)), rng.normal(size=(35, 2))
    pc = logot.point_gromov_wasserstein(x, y, 0.5, max_iters=10, tol=0.0, plan=True)
    pg = logot.point_gromov_wasserstein(x, y, 0.5, max_iters=10, tol=0.0, plan=True, backend="cuda")
    assert np.abs(pg.plan - pc.plan).max() <= 1e-8 * pc.plan.max()
    # float32 on the GPU: the value to the precision's accuracy.
    g32 = logot.entropic_gromov_wasserstein(c1.astype(np.float32), c2.astype(np.float32), 0.05,
                                            p.astype(np.float32), q.astype(np.float32), backend="cuda")
    c64 = logot.entropic_gromov_wasserstein(c1, c2, 0.05, p, q)
    assert g32.plan.dtype == np.float32 and abs(g32.value - c64.value) <= 1e-4 * abs(c64.value)
