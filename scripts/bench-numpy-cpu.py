#!/usr/bin/env python3
"""CPU baselines with NumPy for the canonical kernel problems of DESIGN.md that POT does not
cover (mhc4, mhc16, svd3, xxt, xxt8192, ns, gemm), on the same sizes as `logot bench`.

    python3 scripts/bench-numpy-cpu.py [PROBLEM...]      # default: all
    python3 scripts/bench-numpy-cpu.py --vs-logot target/release/logot --rounds 5 gemm xxt ns

Prints one JSON line per problem: {"problem", "impl", "ms"} (median of repeated runs after
a warm-up, at most about 20 s of timed runs each, as `logot bench` does).

With --vs-logot, `logot bench --problem P --json` and NumPy run in turns (logot, NumPy,
logot, NumPy, …; --rounds each, one warm-up and --runs timed runs per turn), so that the
load of a shared machine falls on both alike; one JSON line per problem with both medians
over all timed runs, their spread (min, max) and numpy_ms / logot_ms, and the load average
before and after. NumPy's matmul is
BLAS (OpenBLAS or MKL, multi-threaded); the bistochastic forward is NumPy's exp and
normalisations (the unrolled iteration, not the log domain); svd3 is np.linalg.svd on the
batch.
"""
import json, os, subprocess, sys, time
import numpy as np


def timed_all(work, runs=5, max_s=20.0):
    work()
    ts = []
    while len(ts) < runs and (not ts or sum(ts) < max_s):
        t = time.perf_counter()
        work()
        ts.append((time.perf_counter() - t) * 1e3)
    return ts


def timed(work, runs=5, max_s=20.0):
    ts = sorted(timed_all(work, runs, max_s))
    return ts[len(ts) // 2]


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

def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def vs_logot(binary, names, rounds, turn_runs):
    """logot and NumPy in turns; every timed run of each kept."""
    global timed
    plain = timed
    for name in names:
        load0 = os.getloadavg()
        lg, npy = [], []
        for _ in range(rounds):
            out = subprocess.run([binary, "bench", "--problem", name, "--json", "--runs", str(turn_runs),
                                  "--warmup", "1"], check=True, capture_output=True, text=True).stdout
            lg += json.loads(out)["runs_ms"]
            def keep_all(work, runs=None, max_s=20.0):
                npy.extend(timed_all(work, turn_runs, max_s))
                return 0.0

            timed = keep_all
            PROBLEMS[name]()
        timed = plain
        print(json.dumps({"problem": name, "numpy": np.__version__, "rounds": rounds,
                          "logot_ms": median(lg), "logot_min_max": [min(lg), max(lg)],
                          "numpy_ms": median(npy), "numpy_min_max": [min(npy), max(npy)],
                          "numpy_over_logot": median(npy) / median(lg),
                          "loadavg_before": load0, "loadavg_after": os.getloadavg(),
                          "logot_runs_ms": lg, "numpy_runs_ms": npy}), flush=True)


args = sys.argv[1:]
if args[:1] == ["--vs-logot"]:
    binary, args = args[1], args[2:]
    rounds = runs = 3
    while args and args[0] in ("--rounds", "--runs"):
        if args[0] == "--rounds":
            rounds = int(args[1])
        else:
            runs = int(args[1])
        args = args[2:]
    vs_logot(binary, args or ["gemm", "xxt", "ns"], rounds, runs)
    sys.exit(0)

for name in args or list(PROBLEMS):
    ms = PROBLEMS[name]()
    note = "forward only" if name.startswith("mhc") else ("forward C = A·B" if name == "gemm" else "")
    print(json.dumps({"problem": name, "impl": "numpy " + np.__version__, "ms": ms, "note": note}), flush=True)
