"""Exact OT from Python (`logot.emd`, `emd_1d`, `wasserstein_1d`, `sliced_wasserstein`, ...)
and the drop-ins `logot.pot.emd`, ... against POT on seeded random problems; the
certificates checked by hand in numpy; bad input named."""

import warnings

import numpy as np
import ot
import pytest

import logot
from logot import pot


def weights(rng, n, zeros=0):
    w = rng.uniform(0.2, 1.0, size=n)
    w[rng.choice(n, size=zeros, replace=False)] = 0.0
    return w / w.sum()


def clouds(rng, n, m, d=2):
    return rng.uniform(size=(n, d)), rng.uniform(size=(m, d))


def check_optimal(r, a, b, M, tol=1e-9):
    """The plan meets its marginals, the potentials are feasible everywhere and tight on the
    plan, and primal equals dual: checked in numpy on the returned arrays."""
    P = r.plan
    scale = np.abs(M).max()
    np.testing.assert_allclose(P.sum(1), a, atol=1e-13)
    np.testing.assert_allclose(P.sum(0), b * a.sum() / b.sum(), atol=1e-13)
    assert (P >= 0).all()
    reduced = M - r.f[:, None] - r.g[None, :]
    assert reduced.min() >= -tol * scale
    assert np.abs(reduced[r.rows, r.cols]).max() <= tol * scale
    assert abs((P * M).sum() - (a @ r.f + b @ r.g)) <= tol * scale
    assert r.mass.size <= len(a) + len(b) - 1


@pytest.mark.parametrize("n,m,zeros", [(30, 20, 0), (40, 40, 3), (7, 50, 2)])
def test_emd_matches_pot_with_its_certificate(n, m, zeros):
    rng = np.random.default_rng(100 + n + m)
    x, y = clouds(rng, n, m)
    a, b = weights(rng, n, zeros), weights(rng, m)
    M = ot.dist(x, y)
    r = logot.emd(a, b, M)
    assert r.exact and r.converged and r.method == "network_simplex"
    assert r.cost == pytest.approx(ot.emd2(a, b, M), rel=1e-12)
    check_optimal(r, a, b, M)
    c = r.certificate
    assert c.duality_gap <= 1e-12 and c.max_violation <= 1e-12 and c.marginal_error_a <= 1e-13
    # Random real costs: the optimal plan is unique, so the plans agree entry by entry.
    np.testing.assert_allclose(pot.emd(a, b, M), ot.emd(a, b, M), atol=1e-14)
    assert pot.emd2(a, b, M) == pytest.approx(ot.emd2(a, b, M), rel=1e-12)


def test_degenerate_integer_costs_reach_pots_cost():
    rng = np.random.default_rng(7)
    M = rng.integers(0, 4, size=(25, 30)).astype(float)
    a, b = weights(rng, 25, 2), weights(rng, 30, 4)
    r = logot.emd(a, b, M)
    assert r.exact and r.cost == pytest.approx(ot.emd2(a, b, M), rel=1e-12)
    check_optimal(r, a, b, M)
    # Tied optima: POT's plan may differ, its cost may not.
    G = pot.emd(a, b, M)
    assert (G * M).sum() == pytest.approx((ot.emd(a, b, M) * M).sum(), rel=1e-12)


def test_uniform_square_assignment_is_a_permutation_of_brute_force_cost():
    from itertools import permutations

    rng = np.random.default_rng(3)
    M = rng.uniform(size=(6, 6))
    best = min(sum(M[i, s[i]] for i in range(6)) for s in permutations(range(6))) / 6
    u = np.full(6, 1 / 6)
    for method in ("assignment", "network_simplex"):
        r = logot.emd(u, u, M, method=method)
        assert r.exact and r.method == method and r.cost == pytest.approx(best, rel=1e-13)
        np.testing.assert_allclose(np.sort(r.plan, axis=None)[-6:], 1 / 6, rtol=1e-14)


def test_batch_and_emd2_with_several_targets():
    rng = np.random.default_rng(11)
    x, y = clouds(rng, 15, 12)
    M = ot.dist(x, y)
    a = weights(rng, 15)
    bs = np.stack([weights(rng, 12) for _ in range(4)], axis=1)  # m × n_hists, as POT
    want = ot.emd2(a, bs, M)
    np.testing.assert_allclose(pot.emd2(a, bs, M), want, rtol=1e-12)
    rs = logot.emd(a, bs.T, M)
    assert len(rs) == 4 and all(r.exact for r in rs)
    np.testing.assert_allclose(logot.emd2(a, bs.T, M), want, rtol=1e-12)
    # One cost per problem.
    Ms = np.stack([ot.dist(*clouds(rng, 15, 12)) for _ in range(3)])
    got = logot.emd2(np.tile(a, (3, 1)), bs.T[:3], Ms)
    np.testing.assert_allclose(got, [ot.emd2(a, bs[:, k], Ms[k]) for k in range(3)], rtol=1e-12)


