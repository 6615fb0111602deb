"""logot.torch's exact OT losses (sliced, max-sliced, 1-D Wasserstein) and the exact solver
on torch tensors and on a GPU: values against POT on the same directions, gradients against
finite differences (torch.autograd.gradcheck, float64), a few SGD steps of a training loss,
the auction's costs against POT's network simplex. Skipped where torch is not installed,
the comparisons with POT where POT is not, the GPU tests where no GPU is usable."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

try:
    import ot
except ImportError:  # pragma: no cover - exercised where POT is absent
    ot = None

import logot  # noqa: E402
import logot.pot as lp  # noqa: E402
import logot.torch as lt  # noqa: E402

needs_pot = pytest.mark.skipif(ot is None, reason="POT is not installed")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available() or not logot.cuda_available(), reason="no CUDA GPU")


def test_a_gpu_is_usable_where_one_is_required():
    """Under LOGOT_REQUIRE_GPU=1 (the GPU machine's runs) the GPU tests cannot pass by skipping."""
    import os

    if os.environ.get("LOGOT_REQUIRE_GPU") == "1":
        assert torch.cuda.is_available() and logot.cuda_available(), "LOGOT_REQUIRE_GPU=1 but no usable CUDA GPU"


def directions(d, count, seed):
    """Unit directions as columns (d×count), drawn here."""
    p = np.random.default_rng(seed).normal(size=(d, count))
    return p / np.linalg.norm(p, axis=0)


def clouds(seed, shape_x, shape_y, dtype=torch.float64, grad=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape_x, generator=g, dtype=dtype).requires_grad_(grad)
    y = (torch.randn(*shape_y, generator=g, dtype=dtype) + 0.5).requires_grad_(grad)
    return x, y


@needs_pot
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_sliced_matches_pot_on_the_same_directions(p):
    x, y = clouds(1, (30, 3), (40, 3))
    proj = directions(3, 20, 2)
    a = np.random.default_rng(3).uniform(0.5, 1.0, 30)
    a /= a.sum()
    xs, ys = x.detach().numpy(), y.detach().numpy()
    got = lt.sliced_wasserstein(x, y, torch.tensor(a), projections=proj, p=p)
    assert got.dtype == torch.float64 and got.dim() == 0
    want = ot.sliced_wasserstein_distance(xs, ys, a, None, projections=proj, p=p)
    assert got.item() == pytest.approx(want, rel=1e-12)
    # The seeded directions are POT's.
    got = lt.sliced_wasserstein(x, y, n_projections=25, seed=7, p=p)
    assert got.item() == pytest.approx(ot.sliced_wasserstein_distance(xs, ys, n_projections=25, seed=7, p=p), rel=1e-12)
    # A batch: each pair as its own problem along the same directions.
    xb, yb = clouds(4, (3, 30, 3), (3, 40, 3))
    got = lt.sliced_wasserstein(xb, yb, projections=proj, p=p)
    assert got.shape == (3,)
    for k in range(3):
        want = ot.sliced_wasserstein_distance(xb[k].detach().numpy(), yb[k].detach().numpy(), projections=proj, p=p)
        assert got[k].item() == pytest.approx(want, rel=1e-12)


@needs_pot
def test_max_sliced_matches_pot_on_the_same_directions():
    x, y = clouds(5, (25, 4), (20, 4))
    proj = directions(4, 30, 6)
    got = lt.max_sliced_wasserstein(x, y, projections=proj, p=2)
    want = ot.max_sliced_wasserstein_distance(x.detach().numpy(), y.detach().numpy(), projections=proj, p=2)
    assert got.item() == pytest.approx(want, rel=1e-12)


@needs_pot
@pytest.mark.parametrize("p", [1.0, 1.5, 2.0])
def test_wasserstein_1d_matches_pot(p):
    rng = np.random.default_rng(8)
    u, v = rng.normal(size=(4, 30)), rng.normal(size=(4, 45)) + 0.3
    uw, vw = rng.uniform(0.2, 1.0, (4, 30)), rng.uniform(0.2, 1.0, (4, 45))
    uw /= uw.sum(1, keepdims=True)
    vw /= vw.sum(1, keepdims=True)
    got = lt.wasserstein_1d(torch.tensor(u[0]), torch.tensor(v[0]), p=p)
    assert got.dim() == 0 and got.item() == pytest.approx(ot.wasserstein_1d(u[0], v[0], p=p), rel=1e-12)
    # POT's batches are columns, logot's rows.
    got = lt.wasserstein_1d(torch.tensor(u), torch.tensor(v), torch.tensor(uw), torch.tensor(vw), p=p)
    np.testing.assert_allclose(got.numpy(), ot.wasserstein_1d(u.T, v.T, uw.T, vw.T, p=p), rtol=1e-12)


def test_gradcheck_sliced_single_and_batched():
    proj = directions(3, 12, 9)
    x, y = clouds(10, (15, 3), (18, 3))
    assert torch.autograd.gradcheck(lambda x, y: lt.sliced_wasserstein(x, y, projections=proj, p=2), (x, y))
    assert torch.autograd.gradcheck(lambda x, y: lt.sliced_wasserstein(x, y, projections=proj, p=1.5), (x, y))
    b = torch.tensor(np.random.default_rng(11).uniform(0.5, 1.0, 18))
    b = b / b.sum()
    assert torch.autograd.gradcheck(lambda x, y: lt.sliced_wasserstein(x, y, None, b, projections=proj), (x, y))
    xb, yb = clouds(12, (3, 15, 3), (3, 18, 3))
    assert torch.autograd.gradcheck(lambda x, y: lt.sliced_wasserstein(x, y, projections=proj), (xb, yb))


def test_gradcheck_max_sliced_and_wasserstein_1d():
    proj = directions(3, 12, 13)
    x, y = clouds(14, (15, 3), (18, 3))
    assert torch.autograd.gradcheck(lambda x, y: lt.max_sliced_wasserstein(x, y, projections=proj), (x, y))
    xb, yb = clouds(15, (2, 15, 3), (2, 18, 3))
    assert torch.autograd.gradcheck(lambda x, y: lt.max_sliced_wasserstein(x, y, projections=proj), (xb, yb))
    for p in (1.0, 1.5, 2.0):
        u, v = clouds(16, (25,), (30,))
        assert torch.autograd.gradcheck(lambda u, v: lt.wasserstein_1d(u, v, p=p), (u, v))
        ub, vb = clouds(17, (3, 25), (3, 30))
        assert torch.autograd.gradcheck(lambda u, v: lt.wasserstein_1d(u, v, p=p), (ub, vb))


def test_dtype_is_kept_and_float32_agrees_with_float64():
    x, y = clouds(18, (40, 2), (40, 2))
    proj = directions(2, 10, 19)
    v64 = lt.sliced_wasserstein(x, y, projections=proj)
    x32, y32 = x.detach().float().requires_grad_(), y.detach().float()
    v32 = lt.sliced_wasserstein(x32, y32, projections=proj)
    assert v32.dtype == torch.float32
    v32.backward()
    assert x32.grad.dtype == torch.float32
    assert v32.item() == pytest.approx(v64.item(), rel=1e-5)
    w = lt.wasserstein_1d(x32[:, 0], y32[:, 0], p=2)
    assert w.dtype == torch.float32


@pytest.mark.parametrize("loss", ["sliced", "max_sliced", "1d"])
def test_a_few_sgd_steps_reduce_the_loss(loss):
    g = torch.Generator().manual_seed(20)
    target = torch.randn(64, 2, generator=g, dtype=torch.float64) * 0.5 + torch.tensor([2.0, -1.0], dtype=torch.float64)
    x = torch.randn(64, 2, generator=g, dtype=torch.float64).requires_grad_()
    proj = directions(2, 16, 21)
    f = {
        "sliced": lambda x: lt.sliced_wasserstein(x, target, projections=proj),
        "max_sliced": lambda x: lt.max_sliced_wasserstein(x, target, projections=proj),
        "1d": lambda x: lt.wasserstein_1d(x[:, 0], target[:, 0], p=2),
    }[loss]
    # Each point's gradient carries its weight 1/n: the step is scaled by n.
    opt = torch.optim.SGD([x], lr=0.25 * x.shape[0])
    first = f(x).item()
    for _ in range(20):
        opt.zero_grad()
        value = f(x)
        value.backward()
        opt.step()
    assert f(x).item() < 0.5 * first


def test_weights_that_require_grad_and_bad_shapes_are_refused():
    x, y = clouds(22, (10, 2), (12, 2))
    a = torch.full((10,), 0.1, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="^a:"):
        lt.sliced_wasserstein(x, y, a)
    with pytest.raises(ValueError, match="^y"):
        lt.sliced_wasserstein(x, y[None])
    with pytest.raises(ValueError, match="^p"):
        lt.wasserstein_1d(x[:, 0], y[:, 0], p=0.5)
    with pytest.raises(ValueError, match="^v_values"):
        lt.wasserstein_1d(x[:, 0], y)


@needs_pot
def test_pot_emd_takes_torch_tensors_and_gives_tensors():
    rng = np.random.default_rng(23)
    a = rng.uniform(0.2, 1.0, 7)
    a /= a.sum()
    c = rng.uniform(size=(7, 5))
    G, log = lp.emd(torch.tensor(a), torch.tensor([]), torch.tensor(c), log=True)
    assert isinstance(G, torch.Tensor) and G.dtype == torch.float64
    assert log["method"] == "network_simplex"
    assert (G.numpy() * c).sum() == pytest.approx(ot.emd2(a, np.full(5, 0.2), c), rel=1e-12)
    cost = lp.emd2([], [], torch.tensor(c[:5], dtype=torch.float32))
    assert isinstance(cost, torch.Tensor) and cost.dtype == torch.float32


@needs_gpu
def test_cuda_tensors_go_through_the_host_and_stay_on_the_device():
    x, y = clouds(24, (50, 3), (60, 3))
    proj = directions(3, 10, 25)
    xc, yc = x.detach().cuda().requires_grad_(), y.detach().cuda()
    v = lt.sliced_wasserstein(xc, yc, projections=proj)
    assert v.device.type == "cuda"
    v.backward()
    assert xc.grad.device.type == "cuda"
    assert v.item() == pytest.approx(lt.sliced_wasserstein(x, y, projections=proj).item(), rel=1e-12)
    w = lt.wasserstein_1d(xc[:, 0], yc[:, 0], p=2)
    assert w.device.type == "cuda"


@needs_gpu
@needs_pot
def test_pot_emd_on_cuda_tensors_runs_the_auction():
    rng = np.random.default_rng(26)
    n = 48
    x, y = rng.normal(size=(n, 2)), rng.normal(size=(n, 2)) + 1.0
    c = ((x[:, None] - y[None]) ** 2).sum(-1)
    want = ot.emd2([], [], c)
    for dtype in (torch.float64, torch.float32):
        ct = torch.tensor(c, dtype=dtype, device="cuda")
        cost, log = lp.emd2([], [], ct, log=True, return_matrix=True)
        assert log["method"] in ("auction", "assignment") and log["exact"]
        assert cost.device.type == "cuda" and log["G"].device.type == "cuda"
        # The cost of the returned plan on the float64 cost: the optimum.
        assert (log["G"].double().cpu().numpy() * c).sum() == pytest.approx(want, rel=1e-12 if dtype == torch.float64 else 1e-6)
    # Non-uniform weights take the CPU (a CUDA tensor does not force the GPU) ...
    a = rng.uniform(0.5, 1.0, n)
    a /= a.sum()
    G, log = lp.emd(torch.tensor(a, device="cuda"), [], torch.tensor(c, device="cuda"), log=True)
    assert log["method"] == "network_simplex" and G.device.type == "cuda"
    # ... unless the GPU is asked for by name: then they are refused, naming the argument.
    with pytest.raises(ValueError, match="^a"):
        lp.emd(torch.tensor(a, device="cuda"), [], torch.tensor(c, device="cuda"), backend="cuda")
