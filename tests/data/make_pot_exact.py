"""Reference values of exact OT from POT 0.9.7 for tests/exact/emd.rs.

Run from the repository root: python3 tests/data/make_pot_exact.py
Writes tests/data/pot_exact_problems.npy (the inputs, packed: for each problem n, m, then
a (n), b (m), M (n*m, row-major)) and tests/data/pot_exact_values.npy (per problem: POT's
emd2 cost, the dual value <a, u> + <b, v> of POT's potentials, and POT's result code).
"""
import numpy as np, ot

rng = np.random.default_rng(20261128)


def normalised(w):
    return w / w.sum()


problems = []
# 0: random 2-D points, non-uniform weights, n != m, squared Euclidean.
x, y = rng.random((30, 2)), rng.random((20, 2))
problems.append((normalised(rng.random(30) + 0.1), normalised(rng.random(20) + 0.1), ot.dist(x, y)))
# 1: zero weights on both sides (a quarter of the bins), n = m = 24.
a = normalised(rng.random(24) + 0.1); a[rng.choice(24, 6, replace=False)] = 0; a = normalised(a)
b = normalised(rng.random(24) + 0.1); b[rng.choice(24, 6, replace=False)] = 0; b = normalised(b)
x, y = rng.random((24, 3)), rng.random((24, 3))
problems.append((a, b, ot.dist(x, y)))
# 2: degenerate integer costs in {0, 1, 2, 3}, uniform weights, n != m.
problems.append((np.full(16, 1 / 16), np.full(12, 1 / 12), rng.integers(0, 4, (16, 12)).astype(float)))
# 3: integer costs, masses of total 60 (integers 1..5 rescaled), unnormalised: ties everywhere.
a = rng.integers(1, 6, 15).astype(float); a *= 60 / a.sum()
b = rng.integers(1, 6, 18).astype(float); b *= 60 / b.sum()
problems.append((a, b, rng.integers(0, 5, (15, 18)).astype(float)))
# 4: negative, non-metric costs (standard normal), n = 20, m = 35.
problems.append((normalised(rng.random(20) + 0.05), normalised(rng.random(35) + 0.05), rng.standard_normal((20, 35))))
# 5: uniform square problem with integer costs (the assignment path, degenerate).
problems.append((np.full(40, 1 / 40), np.full(40, 1 / 40), rng.integers(1, 6, (40, 40)).astype(float)))
# 6: uniform square problem, 8-D points (assignment path, generic).
x, y = rng.random((64, 8)), rng.random((64, 8))
problems.append((np.full(64, 1 / 64), np.full(64, 1 / 64), ot.dist(x, y)))
# 7: larger, non-uniform, Euclidean (not squared) cost, n = 200, m = 150.
x, y = rng.random((200, 2)), rng.random((150, 2))
problems.append((normalised(rng.random(200) + 0.2), normalised(rng.random(150) + 0.2), ot.dist(x, y, metric="euclidean")))
# 8: one source, many targets; 9: many sources, one target.
problems.append((np.array([1.0]), normalised(rng.random(7) + 0.1), rng.random((1, 7))))
problems.append((normalised(rng.random(7) + 0.1), np.array([1.0]), rng.random((7, 1))))

packed, values = [], []
for a, b, M in problems:
    G, log = ot.emd(a, b, M, numItermax=10**7, log=True)
    dual = float(a @ log["u"] + b @ log["v"])
    values.append([float(log["cost"]), dual, float(log["result_code"])])
    packed += [float(len(a)), float(len(b))] + list(a) + list(b) + list(M.ravel())
np.save("tests/data/pot_exact_problems.npy", np.array(packed))
np.save("tests/data/pot_exact_values.npy", np.array(values))
for k, v in enumerate(values):
    print(k, v)
