import numpy as np
import pytest


def gaussian_histogram(x, mean, std):
    h = np.exp(-0.5 * ((x - mean) / std) ** 2) + 1e-3
    return h / h.sum()


@pytest.fixture
def rng():
    return np.random.default_rng(20)


@pytest.fixture
def problem_1d():
    """Two bumps on linspace(0, 1, 60) with the squared-distance cost."""
    x = np.linspace(0, 1, 60)
    cost = (x[:, None] - x[None, :]) ** 2
    return gaussian_histogram(x, 0.3, 0.08), gaussian_histogram(x, 0.65, 0.12), cost


def random_problem(rng, n, m, dtype=np.float64):
    x = rng.uniform(size=(n, 2))
    y = rng.uniform(size=(m, 2))
    cost = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    mu = rng.uniform(0.2, 1.0, size=n)
    nu = rng.uniform(0.2, 1.0, size=m)
    return (mu / mu.sum()).astype(dtype), (nu / nu.sum()).astype(dtype), cost.astype(dtype)