def test_point_clouds_match_the_dense_cost():
    rng = np.random.default_rng(5)
    x, y = clouds(rng, 40, 30, d=3)
    a, b = weights(rng, 40), weights(rng, 30)
    for metric in ("sqeuclidean", "euclidean"):
        r = logot.emd(a, b, logot.PointCloud(x, y, metric=metric))
        assert r.exact
        assert r.cost == pytest.approx(ot.emd2(a, b, ot.dist(x, y, metric=metric)), rel=1e-12)
    # Uniform weights by default (POT's), and batches of pairs.
    xs, ys = rng.uniform(size=(3, 10, 2)), rng.uniform(size=(3, 10, 2))
    got = logot.emd2(None, None, logot.PointCloud(xs, ys))
    u = np.full(10, 0.1)
    np.testing.assert_allclose(got, [ot.emd2(u, u, ot.dist(xs[k], ys[k])) for k in range(3)], rtol=1e-12)
    # One pair of clouds shared by a batch of target weights.
    bs = np.stack([weights(rng, 30) for _ in range(3)])
    got = logot.emd2(a, bs, logot.PointCloud(x, y))
    np.testing.assert_allclose(got, [ot.emd2(a, bs[k], ot.dist(x, y)) for k in range(3)], rtol=1e-12)


def test_an_iteration_limit_is_reported_not_hidden():
    rng = np.random.default_rng(9)
    x, y = clouds(rng, 60, 50)
    a, b = weights(rng, 60), weights(rng, 50)
    M = ot.dist(x, y)
    r = logot.emd(a, b, M, max_iters=5, method="network_simplex")
    assert not r.converged and not r.exact and r.iterations <= 5
    # The certificate describes the plan handed back (its marginals, measured here in
    # numpy, fall short: the simplex still routes mass through its artificial start).
    c = r.certificate
    assert c.marginal_error_a == pytest.approx(np.abs(r.plan.sum(1) - a).sum(), rel=1e-9, abs=1e-15)
    assert c.marginal_error_b == pytest.approx(np.abs(r.plan.sum(0) - b).sum(), rel=1e-9, abs=1e-15)
    assert max(c.marginal_error_a, c.duality_gap, c.max_violation) > 1e-6
    assert r.cost == pytest.approx((r.plan * M).sum(), rel=1e-12)
    with pytest.warns(UserWarning, match="numItermax"):
        G, log = pot.emd(a, b, M, numItermax=5, log=True)
    assert log["result_code"] == 3 and log["warning"] is not None
    G, log = pot.emd(a, b, M, log=True)
    assert log["result_code"] == 1 and log["cost"] == pytest.approx(ot.emd2(a, b, M), rel=1e-12)
    np.testing.assert_allclose(log["u"][:, None] + log["v"][None, :] - M, np.minimum(0, log["u"][:, None]
                               + log["v"][None, :] - M), atol=1e-12)


def test_pot_emd_keeps_the_cost_dtype_and_uniform_defaults():
    rng = np.random.default_rng(4)
    x, y = clouds(rng, 8, 5)
    M = ot.dist(x, y).astype(np.float32)
    G = pot.emd([], [], M)
    assert G.dtype == np.float32
    np.testing.assert_allclose(G, ot.emd([], [], M), atol=1e-7)
    assert pot.emd2([], [], M) == pytest.approx(ot.emd2([], [], M), rel=1e-6)


@pytest.mark.parametrize("metric,p", [("sqeuclidean", 1.0), ("minkowski", 1.5), ("euclidean", 1.0),
                                      ("cityblock", 1.0), ("minkowski", 3.0)])
