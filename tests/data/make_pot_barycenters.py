"""Reference barycenters from POT 0.9.7 for tests/barycenter.rs.

Run from the repository root: python3 tests/data/make_pot_barycenters.py
Writes tests/data/pot_*.npy (float64). The inputs are rebuilt in the Rust tests from the
same formulas (the bary64 shapes of DESIGN.md, resampled to N×N).
"""
import numpy as np, ot, warnings, json
warnings.filterwarnings("ignore")

def shapes(N):
    # The bary64 images of the benchmark problems (DESIGN.md): square, ring 4<r²<9,
    # two disks of radius 2 at (±2, ±2), on linspace(−5, 5), +1e-10 and normalised.
    xs = np.linspace(-5, 5, N)
    a = np.zeros((N, N)); a[N // 5:-N // 5, N // 5:-N // 5] = 1
    r2 = xs[None] ** 2 + xs[:, None] ** 2
    b = ((r2 > 4) & (r2 < 9)).astype(float)
    c = (((xs[None] - 2) ** 2 + (xs[:, None] - 2) ** 2 < 4) | ((xs[None] + 2) ** 2 + (xs[:, None] + 2) ** 2 < 4)).astype(float)
    imgs = np.stack([a / a.sum(), b / b.sum(), c / c.sum()]) + 1e-10
    return imgs / imgs.sum((1, 2), keepdims=True)

def dense_cost(N):
    xs = np.linspace(-5, 5, N)
    coords = np.stack(np.meshgrid(xs, xs), -1).reshape(-1, 2)
    M = ((coords[None] - coords[:, None]) ** 2).sum(-1)
    return M / M.max()

w = np.array([0.3, 0.3, 0.4])
meta = {}

# 1. bary64 on the grid, eps = 0.004, 100 iterations, no early stop (the judged problem).
imgs = shapes(64)
bar = ot.bregman.convolutional_barycenter2d(imgs, 0.004, weights=w, numItermax=100, stopThr=0.0, method="sinkhorn_log")
np.save("tests/data/pot_grid64_eps0.004_it100.npy", bar)

# 2. 24×24 shapes on the grid with POT's default stopping (stopThr=1e-4): checks the schedule.
imgs24 = shapes(24)
bar, log = ot.bregman.convolutional_barycenter2d(imgs24, 0.01, weights=w, method="sinkhorn_log", log=True)
np.save("tests/data/pot_grid24_eps0.01_default.npy", bar)
meta["grid24_niter"] = int(log["niter"])

# 3. 16×16 shapes with the dense normalised cost, eps = 1e-3, 100 iterations, no early stop.
imgs16 = shapes(16)
A = imgs16.reshape(3, -1).T
bar = ot.bregman.barycenter(A, dense_cost(16), 1e-3, weights=w, method="sinkhorn_log", numItermax=100, stopThr=0.0)
np.save("tests/data/pot_dense16_eps0.001_it100.npy", bar)

# 4. Same, default stopping (stopThr=1e-4, numItermax=1000), eps = 1e-2.
bar, log = ot.bregman.barycenter(A, dense_cost(16), 1e-2, weights=w, method="sinkhorn_log", log=True)
np.save("tests/data/pot_dense16_eps0.01_default.npy", bar)
meta["dense16_niter"] = int(log["niter"])

# 5. Non-square random images (12×20, inputs stored too), eps = 0.02, 50 iterations, and a
#    dense problem with a random non-symmetric 9×9 cost (POT needs a square cost; the
#    asymmetry checks which index the inputs and the barycenter live on).
rng = np.random.default_rng(0)
imgs_ns = rng.random((3, 12, 20)) + 0.05
imgs_ns /= imgs_ns.sum((1, 2), keepdims=True)
np.save("tests/data/pot_nonsquare_inputs.npy", imgs_ns)
w2 = np.array([0.5, 0.2, 0.3])
bar = ot.bregman.convolutional_barycenter2d(imgs_ns, 0.02, weights=w2, numItermax=50, stopThr=0.0, method="sinkhorn_log")
np.save("tests/data/pot_grid12x20_eps0.02_it50.npy", bar)
A9 = rng.random((9, 2)) + 0.1
A9 /= A9.sum(0, keepdims=True)
M99 = rng.random((9, 9))
np.save("tests/data/pot_dense9_inputs.npy", A9.T.copy())
np.save("tests/data/pot_dense9_cost.npy", M99)
bar = ot.bregman.barycenter(A9, M99, 0.05, weights=np.array([0.7, 0.3]), method="sinkhorn_log", numItermax=30, stopThr=0.0)
np.save("tests/data/pot_dense9_eps0.05_it30.npy", bar)

print(json.dumps(meta))
