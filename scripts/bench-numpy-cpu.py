#!/usr/bin/env python3
"""CPU baselines with NumPy for the canonical kernel problems of DESIGN.md that POT does not
cover (mhc4, mhc16, svd3, xxt, xxt8192, ns, gemm), on the same sizes as `logot bench`.

    python3 scripts/bench-numpy-cpu.py [PROBLEM...]      # default: all

Prints one JSON line per problem: {"problem", "impl", "ms"} (median of repeated runs after
a warm-up, at most about 20 s of timed runs each, as `logot bench` does). NumPy's matmul is
BLAS (OpenBLAS or MKL, multi-threaded); the bistochastic forward is NumPy's exp and
normalisations (the unrolled iteration, not the log domain); svd3 is np.linalg.svd on the
batch.
"""
import json, sys, time
import numpy as np


def timed(work, runs=5, max_s=20.0):
    work()
    ts = []
    while len(ts) < runs and (not ts or sum(ts) < max_s):
        t = time.perf_counter()
        work()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


rng = np.random.default_rng(0)


def mhc(n):
    x = (rng.random((65536, n, n)) * 4).astype(np.float32)

    def fwd():
        r = np.exp(x)
        for _ in range(20):
            r = r / r.sum(-2, keepdims=True)
            r = r / r.sum(-1, keepdims=True)
        return r

    return timed(fwd)


def svd3():
    a = rng.standard_normal((4096, 1024, 3), dtype=np.float32)
    return timed(lambda: np.linalg.svd(a, full_matrices=False), runs=3)


def xxt(n):
    x = rng.standard_normal((n, n), dtype=np.float32)
    return timed(lambda: x @ x.T, runs=3)


def ns():
    g = rng.standard_normal((4096, 4096), dtype=np.float32)

    def run():
        a, b, c = 3.4445, -4.7750, 2.0315
        x = g / np.linalg.norm(g)
        for _ in range(5):
            m = x @ x.T
            bm = b * m + c * (m @ m)
            x = a * x + bm @ x
        return x

    return timed(run, runs=3)


def gemm():
    a = rng.standard_normal((4096, 4096), dtype=np.float32)
    b = rng.standard_normal((4096, 4096), dtype=np.float32)
    return timed(lambda: a @ b, runs=3)


PROBLEMS = {
    "mhc4": lambda: mhc(4),
    "mhc16": lambda: mhc(16),
    "svd3": svd3,
    "xxt": lambda: xxt(4096),
    "xxt8192": lambda: xxt(8192),
    "ns": ns,
    "gemm": gemm,
}

for name in sys.argv[1:] or list(PROBLEMS):
    ms = PROBLEMS[name]()
    note = "forward only" if name.startswith("mhc") else ("forward C = A·B" if name == "gemm" else "")
    print(json.dumps({"problem": name, "impl": "numpy " + np.__version__, "ms": ms, "note": note}), flush=True)
