"""`from logot import pot as ot` against POT itself: same calls, same answers."""

import warnings

import numpy as np
import ot
import pytest

from logot import pot
from conftest import gaussian_histogram, random_problem


def test_sinkhorn_plan_and_loss(rng):
    a, b, M = random_problem(rng, 30, 20)
    for reg in (1e-2, 0.1):
        want = ot.sinkhorn(a, b, M, reg, method="sinkhorn_log", stopThr=1e-12, numItermax=10_000)
        got = pot.sinkhorn(a, b, M, reg, stopThr=1e-12, numItermax=10_000)
        np.testing.assert_allclose(got, want, atol=1e-13, rtol=1e-9)
        loss = pot.sinkhorn2(a, b, M, reg, stopThr=1e-12, numItermax=10_000)
        assert loss == pytest.approx(ot.sinkhorn2(a, b, M, reg, method="sinkhorn_log", stopThr=1e-12,
                                                  numItermax=10_000), rel=1e-10)
    # POT's default method (scalings) reaches the same plan at its default tolerance.
    np.testing.assert_allclose(pot.sinkhorn(a, b, M, 0.1), ot.sinkhorn(a, b, M, 0.1), atol=1e-9)
    # Every method name POT accepts.
    for method in ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized", "greenkhorn", "sinkhorn_epsilon_scaling"):
        np.testing.assert_allclose(pot.sinkhorn(a, b, M, 0.1, method=method), ot.sinkhorn(a, b, M, 0.1), atol=1e-9)


def test_uniform_marginals_from_empty_lists(rng):
    M = random_problem(rng, 8, 6)[2]
    want = ot.sinkhorn([], [], M, 0.05, method="sinkhorn_log", stopThr=1e-12)
    np.testing.assert_allclose(pot.sinkhorn([], [], M, 0.05, stopThr=1e-12), want, atol=1e-13)


def test_multiple_target_histograms(rng):
    x = np.linspace(0, 1, 40)
    M = (x[:, None] - x[None, :]) ** 2
    a = gaussian_histogram(x, 0.3, 0.1)
    b = np.stack([gaussian_histogram(x, m, 0.1) for m in (0.2, 0.5, 0.8)], axis=1)  # dim_b × n_hists
    want = ot.sinkhorn2(a, b, M, 0.02, method="sinkhorn_log", stopThr=1e-12)
    got = pot.sinkhorn2(a, b, M, 0.02, stopThr=1e-12)
    assert got.shape == (3,)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(pot.sinkhorn(a, b, M, 0.02, stopThr=1e-12), want, rtol=1e-10)
    losses, log = pot.sinkhorn(a, b, M, 0.02, stopThr=1e-12, log=True)
    _, want_log = ot.sinkhorn(a, b, M, 0.02, method="sinkhorn_log", stopThr=1e-12, log=True)
    assert log["log_u"].shape == want_log["log_u"].shape == (40, 3)


def test_log_dict(rng):
    a, b, M = random_problem(rng, 12, 9)
    reg = 0.05
    P, log = pot.sinkhorn(a, b, M, reg, log=True, stopThr=1e-12)
    _, want = ot.sinkhorn(a, b, M, reg, method="sinkhorn_log", log=True, stopThr=1e-12)
    for key in ("err", "niter", "u", "v", "log_u", "log_v"):
        assert key in log
    # POT's log-scalings are determined up to a constant: compare the plans they give.
    K = np.exp(-M / reg)
    np.testing.assert_allclose(log["u"][:, None] * K * log["v"][None, :], P, rtol=1e-12)
    np.testing.assert_allclose(want["u"][:, None] * K * want["v"][None, :], P, atol=1e-13)
    assert log["err"][-1] <= 1e-12 and log["convergence"].converged
    loss, log2 = pot.sinkhorn2(a, b, M, reg, log=True, stopThr=1e-12)
    assert loss == pytest.approx(np.sum(P * M), rel=1e-13) and "niter" in log2
    # warmstart=(log_u, log_v) as POT takes it: converged at once.
    _, log3 = pot.sinkhorn(a, b, M, reg, log=True, stopThr=1e-12, warmstart=(log["log_u"], log["log_v"]))
    assert log3["niter"] < log["niter"]


