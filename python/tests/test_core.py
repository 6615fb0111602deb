"""logot's own API against POT, closed forms, numpy references and finite differences."""

import os
import subprocess
import json
import threading
import time
import warnings

import numpy as np
import ot
import pytest

import logot
from conftest import random_problem

TIGHT = dict(tol=1e-13, max_iters=100_000)


def pot_plan(mu, nu, cost, eps):
    return ot.sinkhorn(mu, nu, cost, eps, method="sinkhorn_log", stopThr=1e-14, numItermax=100_000)


# ---------------------------------------------------------------------------------------
# Distances and plans
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n,m,eps", [(60, 60, 1e-2), (17, 31, 5e-2), (40, 25, 3e-3)])
def test_distance_and_plan_match_pot(rng, n, m, eps):
    mu, nu, cost = random_problem(rng, n, m)
    plan = pot_plan(mu, nu, cost, eps)
    c = logot.coupling(mu, nu, cost, eps, **TIGHT)
    assert c.convergence.converged
    assert isinstance(c.distance, float)
    assert c.plan.shape == (n, m)
    np.testing.assert_allclose(c.plan, plan, atol=1e-13, rtol=1e-9)
    np.testing.assert_allclose(c.distance, np.sum(plan * cost), rtol=1e-10)
    # coupling measures ⟨P, C⟩ on the plan it returns, wasserstein from the potentials:
    # the same value up to rounding.
    w = logot.wasserstein(mu, nu, cost, eps, **TIGHT)
    assert w == pytest.approx(c.distance, rel=1e-12)
    # Potentials: P = exp((f ⊕ g − C)/ε).
    np.testing.assert_allclose(np.exp((c.f[:, None] + c.g[None, :] - cost) / eps), c.plan, rtol=1e-12, atol=1e-300)


def test_closed_forms():
    # Diracs on {0, 1/2, 1}: the plan is forced, <P, C> is the squared distance moved.
    x = np.array([0.0, 0.5, 1.0])
    cost = (x[:, None] - x[None, :]) ** 2
    e = np.eye(3)
    assert logot.wasserstein(e[0], e[2], cost, 0.01) == pytest.approx(1.0, abs=1e-12)
    batch = logot.wasserstein(np.stack([e[0]] * 3), e, cost, 0.01)
    np.testing.assert_allclose(batch, [0.0, 0.25, 1.0], atol=1e-12)
    # 2×2 with uniform marginals: off-diagonal mass e^{−1/ε}/(1 + e^{−1/ε}) / 2.
    c = logot.coupling([0.5, 0.5], [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], 0.1)
    off = 0.5 * np.exp(-10) / (1 + np.exp(-10))
    assert c.plan[0, 1] == pytest.approx(off, rel=1e-9)


def test_float32_is_kept_and_close_to_float64(problem_1d):
    mu, nu, cost = problem_1d
    r64 = logot.solve(mu, nu, cost, 1e-2)
    r32 = logot.solve(mu.astype(np.float32), nu.astype(np.float32), cost.astype(np.float32), 1e-2)
    assert r32.f.dtype == np.float32 and r64.f.dtype == np.float64
    assert r32.convergence.converged
    assert r32.distance == pytest.approx(r64.distance, rel=2e-5)
    c32 = logot.coupling(mu.astype(np.float32), nu.astype(np.float32), cost.astype(np.float32), 1e-2)
    assert c32.plan.dtype == np.float32
    # Mixed precision computes in float64; integers too.
    assert logot.solve(mu.astype(np.float32), nu, cost, 1e-2).f.dtype == np.float64
    assert logot.solve([1, 0], [0, 1], [[0, 2], [2, 0]], 0.1).distance == pytest.approx(2.0, abs=1e-12)


def test_any_strides_give_the_same_answer(rng):
    mu, nu, cost = random_problem(rng, 30, 20)
    want = logot.coupling(mu, nu, cost, 0.05)
    # Fortran order, a transposed view, reversed and strided views of bigger arrays.
    cost_f = np.asfortranarray(cost)
    cost_t = np.ascontiguousarray(cost.T).T
    big = np.zeros((60, 3))
    big[::2, 1] = mu
    mu_strided = big[::2, 1]
    nu_rev = np.ascontiguousarray(nu[::-1])[::-1]
    for args in [(mu, nu, cost_f), (mu, nu, cost_t), (mu_strided, nu_rev, cost)]:
        got = logot.coupling(*args, 0.05)
        np.testing.assert_array_equal(got.plan, want.plan)
        assert got.distance == want.distance
    # Big-endian input is converted.
    got = logot.coupling(mu.astype(">f8"), nu, cost.astype(">f8"), 0.05)
    np.testing.assert_array_equal(got.plan, want.plan)
    # Native float arrays of one dtype take the wrapper's fast path; lists and a batch of
    # one take the general one: the same numbers.
    fast = logot.solve(mu, nu, cost, 0.05)
    lists = logot.solve(mu.tolist(), nu.tolist(), cost.tolist(), 0.05)
    np.testing.assert_array_equal(lists.f, fast.f)
    assert lists.distance == fast.distance
    for dtype in (np.float64, np.float32):
        a, b, c = (np.asarray(v, dtype=dtype) for v in (mu, nu, cost))
        single, batch = logot.solve(a, b, c, 0.05), logot.solve(a[None], b[None], c, 0.05)
        assert single.f.dtype == batch.f.dtype == dtype
        np.testing.assert_array_equal(batch.f[0], single.f)
        assert batch.distance[0] == single.distance


