"""logot.torch: autograd functions, checked by torch.autograd.gradcheck on small float64
problems, against POT and against the numpy API; CUDA tensors in place on a GPU. Skipped
where torch is not installed; the comparisons with POT are skipped where POT is not (the
GPU image may lack it), the CUDA tests where no GPU is usable."""

import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

try:
    import ot
except ImportError:  # pragma: no cover - exercised where POT is absent
    ot = None

import logot  # noqa: E402
import logot.torch as lt  # noqa: E402
from conftest import random_problem  # noqa: E402

TIGHT = dict(tol=1e-14, max_iters=100_000)


def t64(a, grad=False):
    return torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=grad)


def test_import_logot_does_not_import_torch_module():
    import subprocess
    import sys

    code = "import sys, logot; assert 'logot.torch' not in sys.modules; print('ok')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "ok"


needs_pot = pytest.mark.skipif(ot is None, reason="POT is not installed")


@needs_pot
def test_wasserstein_value_matches_pot(rng):
    mu, nu, cost = random_problem(rng, 9, 7)
    w = lt.wasserstein(t64(mu), t64(nu), t64(cost), 0.05, **TIGHT)
    assert w.dtype == torch.float64 and w.dim() == 0
    want = np.sum(ot.sinkhorn(mu, nu, cost, 0.05, method="sinkhorn_log", stopThr=1e-14, numItermax=100_000) * cost)
    assert w.item() == pytest.approx(want, rel=1e-11)


def test_gradcheck_wasserstein_cost_and_marginals(rng):
    mu, nu, cost = random_problem(rng, 5, 4)
    c = t64(cost, grad=True)
    assert torch.autograd.gradcheck(lambda c: lt.wasserstein(t64(mu), t64(nu), c, 0.1, **TIGHT), (c,))
    # Marginals through a softmax: every perturbation keeps the masses equal.
    th_mu = t64(np.log(mu), grad=True)
    th_nu = t64(np.log(nu), grad=True)

    def f(a, b, c):
        return lt.wasserstein(torch.softmax(a, 0), torch.softmax(b, 0), c, 0.1, **TIGHT)

    assert torch.autograd.gradcheck(f, (th_mu, th_nu, c))


def test_gradcheck_batch_with_shared_cost(rng):
    problems = [random_problem(rng, 4, 4) for _ in range(3)]
    mus = t64(np.stack([p[0] for p in problems]))
    nus = t64(np.stack([p[1] for p in problems]))
    c = t64(problems[0][2], grad=True)
    out = lt.wasserstein(mus, nus, c, 0.1, **TIGHT)
    assert out.shape == (3,)
    assert torch.autograd.gradcheck(lambda c: lt.wasserstein(mus, nus, c, 0.1, **TIGHT), (c,))


def test_gradcheck_points_through_a_dense_cost(rng):
    x = t64(rng.uniform(size=(4, 2)), grad=True)
    y = t64(rng.uniform(size=(5, 2)))
    a, b = t64(np.full(4, 0.25)), t64(np.full(5, 0.2))
    assert torch.autograd.gradcheck(lambda x: lt.wasserstein(a, b, lt.sqeuclidean(x, y), 0.1, **TIGHT), (x,))
    assert torch.autograd.gradcheck(
        lambda x: lt.wasserstein_points(x, y, 0.1, a, b, convention="linear", **TIGHT), (x,)
    )


def test_gradcheck_points_objective(rng):
    x = t64(rng.uniform(size=(5, 2)), grad=True)
    y = t64(rng.uniform(size=(4, 2)) + 0.2, grad=True)
    assert torch.autograd.gradcheck(lambda x, y: lt.wasserstein_points(x, y, 0.1, **TIGHT), (x, y))
    # Weights through a softmax (mass-preserving).
    th = t64(rng.normal(size=5), grad=True)
    assert torch.autograd.gradcheck(
        lambda th: lt.wasserstein_points(x.detach(), y.detach(), 0.1, torch.softmax(th, 0), **TIGHT), (th,)
    )


@needs_pot
def test_gradcheck_sinkhorn_divergence(rng):
    x = t64(rng.normal(size=(5, 2)), grad=True)
    y = t64(rng.normal(size=(4, 2)) + 0.5, grad=True)
    assert torch.autograd.gradcheck(lambda x, y: lt.sinkhorn_divergence(x, y, 0.5, **TIGHT), (x, y))
    # Same value as the numpy API.
    s = lt.sinkhorn_divergence(x, y, 0.5, **TIGHT)
    want = logot.sinkhorn_divergence(x.detach().numpy(), y.detach().numpy(), 0.5, **TIGHT).value
    assert s.item() == pytest.approx(want, rel=1e-13)
    lin = lt.sinkhorn_divergence(x, y, 1.0, convention="linear", tol=1e-12, max_iters=50_000)
    want = ot.bregman.empirical_sinkhorn_divergence(x.detach().numpy(), y.detach().numpy(), 1.0, stopThr=1e-12,
                                                    numIterMax=50_000, warn=False)
    assert lin.item() == pytest.approx(want, rel=1e-8)
    with pytest.raises(ValueError, match="weights"):
        lt.sinkhorn_divergence(x, y, 0.5, t64(np.full(5, 0.2), grad=True))