def test_precision_is_kept(rng):
    a, b, M = random_problem(rng, 16, 16, dtype=np.float32)
    P = pot.sinkhorn(a, b, M, 0.05, stopThr=1e-6)
    assert P.dtype == np.float32
    assert pot.sinkhorn2(a, b, M, 0.05, stopThr=1e-6).dtype == np.float32
    want = ot.sinkhorn(a.astype(np.float64), b.astype(np.float64), M.astype(np.float64), 0.05, method="sinkhorn_log")
    np.testing.assert_allclose(P, want, atol=1e-6)


def test_warnings_and_errors_as_pot(rng):
    a, b, M = random_problem(rng, 20, 20)
    with pytest.warns(UserWarning, match="Sinkhorn did not converge"):
        pot.sinkhorn(a, b, M, 1e-3, numItermax=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pot.sinkhorn2(a, b, M, 1e-3, numItermax=5)  # sinkhorn2 does not warn by default (POT)
    with pytest.raises(ValueError, match="Unknown method"):
        pot.sinkhorn2(a, b, M, 0.1, method="greenkhorn")  # not a sinkhorn2 method in POT either
    with pytest.raises(TypeError, match="nonsense"):
        pot.sinkhorn(a, b, M, 0.1, nonsense=1)
    pot.sinkhorn(a, b, M, 0.1, stabThr=1e-30, print_period=5)  # POT's tuning: accepted
    # Bad input names POT's arguments.
    with pytest.raises(ValueError, match=r"^b: negative mass"):
        pot.sinkhorn(a, -b, M, 0.1)
    with pytest.raises(ValueError, match=r"^reg = 0"):
        pot.sinkhorn(a, b, M, 0.0)
    with pytest.raises(ValueError, match=r"^M"):
        pot.sinkhorn(a, b, M[:, :5], 0.1)
    bad = M.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match=r"^M: non-finite"):
        pot.sinkhorn2(a, b, bad, 0.1)
    with pytest.raises(ValueError, match=r"^numItermax = 0"):
        pot.sinkhorn(a, b, M, 0.1, numItermax=0)


def test_barycenter_as_pot():
    x = np.linspace(0, 1, 50)
    M = (x[:, None] - x[None, :]) ** 2
    A = np.stack([gaussian_histogram(x, 0.2, 0.05), gaussian_histogram(x, 0.7, 0.1)], axis=1)
    w = np.array([0.3, 0.7])
    want = ot.bregman.barycenter(A, M, 1e-2, weights=w, method="sinkhorn_log")
    np.testing.assert_allclose(pot.barycenter(A, M, 1e-2, weights=w, method="sinkhorn_log"), want, atol=1e-12)
    np.testing.assert_allclose(pot.bregman.barycenter(A, M, 1e-2, weights=w), want, atol=1e-12)
    # Every method computes the log-domain fixed point. It satisfies the barycenter's
    # optimality condition: the weighted sum of the inputs' dual potentials on the
    # barycenter's side is constant (POT's own method="sinkhorn" misses it here by 0.026).
    bar = pot.barycenter(A, M, 1e-2, w, stopThr=1e-10)
    np.testing.assert_array_equal(bar, pot.barycenter(A, M, 1e-2, w, method="sinkhorn_log", stopThr=1e-10))
    gs = []
    for k in range(2):
        _, log = ot.sinkhorn(A[:, k], bar, M, 1e-2, method="sinkhorn_log", stopThr=1e-13, numItermax=100_000, log=True)
        gs.append(1e-2 * log["log_v"])
    assert np.ptp(w[0] * gs[0] + w[1] * gs[1]) < 1e-9
    bar, log = pot.barycenter(A, M, 1e-2, log=True)
    _, want_log = ot.bregman.barycenter(A, M, 1e-2, method="sinkhorn_log", log=True)
    assert log["niter"] == want_log["niter"] + 1  # iterations run vs POT's last index
    assert log["err"][-1] == pytest.approx(want_log["err"][-1], rel=1e-8)
    with pytest.raises(ValueError, match=r"^M"):
        pot.barycenter(A, M[:10], 1e-2)


