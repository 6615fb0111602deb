"""Numeric arguments are checked by type and named: an integer argument takes an ``int`` (or
a numpy integer), not a ``bool``, a float or a string; a real one a number, not a ``bool``
nor a string; out-of-range counts (negative, above 2⁶⁴−1) are a ``ValueError``. Nothing is
coerced silently, and every error names the argument (the compiled module's own checks
too, for callers that reach it directly). Complex tensors are refused by ``logot.torch``
as complex arrays are by the numpy API."""

import numpy as np
import pytest

import logot
import logot.pot as lpot
from logot import _logot
from conftest import random_problem

EPS = 0.1


@pytest.fixture
def small():
    return random_problem(np.random.default_rng(5), 6, 5)


def _clouds():
    rng = np.random.default_rng(6)
    return rng.normal(size=(6, 2)), rng.normal(size=(5, 2))


# The public functions that take the Sinkhorn options, each as a call of those options.
def _sinkhorn_calls(small):
    mu, nu, cost = small
    x, y = _clouds()
    return {
        "wasserstein": lambda **kw: logot.wasserstein(mu, nu, cost, **kw),
        "solve": lambda **kw: logot.solve(mu, nu, cost, **kw),
        "coupling": lambda **kw: logot.coupling(mu, nu, cost, **kw),
        "wasserstein_gradients": lambda **kw: logot.wasserstein_gradients(mu, nu, cost, **kw),
        "point_gradients": lambda **kw: logot.point_gradients(x, y, **kw),
        "sinkhorn_divergence": lambda **kw: logot.sinkhorn_divergence(x, y, **kw),
    }


BAD_COUNTS = [
    # (value, exception, message start)
    (1.5, TypeError, r"^max_iters: expected an integer, got float"),
    (True, TypeError, r"^max_iters: expected an integer, got bool"),
    ("100", TypeError, r"^max_iters: expected an integer, got str"),
    (-1, ValueError, r"^max_iters = -1: expected an integer from 0"),
    (2**70, ValueError, r"^max_iters = 1180591620717411303424: expected an integer from 0"),
]


@pytest.mark.parametrize("value, exc, match", BAD_COUNTS)
@pytest.mark.parametrize("fn", ["wasserstein", "solve", "coupling", "wasserstein_gradients",
                                "point_gradients", "sinkhorn_divergence"])
def test_max_iters_is_an_integer_named_in_the_error(small, fn, value, exc, match):
    call = _sinkhorn_calls(small)[fn]
    with pytest.raises(exc, match=match):
        call(eps=EPS, max_iters=value)


@pytest.mark.parametrize("fn", ["wasserstein", "coupling", "point_gradients", "sinkhorn_divergence"])
def test_check_every_and_the_real_options_are_named(small, fn):
    call = _sinkhorn_calls(small)[fn]
    with pytest.raises(ValueError, match=r"^check_every = -1: expected an integer from 0"):
        call(eps=EPS, check_every=-1)
    with pytest.raises(TypeError, match=r"^check_every: expected an integer, got float"):
        call(eps=EPS, check_every=2.0)
    with pytest.raises(TypeError, match=r"^eps: expected a real number, got str"):
        call(eps="0.1")
    with pytest.raises(TypeError, match=r"^eps: expected a real number, got bool"):
        call(eps=True)
    with pytest.raises(TypeError, match=r"^tol: expected a real number, got str"):
        call(eps=EPS, tol="1e-9")
    with pytest.raises(TypeError, match=r"^eps_scaling\[2\] \(iters_per_stage\): expected an integer"):
        call(eps=EPS, eps_scaling=(1.0, 0.5, 2.5))
    with pytest.raises(TypeError, match=r"^eps_scaling: expected None, True or"):
        call(eps=EPS, eps_scaling="yes")


def test_integers_and_reals_of_numpy_types_are_the_same_call(small):
    """The neighbours that must keep working: numpy integers and floats, Python ints for
    reals, 0-d arrays; each gives the numbers of the plain call."""
    mu, nu, cost = small
    ref = logot.solve(mu, nu, cost, 0.5, max_iters=50, check_every=5, tol=1e-10)
    for kw in (dict(eps=np.float64(0.5), max_iters=np.int64(50), check_every=np.int32(5), tol=np.float32(1e-10)),
               dict(eps=np.array(0.5), max_iters=50, check_every=np.uint8(5), tol=1e-10)):
        r = logot.solve(mu, nu, cost, **kw)
        assert r.distance == ref.distance
        assert r.convergence.iterations == ref.convergence.iterations
    # An integer ε is a real number (1 and 1.0 are one regularisation).
    assert logot.wasserstein(mu, nu, cost, 1) == logot.wasserstein(mu, nu, cost, 1.0)
    # The largest count is accepted (the solver stops on its tolerance long before).
    big = logot.solve(mu, nu, cost, 0.5, max_iters=2**64 - 1, check_every=5, tol=1e-10)
    assert big.distance == ref.distance and big.convergence.converged