def cloud_batch(rng, batch=2, n=4, m=3, d=2):
    x = rng.uniform(size=(batch, n, d)) + 0.3 * np.arange(batch)[:, None, None]
    y = rng.uniform(size=(batch, m, d)) + 0.2
    return t64(x, grad=True), t64(y, grad=True)


def test_gradcheck_batched_points(rng):
    # A batch of pairs (x B×n×d, y B×m×d): a (B,) value, each problem's gradients with
    # respect to its own clouds, checked by finite differences (gradcheck) and against
    # separate calls on each pair.
    x, y = cloud_batch(rng)
    assert torch.autograd.gradcheck(lambda x, y: lt.wasserstein_points(x, y, 0.1, **TIGHT), (x, y))
    assert torch.autograd.gradcheck(lambda x, y: lt.sinkhorn_divergence(x, y, 0.5, **TIGHT), (x, y))
    assert torch.autograd.gradcheck(
        lambda x: lt.wasserstein_points(x, y, 0.1, convention="linear", **TIGHT), (x,)
    )
    # Weights through a softmax: one row per problem (B×n), or one row shared (n).
    th = t64(rng.normal(size=(2, 4)), grad=True)
    assert torch.autograd.gradcheck(
        lambda th: lt.wasserstein_points(x.detach(), y.detach(), 0.1, torch.softmax(th, -1), **TIGHT), (th,)
    )
    th1 = t64(rng.normal(size=4), grad=True)
    assert torch.autograd.gradcheck(
        lambda th: lt.wasserstein_points(x.detach(), y.detach(), 0.1, torch.softmax(th, -1), **TIGHT), (th1,)
    )
    for fn, eps in ((lt.wasserstein_points, 0.1), (lt.sinkhorn_divergence, 0.5)):
        xs, ys = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        v = fn(xs, ys, eps, **TIGHT)
        assert v.shape == (2,)
        (v * t64([1.0, -2.0])).sum().backward()
        for k, w in enumerate((1.0, -2.0)):
            xk, yk = x[k].detach().clone().requires_grad_(), y[k].detach().clone().requires_grad_()
            one = fn(xk, yk, eps, **TIGHT)
            assert one.dim() == 0 and v[k].item() == pytest.approx(one.item(), rel=1e-12)
            (w * one).backward()
            torch.testing.assert_close(xs.grad[k], xk.grad, rtol=1e-11, atol=1e-14)
            torch.testing.assert_close(ys.grad[k], yk.grad, rtol=1e-11, atol=1e-14)


@needs_pot
def test_batched_divergence_matches_pot(rng):
    x, y = cloud_batch(rng, n=5, m=4)
    lin = lt.sinkhorn_divergence(x, y, 1.0, convention="linear", tol=1e-12, max_iters=50_000)
    assert lin.shape == (2,)
    for k in range(2):
        want = ot.bregman.empirical_sinkhorn_divergence(x[k].detach().numpy(), y[k].detach().numpy(), 1.0,
                                                        stopThr=1e-12, numIterMax=50_000, warn=False)
        assert lin[k].item() == pytest.approx(want, rel=1e-8)
    lin.sum().backward()
    assert x.grad.shape == x.shape and torch.isfinite(x.grad).all()


def test_batched_points_bad_shapes(rng):
    x, y = cloud_batch(rng)
    with pytest.raises(ValueError, match=r"^y: expected a batch of clouds"):
        lt.wasserstein_points(x, y[0], 0.1)
    with pytest.raises(ValueError, match=r"^a: expected weights 4 or 2×4"):
        lt.sinkhorn_divergence(x, y, 0.5, t64(np.full((3, 4), 0.25)))
    with pytest.raises(ValueError, match=r"^b: expected weights 3 or 2×3"):
        lt.wasserstein_points(x, y, 0.1, None, t64(np.full(4, 0.25)))
    with pytest.raises(ValueError, match=r"^y: holds 1 point clouds but x holds 2"):
        lt.sinkhorn_divergence(x, y[:1], 0.5)


def test_gradcheck_coupling_nonlinear_loss(rng):
    mu, nu, cost = random_problem(rng, 4, 3)
    c = t64(cost, grad=True)
    assert torch.autograd.gradcheck(lambda c: (lt.coupling(t64(mu), t64(nu), c, 0.2, **TIGHT) ** 2).sum(), (c,))


def test_gradcheck_bistochastic(rng):
    x = t64(rng.uniform(0, 3, size=(2, 4, 4)), grad=True)
    assert torch.autograd.gradcheck(lambda x: lt.bistochastic(x, tol=1e-14), (x,))
    r = lt.bistochastic(x, iters=20)
    np.testing.assert_allclose(r.detach().numpy(), logot.bistochastic(x.detach().numpy(), 20).r)
    # Leading batch axes and float32.
    x32 = torch.rand(3, 2, 6, 6, dtype=torch.float32, requires_grad=True)
    r32 = lt.bistochastic(x32)
    assert r32.shape == (3, 2, 6, 6) and r32.dtype == torch.float32
    (r32 * torch.randn(3, 2, 6, 6)).sum().backward()
    assert x32.grad.shape == x32.shape and torch.isfinite(x32.grad).all()