def test_convolutional_barycenter2d_as_pot():
    n = 24
    t = np.linspace(0, 1, n)
    X, Y = np.meshgrid(t, t, indexing="ij")
    imgs = []
    for cx, cy in ((0.3, 0.3), (0.7, 0.6), (0.4, 0.75)):
        im = np.exp(-((X - cx) ** 2 + (Y - cy) ** 2) / 0.01) + 1e-6
        imgs.append(im / im.sum())
    A = np.stack(imgs)
    w = np.array([0.2, 0.5, 0.3])
    want = ot.bregman.convolutional_barycenter2d(A, 4e-3, w, method="sinkhorn_log")
    got = pot.convolutional_barycenter2d(A, 4e-3, w, method="sinkhorn_log")
    np.testing.assert_allclose(got, want, atol=1e-12)
    got32 = pot.convolutional_barycenter2d(A.astype(np.float32), 4e-3, w.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, atol=1e-5)


def test_empirical_sinkhorn_divergence_as_pot(rng):
    xs = rng.normal(size=(25, 2))
    xt = rng.normal(size=(20, 2)) + 1.0
    a = rng.uniform(0.5, 1, 25)
    a /= a.sum()
    want = ot.bregman.empirical_sinkhorn_divergence(xs, xt, 1.0, a=a, stopThr=1e-11, numIterMax=20_000, warn=False)
    got = pot.empirical_sinkhorn_divergence(xs, xt, 1.0, a=a, stopThr=1e-11, numIterMax=20_000, warn=False)
    assert got == pytest.approx(want, rel=1e-8)
    got_e, log = pot.bregman.empirical_sinkhorn_divergence(xs, xt, 1.0, metric="euclidean", log=True, warn=False)
    want_e = ot.bregman.empirical_sinkhorn_divergence(xs, xt, 1.0, metric="euclidean", warn=False)
    assert got_e == pytest.approx(want_e, rel=1e-6)
    assert set(log) >= {"sinkhorn_loss_ab", "sinkhorn_loss_a", "sinkhorn_loss_b"}
    with pytest.raises(ValueError, match=r"^X_t"):
        pot.empirical_sinkhorn_divergence(xs, xt[:, :1], 1.0)
    # POT's samples are one pair of clouds: a batch of pairs (logot.sinkhorn_divergence's) is not.
    with pytest.raises(ValueError, match=r"^X_s: expected points n×d"):
        pot.empirical_sinkhorn_divergence(np.stack([xs, xs]), np.stack([xt, xt]), 1.0)


def test_helpers(rng):
    x = rng.normal(size=(7, 3))
    y = rng.normal(size=(5, 3))
    np.testing.assert_allclose(pot.dist(x, y), ot.dist(x, y), atol=1e-12)
    np.testing.assert_allclose(pot.dist(x, y, metric="euclidean"), ot.dist(x, y, metric="euclidean"), atol=1e-12)
    np.testing.assert_allclose(pot.dist(x), ot.dist(x), atol=1e-12)
    np.testing.assert_array_equal(pot.unif(7), ot.unif(7))


def test_a_pot_script_runs_unchanged():
    """A typical POT snippet with `ot` swapped for `logot.pot`: same numbers."""
    script = """
n = 100
x = np.arange(n, dtype=np.float64)
a = np.exp(-((x - 20) / 5) ** 2); a /= a.sum()
b = np.exp(-((x - 60) / 10) ** 2); b /= b.sum()
M = ot.dist(x.reshape((n, 1)), x.reshape((n, 1)))
M /= M.max()
G = ot.sinkhorn(a, b, M, 1e-2)
W = ot.sinkhorn2(a, b, M, 1e-2)
A = np.vstack((a, b)).T
bary = ot.bregman.barycenter(A, M, 1e-2, np.array([0.5, 0.5]), method="sinkhorn_log")
"""
    results = {}
    for name, module in (("pot", ot), ("logot", pot)):
        env = {"np": np, "ot": module}
        exec(script, env)
        results[name] = env
    np.testing.assert_allclose(results["logot"]["G"], results["pot"]["G"], atol=1e-10)
    assert results["logot"]["W"] == pytest.approx(results["pot"]["W"], rel=1e-7)
    np.testing.assert_allclose(results["logot"]["bary"], results["pot"]["bary"], atol=1e-12)