def test_emd_1d_matches_pot(metric, p):
    rng = np.random.default_rng(21)
    xa, xb = rng.normal(size=40), rng.normal(1.0, 2.0, size=25)
    a, b = weights(rng, 40, 3), weights(rng, 25)
    want_G = ot.emd_1d(xa, xb, a, b, metric=metric, p=p)
    np.testing.assert_allclose(pot.emd_1d(xa, xb, a, b, metric=metric, p=p), want_G, atol=1e-15)
    assert pot.emd2_1d(xa, xb, a, b, metric=metric, p=p) == pytest.approx(
        ot.emd2_1d(xa, xb, a, b, metric=metric, p=p), rel=1e-12)
    S = pot.emd_1d(xa, xb, a, b, metric=metric, p=p, dense=False)
    np.testing.assert_allclose(S.toarray(), want_G, atol=1e-15)
    # logot's own call, with the certificate checked on the dense cost.
    q = {"sqeuclidean": 2.0, "minkowski": p}.get(metric, 1.0)
    r = logot.emd_1d(xa, xb, a, b, p=q)
    assert r.exact and r.method == "sorting"
    check_optimal(r, a, b, np.abs(xa[:, None] - xb[None, :]) ** q)


def test_emd_1d_accepts_columns_and_uniform_weights():
    rng = np.random.default_rng(2)
    xa, xb = rng.uniform(size=(10, 1)), rng.uniform(size=(7, 1))
    np.testing.assert_allclose(pot.emd_1d(xa, xb), ot.emd_1d(xa, xb), atol=1e-15)
    cost, log = pot.emd2_1d(xa, xb, log=True)
    want, wlog = ot.emd2_1d(xa, xb, log=True)
    assert cost == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(log["G"], wlog["G"], atol=1e-15)


@pytest.mark.parametrize("p", [1, 2, 3.5])
def test_wasserstein_1d_matches_pot(p):
    rng = np.random.default_rng(31)
    u, v = rng.normal(size=50), rng.exponential(size=30)
    uw, vw = weights(rng, 50), weights(rng, 30)
    assert pot.wasserstein_1d(u, v, uw, vw, p=p) == pytest.approx(ot.wasserstein_1d(u, v, uw, vw, p=p), rel=1e-12)
    assert logot.wasserstein_1d(u, v, p=p) == pytest.approx(ot.wasserstein_1d(u, v, p=p), rel=1e-12)
    # POT's columns: one problem per column, weights shared or per column.
    U, V = rng.normal(size=(50, 4)), rng.normal(size=(30, 4))
    np.testing.assert_allclose(pot.wasserstein_1d(U, V, uw, vw, p=p), ot.wasserstein_1d(U, V, uw, vw, p=p),
                               rtol=1e-12)
    UW = np.stack([weights(rng, 50) for _ in range(4)], axis=1)
    np.testing.assert_allclose(pot.wasserstein_1d(U, V, UW, None, p=p), ot.wasserstein_1d(U, V, UW, None, p=p),
                               rtol=1e-12)
    # Translation by t: W_p^p = |t|^p whatever the points.
    assert logot.wasserstein_1d(u, u + 0.7, p=p) == pytest.approx(0.7 ** p, rel=1e-12)


def test_sliced_matches_pot_on_the_same_projections():
    rng = np.random.default_rng(41)
    x, y = rng.normal(size=(60, 3)), rng.normal(0.5, 1.5, size=(45, 3))
    a, b = weights(rng, 60), weights(rng, 45)
    theta = rng.normal(size=(3, 20))
    theta /= np.linalg.norm(theta, axis=0)
    for p in (1, 2, 3):
        want, wlog = ot.sliced_wasserstein_distance(x, y, a, b, p=p, projections=theta, log=True)
        got, log = pot.sliced_wasserstein_distance(x, y, a, b, p=p, projections=theta, log=True)
        assert got == pytest.approx(want, rel=1e-12)
        np.testing.assert_allclose(log["projected_emds"], wlog["projected_emds"], rtol=1e-12)
        r = logot.sliced_wasserstein(x, y, a, b, projections=theta, p=p)
        assert r.distance == pytest.approx(want, rel=1e-12)
        wmax = ot.max_sliced_wasserstein_distance(x, y, a, b, p=p, projections=theta)
        assert pot.max_sliced_wasserstein_distance(x, y, a, b, p=p, projections=theta) == pytest.approx(wmax,
                                                                                                         rel=1e-12)


