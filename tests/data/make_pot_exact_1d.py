"""Reference values from POT 0.9.7 for tests/exact/one_d.rs and tests/exact/sliced.rs.

Run from the repository root: python3 tests/data/make_pot_exact_1d.py
Writes tests/data/pot_exact_1d_*.npy and pot_exact_sliced_*.npy (float64).

1-D problems are packed in one flat array, problem after problem:
[n, m, x_a (n), x_b (m), a (n), b (m)]; the values of each problem are one row of
pot_exact_1d_values.npy: emd2_1d with "sqeuclidean", "minkowski" p = 1.5, "euclidean",
then wasserstein_1d with p = 1, 2, 3. Problems: weighted n != m, ties in the positions and
zero weights, uniform n = m, equal cumulative weights (degenerate staircase), and b of a
slightly different total (rescaled by POT). The dense emd_1d plans (sqeuclidean) of the
problems without tied positions are stored too (the plan of tied positions depends on the
order the sort leaves them in).
"""
import numpy as np
import ot

rng = np.random.default_rng(20261128)
problems, values, plans = [], [], {}


def add(xa, xb, a, b, plan_name=None):
    n, m = len(xa), len(xb)
    problems.append(np.concatenate([[n, m], xa, xb, a, b]))
    row = [
        ot.emd2_1d(xa, xb, a, b, metric="sqeuclidean"),
        ot.emd2_1d(xa, xb, a, b, metric="minkowski", p=1.5),
        ot.emd2_1d(xa, xb, a, b, metric="euclidean"),
    ]
    bb = b * a.sum() / b.sum()  # wasserstein_1d does not rescale: give it the rescaled b
    row += [ot.wasserstein_1d(xa, xb, a, bb, p=p) for p in (1, 2, 3)]
    values.append([float(v) for v in row])
    if plan_name:
        plans[plan_name] = ot.emd_1d(xa, xb, a, b, metric="sqeuclidean")


# 0. weighted, n != m
xa, xb = rng.normal(0, 1, 17), rng.normal(0.5, 2, 11)
a, b = rng.random(17) + 0.1, rng.random(11) + 0.1
add(xa, xb, a / a.sum(), b / b.sum(), "plan0")
# 1. uniform, n = m
xa, xb = rng.random(40), rng.random(40) * 3 - 1
add(xa, xb, np.full(40, 1 / 40), np.full(40, 1 / 40), "plan1")
# 2. ties in the positions and zero weights
xa = np.round(rng.random(30) * 5) / 5
xb = np.round(rng.random(25) * 5) / 5 + 0.1
a, b = rng.random(30), rng.random(25)
a[::4] = 0.0
b[1::5] = 0.0
add(xa, xb, a / a.sum(), b / b.sum())
# 3. equal cumulative weights: dyadic weights whose partial sums coincide
xa, xb = rng.random(8), rng.random(4) + 0.25
add(xa, xb, np.full(8, 0.125), np.array([0.25, 0.25, 0.25, 0.25]), "plan3")
# 4. b of a total 1 + 4e-7 (inside POT's decimal=6 check and logot's 1e-6 relative)
xa, xb = rng.normal(0, 1, 23), rng.normal(1, 1, 19)
a, b = rng.random(23) + 0.05, rng.random(19) + 0.05
add(xa, xb, a / a.sum(), b / b.sum() * (1 + 4e-7), "plan4")
# 5. larger weighted problem, negative and positive positions
xa, xb = rng.normal(0, 3, 500), rng.standard_cauchy(350)
a, b = rng.random(500), rng.random(350)
add(xa, xb, a / a.sum(), b / b.sum())

np.save("tests/data/pot_exact_1d_problems.npy", np.concatenate(problems))
np.save("tests/data/pot_exact_1d_values.npy", np.array(values))
for k, v in plans.items():
    np.save(f"tests/data/pot_exact_1d_{k}.npy", np.asarray(v))

# Sliced: weighted clouds in 3-D, n = 60, m = 45; directions given (d×L, L = 20, not
# normalised, as POT allows) and drawn by POT from seed 7 (30 directions).
xs = rng.normal(0, 1, (60, 3))
xt = rng.normal(0, 1, (45, 3)) * np.array([2.0, 0.5, 1.0]) + np.array([1.0, -1.0, 0.0])
a, b = rng.random(60) + 0.1, rng.random(45) + 0.1
a, b = a / a.sum(), b / b.sum()
proj = rng.normal(0, 1, (3, 20))
np.save("tests/data/pot_exact_sliced_xs.npy", xs)
np.save("tests/data/pot_exact_sliced_xt.npy", xt)
np.save("tests/data/pot_exact_sliced_a.npy", a)
np.save("tests/data/pot_exact_sliced_b.npy", b)
np.save("tests/data/pot_exact_sliced_proj.npy", proj)
np.save("tests/data/pot_exact_sliced_seed7_proj.npy", ot.sliced.get_random_projections(3, 30, seed=7))
sv = [
    ot.sliced_wasserstein_distance(xs, xt, a, b, projections=proj, p=2),
    ot.sliced_wasserstein_distance(xs, xt, a, b, projections=proj, p=1),
    ot.sliced_wasserstein_distance(xs, xt, a, b, n_projections=30, p=2, seed=7),
    ot.sliced_wasserstein_distance(xs, xt, None, None, n_projections=30, p=3, seed=7),
    ot.max_sliced_wasserstein_distance(xs, xt, a, b, projections=proj, p=2),
    ot.max_sliced_wasserstein_distance(xs, xt, a, b, n_projections=30, p=1, seed=7),
]
_, log = ot.sliced_wasserstein_distance(xs, xt, a, b, projections=proj, p=2, log=True)
np.save("tests/data/pot_exact_sliced_values.npy", np.array([float(v) for v in sv]))
np.save("tests/data/pot_exact_sliced_projected.npy", np.asarray(log["projected_emds"]))
print("1-D values:\n", np.array(values))
print("sliced values:", sv)
