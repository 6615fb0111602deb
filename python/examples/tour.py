# %% [markdown]
# # A tour of logot from Python
#
# Entropic optimal transport in the log domain, computed by the Rust crate `logot`: one
# problem and batches, plans, exact gradients, point clouds, barycenters, the bistochastic
# projection, POT's names (`logot.pot`) and PyTorch autograd (`logot.torch`).
#
#     pip install ./python && python python/examples/tour.py
#
# The `# %%` markers make each part a cell in Jupyter/VS Code ("run cell").

# %%
import numpy as np

import logot

rng = np.random.default_rng(0)

# %% [markdown]
# ## One problem: distance, potentials, plan
# Two bumps on [0, 1], squared-distance cost. The plan is `P = exp((f ⊕ g − C)/ε)` with
# marginals μ and ν; the distance is `⟨P, C⟩` (POT's `sinkhorn2`).

# %%
x = np.linspace(0, 1, 200)
cost = (x[:, None] - x[None, :]) ** 2
mu = np.exp(-0.5 * ((x - 0.3) / 0.05) ** 2)
mu /= mu.sum()
nu = np.exp(-0.5 * ((x - 0.7) / 0.1) ** 2)
nu /= nu.sum()

r = logot.solve(mu, nu, cost, 1e-3)
print(r)
c = logot.coupling(mu, nu, cost, 1e-3)
print("marginals hold:", np.abs(c.plan.sum(1) - mu).max(), np.abs(c.plan.sum(0) - nu).max())
# The exact W2² between N(0.3, 0.05²) and N(0.7, 0.1²) is 0.4² + 0.05² = 0.1625; ε adds a little.
print(f"<P, C> = {logot.wasserstein(mu, nu, cost, 1e-3):.5f}  (exact W2² of the Gaussians 0.16250)")

# %% [markdown]
# ## float32, batches, the GPU
# float32 stays float32 (stable down to small ε in the log domain). A batch is B rows of μ
# and ν against one cost (or B costs).

# %%
r32 = logot.solve(mu.astype(np.float32), nu.astype(np.float32), cost.astype(np.float32), 1e-3)
print("float32:", r32.distance, r32.f.dtype)
targets = np.stack([np.roll(nu, s) for s in (-40, 0, 40)])
print("batch:", logot.wasserstein(mu, targets, cost, 1e-3, max_iters=5000))
if logot.cuda_available():
    print("cuda:", logot.wasserstein(mu, nu, cost, 1e-3, backend="cuda"), logot.cuda_device_name())
else:
    print("no CUDA GPU here: backend='cuda' would raise RuntimeError")

# %% [markdown]
# ## Exact gradients
# `wasserstein_gradients` differentiates `⟨P, C⟩` through the converged plan (implicit
# differentiation). Check one entry against a central difference.

# %%
small = logot.PointCloud(rng.uniform(size=(6, 2)), rng.uniform(size=(5, 2))).dense()
a, b = np.full(6, 1 / 6), np.full(5, 1 / 5)
g = logot.wasserstein_gradients(a, b, small, 0.05, tol=1e-13)
h = 1e-6
up, down = small.copy(), small.copy()
up[2, 3] += h
down[2, 3] -= h
fd = (logot.wasserstein(a, b, up, 0.05, tol=1e-13) - logot.wasserstein(a, b, down, 0.05, tol=1e-13)) / (2 * h)
print(f"∂<P,C>/∂C[2,3]: implicit {g.cost[2, 3]:.8f}, central difference {fd:.8f}")

# %% [markdown]
# ## Point clouds: the cost is never stored
# `PointCloud(x, y)` computes `|x_i − y_j|²` on the fly; the Sinkhorn divergence comes
# with its gradients with respect to the points.

