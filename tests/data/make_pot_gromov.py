# Reference values for tests/gromov/ (entropic.rs, exact.rs; POT 0.9.7): entropic and
# exact (fused) Gromov-Wasserstein on small held-out problems, inputs and results written as
# tests/data/pot_gw_<case>_<name>.npy.
#     /path/to/venv/bin/python tests/data/make_pot_gromov.py
import os
import numpy as np
import ot

OUT = os.path.dirname(os.path.abspath(__file__))


def save(case, **arrays):
    for k, v in arrays.items():
        np.save(os.path.join(OUT, f"pot_gw_{case}_{k}.npy"), np.asarray(v, dtype=np.float64))


def sqdist(x):
    c = ot.dist(x, x)
    return c / c.max()


def weights(rng, n):
    w = rng.uniform(0.2, 1.0, n)
    return w / w.sum()


# Inner Sinkhorn solves run to a tight tolerance so that the outer iterates are those of the
# exact mirror descent (the Rust side solves them to 1e-12).
INNER = dict(numItermax=200000, stopThr=1e-15)


def entropic(case, seed, n, m, loss, eps, max_iter, tol, sym=True, fused=None, g0=False):
    rng = np.random.default_rng(seed)
    if sym:
        c1 = sqdist(rng.normal(size=(n, 2)))
        c2 = sqdist(rng.normal(size=(m, 3)))
    else:
        c1 = rng.uniform(0.0, 1.0, (n, n))
        c2 = rng.uniform(0.0, 1.0, (m, m))
    if loss == "kl_loss":
        c2 = c2 + 0.2  # C2 > 0: the KL loss is infinite at b = 0 < a
    p, q = weights(rng, n), weights(rng, m)
    G0 = None
    if g0:
        G0 = rng.uniform(0.1, 1.0, (n, m))
        G0 /= G0.sum()
    if fused is None:
        T, log = ot.gromov.entropic_gromov_wasserstein(
            c1, c2, p, q, loss, eps, G0=G0, max_iter=max_iter, tol=tol, log=True, **INNER)
        value = log["gw_dist"]
        M = np.zeros((n, m))
        alpha = 1.0
    else:
        alpha = fused
        M = rng.uniform(0.0, 1.0, (n, m))
        T, log = ot.gromov.entropic_fused_gromov_wasserstein(
            M, c1, c2, p, q, loss, eps, alpha=alpha, G0=G0, max_iter=max_iter, tol=tol,
            log=True, **INNER)
        value = log["fgw_dist"]
    g0v = G0 if G0 is not None else np.outer(p, q)
    save(case, c1=c1, c2=c2, p=p, q=q, m=M, g0=g0v, plan=T,
         scalars=[value, eps, max_iter, tol, alpha, len(log["err"])], steps=log["err"])
    print(f"{case}: value {value!r}, checks {len(log['err'])}, last step {log['err'][-1]:.3e}")


def exact(case, seed, n, loss, sym=True, fused=None, m=None):
    """Uniform weights on n = m points unless m is given; then random weights on n and m
    points (the linear step is then a transport problem, not an assignment)."""
    rng = np.random.default_rng(seed)
    mm = n if m is None else m
    if sym:
        c1 = sqdist(rng.normal(size=(n, 2)))
        c2 = sqdist(rng.normal(size=(mm, 3)))
    else:
        c1 = rng.uniform(0.0, 1.0, (n, n))
        c2 = rng.uniform(0.0, 1.0, (mm, mm))
    if loss == "kl_loss":
        c2 = c2 + 0.2
    if m is None:
        p = q = np.full(n, 1.0 / n)
    else:
        p, q = weights(rng, n), weights(rng, m)
    n_, m_ = n, mm
    if fused is None:
        T, log = ot.gromov.gromov_wasserstein(c1, c2, p, q, loss, log=True)
        value, alpha, M = log["gw_dist"], 1.0, np.zeros((n_, m_))
    else:
        alpha = fused
        M = rng.uniform(0.0, 1.0, (n_, m_))
        T, log = ot.gromov.fused_gromov_wasserstein(M, c1, c2, p, q, loss, alpha=alpha, log=True)
        value = log["fgw_dist"]
    save(case, c1=c1, c2=c2, p=p, q=q, m=M, plan=T,
         scalars=[value, alpha, len(log["loss"]) - 1], losses=log["loss"])
    print(f"{case}: value {float(value)!r}, iterations {len(log['loss']) - 1}")


entropic("e_sq", 11, 7, 9, "square_loss", 0.02, 40, 0.0)
entropic("e_sq_tol", 12, 8, 6, "square_loss", 0.05, 1000, 1e-9)
entropic("e_kl", 13, 6, 8, "kl_loss", 0.05, 30, 0.0)
entropic("e_asym", 14, 7, 5, "square_loss", 0.05, 30, 0.0, sym=False, g0=True)
entropic("e_fused", 15, 8, 7, "square_loss", 0.03, 30, 0.0, fused=0.3)
entropic("e_fused_kl_asym", 16, 6, 7, "kl_loss", 0.1, 25, 0.0, sym=False, fused=0.6, g0=True)

exact("x_sq", 21, 8, "square_loss")
exact("x_fused", 22, 8, "square_loss", fused=0.5)
exact("x_asym", 23, 7, "square_loss", sym=False)
exact("x_kl", 24, 7, "kl_loss")
exact("x_w_sq", 25, 9, "square_loss", m=7)
exact("x_w_fused", 26, 8, "square_loss", fused=0.4, m=10)
exact("x_w_asym", 27, 7, "square_loss", sym=False, m=6)
