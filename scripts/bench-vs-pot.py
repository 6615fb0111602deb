#!/usr/bin/env python3
"""Time POT and `logot bench` on the same CPU problem in one run and print the ratio.

    python3 scripts/bench-vs-pot.py otBcpu [float64|float32]   # needs `pip install POT`

The problem is rebuilt here exactly as `logot_cli::problems` (cli/src/problems.rs) builds it. POT runs on float64
arrays by default, as in the CPU baselines of benches/README.md; logot runs in
float32, the precision the otBcpu criterion names.
"""
import json, subprocess, sys, time
import numpy as np
import ot


def bumps(b, n, seed):
    x = np.linspace(0, 1, n)
    golden = 0.618033988749895
    out = np.empty((b, n))
    for k in range(b):
        t = (seed * 0.414213562 + k * golden) % 1.0
        u = (seed * 0.732050807 + k * golden * golden) % 1.0
        h = np.exp(-0.5 * ((x - t) / (0.05 + 0.2 * u)) ** 2) + 1e-6
        out[k] = h / h.sum()
    return out


def ot_b(b, n, dtype):
    x = np.linspace(0, 1, n)
    c = (x[:, None] - x[None, :]) ** 2
    return bumps(b, n, 1).astype(dtype), bumps(b, n, 2).astype(dtype), c.astype(dtype)


def main():
    problem = sys.argv[1] if len(sys.argv) > 1 else "otBcpu"
    pot_dtype = np.dtype(sys.argv[2] if len(sys.argv) > 2 else "float64")
    sizes = {"otBcpu": (8, 1024), "otB": (64, 2048)}
    b, n = sizes[problem]
    mu, nu, c = ot_b(b, n, pot_dtype)
    t = time.perf_counter()
    pot = [ot.sinkhorn2(mu[k], nu[k], c, 1e-2, method="sinkhorn_log", numItermax=100, stopThr=0) for k in range(b)]
    pot_ms = (time.perf_counter() - t) * 1e3
    out = subprocess.run(["cargo", "run", "--release", "-q", "--bin", "logot", "--", "bench", "--problem", problem, "--json"],
                         check=True, capture_output=True, text=True).stdout
    lg = json.loads(out)
    print(json.dumps({"problem": problem, "pot_dtype": str(pot_dtype), "pot_sinkhorn_log_ms": pot_ms, "logot_cpu_ms": lg["ms"],
                      "speedup": pot_ms / lg["ms"], "logot_gterms_per_s": lg["gterms_per_s"],
                      "pot_distance_first": float(pot[0]), "logot_distance_first": lg["distance_first"]}))


if __name__ == "__main__":
    main()