def test_sliced_seeds_draw_pots_directions():
    rng = np.random.default_rng(43)
    x, y = rng.normal(size=(30, 4)), rng.normal(size=(35, 4))
    for seed in (0, 5, 2**31 + 7):
        want = ot.sliced_wasserstein_distance(x, y, n_projections=17, seed=seed)
        assert pot.sliced_wasserstein_distance(x, y, n_projections=17, seed=seed) == pytest.approx(want, rel=1e-12)
        assert logot.sliced_wasserstein(x, y, n_projections=17, seed=seed).distance == pytest.approx(want, rel=1e-12)
    # seed=None: directions drawn from NumPy's global generator, handed back in the log.
    got, log = pot.sliced_wasserstein_distance(x, y, n_projections=9, log=True)
    assert log["projections"].shape == (4, 9)
    np.testing.assert_allclose(np.linalg.norm(log["projections"], axis=0), 1.0, rtol=1e-15)
    assert got == pytest.approx(ot.sliced_wasserstein_distance(x, y, projections=log["projections"]), rel=1e-12)
    rs = np.random.RandomState(3)
    want = ot.sliced_wasserstein_distance(x, y, seed=np.random.RandomState(3))
    assert pot.sliced_wasserstein_distance(x, y, seed=rs) == pytest.approx(want, rel=1e-12)


def test_sliced_gradients_match_finite_differences():
    rng = np.random.default_rng(47)
    x, y = rng.normal(size=(12, 2)), rng.normal(1.0, 1.0, size=(9, 2))
    a, b = weights(rng, 12), weights(rng, 9)
    theta = rng.normal(size=(2, 8))
    theta /= np.linalg.norm(theta, axis=0)

    def sw(xx, yy):
        return ot.sliced_wasserstein_distance(xx, yy, a, b, p=2, projections=theta)

    r = logot.sliced_wasserstein(x, y, a, b, projections=theta, p=2, gradients=True)
    h = 1e-6
    for arr, grad in ((x, r.grad_x_s), (y, r.grad_x_t)):
        fd = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            plus, minus = arr.copy(), arr.copy()
            plus[idx] += h
            minus[idx] -= h
            fd[idx] = (sw(plus, y) - sw(minus, y)) / (2 * h) if arr is x else (sw(x, plus) - sw(x, minus)) / (2 * h)
        np.testing.assert_allclose(grad, fd, atol=1e-7)


def test_max_sliced_ascent_finds_a_translation():
    rng = np.random.default_rng(53)
    x = rng.normal(size=(40, 3))
    t = np.array([3.0, -4.0, 12.0])  # |t| = 13
    r = logot.max_sliced_wasserstein(x, x + t, n_projections=10, seed=1, ascent_steps=300)
    assert r.distance == pytest.approx(13.0, rel=1e-6)
    np.testing.assert_allclose(np.abs(r.direction @ t), 13.0, rtol=1e-6)


def _raises(arg, fn, *args, **kwargs):
    with pytest.raises(ValueError) as e:
        fn(*args, **kwargs)
    assert str(e.value).startswith(arg), str(e.value)
    return str(e.value)


def test_bad_input_names_the_argument():
    M = np.array([[0.0, 1.0], [1.0, 0.0]])
    h = np.array([0.5, 0.5])
    _raises("cost", logot.emd, h, h, np.array([[0.0, np.nan], [1.0, 0.0]]))
    _raises("mu", logot.emd, np.array([1.5, -0.5]), h, M)
    _raises("nu", logot.emd, h, np.array([0.5]), M)
    _raises("max_iters", logot.emd, h, h, M, max_iters=0)
    _raises("method", logot.emd, h, h, M, method="hungarian")
    assert "a sums" in _raises("unequal", pot.emd, h, np.array([0.5, 0.6]), M)
    _raises("a", pot.emd, np.array([1.5, -0.5]), h, M)
    _raises("M", pot.emd, h, h, np.array([[0.0, np.inf], [1.0, 0.0]]))
    assert "M has 3 rows" in _raises("a", pot.emd, h, h, np.ones((3, 2)))
    _raises("numItermax", pot.emd, h, h, M, numItermax=0)
    _raises("x_b", logot.emd_1d, [0.0, 1.0], [0.0, np.nan])
    _raises("p", logot.emd_1d, [0.0, 1.0], [0.0, 1.0], p=0.5)
    _raises("p", pot.emd_1d, [0.0, 1.0], [0.0, 1.0], metric="minkowski", p=0.5)
    _raises("b", pot.emd_1d, [0.0, 1.0], [0.0, 1.0], b=[1.0, -1.0])
    _raises("u_weights", logot.wasserstein_1d, [0.0, 1.0], [0.0, 1.0], [1.0, -1.0])
    _raises("p", pot.wasserstein_1d, [0.0, 1.0], [0.0, 1.0], p=0.5)
    x3, y2 = np.zeros((3, 3)), np.zeros((3, 2))
    _raises("x_t", logot.sliced_wasserstein, y2, x3)
    assert "X_s" in _raises("X_t", pot.sliced_wasserstein_distance, y2, x3)
    _raises("p", pot.sliced_wasserstein_distance, y2, y2, p=0.5)
    _raises("projections", pot.sliced_wasserstein_distance, y2, y2, projections=np.ones((3, 4)))
    _raises("projections", logot.sliced_wasserstein, y2, y2, projections=np.ones((2, 0)))
    _raises("seed", pot.sliced_wasserstein_distance, y2, y2, seed=-1)
    _raises("seed", logot.sliced_wasserstein, y2, y2, seed=2**32)
    _raises("n_projections", pot.sliced_wasserstein_distance, y2, y2, n_projections=0)
    _raises("n_projections", pot.sliced_wasserstein_distance, y2, y2, n_projections=0, seed=1)
    _raises("a", pot.sliced_wasserstein_distance, y2, y2, a=np.ones(4) / 4)
    _raises("X_s", pot.sliced_wasserstein_distance, np.zeros((0, 2)), y2)
    with pytest.raises(TypeError, match="n_projections"):
        logot.sliced_wasserstein(y2, y2, n_projections=2.5)


