"""Unbalanced OT (POT's ``reg_m``) from Python: ``logot.solve/wasserstein/coupling(...,
reg_m=...)`` and ``logot.pot.sinkhorn_unbalanced(2)`` against POT's
``ot.unbalanced.sinkhorn_unbalanced(..., reg_type="kl")`` in float64 and float32, and bad
input raising ValueError naming the argument."""

import warnings

import numpy as np
import ot
import pytest

import logot
from logot import pot

INF = float("inf")
POT_KW = dict(reg_type="kl", numItermax=200_000, stopThr=1e-15)


def unbalanced_problem(rng, n, m, dtype=np.float64):
    """Random points in the plane, squared distances, masses ≈ 0.6·n and 0.45·m (unequal)."""
    x = rng.uniform(size=(n, 2))
    y = rng.uniform(size=(m, 2))
    cost = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    a = rng.uniform(0.2, 1.0, size=n)
    b = rng.uniform(0.2, 0.7, size=m)
    return a.astype(dtype), b.astype(dtype), cost.astype(dtype)


def pot_reference(a, b, M, reg, reg_m):
    """POT's plan, its linear and total costs, and the generalized-KL objective of its plan."""
    a, b, M = (np.asarray(v, dtype=np.float64) for v in (a, b, M))
    P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, reg, reg_m, **POT_KW)
    linear = ot.unbalanced.sinkhorn_unbalanced2(a, b, M, reg, reg_m, returnCost="linear", **POT_KW)
    total = ot.unbalanced.sinkhorn_unbalanced2(a, b, M, reg, reg_m, returnCost="total", **POT_KW)
    rm = list(np.ravel(reg_m))
    ra, rb = rm * 2 if len(rm) == 1 else rm
    nx = ot.backend.NumpyBackend()
    obj = np.sum(P * M) + reg * nx.kl_div(P, a[:, None] * b[None, :], mass=True)
    if ra != INF:
        obj += ra * nx.kl_div(P.sum(1), a, mass=True)
    if rb != INF:
        obj += rb * nx.kl_div(P.sum(0), b, mass=True)
    return P, float(linear), float(total), float(obj)


RELAXATIONS = [0.5, (0.5, 2.0), (INF, 1.0), (1.0, INF), [0.3]]


@pytest.mark.parametrize("reg_m", RELAXATIONS)
def test_coupling_matches_pot_float64(rng, reg_m):
    a, b, M = unbalanced_problem(rng, 12, 9)
    P, linear, _, objective = pot_reference(a, b, M, 0.1, reg_m)
    c = logot.coupling(a, b, M, 0.1, reg_m=reg_m, tol=1e-13, max_iters=100_000)
    assert c.converged
    np.testing.assert_allclose(c.plan, P, rtol=1e-8, atol=1e-12)
    assert c.distance == pytest.approx(linear, rel=1e-9)
    assert c.objective == pytest.approx(objective, rel=1e-9)
    # The solve without the plan, and the plain distance.
    r = logot.solve(a, b, M, 0.1, reg_m=reg_m, tol=1e-13, max_iters=100_000)
    assert r.distance == pytest.approx(linear, rel=1e-9)
    assert r.objective == pytest.approx(objective, rel=1e-9)
    assert "objective" in repr(r)
    d = logot.wasserstein(a, b, M, 0.1, reg_m=reg_m, tol=1e-13, max_iters=100_000)
    assert isinstance(d, float) and d == pytest.approx(linear, rel=1e-9)


@pytest.mark.parametrize("reg_m", [0.5, (INF, 1.0)])
def test_float32_matches_pot(rng, reg_m):
    a, b, M = unbalanced_problem(rng, 12, 9, np.float32)
    P, linear, total, objective = pot_reference(a, b, M, 0.1, reg_m)
    c = logot.coupling(a, b, M, 0.1, reg_m=reg_m)
    assert c.converged and c.plan.dtype == np.float32
    np.testing.assert_allclose(c.plan, P, atol=1e-4 * P.max())
    assert c.distance == pytest.approx(linear, rel=1e-4)
    assert c.objective == pytest.approx(objective, rel=1e-4)
    got = pot.sinkhorn_unbalanced(a, b, M, 0.1, reg_m)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, P, atol=1e-4 * P.max())
    assert pot.sinkhorn_unbalanced2(a, b, M, 0.1, reg_m, returnCost="total") == pytest.approx(
        total, rel=1e-4, abs=1e-4 * abs(objective))  # POT's total can cancel to ≈ 0