# %%
cloud_x = rng.normal(size=(1000, 3))
cloud_y = rng.normal(size=(800, 3)) * 0.8 + 0.5
wx, wy = np.full(1000, 1 / 1000), np.full(800, 1 / 800)
print("OT between clouds:", logot.wasserstein(wx, wy, logot.PointCloud(cloud_x, cloud_y), 0.5))
s = logot.sinkhorn_divergence(cloud_x, cloud_y, 0.5)
print("Sinkhorn divergence:", s.value, "gradient shape", s.grad_x.shape, "converged", s.converged)
# One gradient step moves x towards y: the divergence drops.
s2 = logot.sinkhorn_divergence(cloud_x - 200.0 * s.grad_x, cloud_y, 0.5)
print("after a step along −∇:", s2.value)

# %% [markdown]
# ## Barycenters
# Fixed support with a dense cost (POT's `ot.bregman.barycenter`), and images on a grid
# with the separable kernel (POT's `convolutional_barycenter2d`).

# %%
bar = logot.barycenter(np.stack([mu, nu]), [0.5, 0.5], cost, 1e-3)
print(bar, "mean of the barycenter:", (bar.histogram * x).sum())
t = np.linspace(-1, 1, 48)
X, Y = np.meshgrid(t, t, indexing="ij")
disk = (X**2 + Y**2 < 0.3).astype(float) + 1e-6
square = ((abs(X) < 0.5) & (abs(Y) < 0.5)).astype(float) + 1e-6
images = np.stack([disk / disk.sum(), square / square.sum()])
img_bar = logot.grid_barycenter(images, [0.5, 0.5], 2e-3)
print("grid barycenter:", img_bar.histogram.shape, "iterations", img_bar.iterations)

# %% [markdown]
# ## Bistochastic projection (hyper-connections) and linear algebra

# %%
Xs = rng.uniform(0, 4, size=(10_000, 4, 4))
R = logot.bistochastic(Xs, tol=1e-10)
print("bistochastic:", R.convergence)
G = rng.normal(size=Xs.shape)
print("backward:", logot.bistochastic_backward(R.r, G).cg)
print("svd3 singular values:", logot.svd3(rng.normal(size=(50, 3))).s)
W = rng.normal(size=(64, 128))
O = logot.newton_schulz(W, polish_steps=8)
print("Newton–Schulz polar factor, ‖O·Oᵀ − I‖ =", np.abs(O @ O.T - np.eye(64)).max())

# %% [markdown]
# ## POT's names: `from logot import pot as ot`

# %%
from logot import pot as ot  # noqa: E402

P = ot.sinkhorn(mu, nu, cost, 1e-3)
print("ot.sinkhorn plan:", P.shape, "ot.sinkhorn2:", ot.sinkhorn2(mu, nu, cost, 1e-3))
try:
    import ot as pot_itself

    ref = pot_itself.sinkhorn(mu, nu, cost, 1e-3, method="sinkhorn_log")
    print("largest difference to POT's plan:", np.abs(P - ref).max())
except ImportError:
    print("(POT is not installed: pip install pot to compare)")

# %% [markdown]
# ## PyTorch: losses with exact gradients

# %%
try:
    import torch

    import logot.torch as lt
except ImportError:
    torch = None
    print("(PyTorch is not installed: the autograd part is skipped)")

if torch is not None:
    xt = torch.tensor(cloud_x[:200], requires_grad=True)
    yt = torch.tensor(cloud_y[:150])
    loss = lt.sinkhorn_divergence(xt, yt, 0.5)
    loss.backward()
    print("torch divergence:", loss.item(), "grad norm:", xt.grad.norm().item())
    M = torch.tensor(small, requires_grad=True)
    w = lt.wasserstein(torch.tensor(a), torch.tensor(b), M, 0.05)
    w.backward()
    print("∂<P,C>/∂C[2,3] through torch:", M.grad[2, 3].item())
    Xt = torch.rand(8, 4, 4, dtype=torch.float64, requires_grad=True)
    (lt.bistochastic(Xt) ** 2).sum().backward()
    print("bistochastic backward:", Xt.grad.shape)