# ---------------------------------------------------------------------------------------
# The GPU auction (backend="cuda"): refusals anywhere, results on a GPU
# ---------------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not logot.cuda_available(), reason="no CUDA GPU")


def test_a_gpu_is_usable_where_one_is_required():
    """Under LOGOT_REQUIRE_GPU=1 (the GPU machine's runs) the GPU tests cannot pass by skipping."""
    import os

    if os.environ.get("LOGOT_REQUIRE_GPU") == "1":
        assert logot.cuda_available(), "LOGOT_REQUIRE_GPU=1 but the CUDA backend is unavailable"


def test_cuda_backend_refuses_what_the_auction_does_not_take_naming_the_argument():
    rng = np.random.default_rng(40)
    c = rng.uniform(size=(6, 6))
    a = rng.uniform(0.5, 1.0, 6)
    a /= a.sum()
    cases = [
        ((a, None, c), {}, "^mu"),
        ((None, a, c), {}, "^nu"),
        ((None, None, c[:, :5]), {}, "^cost"),
        ((None, None, c), dict(method="network_simplex"), "^method"),
        ((None, None, logot.PointCloud(c[:, :2], c[:, 2:4], metric="euclidean")), {}, "^metric"),
        ((None, None, np.zeros((4097, 4097), dtype=np.float32)), {}, "^cost"),
    ]
    for args, kw, match in cases:
        with pytest.raises(ValueError, match=match):
            logot.emd(*args, backend="cuda", **kw)
    assert logot._logot.emd_gpu_refusal(None, None, 6, 6) is None
    assert logot._logot.emd_gpu_refusal(a[None], None, 6, 6).startswith("mu")


@needs_gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cuda_auction_batches_reach_pots_costs(dtype):
    rng = np.random.default_rng(41)
    b, n, d = 6, 40, 3
    x, y = rng.normal(size=(b, n, d)), rng.normal(size=(b, n, d)) + 0.5
    c = ((x[:, :, None] - y[:, None]) ** 2).sum(-1)
    want = [ot.emd2([], [], c[k]) for k in range(b)]
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    dense = logot.emd(None, None, c.astype(dtype), backend="cuda")
    clouds = logot.emd(None, None, logot.PointCloud(x.astype(dtype), y.astype(dtype)), backend="cuda")
    for rs in (dense, clouds):
        assert len(rs) == b
        for r, w, ck in zip(rs, want, c):
            assert r.method in ("auction", "assignment") and r.exact
            np.testing.assert_allclose(r.plan.sum(0), np.full(n, 1.0 / n), rtol=1e-12)
            np.testing.assert_allclose(r.plan.sum(1), np.full(n, 1.0 / n), rtol=1e-12)
            # The plan's cost on the float64 cost is POT's optimum.
            assert (r.plan * ck).sum() == pytest.approx(w, rel=rtol)
    # Integer costs with ties everywhere: the certificate still holds.
    ties = rng.integers(0, 3, size=(4, 32, 32)).astype(dtype)
    for r, ck in zip(logot.emd(None, None, ties, backend="cuda"), ties):
        assert r.exact and r.cost == pytest.approx(ot.emd2([], [], ck.astype(np.float64)), abs=1e-12)