def test_batch_matches_pot(rng):
    problems = [unbalanced_problem(rng, 8, 6) for _ in range(3)]
    mu = np.stack([p[0] for p in problems])
    nu = np.stack([p[1] for p in problems])
    cost = np.stack([p[2] for p in problems])
    r = logot.solve(mu, nu, cost, 0.2, reg_m=(1.0, 0.5), tol=1e-13, max_iters=100_000)
    assert r.convergence.converged and r.objective.shape == (3,)
    for k, (a, b, M) in enumerate(problems):
        _, linear, _, objective = pot_reference(a, b, M, 0.2, (1.0, 0.5))
        assert r.distance[k] == pytest.approx(linear, rel=1e-9)
        assert r.objective[k] == pytest.approx(objective, rel=1e-9)


@pytest.mark.parametrize("reg_m", [0.5, (0.5, 2.0), (INF, 1.0), (1.0, INF)])
def test_pot_names_match_pot(rng, reg_m):
    a, b, M = unbalanced_problem(rng, 10, 7)
    kw = dict(numItermax=200_000, stopThr=1e-13)
    P, linear, total, objective = pot_reference(a, b, M, 0.05, reg_m)
    got = pot.sinkhorn_unbalanced(a, b, M, 0.05, reg_m, **kw)
    np.testing.assert_allclose(got, P, rtol=1e-8, atol=1e-12)
    assert pot.sinkhorn_unbalanced2(a, b, M, 0.05, reg_m, **kw) == pytest.approx(linear, rel=1e-9)
    assert pot.sinkhorn_unbalanced2(a, b, M, 0.05, reg_m, returnCost="total", **kw) == pytest.approx(
        total, rel=1e-9, abs=1e-9 * abs(objective))  # POT's total can cancel to ≈ 0
    # ot.unbalanced's namespace, every method name POT accepts, and the log.
    for method in ("sinkhorn", "sinkhorn_stabilized", "sinkhorn_translation_invariant", "sinkhorn_reg_scaling"):
        plan, log = pot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.05, reg_m, method=method, log=True, **kw)
        np.testing.assert_allclose(plan, P, rtol=1e-8, atol=1e-12)
    assert log["cost"] == pytest.approx(linear, rel=1e-9)
    assert log["total_cost"] == pytest.approx(total, rel=1e-9, abs=1e-9 * abs(objective))
    assert log["objective"] == pytest.approx(objective, rel=1e-9)
    # POT's scalings: P = diag(u) (a⊗b ⊙ exp(−M/reg)) diag(v).
    K = a[:, None] * b[None, :] * np.exp(-M / 0.05)
    np.testing.assert_allclose(log["u"][:, None] * K * log["v"][None, :], P, rtol=1e-8, atol=1e-12)


def test_multiple_target_histograms(rng):
    a, _, M = unbalanced_problem(rng, 10, 7)
    B = np.stack([unbalanced_problem(rng, 10, 7)[1] for _ in range(3)], axis=1)  # dim_b × n_hists
    kw = dict(reg_type="kl", numItermax=200_000, stopThr=1e-13)
    # POT 0.9.7 solves a 2-D b with reg_type="entropy" whatever it is told (it warns);
    # logot solves each column's "kl" problem: POT's answer column by column.
    want = [ot.unbalanced.sinkhorn_unbalanced2(a, B[:, k], M, 0.1, 0.7, **kw) for k in range(3)]
    got = pot.sinkhorn_unbalanced2(a, B, M, 0.1, 0.7, **kw)
    assert got.shape == (3,)
    np.testing.assert_allclose(got, want, rtol=1e-9)
    np.testing.assert_allclose(pot.sinkhorn_unbalanced(a, B, M, 0.1, 0.7, **kw), want, rtol=1e-9)


def test_balanced_results_have_no_objective(problem_1d):
    mu, nu, cost = problem_1d
    r = logot.solve(mu, nu, cost, 0.05)
    assert r.objective is None and "objective" not in repr(r)
    # Both sides infinite is the balanced problem.
    b = logot.solve(mu, nu, cost, 0.05, reg_m=INF)
    assert b.distance == r.distance and b.objective is None


