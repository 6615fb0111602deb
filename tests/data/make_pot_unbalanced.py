# Reference values for tests/unbalanced/solve.rs (POT 0.9.7).
import numpy as np, ot
inf = float("inf")
def problem(n, m, k=0):
    i = np.arange(n); j = np.arange(m)
    a = (0.5 + 0.4*np.sin(1.3*i + 0.2 + 0.1*k)**2) * (1 + 0.3*k)
    b = 0.3 + 0.5*np.cos(0.7*j + 0.1 + 0.2*k)**2
    M = (np.sin(0.9*i[:, None] + 0.3 + 0.5*k) - np.cos(1.1*j[None, :] - 0.2*k))**2
    return a, b, M
def solve(a, b, M, eps, reg_m):
    kw = dict(reg_type="kl", numItermax=200000, stopThr=1e-15)
    P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, eps, reg_m, **kw)
    lin = ot.unbalanced.sinkhorn_unbalanced2(a, b, M, eps, reg_m, returnCost="linear", **kw)
    tot = ot.unbalanced.sinkhorn_unbalanced2(a, b, M, eps, reg_m, returnCost="total", **kw)
    nx = ot.backend.NumpyBackend()
    ra, rb = (reg_m, reg_m) if np.isscalar(reg_m) else reg_m
    # generalized KL (x log(x/y) - x + y) with POT's own kl_div(mass=True)
    obj = np.sum(P*M) + eps*nx.kl_div(P, a[:, None]*b[None, :], mass=True)
    if ra != inf: obj += ra*nx.kl_div(P.sum(1), a, mass=True)
    if rb != inf: obj += rb*nx.kl_div(P.sum(0), b, mass=True)
    return P, float(lin), float(tot), float(obj)
def fmt(v): return "[" + ", ".join(repr(float(x)) for x in np.ravel(v)) + "]"
cases = [("scalar", 7, 5, 0, 0.1, 0.5), ("pair", 7, 5, 0, 0.1, (0.5, 2.0)),
         ("semi_mu", 6, 8, 1, 0.05, (inf, 1.0)), ("semi_nu", 6, 8, 1, 0.05, (1.0, inf))]
for name, n, m, k, eps, rm in cases:
    a, b, M = problem(n, m, k)
    P, lin, tot, obj = solve(a, b, M, eps, rm)
    print(f"// {name}: problem({n}, {m}, {k}), eps = {eps}, reg_m = {rm}; masses {a.sum()!r} {b.sum()!r}")
    print(f"plan = {fmt(P)}\nlinear = {lin!r}\ntotal = {tot!r}\nobjective = {obj!r}\nmass = {P.sum()!r}")
# batch with per-problem costs, reg_m = 1.0, eps = 0.2
print("// batch: problem(5, 4, k) for k = 0, 1, 2, eps = 0.2, reg_m = 1.0")
for k in range(3):
    a, b, M = problem(5, 4, k)
    P, lin, tot, obj = solve(a, b, M, 0.2, 1.0)
    print(f"k={k} plan = {fmt(P)}\nlinear = {lin!r} total = {tot!r} objective = {obj!r}")