def test_batches(rng):
    problems = [random_problem(rng, 12, 9) for _ in range(4)]
    mus = np.stack([p[0] for p in problems])
    nus = np.stack([p[1] for p in problems])
    costs = np.stack([p[2] for p in problems])
    each = [logot.wasserstein(p[0], p[1], p[2], 0.05, **TIGHT) for p in problems]
    d = logot.wasserstein(mus, nus, costs, 0.05, **TIGHT)
    assert d.shape == (4,)
    np.testing.assert_allclose(d, each, rtol=1e-12)
    # Shared cost, shared source (1-D mu broadcast against B targets).
    shared = logot.solve(mus[0], nus, costs[0], 0.05, **TIGHT)
    assert shared.f.shape == (4, 12) and shared.g.shape == (4, 9)
    for k in range(4):
        assert shared.distance[k] == pytest.approx(logot.wasserstein(mus[0], nus[k], costs[0], 0.05, **TIGHT), rel=1e-12)
    c = logot.coupling(mus, nus, costs[0], 0.05)
    assert c.plan.shape == (4, 12, 9)


def test_eps_scaling_and_warm_start(problem_1d):
    mu, nu, cost = problem_1d
    cold = logot.solve(mu, nu, cost, 1e-3, max_iters=5000)
    scaled = logot.solve(mu, nu, cost, 1e-3, eps_scaling=True, max_iters=5000)
    assert cold.converged and scaled.converged
    assert scaled.distance == pytest.approx(cold.distance, rel=1e-7)
    warm = logot.solve(mu, nu, cost, 1e-3, warm_start=(cold.f, cold.g))
    assert warm.convergence.iterations < cold.convergence.iterations
    assert warm.distance == pytest.approx(cold.distance, rel=1e-9)
    explicit = logot.solve(mu, nu, cost, 1e-3, eps_scaling=(1.0, 0.5, 3), max_iters=5000)
    assert explicit.distance == pytest.approx(cold.distance, rel=1e-7)


def test_fixed_iterations_and_the_warning(problem_1d):
    mu, nu, cost = problem_1d
    r = logot.solve(mu, nu, cost, 1e-3, max_iters=3, tol=0)
    assert r.convergence.iterations == 3 and not r.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logot.wasserstein(mu, nu, cost, 1e-3, max_iters=3, tol=0)  # asked for: no warning
    with pytest.warns(logot.ConvergenceWarning, match="did not converge"):
        logot.wasserstein(mu, nu, cost, 1e-3, max_iters=3)


def test_results_have_a_readable_repr(problem_1d):
    r = logot.solve(*problem_1d, 1e-2)
    text = repr(r)
    assert text.startswith("SinkhornResult(distance=0.") and "converged=True" in text
    assert "<float64 array (60,)>" in text
    assert "Convergence(iterations=" in repr(r.convergence)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


def test_bad_input_raises_value_error_naming_the_argument(problem_1d):
    mu, nu, cost = problem_1d
    with pytest.raises(ValueError, match=r"^nu: negative mass"):
        logot.wasserstein(mu, -nu, cost, 0.1)
    with pytest.raises(ValueError, match="unequal total masses"):
        logot.wasserstein(mu, 2 * nu, cost, 0.1)
    bad = cost.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"^cost: non-finite value NaN"):
        logot.wasserstein(mu, nu, bad, 0.1)
    with pytest.raises(ValueError, match=r"^eps = -0.1"):
        logot.wasserstein(mu, nu, cost, -0.1)
    with pytest.raises(ValueError, match=r"^cost"):
        logot.wasserstein(mu, nu, cost[:, :10], 0.1)
    with pytest.raises(ValueError, match=r"^mu: total mass is zero"):
        logot.wasserstein(0 * mu, 0 * nu, cost, 0.1)
    with pytest.raises(ValueError, match=r"^max_iters = 0"):
        logot.wasserstein(mu, nu, cost, 0.1, max_iters=0)
    with pytest.raises(ValueError, match=r"^mu"):
        logot.wasserstein(mu[None, None], nu, cost, 0.1)
    with pytest.raises(ValueError, match="backend"):
        logot.wasserstein(mu, nu, cost, 0.1, backend="tpu")
    with pytest.raises(ValueError, match=r"^x"):
        logot.sinkhorn_divergence(np.zeros(3), np.zeros((3, 2)), 0.1)
    with pytest.raises(ValueError, match=r"^weights"):
        logot.barycenter(np.stack([mu, mu]), [0.7, 0.7], cost, 0.1)