def test_bad_input_raises_value_error_naming_the_argument(rng):
    a, b, M = unbalanced_problem(rng, 6, 5)
    bad = [
        (lambda: logot.wasserstein(a, b, M, 0.1, reg_m=0.0), "reg_m = 0.0: the marginal penalty must be > 0"),
        (lambda: logot.coupling(a, b, M, 0.1, reg_m=-1), "reg_m = -1.0"),
        (lambda: logot.solve(a, b, M, 0.1, reg_m=float("nan")), "reg_m = nan"),
        (lambda: logot.solve(a, b, M, 0.1, reg_m=(1.0, 0.0)), "reg_m[1] = 0.0"),
        (lambda: logot.solve(a, b, M, 0.1, reg_m=(-INF, 1.0)), "reg_m[0] = -inf"),
        (lambda: logot.solve(a, b, M, 0.1, reg_m=(1.0, 2.0, 3.0)), "reg_m = (1.0, 2.0, 3.0)"),
        # Unequal masses need a relaxed side.
        (lambda: logot.wasserstein(a, b, M, 0.1), "unequal total masses"),
        (lambda: logot.wasserstein(a, b, M, 0.1, reg_m=(INF, INF)), "unequal total masses"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, reg_type="entropy"), "reg_type = 'entropy'"),
        (lambda: pot.sinkhorn_unbalanced2(a, b, M, 0.1, 1.0, reg_type=None), "reg_type = None"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, 0.0), "reg_m = 0.0"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, (1.0, float("nan"))), "reg_m[1] = nan"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, None), "reg_m = None"),
        (lambda: pot.sinkhorn_unbalanced2(a, b, M, 0.1, 1.0, returnCost="both"), "returnCost = 'both'"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, method="lbfgs"), "Unknown method 'lbfgs'"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, c=np.ones_like(M)), "c: "),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, warmstart=(a, b)), "warmstart: "),
        (lambda: pot.sinkhorn_unbalanced(a, b, M, -0.1, 1.0), "reg = -0.1"),
        (lambda: pot.sinkhorn_unbalanced(-a, b, M, 0.1, 1.0), "a: negative mass"),
        (lambda: pot.sinkhorn_unbalanced(a, b, M[:, :4], 0.1, 1.0), "M: "),
    ]
    for call, needle in bad:
        with pytest.raises(ValueError) as e:
            call()
        assert needle in str(e.value), (needle, str(e.value))
    with pytest.raises(TypeError):
        pot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0, no_such_option=1)
    # A non-number is a TypeError naming reg_m (test_arguments.py: bools and strings).
    with pytest.raises(TypeError, match=r"^reg_m: expected a real number .* got str 'abc'"):
        logot.solve(a, b, M, 0.1, reg_m="abc")


def test_not_converged_warns(rng):
    a, b, M = unbalanced_problem(rng, 10, 7)
    with pytest.warns(UserWarning, match="did not converge"):
        pot.sinkhorn_unbalanced(a, b, M, 0.01, 1.0, numItermax=10, stopThr=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pot.sinkhorn_unbalanced(a, b, M, 0.1, 1.0)


def test_unbalanced_sinkhorn_divergence_matches_pot_objectives(rng):
    """``sinkhorn_divergence(reg_m=ρ)`` against the debiased combination of POT's
    generalized-KL objectives: ``O(a, b) − ½ O(a, a) − ½ O(b, b) + (ε/2)(Σa − Σb)²``."""
    x, y = rng.uniform(size=(10, 2)), rng.uniform(0.2, 1.2, size=(8, 2))
    a, b = rng.uniform(0.2, 1.0, size=10), rng.uniform(0.1, 0.5, size=8)
    eps, rho = 0.1, 0.4
    dist = lambda p, q: ((p[:, None, :] - q[None, :, :]) ** 2).sum(-1)
    obj = lambda u, v, p, q: pot_reference(u, v, dist(p, q), eps, rho)[3]
    want = (obj(a, b, x, y) - 0.5 * obj(a, a, x, x) - 0.5 * obj(b, b, y, y)
            + 0.5 * eps * (a.sum() - b.sum()) ** 2)
    s = logot.sinkhorn_divergence(x, y, eps, a, b, reg_m=rho, tol=1e-13, max_iters=100_000)
    assert s.converged
    assert s.value == pytest.approx(want, rel=1e-9)
    assert s.grad_x.shape == (10, 2) and np.isfinite(s.grad_x).all()
    # Zero for equal measures, also when relaxed.
    same = logot.sinkhorn_divergence(x, x, eps, a, a, reg_m=rho, tol=1e-13, max_iters=100_000)
    assert abs(same.value) < 1e-12
    # One ρ per side, or the linear convention, is refused naming the argument.
    with pytest.raises(ValueError, match="one penalty"):
        logot.sinkhorn_divergence(x, y, eps, a, b, reg_m=(0.4, 1.0))
    with pytest.raises(ValueError, match="convention"):
        logot.sinkhorn_divergence(x, y, eps, a, b, reg_m=rho, convention="linear")
    with pytest.raises(ValueError, match="reg_m"):
        logot.sinkhorn_divergence(x, y, eps, a, b, reg_m=-1.0)
