# Reference values for cli/tests/cli/gw.rs (POT 0.9.7): entropic Gromov-Wasserstein between
# two point clouds with squared-Euclidean structures (C1 = ot.dist(x, x), not normalised),
# as `logot gw --x --y` solves it in linear memory. Inputs and results written as
# tests/data/pot_gw_cloud_<name>.npy.
#     /path/to/venv/bin/python tests/data/make_pot_cli_gromov.py
import os
import numpy as np
import ot

OUT = os.path.dirname(os.path.abspath(__file__))

rng = np.random.default_rng(31)
n, m = 12, 10
x = 0.5 * rng.normal(size=(n, 2))
y = 0.5 * rng.normal(size=(m, 3))
p = rng.uniform(0.2, 1.0, n)
p /= p.sum()
q = rng.uniform(0.2, 1.0, m)
q /= q.sum()
eps, max_iter = 0.05, 25
# Inner solves to a tight tolerance: the outer iterates are those of the exact mirror descent.
T, log = ot.gromov.entropic_gromov_wasserstein(
    ot.dist(x, x), ot.dist(y, y), p, q, "square_loss", eps, max_iter=max_iter, tol=0.0,
    log=True, numItermax=200000, stopThr=1e-15)
value = log["gw_dist"]
for k, v in dict(x=x, y=y, p=p, q=q, plan=T, scalars=[value, eps, max_iter]).items():
    np.save(os.path.join(OUT, f"pot_gw_cloud_{k}.npy"), np.asarray(v, dtype=np.float64))
print(f"cloud: value {value!r}, plan max {T.max():.3e}, row sums error "
      f"{np.abs(T.sum(1) - p).sum():.2e}")