@pytest.mark.parametrize("reg_m, exc, match", [
    (True, TypeError, r"^reg_m: expected a real number .* got bool"),
    ("0.5", TypeError, r"^reg_m: expected a real number .* got str"),
    ((1.0, "2"), TypeError, r"^reg_m\[1\]: expected a real number .* got str"),
    ((np.bool_(True), 1.0), TypeError, r"^reg_m\[0\]: expected a real number .* got bool"),
    (-1.0, ValueError, r"^reg_m = -1.0: the marginal penalty must be > 0"),
])
@pytest.mark.parametrize("fn", ["wasserstein", "solve", "coupling", "sinkhorn_divergence"])
def test_reg_m_is_a_real_number_named_in_the_error(small, fn, reg_m, exc, match):
    call = _sinkhorn_calls(small)[fn]
    with pytest.raises(exc, match=match):
        call(eps=EPS, reg_m=reg_m)


def test_reg_m_numbers_of_every_real_type_are_the_same_call(small):
    mu, nu, cost = small
    ref = logot.solve(mu, nu, cost, EPS, reg_m=2.0)
    for reg_m in (2, np.float32(2.0), np.int64(2), (2.0, 2.0), [2], np.array([2.0, 2.0])):
        assert logot.solve(mu, nu, cost, EPS, reg_m=reg_m).distance == ref.distance


def test_the_other_functions_name_their_counts_and_reals(small):
    mu, nu, cost = small
    plan = logot.coupling(mu, nu, cost, EPS).plan
    with pytest.raises(TypeError, match=r"^cg_max_iters: expected an integer, got float"):
        logot.wasserstein_gradients(mu, nu, cost, EPS, cg_max_iters=10.0)
    with pytest.raises(TypeError, match=r"^cg_tol: expected a real number, got str"):
        logot.wasserstein_gradients(mu, nu, cost, EPS, cg_tol="1e-9")
    with pytest.raises(ValueError, match=r"^cg_max_iters = -3"):
        logot.plan_gradients(plan, EPS, np.ones_like(plan), cg_max_iters=-3)
    with pytest.raises(TypeError, match=r"^eps: expected a real number, got bool"):
        logot.plan_gradients(plan, True, np.ones_like(plan))
    h = np.stack([mu, mu[::-1]])
    w = np.array([0.5, 0.5])
    sq = ((np.arange(6)[:, None] - np.arange(6)[None, :]) / 5.0) ** 2
    with pytest.raises(TypeError, match=r"^max_iters: expected an integer, got float"):
        logot.barycenter(h, w, sq, EPS, max_iters=100.0)
    with pytest.raises(ValueError, match=r"^check_every = -1"):
        logot.barycenter(h, w, sq, EPS, check_every=-1)
    with pytest.raises(TypeError, match=r"^tol: expected a real number, got str"):
        logot.barycenter(h, w, sq, EPS, tol="1e-4")
    x = np.zeros((3, 3))
    with pytest.raises(TypeError, match=r"^iters: expected an integer, got bool"):
        logot.bistochastic(x, True)
    with pytest.raises(ValueError, match=r"^iters = -1"):
        logot.bistochastic(x, -1)
    r = logot.bistochastic(x).r
    with pytest.raises(TypeError, match=r"^cg_max_iters: expected an integer"):
        logot.bistochastic_backward(r, np.ones_like(r), cg_max_iters="5")
    with pytest.raises(TypeError, match=r"^steps: expected an integer, got float"):
        logot.newton_schulz(np.eye(3), 2.5)
    with pytest.raises(TypeError, match=r"^coefficients\[1\]: expected a real number, got str"):
        logot.newton_schulz(np.eye(3), coefficients=(1.0, "2", 3.0))
    with pytest.raises(TypeError, match=r"^ordinal: expected an integer"):
        logot.cuda_device_name(0.0)


def test_pot_names_its_own_arguments(small):
    mu, nu, cost = small
    with pytest.raises(TypeError, match=r"^numItermax: expected an integer, got float"):
        lpot.sinkhorn(mu, nu, cost, EPS, numItermax=1.5)
    with pytest.raises(ValueError, match=r"^numItermax = -1"):
        lpot.sinkhorn2(mu, nu, cost, EPS, numItermax=-1)
    with pytest.raises(TypeError, match=r"^reg: expected a real number, got bool"):
        lpot.sinkhorn(mu, nu, cost, True)
    with pytest.raises(TypeError, match=r"^stopThr: expected a real number, got str"):
        lpot.sinkhorn(mu, nu, cost, EPS, stopThr="1e-9")
    with pytest.raises(TypeError, match=r"^reg_m: expected a real number"):
        lpot.sinkhorn_unbalanced(mu, nu, cost, EPS, reg_m="1.0")
    A = np.stack([mu, mu[::-1]], axis=1)
    sq = ((np.arange(6)[:, None] - np.arange(6)[None, :]) / 5.0) ** 2
    with pytest.raises(TypeError, match=r"^numItermax: expected an integer, got float"):
        lpot.barycenter(A, sq, EPS, numItermax=100.0)
    x, y = _clouds()
    with pytest.raises(ValueError, match=r"^numIterMax = -5"):
        lpot.empirical_sinkhorn_divergence(x, y, EPS, numIterMax=-5)