def test_numerical_failure_is_a_runtime_error():
    # ε far below what float32 resolves against the cost's size.
    x = np.linspace(0, 1000, 50, dtype=np.float32)
    cost = (x[:, None] - x[None, :]) ** 2
    mu = np.full(50, 1 / 50, dtype=np.float32)
    with pytest.raises((RuntimeError, ValueError)) as e:
        logot.wasserstein(mu, mu, cost, 1e-12)
    assert "eps" in str(e.value)


@pytest.mark.skipif(logot.cuda_available(), reason="a GPU is present")
def test_cuda_without_a_gpu_is_a_runtime_error(problem_1d):
    with pytest.raises(RuntimeError) as e:
        logot.wasserstein(*problem_1d, 0.1, backend="cuda")
    assert "CUDA" in str(e.value) or "NVRTC" in str(e.value) or "GPU" in str(e.value)
    assert not logot.cuda_available()


@pytest.mark.skipif(not logot.cuda_available(), reason="no CUDA GPU")
def test_cuda_matches_cpu(rng):
    mu, nu, cost = random_problem(rng, 64, 48)
    for dtype, rtol in [(np.float64, 1e-10), (np.float32, 1e-4)]:
        args = (mu.astype(dtype), nu.astype(dtype), cost.astype(dtype), 0.02)
        cpu = logot.coupling(*args)
        gpu = logot.coupling(*args, backend="cuda")
        assert gpu.plan.dtype == dtype
        np.testing.assert_allclose(gpu.distance, cpu.distance, rtol=rtol)
        np.testing.assert_allclose(gpu.plan, cpu.plan, rtol=rtol * 100, atol=rtol * 1e-3)
    g_cpu = logot.wasserstein_gradients(mu, nu, cost, 0.05)
    g_gpu = logot.wasserstein_gradients(mu, nu, cost, 0.05, backend="cuda")
    np.testing.assert_allclose(g_gpu.cost, g_cpu.cost, rtol=1e-6, atol=1e-10)
    x = rng.normal(size=(5, 6, 6))
    np.testing.assert_allclose(logot.bistochastic(x, backend="cuda").r, logot.bistochastic(x).r, atol=1e-12)


def test_the_gil_is_released(rng):
    mu, nu, cost = random_problem(rng, 400, 400)
    done = threading.Event()

    def work():
        logot.solve(mu, nu, cost, 1e-3, max_iters=300, tol=0)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    ticks = 0
    start = time.perf_counter()
    while not done.is_set():
        ticks += 1
    t.join()
    elapsed = time.perf_counter() - start
    # The main thread kept running Python while the solve ran (with the GIL held it would
    # have been stopped for the whole solve).
    assert elapsed > 0.01 and ticks > 1000, (elapsed, ticks)


def test_the_library_time_of_a_call_is_kept_per_thread(rng):
    # The reference of python/bench/overhead.py: the time a call spent in the library,
    # kept for the calling thread only.
    mu, nu, cost = random_problem(rng, 400, 400)
    small = random_problem(rng, 5, 5)
    start = time.perf_counter()
    logot.wasserstein(*small, 0.5)
    small_wall = time.perf_counter() - start
    own = {}

    def work():
        start = time.perf_counter()
        logot.solve(mu, nu, cost, 1e-3, max_iters=300, tol=0)
        own["wall"] = time.perf_counter() - start
        own["inside"] = logot._logot._last_compute_seconds()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    # 300 iterations of 400×400 are most of that call; the bindings' own work is not in it.
    assert 0.5 * own["wall"] < own["inside"] < own["wall"], own
    # The main thread still reads its own small call, not the other thread's.
    assert 0 < logot._logot._last_compute_seconds() < min(small_wall, 0.5 * own["inside"]), (small_wall, own)


# ---------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------


def pot_distance(mu, nu, cost, eps):
    return np.sum(pot_plan(mu, nu, cost, eps) * cost)


def test_wasserstein_gradients_against_finite_differences_of_pot(rng):
    mu, nu, cost = random_problem(rng, 5, 4)
    eps, h = 0.1, 1e-5
    g = logot.wasserstein_gradients(mu, nu, cost, eps, **TIGHT)
    assert g.cg.converged and g.result.convergence.converged
    fd = np.zeros_like(cost)
    for i in range(5):
        for j in range(4):
            up, down = cost.copy(), cost.copy()
            up[i, j] += h
            down[i, j] -= h
            fd[i, j] = (pot_distance(mu, nu, up, eps) - pot_distance(mu, nu, down, eps)) / (2 * h)
    np.testing.assert_allclose(g.cost, fd, atol=1e-8)
    # Marginals: a mass-preserving direction (move mass from bin 0 to bin 3 of mu).
    d = np.zeros(5)
    d[0], d[3] = -1.0, 1.0
    fd_mu = (pot_distance(mu + h * d, nu, cost, eps) - pot_distance(mu - h * d, nu, cost, eps)) / (2 * h)
    assert g.mu @ d == pytest.approx(fd_mu, abs=1e-8)
    assert abs(g.mu.sum()) < 1e-12  # the zero-mean representative
    e = np.zeros(4)
    e[1], e[2] = 1.0, -1.0
    fd_nu = (pot_distance(mu, nu + h * e, cost, eps) - pot_distance(mu, nu - h * e, cost, eps)) / (2 * h)
    assert g.nu @ e == pytest.approx(fd_nu, abs=1e-8)