def test_float32_tensors(rng):
    mu, nu, cost = random_problem(rng, 20, 20, dtype=np.float32)
    c = torch.tensor(cost, requires_grad=True)
    w = lt.wasserstein(torch.tensor(mu), torch.tensor(nu), c, 0.05)
    assert w.dtype == torch.float32
    w.backward()
    assert c.grad.dtype == torch.float32
    g = logot.wasserstein_gradients(mu.astype(np.float64), nu.astype(np.float64), cost.astype(np.float64), 0.05)
    np.testing.assert_allclose(c.grad.numpy(), g.cost, atol=1e-4)


def test_errors_surface_as_value_errors(rng):
    mu, nu, cost = random_problem(rng, 5, 4)
    with pytest.raises(ValueError, match=r"^nu: negative mass"):
        lt.wasserstein(t64(mu), t64(-nu), t64(cost, grad=True), 0.1)
    with pytest.raises(ValueError, match=r"^x"):
        lt.bistochastic(torch.zeros(3, 4))


@pytest.mark.skipif(not torch.cuda.is_available() or not logot.cuda_available(), reason="no CUDA GPU")
def test_cuda_tensors(rng):
    mu, nu, cost = random_problem(rng, 64, 64)
    dev = torch.device("cuda")
    c = torch.tensor(cost, device=dev, requires_grad=True)
    w = lt.wasserstein(torch.tensor(mu, device=dev), torch.tensor(nu, device=dev), c, 0.05)
    assert w.device.type == "cuda"
    w.backward()
    assert c.grad.device.type == "cuda"
    cpu = logot.wasserstein_gradients(mu, nu, cost, 0.05)
    np.testing.assert_allclose(c.grad.cpu().numpy(), cpu.cost, rtol=1e-6, atol=1e-10)
    x = torch.rand(1024, 8, 8, device=dev, requires_grad=True)
    r = lt.bistochastic(x)
    (r * torch.randn_like(r)).sum().backward()
    assert x.grad.device.type == "cuda"
    np.testing.assert_allclose(r.detach().cpu().numpy(), logot.bistochastic(x.detach().cpu().numpy()).r, atol=1e-5)


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available() or not logot.cuda_available(), reason="no CUDA GPU")


@contextlib.contextmanager
def no_host_copies():
    """Any host copy of a CUDA tensor through torch's Python API (``.cpu()``, ``.numpy()``,
    ``.to("cpu")``, ``.tolist()``, ``.item()``) fails the test inside this block (reading a
    host tensor, such as the pinned copy of the deferred statistics, is not a copy)."""
    with pytest.MonkeyPatch.context() as mp:
        def forbid(name, original):
            def check(self, *args, **kwargs):
                if not self.is_cuda:
                    return original(self, *args, **kwargs)
                if name == "to" and not any(str(a).startswith("cpu") for a in list(args) + list(kwargs.values())):
                    return original(self, *args, **kwargs)
                raise AssertionError(f"host copy through Tensor.{name} during an in-place CUDA call")

            mp.setattr(torch.Tensor, name, check)

        for name in ("cpu", "numpy", "tolist", "item", "to"):
            forbid(name, getattr(torch.Tensor, name))
        yield


def _host_path(x, g, iters=20):
    """R and dX through the host-array API on the CUDA backend (the copy path)."""
    xn = x.detach().cpu().numpy()
    r = logot.bistochastic(xn.reshape(-1, *xn.shape[-2:]), iters, backend="cuda").r
    dx = logot.bistochastic_backward(r, g.detach().cpu().numpy().reshape(r.shape), backend="cuda").dx
    return r.reshape(xn.shape), dx.reshape(xn.shape)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_zero_copy(dtype):
    """CUDA tensors are computed in place: no host copy through torch while the forward and
    backward run (no_host_copies forbids them), no device-to-host or host-to-device copy of
    the data (the profiler's copies take less GPU time than half of one copy of x), and
    the results equal the host-array path on the CUDA backend bit for bit."""
    from torch.profiler import ProfilerActivity, profile

    assert lt.CUDA_ZERO_COPY
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = (4 * torch.rand(65536, 4, 4, device="cuda", dtype=dtype, generator=gen)).requires_grad_()
    g = torch.randn(x.shape, device="cuda", dtype=dtype, generator=gen)
    lt.bistochastic(x)  # compile the kernels outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with no_host_copies():
            r = lt.bistochastic(x)
            (r * g).sum().backward()
            torch.cuda.synchronize()
    assert r.device == x.device and x.grad.device == x.device
    assert r.dtype == dtype and x.grad.dtype == dtype
    copies = [e for e in prof.events() if "Memcpy DtoH" in e.name or "Memcpy HtoD" in e.name]
    # The data is 4 or 8 MiB; the statistics read back are a few words. Compare the copies'
    # GPU time with that of one copy of x (the profiler's events do not carry byte counts
    # on every torch version).
    total_us = sum(e.device_time_total for e in copies)
    x_copy_us = _time_one_copy(x)
    assert total_us < 0.5 * x_copy_us, (total_us, x_copy_us)
    want_r, want_dx = _host_path(x, g)
    np.testing.assert_array_equal(r.detach().cpu().numpy(), want_r)
    np.testing.assert_array_equal(x.grad.cpu().numpy(), want_dx)


