# Reference values for cli/tests/cli/unbalanced.rs (POT 0.9.7): unbalanced OT through the
# command line (--reg-m, --reg-m-mu, --reg-m-nu) on dense, batched and point-cloud costs.
# The inputs are closed-form (sin/cos of the index), written as .npy by the test itself.
# Run (a Python with POT): python3 tests/data/make_pot_cli_unbalanced.py
import numpy as np, ot
inf = float("inf")
nx = ot.backend.NumpyBackend()

def problem(n, m, k=0):
    i = np.arange(n); j = np.arange(m)
    a = (0.6 + 0.5 * np.sin(0.7 * i + 0.3 + 0.2 * k) ** 2) * (1.0 + 0.4 * k)
    b = 0.2 + 0.6 * np.cos(1.1 * j + 0.4 * k) ** 2
    M = (i[:, None] / n - j[None, :] / m - 0.1 * k) ** 2 + 0.3 * np.sin(i[:, None] + 2.0 * j[None, :]) ** 2
    return a, b, M

def clouds(n, m, d):
    X = np.array([[np.sin(1.7 * i + 0.9 * c) for c in range(d)] for i in range(n)])
    Y = np.array([[0.5 + 0.8 * np.cos(1.3 * j + 0.4 * c) for c in range(d)] for j in range(m)])
    a = 0.1 + 0.05 * np.arange(n)
    b = 0.3 - 0.02 * np.arange(m)
    return a, b, X, Y

def solve(a, b, M, eps, reg_m):
    kw = dict(reg_type="kl", numItermax=200000, stopThr=1e-15)
    P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, eps, reg_m, **kw)
    ra, rb = (reg_m, reg_m) if np.isscalar(reg_m) else reg_m
    # the generalized KL (x log(x/y) - x + y), POT's kl_div(mass=True)
    obj = np.sum(P * M) + eps * nx.kl_div(P, a[:, None] * b[None, :], mass=True)
    if ra != inf: obj += ra * nx.kl_div(P.sum(1), a, mass=True)
    if rb != inf: obj += rb * nx.kl_div(P.sum(0), b, mass=True)
    return P, float(np.sum(P * M)), float(obj), float(P.sum())

def fmt(v): return "[" + ", ".join(repr(float(x)) for x in np.ravel(v)) + "]"

print(f"// POT {ot.__version__}")
for name, n, m, eps, rm in [("scalar", 7, 5, 0.1, 0.5), ("pair", 7, 5, 0.1, (0.5, 2.0)),
                            ("mu_only", 7, 5, 0.05, (1.0, inf)), ("nu_only", 7, 5, 0.05, (inf, 0.3))]:
    a, b, M = problem(n, m)
    P, lin, obj, mass = solve(a, b, M, eps, rm)
    print(f"// {name}: problem({n}, {m}, 0), eps = {eps}, reg_m = {rm}; masses {a.sum()!r}, {b.sum()!r}")
    print(f"distance = {lin!r}; objective = {obj!r}; mass = {mass!r}")
    print(f"plan = {fmt(P)}")
print("// batch: problem(6, 4, k), k = 0, 1, 2, per-problem costs, eps = 0.2, reg_m = 1.0")
for k in range(3):
    a, b, M = problem(6, 4, k)
    P, lin, obj, mass = solve(a, b, M, 0.2, 1.0)
    print(f"k={k}: distance = {lin!r}; objective = {obj!r}; mass = {mass!r}")
a, b, X, Y = clouds(9, 11, 3)
M = ot.dist(X, Y)
P, lin, obj, mass = solve(a, b, M, 0.05, 0.3)
print(f"// clouds(9, 11, 3), sqeuclidean, eps = 0.05, reg_m = 0.3; masses {a.sum()!r}, {b.sum()!r}")
print(f"distance = {lin!r}; objective = {obj!r}; mass = {mass!r}")
# The unbalanced Sinkhorn divergence (GeomLoss's debiased formula with one reg_m):
# S = OBJ(a, b) - OBJ(a, a)/2 - OBJ(b, b)/2 + (eps/2)(sum a - sum b)^2, OBJ the generalized
# objective above on POT's plans (ot.dist: squared Euclidean).
a, b, X, Y = clouds(9, 11, 3)
eps, rm = 0.1, 0.4
obj = lambda u, v, P, Q: solve(u, v, ot.dist(P, Q), eps, rm)[2]
S = obj(a, b, X, Y) - 0.5 * obj(a, a, X, X) - 0.5 * obj(b, b, Y, Y) + 0.5 * eps * (a.sum() - b.sum()) ** 2
print(f"// divergence: clouds(9, 11, 3), sqeuclidean, eps = {eps}, reg_m = {rm}")
print(f"divergence = {S!r}; terms = {fmt([obj(a, b, X, Y), obj(a, a, X, X), obj(b, b, Y, Y)])}")