def test_plan_gradients_of_a_nonlinear_loss(rng):
    mu, nu, cost = random_problem(rng, 4, 5)
    eps, h = 0.2, 1e-5

    def loss(c):  # L(P) = Σ P², through POT
        return np.sum(pot_plan(mu, nu, c, eps) ** 2)

    plan = logot.coupling(mu, nu, cost, eps, **TIGHT).plan
    g = logot.plan_gradients(plan, eps, 2 * plan)
    assert g.cg.converged
    fd = np.zeros_like(cost)
    for i in range(4):
        for j in range(5):
            up, down = cost.copy(), cost.copy()
            up[i, j] += h
            down[i, j] -= h
            fd[i, j] = (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(g.cost, fd, atol=1e-9)


def regularised_objective(plan, cost, eps):
    """OT_ε = <P, C> + ε Σ P (log P − 1), from a POT plan."""
    p = plan[plan > 0]
    return np.sum(plan * cost) + eps * np.sum(p * (np.log(p) - 1))


def test_point_gradients_match_pot(rng):
    x = rng.uniform(size=(7, 2))
    y = rng.uniform(size=(6, 2)) + 0.3
    a = rng.uniform(0.5, 1, 7)
    a /= a.sum()
    eps, h = 0.05, 1e-6
    g = logot.point_gradients(x, y, eps, a, **TIGHT)
    b = np.full(6, 1 / 6)
    cost = ot.dist(x, y)
    plan = pot_plan(a, b, cost, eps)
    assert g.value == pytest.approx(regularised_objective(plan, cost, eps), rel=1e-10)
    assert g.result.distance == pytest.approx(np.sum(plan * cost), rel=1e-10)
    # ∂OT_ε/∂x by central differences of POT's objective.
    fd = np.zeros_like(x)
    for i in range(7):
        for k in range(2):
            xs = []
            for s in (h, -h):
                xp = x.copy()
                xp[i, k] += s
                c = ot.dist(xp, y)
                xs.append(regularised_objective(pot_plan(a, b, c, eps), c, eps))
            fd[i, k] = (xs[0] - xs[1]) / (2 * h)
    np.testing.assert_allclose(g.x, fd, atol=1e-7)
    # Also through a PointCloud cost in solve/coupling: the dense plan.
    c = logot.coupling(a, b, logot.PointCloud(x, y), eps, **TIGHT)
    np.testing.assert_allclose(c.plan, plan, atol=1e-13)


def test_cross_precision_is_a_gpu_choice_the_cpu_ignores(rng):
    """Every name of logot.PRECISIONS reaches the library through PointCloud,
    point_gradients and sinkhorn_divergence, one pair and a batch, float32 and float64; the
    CPU forms exact products whatever the choice, so each gives the default's numbers bit for
    bit; an unknown name is a ValueError naming precision."""
    x, y = rng.normal(size=(30, 20)), rng.normal(size=(25, 20)) + 0.3
    xb, yb = rng.normal(size=(3, 10, 18)), rng.normal(size=(3, 12, 18))
    a, b = np.full(30, 1 / 30), np.full(25, 1 / 25)
    assert logot.PRECISIONS == ("exact", "tf32x3", "tf32", "f16x2", "f16")
    for dtype in (np.float64, np.float32):
        xs, ys, xbs, ybs = (v.astype(dtype) for v in (x, y, xb, yb))
        w = logot.wasserstein(a.astype(dtype), b.astype(dtype), logot.PointCloud(xs, ys), 4.0)
        g = logot.point_gradients(xbs, ybs, 4.0)
        s = logot.sinkhorn_divergence(xs, ys, 4.0)
        sb = logot.sinkhorn_divergence(xbs, ybs, 4.0)
        for p in logot.PRECISIONS:
            cloud = logot.PointCloud(xs, ys, precision=p)
            assert logot.wasserstein(a.astype(dtype), b.astype(dtype), cloud, 4.0) == w, p
            gp = logot.point_gradients(xbs, ybs, 4.0, precision=p)
            np.testing.assert_array_equal(gp.value, g.value, err_msg=p)
            np.testing.assert_array_equal(gp.x, g.x, err_msg=p)
            sp = logot.sinkhorn_divergence(xs, ys, 4.0, precision=p)
            assert sp.value == s.value, p
            np.testing.assert_array_equal(sp.grad_y, s.grad_y, err_msg=p)
            np.testing.assert_array_equal(logot.sinkhorn_divergence(xbs, ybs, 4.0, precision=p).value,
                                          sb.value, err_msg=p)
    assert "precision='f16'" in repr(logot.PointCloud(x, y, precision="f16"))
    for bad in ("f32", "F16", "bf16"):
        with pytest.raises(ValueError, match="precision"):
            logot.wasserstein(a, b, logot.PointCloud(x, y, precision=bad), 4.0)
        with pytest.raises(ValueError, match="precision"):
            logot.point_gradients(x, y, 4.0, precision=bad)
        with pytest.raises(ValueError, match="precision"):
            logot.sinkhorn_divergence(x, y, 4.0, precision=bad)


def test_sinkhorn_divergence_both_conventions(rng):
    x = rng.normal(size=(12, 3))
    y = rng.normal(size=(10, 3)) * 1.3 + 0.5
    eps = 1.0
    # Self-transport converges slowly under alternating updates (POT's and logot's linear
    # terms alike): a looser tolerance, compared at 1e-8.
    lin = logot.sinkhorn_divergence(x, y, eps, convention="linear", tol=1e-11, max_iters=20_000)
    want = ot.bregman.empirical_sinkhorn_divergence(x, y, eps, stopThr=1e-11, numIterMax=20_000, warn=False)
    assert lin.value == pytest.approx(want, rel=1e-8)
    assert lin.grad_x is None
    obj = logot.sinkhorn_divergence(x, y, eps, **TIGHT)
    assert obj.converged and obj.grad_x.shape == (12, 3)
    a, b = np.full(12, 1 / 12), np.full(10, 1 / 10)
    terms = []
    for p, q, wp, wq in ((x, y, a, b), (x, x, a, a), (y, y, b, b)):
        c = ot.dist(p, q)
        plan = ot.sinkhorn(wp, wq, c, eps, method="sinkhorn_log", stopThr=1e-12, numItermax=20_000, warn=False)
        terms.append(regularised_objective(plan, c, eps))
    np.testing.assert_allclose(obj.terms, terms, rtol=1e-9)
    assert obj.value == pytest.approx(terms[0] - 0.5 * (terms[1] + terms[2]), rel=1e-8)
    # A translation by t adds |t|² to every OT_ε(μ, T_t μ): S = |t|².
    t = np.array([0.25, -0.1, 0.3])
    s = logot.sinkhorn_divergence(x, x + t, eps, **TIGHT)
    assert s.value == pytest.approx(t @ t, rel=1e-9)


# ---------------------------------------------------------------------------------------
# Batches of point-cloud pairs (x B×n×d, y B×m×d: problem k on x[k], y[k])
# ---------------------------------------------------------------------------------------


def cloud_batch(rng, batch=3, n=6, m=5, d=2):
    """Seeded pairs with different content per problem and positive weights B×n, B×m."""
    x = rng.uniform(size=(batch, n, d)) + 0.25 * np.arange(batch)[:, None, None]
    y = rng.uniform(size=(batch, m, d)) * (1 + 0.2 * np.arange(batch))[:, None, None] + 0.1
    a = rng.uniform(0.5, 1, size=(batch, n))
    b = rng.uniform(0.5, 1, size=(batch, m))
    return x, y, a / a.sum(1, keepdims=True), b / b.sum(1, keepdims=True)


def test_batched_point_gradients_equal_separate_calls_and_pot(rng):
    x, y, a, b = cloud_batch(rng)
    eps = 0.1
    g = logot.point_gradients(x, y, eps, a, b, **TIGHT)
    assert g.value.shape == (3,) and g.x.shape == x.shape and g.y.shape == y.shape
    assert g.result.convergence.converged
    for k in range(3):
        one = logot.point_gradients(x[k], y[k], eps, a[k], b[k], **TIGHT)
        assert g.value[k] == pytest.approx(one.value, rel=1e-13, abs=1e-15)
        np.testing.assert_allclose(g.x[k], one.x, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(g.y[k], one.y, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(g.result.f[k], one.result.f, rtol=1e-12, atol=1e-14)
        # POT per problem on the dense cost: ⟨P, C⟩ (sinkhorn2) and the objective.
        cost = ot.dist(x[k], y[k])
        want = ot.sinkhorn2(a[k], b[k], cost, eps, method="sinkhorn_log", stopThr=1e-14, numItermax=100_000)
        assert g.result.distance[k] == pytest.approx(float(want), rel=1e-10)
        plan = pot_plan(a[k], b[k], cost, eps)
        assert g.value[k] == pytest.approx(regularised_objective(plan, cost, eps), rel=1e-10)
    # Each problem's gradient is with respect to its own clouds: moving x[1] moves value[1]
    # alone, by g.x[1] (central difference).
    h = 1e-6
    up, down = x.copy(), x.copy()
    up[1, 2, 0] += h
    down[1, 2, 0] -= h
    v_up = logot.point_gradients(up, y, eps, a, b, **TIGHT).value
    v_down = logot.point_gradients(down, y, eps, a, b, **TIGHT).value
    np.testing.assert_array_equal(v_up[[0, 2]], g.value[[0, 2]])
    assert (v_up[1] - v_down[1]) / (2 * h) == pytest.approx(g.x[1, 2, 0], abs=1e-7)


def test_batched_point_weights_broadcast_and_uniform(rng):
    x, y, a, b = cloud_batch(rng)
    eps = 0.1
    shared = logot.point_gradients(x, y, eps, a[0], b[1], **TIGHT)
    tiled = logot.point_gradients(x, y, eps, np.tile(a[0], (3, 1)), np.tile(b[1], (3, 1)), **TIGHT)
    np.testing.assert_allclose(shared.value, tiled.value, rtol=1e-14)
    np.testing.assert_allclose(shared.x, tiled.x, rtol=1e-14, atol=1e-16)
    uniform = logot.point_gradients(x, y, eps, **TIGHT)
    explicit = logot.point_gradients(x, y, eps, np.full(6, 1 / 6), np.full((3, 5), 1 / 5), **TIGHT)
    np.testing.assert_allclose(uniform.value, explicit.value, rtol=1e-14)
    np.testing.assert_allclose(uniform.y, explicit.y, rtol=1e-14, atol=1e-16)
    for k in range(3):
        one = logot.point_gradients(x[k], y[k], eps, **TIGHT)
        assert uniform.value[k] == pytest.approx(one.value, rel=1e-13)
    # float32 in, float32 out.
    g32 = logot.point_gradients(x.astype(np.float32), y.astype(np.float32), eps)
    assert g32.value.dtype == np.float32 and g32.x.dtype == np.float32
    np.testing.assert_allclose(g32.value, uniform.value, rtol=1e-4)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
def test_batched_point_cloud_cost_in_wasserstein_and_coupling(rng, metric):
    x, y, a, b = cloud_batch(rng)
    eps = 0.1
    cloud = logot.PointCloud(x, y, metric)
    dense = cloud.dense()
    assert dense.shape == (3, 6, 5)
    # One histogram shared by the batch (1-D) or one per problem (B×n).
    w = logot.wasserstein(a[0], b, cloud, eps, **TIGHT)
    c = logot.coupling(a, b, cloud, eps, **TIGHT)
    assert w.shape == (3,) and c.plan.shape == (3, 6, 5)
    for k in range(3):
        cost = ot.dist(x[k], y[k], metric=metric)
        np.testing.assert_allclose(dense[k], cost, rtol=1e-12, atol=1e-15)
        one = logot.wasserstein(a[0], b[k], logot.PointCloud(x[k], y[k], metric), eps, **TIGHT)
        assert w[k] == pytest.approx(one, rel=1e-13)
        want = ot.sinkhorn2(a[0], b[k], cost, eps, method="sinkhorn_log", stopThr=1e-14, numItermax=100_000)
        assert w[k] == pytest.approx(float(want), rel=1e-10)
        np.testing.assert_allclose(c.plan[k], pot_plan(a[k], b[k], cost, eps), atol=1e-13)


def test_batched_sinkhorn_divergence_matches_separate_calls(rng):
    x, y, a, b = cloud_batch(rng, n=7, m=5, d=3)
    eps = 0.5
    s = logot.sinkhorn_divergence(x, y, eps, a, b, **TIGHT)
    assert s.value.shape == (3,) and s.grad_x.shape == x.shape and s.grad_y.shape == y.shape
    assert s.terms.shape == (3, 3) and len(s.convergence) == 3 and s.converged
    for k in range(3):
        one = logot.sinkhorn_divergence(x[k], y[k], eps, a[k], b[k], **TIGHT)
        assert s.value[k] == pytest.approx(one.value, rel=1e-12)
        np.testing.assert_allclose(s.terms[k], one.terms, rtol=1e-13)
        np.testing.assert_allclose(s.grad_x[k], one.grad_x, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(s.grad_y[k], one.grad_y, rtol=1e-12, atol=1e-15)
        # The batch runs until every problem has met the tolerance; each problem met it at the
        # iteration it meets it alone.
        assert [c.iterations_each for c in s.convergence[k]] == [c.iterations_each for c in one.convergence]
    # Uniform weights and a shared 1-D b; a translation by t_k gives S = |t_k|² per problem.
    t = rng.normal(size=(3, 1, 3)) * 0.3
    tr = logot.sinkhorn_divergence(x, x + t, eps, None, np.full(7, 1 / 7), **TIGHT)
    np.testing.assert_allclose(tr.value, (t[:, 0] ** 2).sum(1), rtol=1e-9)
    # POT's convention per problem (empirical_sinkhorn_divergence on ot.dist costs).
    lin = logot.sinkhorn_divergence(x, y, 1.0, convention="linear", tol=1e-11, max_iters=20_000)
    assert lin.grad_x is None and lin.value.shape == (3,)
    for k in range(3):
        want = ot.bregman.empirical_sinkhorn_divergence(x[k], y[k], 1.0, stopThr=1e-11, numIterMax=20_000, warn=False)
        assert lin.value[k] == pytest.approx(want, rel=1e-8)
    # Unbalanced (reg_m), per problem.
    u = logot.sinkhorn_divergence(x, y, eps, a, 2 * b, reg_m=2.0, **TIGHT)
    for k in range(3):
        one = logot.sinkhorn_divergence(x[k], y[k], eps, a[k], 2 * b[k], reg_m=2.0, **TIGHT)
        assert u.value[k] == pytest.approx(one.value, rel=1e-12)
        np.testing.assert_allclose(u.grad_x[k], one.grad_x, rtol=1e-12, atol=1e-15)


def test_batched_point_clouds_bad_shapes(rng):
    x, y, a, b = cloud_batch(rng)
    with pytest.raises(ValueError, match=r"^y: expected a batch of clouds B×m×d"):
        logot.point_gradients(x, y[0], 0.1)
    with pytest.raises(ValueError, match=r"^y: expected points m×d"):
        logot.sinkhorn_divergence(x[0], y, 0.1)
    with pytest.raises(ValueError, match=r"^x: expected points n×d or a batch"):
        logot.sinkhorn_divergence(x[None], y[None], 0.1)
    # The library's messages: another number of pairs, another dimension.
    with pytest.raises(ValueError, match=r"^y: holds 2 point clouds but x holds 3"):
        logot.point_gradients(x, y[:2], 0.1)
    with pytest.raises(ValueError, match=r"^y: points have 1 coordinates but those of x have 2"):
        logot.sinkhorn_divergence(x, y[..., :1], 0.1)
    with pytest.raises(ValueError, match=r"^y: holds 2 point clouds"):
        logot.wasserstein(a[0], b[0], logot.PointCloud(x, y[:2]), 0.1)
    with pytest.raises(ValueError, match=r"^x: holds 3 pairs of point clouds but there are 2 problems"):
        logot.wasserstein(a[:2], b[0], logot.PointCloud(x, y), 0.1)
    # Weights: n or B×n.
    with pytest.raises(ValueError, match=r"^a: expected weights 6 or 3×6"):
        logot.point_gradients(x, y, 0.1, a[:2])
    with pytest.raises(ValueError, match=r"^b: expected weights 5 or 3×5"):
        logot.sinkhorn_divergence(x, y, 0.1, None, np.ones(4) / 4)
    with pytest.raises(ValueError, match=r"^a: expected weights"):
        logot.sinkhorn_divergence(x, y, 0.1, a[None])
    with pytest.raises(ValueError, match=r"^cost: a barycenter needs one"):
        logot.barycenter(np.stack([b[0], b[1]]), None, logot.PointCloud(x, y), 0.1)


# ---------------------------------------------------------------------------------------
# Barycenters
# ---------------------------------------------------------------------------------------


def test_barycenter_matches_pot(problem_1d):
    mu, nu, cost = problem_1d
    A = np.stack([mu, nu], axis=1)
    for w in ([0.5, 0.5], [0.2, 0.8]):
        want = ot.bregman.barycenter(A, cost, 1e-2, weights=np.array(w), method="sinkhorn_log", numItermax=1000)
        bar = logot.barycenter(A.T, w, cost, 1e-2)
        assert bar.converged
        np.testing.assert_allclose(bar.histogram, want, atol=1e-12)
    # A batch of two problems, the same answers.
    batch = logot.barycenter(np.stack([A.T, A.T]), [[0.5, 0.5], [0.2, 0.8]], cost, 1e-2)
    assert batch.histogram.shape == (2, 60)
    np.testing.assert_allclose(batch.histogram[1], logot.barycenter(A.T, [0.2, 0.8], cost, 1e-2).histogram, atol=1e-14)


def test_grid_barycenter_matches_pot_convolutional():
    n = 20
    t = np.linspace(-1, 1, n)
    X, Y = np.meshgrid(t, t, indexing="ij")
    square = ((np.abs(X) < 0.5) & (np.abs(Y) < 0.5)).astype(float) + 1e-4
    ring = ((X**2 + Y**2 > 0.3) & (X**2 + Y**2 < 0.7)).astype(float) + 1e-4
    A = np.stack([square / square.sum(), ring / ring.sum()])
    want = ot.bregman.convolutional_barycenter2d(A, 4e-3, method="sinkhorn_log", numItermax=200)
    bar = logot.grid_barycenter(A, None, 4e-3, max_iters=200)
    assert bar.histogram.shape == (n, n)
    np.testing.assert_allclose(bar.histogram, want, atol=1e-12)
    # The dense cost of the same grid gives the same barycenter.
    g = logot.Grid((n, n))
    dense = logot.barycenter(A.reshape(2, -1), None, g, 4e-3, max_iters=200)
    np.testing.assert_allclose(dense.histogram.reshape(n, n), bar.histogram, atol=1e-15)


# ---------------------------------------------------------------------------------------
# Bistochastic projection, linear algebra
# ---------------------------------------------------------------------------------------


def sinkhorn_knopp_reference(x, iters):
    """Log-domain alternating column/row normalisation of exp(X), in numpy."""
    log_r = x.copy()
    for _ in range(iters):
        log_r = log_r - np.logaddexp.reduce(log_r, axis=-2, keepdims=True)
        log_r = log_r - np.logaddexp.reduce(log_r, axis=-1, keepdims=True)
    return np.exp(log_r)


def test_bistochastic_forward_and_backward(rng):
    x = rng.uniform(0, 4, size=(2, 4, 4))
    out = logot.bistochastic(x, iters=20)
    np.testing.assert_allclose(out.r, sinkhorn_knopp_reference(x, 20), atol=1e-14)
    conv = logot.bistochastic(x, tol=1e-13)
    assert conv.convergence.converged
    np.testing.assert_allclose(conv.r.sum(-2), 1, atol=1e-12)
    np.testing.assert_allclose(conv.r.sum(-1), 1, atol=1e-12)
    # Backward: L = <G, R(X)> against central differences of the numpy reference run to
    # convergence.
    g = rng.normal(size=(2, 4, 4))
    dx = logot.bistochastic_backward(conv.r, g)
    assert dx.cg.converged
    h = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += h
        down[idx] -= h
        fd[idx] = (np.sum(g * sinkhorn_knopp_reference(up, 500)) - np.sum(g * sinkhorn_knopp_reference(down, 500))) / (2 * h)
    np.testing.assert_allclose(dx.dx, fd, atol=2e-8)
    single = logot.bistochastic(x[0], iters=20)
    assert single.r.shape == (4, 4)


def test_svd3_matches_numpy(rng):
    a = rng.normal(size=(8, 30, 3))
    out = logot.svd3(a)
    s_np = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(out.s, s_np, rtol=1e-12)
    np.testing.assert_allclose(np.einsum("bik,bk,bkj->bij", out.u, out.s, out.vt), a, atol=1e-12)
    one = logot.svd3(a[0].astype(np.float32))
    assert one.s.dtype == np.float32 and one.u.shape == (30, 3)
    np.testing.assert_allclose(one.s, s_np[0], rtol=1e-5)


def test_newton_schulz_matches_a_numpy_iteration(rng):
    x = rng.normal(size=(12, 20))
    a, b, c = logot.MUON_COEFFICIENTS
    y = x / np.linalg.norm(x)
    for _ in range(5):
        s = y @ y.T
        y = a * y + (b * s + c * s @ s) @ y
    np.testing.assert_allclose(logot.newton_schulz(x), y, atol=1e-12)
    u, _, vt = np.linalg.svd(x, full_matrices=False)
    polar = logot.newton_schulz(x, polish_steps=8)
    np.testing.assert_allclose(polar, u @ vt, atol=1e-9)


# ---------------------------------------------------------------------------------------
# The Rust library's own numbers
# ---------------------------------------------------------------------------------------


def find_cli():
    path = os.environ.get("LOGOT_CLI")
    if path:
        return path
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    for profile in ("release", "debug"):
        p = os.path.join(root, "target", profile, "logot")
        if os.path.exists(p):
            return p
    return None


@pytest.mark.skipif(find_cli() is None, reason="the logot command-line tool is not built (set LOGOT_CLI)")
def test_same_numbers_as_the_rust_command_line(tmp_path, rng):
    mus = np.stack([random_problem(rng, 25, 25)[0] for _ in range(3)])
    nus = np.stack([random_problem(rng, 25, 25)[1] for _ in range(3)])
    cost = random_problem(rng, 25, 25)[2]
    for name, arr in (("mu", mus), ("nu", nus), ("cost", cost)):
        np.save(tmp_path / f"{name}.npy", arr)
    out = subprocess.run(
        [find_cli(), "wasserstein", "--mu", str(tmp_path / "mu.npy"), "--nu", str(tmp_path / "nu.npy"),
         "--cost", str(tmp_path / "cost.npy"), "--eps", "0.02"],
        check=True, capture_output=True, text=True,
    )
    report = json.loads(out.stdout)
    r = logot.solve(mus, nus, cost, 0.02)
    # The same library call (up to the order of parallel sums).
    np.testing.assert_allclose(r.distance, report["distance"], rtol=1e-13)
    assert r.convergence.iterations == report["iterations"]
    assert r.convergence.converged == report["converged"]