@needs_gpu
def test_cuda_in_place_on_a_side_stream_and_with_batch_axes():
    """The work goes to the caller's current stream, ordered after what is queued there (the
    logits are produced on a side stream just before the call); leading batch axes and
    non-contiguous inputs and gradients; non-finite logits leave NaN in R and are reported
    (deferred) as a warning naming them."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    base = torch.rand(3, 700, 16, 16, device="cuda", generator=gen)
    g = torch.randn(3, 700, 16, 16, device="cuda", generator=gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with no_host_copies():
        with torch.cuda.stream(side):
            x = (base * 4).transpose(-1, -2).detach().requires_grad_()  # queued on `side`, not contiguous
            r = lt.bistochastic(x)
            (r * g.transpose(-1, -2)).sum().backward()  # a non-contiguous upstream gradient
        side.synchronize()
        lt.bistochastic_stats()
        bad = base.clone()
        bad[1, 5, 2, 3] = float("nan")
        r_bad = lt.bistochastic(bad)
        with pytest.warns(logot.ConvergenceWarning, match="non-finite logits"):
            stats = lt.bistochastic_stats()
        assert stats["forward"] is None
        assert not bool(torch.isfinite(r_bad[1, 5]).all())
    assert r.shape == x.shape and x.grad.shape == x.shape
    want_r, want_dx = _host_path(x.detach().contiguous(), g.transpose(-1, -2).contiguous())
    np.testing.assert_array_equal(r.detach().cpu().numpy(), want_r)
    np.testing.assert_array_equal(x.grad.cpu().numpy(), want_dx)


def _time_one_copy(x):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    x.detach().cpu()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000.0


@needs_gpu
def test_cuda_calls_do_not_wait_for_the_gpu():
    """Forward and backward return while a long kernel queued before them still runs (no
    stream or device synchronisation per call); their statistics arrive later, truthfully:
    non-convergence of the projection (tol > 0) and of the backward's CG is warned about by
    bistochastic_stats(), and by a later call once the copies have completed."""
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = (4 * torch.rand(4096, 16, 16, device="cuda", generator=gen)).requires_grad_()
    g = torch.randn(x.shape, device="cuda", generator=gen)
    # The timed sequence twice beforehand: kernels compiled, and torch's caching allocator
    # holding every block it needs (growing it is a cudaMalloc, which synchronises).
    for _ in range(2):
        x.grad = None
        (lt.bistochastic(x, iters=2, tol=1e-9) * g).sum().backward()
    lt.bistochastic_stats()
    torch.cuda.synchronize()
    x.grad = None
    import time

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(2_000_000_000)  # about a second of GPU time
    stop.record()
    t = time.perf_counter()
    r = lt.bistochastic(x, iters=2, tol=1e-9)
    (r * g).sum().backward()
    host_s = time.perf_counter() - t
    assert not stop.query(), f"the sleep kernel ended before the calls returned after {host_s:.3f} s"
    torch.cuda.synchronize()
    sleep_s = start.elapsed_time(stop) / 1000.0
    assert host_s < 0.5 * sleep_s, (host_s, sleep_s)
    x.grad = None
    # 2 iterations cannot reach 1e-9; 1 CG iteration cannot reach 1e-12.
    lt.bistochastic_stats()
    # The forward's statistics may be reported by the backward's poll, the rest here.
    with pytest.warns(logot.ConvergenceWarning) as record:
        r = lt.bistochastic(x, iters=2, tol=1e-9, cg_max_iters=1, cg_tol=1e-12)
        (r * g).sum().backward()
        stats = lt.bistochastic_stats()
    messages = " ".join(str(w.message) for w in record)
    assert "projection did not converge" in messages and "CG did not converge" in messages
    assert stats["forward"]["unconverged"] > 0 and stats["forward"]["iterations"] == 2
    assert stats["backward"].unconverged > 0 and stats["backward"].problems == x.shape[0]
    # A later call reports what completed in the meantime, without being asked.
    r = lt.bistochastic(x, iters=2, tol=1e-9)
    torch.cuda.synchronize()
    with pytest.warns(logot.ConvergenceWarning, match="projection did not converge"):
        lt.bistochastic(x, iters=2, tol=1e-9)
    lt.bistochastic_stats()


@needs_gpu
def test_cuda_statistics_equal_the_host_path():
    """The deferred statistics are the ones the host-array path reports: the projection's
    iteration count and the CG summary of the same R and G."""
    gen = torch.Generator(device="cuda").manual_seed(9)
    x = (3 * torch.rand(500, 8, 8, device="cuda", dtype=torch.float64, generator=gen)).requires_grad_()
    g = torch.randn(x.shape, device="cuda", dtype=torch.float64, generator=gen)
    lt.bistochastic_stats()
    r = lt.bistochastic(x, iters=1000, tol=1e-12, cg_max_iters=4, cg_tol=1e-13)
    (r * g).sum().backward()
    with pytest.warns(logot.ConvergenceWarning, match="CG did not converge"):
        stats = lt.bistochastic_stats()
    want = logot.bistochastic_backward(r.detach().cpu().numpy(), g.cpu().numpy(), cg_tol=1e-13, cg_max_iters=4,
                                       backend="cuda").cg
    got = stats["backward"]
    assert (got.problems, got.max_iterations, got.unconverged, got.first_unconverged) == (
        want.problems, want.max_iterations, want.unconverged, want.first_unconverged)
    assert got.max_residual == want.max_residual
    assert stats["forward"]["unconverged"] == 0 and stats["forward"]["marginal_error"] <= 1e-12


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_graph_capture_replays_forward_and_backward(dtype):
    """A training step captured into a CUDA graph (forward and backward, torch's recipe:
    warm-up on a side stream, then capture) replays logot's kernels on the captured tensors:
    each replay on new data equals the eager calls on that data bit for bit, and the
    replays leave no statistics to report."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    shape = (300, 12, 12)
    x = (4 * torch.rand(shape, device="cuda", dtype=dtype, generator=gen)).requires_grad_()
    g = torch.randn(shape, device="cuda", dtype=dtype, generator=gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x.grad = None
            lt.bistochastic(x, 15).backward(g)
    torch.cuda.current_stream().wait_stream(side)
    lt.bistochastic_stats()
    graph = torch.cuda.CUDAGraph()
    x.grad = None
    with torch.cuda.graph(graph):
        r = lt.bistochastic(x, 15)
        r.backward(g)
    lt.bistochastic_stats()
    for seed in (1, 2, 3):
        data = torch.Generator(device="cuda").manual_seed(100 + seed)
        xv = 4 * torch.rand(shape, device="cuda", dtype=dtype, generator=data)
        gv = torch.randn(shape, device="cuda", dtype=dtype, generator=data)
        with torch.no_grad():
            x.copy_(xv)
        g.copy_(gv)
        graph.replay()
        xe = xv.clone().requires_grad_()
        re = lt.bistochastic(xe, 15)
        re.backward(gv)
        torch.cuda.synchronize()
        assert torch.equal(r.detach(), re.detach())
        assert torch.equal(x.grad, xe.grad)
        # The replayed projection is this data's (rows normalised last: sums of 1).
        assert (r.detach().sum(-1) - 1).abs().max() < (1e-5 if dtype == torch.float32 else 1e-12)
    # The eager calls' reports only (3 forward, 3 backward; some may have come back already):
    # the captured calls post nothing.
    assert len(lt._lg._logot._bistochastic_reports(True)) <= 6


def _dense_batch(b, n, m, dtype, seed, device="cuda"):
    """Seeded marginals (rows summing to 1, a few empty bins) and costs U[0, 1) on the GPU."""
    gen = torch.Generator(device=device).manual_seed(seed)
    mu = torch.rand(b, n, device=device, dtype=dtype, generator=gen) + 0.1
    nu = torch.rand(b, m, device=device, dtype=dtype, generator=gen) + 0.1
    mu[:, :2] = 0
    mu, nu = mu / mu.sum(-1, keepdim=True), nu / nu.sum(-1, keepdim=True)
    cost = torch.rand(b, n, m, device=device, dtype=dtype, generator=gen)
    return mu, nu, cost


def _dense_host_path(mu, nu, cost, eps, **options):
    """Value and gradients through the host-array path on the CUDA backend (the copy path):
    CPU tensors with backend="cuda"."""
    leaves = [t.detach().cpu().requires_grad_() for t in (mu, nu, cost)]
    value = lt.wasserstein(*leaves, eps, backend="cuda", **options)
    value.sum().backward()
    return value.detach().numpy(), [t.grad.numpy() for t in leaves]


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_wasserstein_zero_copy(dtype):
    """A dense batch of CUDA tensors is computed in place: no host copy through torch while
    the forward and backward run (no_host_copies), the profiler's host<->device copies take
    less GPU time than half of one copy of the cost (only per-problem numbers cross), and the
    value and the gradients with respect to the cost and both marginals equal the host-array
    path on the CUDA backend bit for bit."""
    from torch.profiler import ProfilerActivity, profile

    # 64 MiB of f32 cost: the per-problem numbers read back (input checks, convergence checks,
    # the backward's CG dot products: a few bytes each) stay far below half a copy of it.
    mu, nu, cost = _dense_batch(16, 1024, 1024, dtype, 5)
    leaves = [t.clone().requires_grad_() for t in (mu, nu, cost)]
    lt.wasserstein(*[t.detach() for t in leaves], 0.05)  # compile the kernels outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with no_host_copies():
            value = lt.wasserstein(*leaves, 0.05)
            value.sum().backward()
            torch.cuda.synchronize()
    assert value.device == cost.device and value.dtype == dtype and value.shape == (16,)
    assert all(t.grad.device == cost.device and t.grad.dtype == dtype for t in leaves)
    copies = [e for e in prof.events() if "Memcpy DtoH" in e.name or "Memcpy HtoD" in e.name]
    total_us = sum(e.device_time_total for e in copies)
    cost_copy_us = _time_one_copy(cost)
    assert total_us < 0.5 * cost_copy_us, (total_us, cost_copy_us)
    want_value, want_grads = _dense_host_path(mu, nu, cost, 0.05)
    np.testing.assert_array_equal(value.detach().cpu().numpy(), want_value)
    for name, t, want in zip(("mu", "nu", "cost"), leaves, want_grads):
        np.testing.assert_array_equal(t.grad.cpu().numpy(), want, err_msg=name)


@needs_gpu
def test_cuda_wasserstein_on_a_side_stream_with_shared_cost_and_one_problem():
    """The work goes to the caller's current stream, ordered after what is queued there (the
    inputs are produced on a side stream just before the call; the cost is not contiguous);
    one shared cost for a batch and a single problem give the host path's results; the
    convergence warning comes from the reports read back; bad input is a ValueError naming
    the argument."""
    mu, nu, cost = _dense_batch(4, 300, 200, torch.float64, 11)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with no_host_copies():
        with torch.cuda.stream(side):
            shared = (cost[0].t() * 2).t().requires_grad_()  # queued on `side`, not contiguous
            a, b = (mu * 1).requires_grad_(), (nu * 1).requires_grad_()
            value = lt.wasserstein(a, b, shared, 0.05)
            value.sum().backward()
            one = lt.wasserstein(mu[1], nu[1], cost[1], 0.05)
        side.synchronize()
    want_value, want_grads = _dense_host_path(mu, nu, shared.detach(), 0.05)
    np.testing.assert_array_equal(value.detach().cpu().numpy(), want_value)
    np.testing.assert_array_equal(a.grad.cpu().numpy(), want_grads[0])
    np.testing.assert_array_equal(b.grad.cpu().numpy(), want_grads[1])
    # The shared cost's gradient is summed over the batch by torch (on the GPU or the CPU).
    np.testing.assert_allclose(shared.grad.cpu().numpy(), want_grads[2], rtol=1e-12, atol=1e-15)
    assert one.shape == ()
    want_one = logot.wasserstein(mu[1].cpu().numpy(), nu[1].cpu().numpy(), cost[1].cpu().numpy(), 0.05,
                                 backend="cuda")
    assert float(one) == want_one
    with pytest.warns(logot.ConvergenceWarning, match="did not converge"):
        lt.wasserstein(mu, nu, cost, 1e-3, max_iters=3)
    bad = mu.clone()
    bad[2, 7] = float("nan")
    with pytest.raises(ValueError, match=r"^mu: .*\(2, 7\)"):
        lt.wasserstein(bad, nu, cost, 0.05)
    with pytest.raises(ValueError, match=r"^nu: negative mass"):
        lt.wasserstein(mu, -nu, cost, 0.05)


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_coupling_in_place(dtype):
    """The plans and their implicit backward on CUDA tensors run in place (no host copy
    through torch, on the current stream) and equal the host-array path on the CUDA backend
    bit for bit: the plan, and ∂C, ∂μ, ∂ν of a loss ⟨G, P⟩ with a seeded G."""
    mu, nu, cost = _dense_batch(3, 200, 150, dtype, 21)
    g = torch.randn(cost.shape, device="cuda", dtype=dtype, generator=torch.Generator(device="cuda").manual_seed(4))
    leaves = [t.clone().requires_grad_() for t in (mu, nu, cost)]
    with no_host_copies():
        plan = lt.coupling(*leaves, 0.05)
        (plan * g).sum().backward()
        torch.cuda.synchronize()
    assert plan.device == cost.device and plan.dtype == dtype and plan.shape == cost.shape
    host = [t.detach().cpu().requires_grad_() for t in (mu, nu, cost)]
    want = lt.coupling(*host, 0.05, backend="cuda")
    (want * g.cpu()).sum().backward()
    np.testing.assert_array_equal(plan.detach().cpu().numpy(), want.detach().numpy())
    for name, t, w in zip(("mu", "nu", "cost"), leaves, host):
        np.testing.assert_array_equal(t.grad.cpu().numpy(), w.grad.numpy(), err_msg=name)
    one = lt.coupling(mu[0], nu[0], cost[0], 0.05)
    assert one.shape == cost.shape[1:]
    want_one = lt.coupling(mu[0].cpu(), nu[0].cpu(), cost[0].cpu(), 0.05, backend="cuda")
    np.testing.assert_array_equal(one.cpu().numpy(), want_one.numpy())


def test_in_place_inputs_broadcast_like_the_host_path():
    """The in-place path's inputs (checked on CPU tensors, the same torch code): marginals
    broadcast to B×n and B×m as the host path's ``_problem`` does, contiguous; mismatched
    shapes are left to the host path (whose checks name the argument)."""
    mu, nu = torch.rand(5), torch.rand(3, 4)
    cost = torch.rand(4, 5).t()  # 5×4, not contiguous
    assert lt._dense_fits(mu, nu, cost)
    a, b, c, dims, single = lt._dense_inputs(mu, nu, cost)
    assert dims == (3, 5, 4) and not single
    assert a.shape == (3, 5) and b.shape == (3, 4) and c.shape == (5, 4)
    assert a.is_contiguous() and b.is_contiguous() and c.is_contiguous()
    torch.testing.assert_close(a, mu.expand(3, 5), rtol=0, atol=0)
    torch.testing.assert_close(c, cost, rtol=0, atol=0)
    a, b, c, dims, single = lt._dense_inputs(mu, nu[0], cost)
    assert dims == (1, 5, 4) and single
    assert lt._dense_fits(torch.rand(2, 5), torch.rand(2, 4), torch.rand(2, 5, 4))
    assert not lt._dense_fits(torch.rand(2, 5), torch.rand(3, 4), cost)  # batch sizes differ
    assert not lt._dense_fits(torch.rand(6), nu, cost)  # n differs
    assert not lt._dense_fits(torch.rand(2, 5), torch.rand(2, 4), torch.rand(3, 5, 4))


def _cloud_batch(b, n, m, d, dtype, seed, device="cuda"):
    """Seeded clouds x in [2, 3)^d and y in [2.1, 3.1)^d (B×n×d, B×m×d: far from the origin,
    where the device's centring matters) and weights (rows summing to 1, a few empty bins)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = 2 + torch.rand(b, n, d, device=device, dtype=dtype, generator=gen)
    y = 2.1 + torch.rand(b, m, d, device=device, dtype=dtype, generator=gen)
    a = torch.rand(b, n, device=device, dtype=dtype, generator=gen) + 0.1
    w = torch.rand(b, m, device=device, dtype=dtype, generator=gen) + 0.1
    a[:, :2] = 0
    return x, y, a / a.sum(-1, keepdim=True), w / w.sum(-1, keepdim=True)


def _host_copies_of(loss):
    """``loss()`` and the backward of its sum under the profiler, with no host copy through
    torch allowed: the value and the GPU time (µs) of the host<->device copies that ran."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with no_host_copies():
            value = loss()
            value.sum().backward()
            torch.cuda.synchronize()
    copies = [e for e in prof.events() if "Memcpy DtoH" in e.name or "Memcpy HtoD" in e.name]
    return value, sum(e.device_time_total for e in copies)


def _points_host_path(x, y, a, b, eps, **options):
    """OT_ε and its gradients through the host-array path on the CUDA backend (the copy path:
    numpy arrays with backend="cuda:0"), the weights' gradients centred as logot.torch does."""
    g = logot.point_gradients(*[t.detach().cpu().numpy() for t in (x, y)], eps,
                              *[t.detach().cpu().numpy() for t in (a, b)], backend="cuda:0", **options)
    f, gp = lt._centred_potentials(torch.from_numpy(np.ascontiguousarray(g.result.f)).cuda(),
                                   torch.from_numpy(np.ascontiguousarray(g.result.g)).cuda())
    return np.asarray(g.value), [g.x, g.y, f.cpu().numpy(), gp.cpu().numpy()]


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("d", [3, 17])
def test_cuda_wasserstein_points_zero_copy(dtype, d):
    """A batch of pairs of CUDA clouds is computed in place: no host copy through torch while
    the forward and backward run, the profiler's host<->device copies take less GPU time than
    half of one copy of the clouds (only per-problem numbers cross), and the value and the
    gradients with respect to both clouds and both weights equal the host-array path on the
    CUDA backend bit for bit."""
    # 12 to 36 MB of x and a small y: one copy of x takes far longer than the per-problem
    # numbers read back (input checks, ranges, convergence checks: a few bytes each).
    x, y, a, b = _cloud_batch(4, 2**18 if d == 3 else 2**16, 256, d, dtype, 7)
    leaves = [t.clone().requires_grad_() for t in (x, y, a, b)]
    lt.wasserstein_points(*[t.detach() for t in leaves[:2]], 0.5, *[t.detach() for t in leaves[2:]])
    torch.cuda.synchronize()
    value, total_us = _host_copies_of(lambda: lt.wasserstein_points(leaves[0], leaves[1], 0.5, leaves[2], leaves[3]))
    assert value.device == x.device and value.dtype == dtype and value.shape == (4,)
    clouds_copy_us = _time_one_copy(x)
    assert total_us < 0.5 * clouds_copy_us, (total_us, clouds_copy_us)
    want_value, want_grads = _points_host_path(x, y, a, b, 0.5)
    np.testing.assert_array_equal(value.detach().cpu().numpy(), want_value)
    for name, t, want in zip(("x", "y", "a", "b"), leaves, want_grads):
        np.testing.assert_array_equal(t.grad.cpu().numpy(), want, err_msg=name)


@needs_gpu
def test_cuda_precision_reaches_the_tensor_core_kernels():
    """float32 CUDA clouds above 16 dimensions, in place: ``precision`` picks the cross
    term's kernel. The values are stationary in the potentials (an error δ in f and g moves
    them by O(δ²), below f32's resolution here: exact and f16 gave the same values to the
    bit), so the point gradients carry the choice: with f16 products they differ from exact
    products' and stay near them, and equal the host-array path's with the same choice bit
    for bit; the divergence's gradients differ too."""
    x, y, a, b = _cloud_batch(2, 3000, 2500, 40, torch.float32, 29)
    ot_grad, div_grad = {}, {}
    for p in ("exact", "f16"):
        for out, loss in ((ot_grad, lt.wasserstein_points), (div_grad, lt.sinkhorn_divergence)):
            leaf = x.clone().requires_grad_()
            value = loss(leaf, y, 2.0, a, b, precision=p)
            assert torch.isfinite(value).all() and value.shape == (2,)
            value.sum().backward()
            out[p] = leaf.grad.cpu().numpy()
    exact, f16 = (ot_grad[p].astype(np.float64) for p in ("exact", "f16"))
    assert (exact != f16).any()
    err = np.abs(f16 - exact).max() / np.abs(exact).max()
    print(f"f16 against exact products: largest gradient difference {err:.3e} of the largest entry")
    assert err < 5e-3, err
    _, host = _points_host_path(x, y, a, b, 2.0, precision="f16")
    np.testing.assert_array_equal(host[0], ot_grad["f16"])
    assert (div_grad["exact"] != div_grad["f16"]).any() and np.isfinite(div_grad["f16"]).all()


def _divergence_host_path(x, y, a, b, eps, **options):
    """S_ε and its point gradients through the host-array path on the CUDA backend."""
    s = logot.sinkhorn_divergence(*[t.detach().cpu().numpy() for t in (x, y)], eps,
                                  *[t.detach().cpu().numpy() for t in (a, b)], backend="cuda:0", **options)
    return np.asarray(s.value), [s.grad_x, s.grad_y]


@needs_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("d", [17, 40])
def test_cuda_sinkhorn_divergence_zero_copy(dtype, d):
    """A batch of Sinkhorn divergences of CUDA clouds is computed in place: no host copy
    through torch while the forward and backward run, the profiler's host<->device copies
    take less GPU time than half of one copy of the clouds (only per-problem numbers cross),
    and the values and the gradients with respect to both clouds equal the host-array path on
    the CUDA backend bit for bit. One pair (a 0-d value) and weights shared by a batch, on a
    side stream with a non-contiguous cloud, too; a NaN coordinate is a ValueError naming the
    cloud; an unconverged solve warns."""
    # 2.2 to 10 MB of x and a small y: one copy of x takes far longer than the numbers read
    # back (input checks, ranges, convergence checks of the three solves).
    x, y, a, b = _cloud_batch(2, 16384, 256, d, dtype, 19)
    leaves = [t.clone().requires_grad_() for t in (x, y)]
    lt.sinkhorn_divergence(x, y, 2.0, a, b)
    torch.cuda.synchronize()
    value, total_us = _host_copies_of(lambda: lt.sinkhorn_divergence(leaves[0], leaves[1], 2.0, a, b))
    assert value.device == x.device and value.dtype == dtype and value.shape == (2,)
    clouds_copy_us = _time_one_copy(x)
    assert total_us < 0.5 * clouds_copy_us, (total_us, clouds_copy_us)
    want_value, want_grads = _divergence_host_path(x, y, a, b, 2.0)
    np.testing.assert_array_equal(value.detach().cpu().numpy(), want_value)
    assert (want_value > 0).all()
    for name, t, want in zip(("x", "y"), leaves, want_grads):
        np.testing.assert_array_equal(t.grad.cpu().numpy(), want, err_msg=name)
    _one_pair_and_shared_weights_on_a_side_stream(lt.sinkhorn_divergence, _divergence_host_path, dtype, 23, "y")


def _one_pair_and_shared_weights_on_a_side_stream(loss, host_path, dtype, seed, spoil):
    """``loss`` on one pair (a 0-d value) and on a batch with weights shared by the pairs,
    produced on a side stream just before the call (a cloud not contiguous), gives
    ``host_path``'s results; the convergence warning comes from the reports read back; a NaN
    coordinate in cloud ``spoil`` is a ValueError naming it."""
    x, y, a, b = _cloud_batch(3, 300, 200, 5, dtype, seed)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with no_host_copies():
        with torch.cuda.stream(side):
            xs = (x.transpose(1, 2) * 1).transpose(1, 2).requires_grad_()  # not contiguous
            one = loss(x[1], y[1], 0.3, a[1], b[1])
            shared = loss(xs, y, 0.3, a[0], b[0])
            shared.sum().backward()
        side.synchronize()
    want_one, _ = host_path(x[1], y[1], a[1], b[1], 0.3)
    assert one.shape == () and float(one) == float(want_one)
    want, grads = host_path(x, y, a[0], b[0], 0.3)
    np.testing.assert_array_equal(shared.detach().cpu().numpy(), want)
    np.testing.assert_array_equal(xs.grad.cpu().numpy(), grads[0])
    with pytest.warns(logot.ConvergenceWarning, match="did not converge"):
        loss(x, y, 1e-3, a, b, max_iters=3)
    clouds = dict(x=x.clone(), y=y.clone())
    clouds[spoil][2, 7, 1] = float("nan")
    with pytest.raises(ValueError, match=spoil):
        loss(clouds["x"], clouds["y"], 0.3, a, b)


@needs_gpu
def test_cuda_wasserstein_points_one_pair_and_shared_weights_on_a_side_stream():
    """One pair (a 0-d value) and a batch with weights shared by the pairs, produced on a
    side stream just before the call (the clouds not contiguous), give the host path's
    results; the convergence warning comes from the reports read back; a NaN coordinate is a
    ValueError naming the cloud."""
    _one_pair_and_shared_weights_on_a_side_stream(lt.wasserstein_points, _points_host_path, torch.float64, 13, "x")