@pytest.mark.parametrize("field, value, exc, match", [
    (1, 1.5, TypeError, r"^max_iters: expected an integer, got float"),
    (1, True, TypeError, r"^max_iters: expected an integer, got bool"),
    (1, -1, ValueError, r"^max_iters = -1: expected an integer from 0"),
    (1, 2**70, ValueError, r"^max_iters = 1180591620717411303424"),
    (3, -1, ValueError, r"^check_every = -1"),
    (0, "0.1", TypeError, r"^eps: expected a real number"),
    (2, True, TypeError, r"^tol: expected a real number"),
])
def test_the_compiled_module_names_each_parameter(small, field, value, exc, match):
    """The compiled module checks its parameter tuple field by field, naming each (the
    Python layer's checks come first; logot.torch's CUDA paths pass the tuple on)."""
    mu, nu, cost = small
    params = [EPS, 100, None, 10, None]
    params[field] = value
    with pytest.raises(exc, match=match):
        _logot.solve(mu[None], nu[None], cost, tuple(params))
    with pytest.raises(TypeError, match=r"^params: expected \(eps, max_iters, tol, check_every, eps_scaling\)"):
        _logot.solve(mu[None], nu[None], cost, (EPS, 100))


def test_complex_arrays_are_refused_by_the_numpy_api(small):
    mu, nu, cost = small
    with pytest.raises(TypeError, match="expected real numbers, got dtype complex128"):
        logot.wasserstein(mu, nu, cost + 1j, EPS)


def _torch():
    torch = pytest.importorskip("torch")
    import logot.torch as lt

    return torch, lt


def test_torch_refuses_complex_tensors_naming_the_argument(small):
    torch, lt = _torch()
    mu, nu, cost = (torch.tensor(a) for a in small)
    x, y = (torch.tensor(a) for a in _clouds())
    cplx = lambda t: t.to(torch.complex128) + 1j  # noqa: E731
    with pytest.raises(TypeError, match=r"^cost: expected real numbers, got dtype torch.complex128"):
        lt.wasserstein(mu, nu, cplx(cost), EPS)
    with pytest.raises(TypeError, match=r"^nu: expected real numbers"):
        lt.coupling(mu, cplx(nu), cost, EPS)
    with pytest.raises(TypeError, match=r"^mu: expected real numbers"):
        lt.wasserstein(small[0] + 0j, nu, cost, EPS)  # a complex numpy array too
    with pytest.raises(TypeError, match=r"^x: expected real numbers"):
        lt.wasserstein_points(cplx(x), y, EPS)
    with pytest.raises(TypeError, match=r"^y: expected real numbers"):
        lt.sinkhorn_divergence(x, cplx(y), EPS)
    with pytest.raises(TypeError, match=r"^a: expected real numbers"):
        lt.wasserstein_points(x, y, EPS, a=cplx(torch.full((6,), 1 / 6)))
    with pytest.raises(TypeError, match=r"^x: expected real numbers"):
        lt.bistochastic(cplx(torch.zeros(3, 3)))
    # A complex tensor with a zero imaginary part is refused too (its dtype is what counts),
    # and the real tensors of the same values are accepted.
    with pytest.raises(TypeError, match=r"^cost: expected real numbers"):
        lt.wasserstein(mu, nu, cost.to(torch.complex128), EPS)
    assert torch.isfinite(lt.wasserstein(mu, nu, cost, EPS))


def test_torch_names_its_options(small):
    torch, lt = _torch()
    mu, nu, cost = (torch.tensor(a) for a in small)
    x, y = (torch.tensor(a) for a in _clouds())
    with pytest.raises(TypeError, match=r"^max_iters: expected an integer, got float"):
        lt.wasserstein(mu, nu, cost, EPS, max_iters=1.5)
    with pytest.raises(ValueError, match=r"^max_iters = 1180591620717411303424"):
        lt.coupling(mu, nu, cost, EPS, max_iters=2**70)
    with pytest.raises(ValueError, match=r"^check_every = -1"):
        lt.wasserstein_points(x, y, EPS, check_every=-1)
    with pytest.raises(TypeError, match=r"^eps: expected a real number, got str"):
        lt.sinkhorn_divergence(x, y, "0.1")
    with pytest.raises(TypeError, match=r"^cg_max_iters: expected an integer, got bool"):
        lt.wasserstein(mu, nu, cost, EPS, cg_max_iters=True)
    with pytest.raises(TypeError, match=r"^iters: expected an integer, got float"):
        lt.bistochastic(torch.zeros(3, 3), 2.0)
