#!/usr/bin/env python3
"""Time POT and `logot bench` on the same CPU problem in one run, in interleaved repeats.

    python3 scripts/bench-vs-pot.py [otBcpu|otB|otA] [--pot-dtype float64|float32]
        [--logot target/release/logot] [--before OTHER_LOGOT] [--repeats 3]   # needs POT

The problem is rebuilt here exactly as `logot_cli::problems` (cli/src/problems.rs) builds
it. POT runs on float64 arrays by default, as in the CPU baselines of benches/README.md;
logot runs in float32, the precision the otBcpu criterion names. Each repeat runs logot, POT
and (with --before) the other binary one after the other, so a machine shared with other
jobs loads all of them alike; each logot run is `logot bench --json` (its own median of
--runs). The printed JSON holds every repeat's times, their medians, the spread (min-max)
and the ratios of the medians; `f32_vs_f64` is the largest relative difference between the
distances of a `--f64` run and the f32 one (same binary).
"""
import argparse, json, statistics, subprocess, sys, time
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


def ot_a(dtype):
    x = np.linspace(0, 100, 100)
    g = lambda m, s: np.exp(-0.5 * ((x - m) / s) ** 2)
    mu, nu = g(20, 10), g(60, 30)
    c = (x[None] - x[:, None]) ** 2
    return (mu / mu.sum()).astype(dtype), (nu / nu.sum()).astype(dtype), (c / c.max()).astype(dtype)


def pot_run(problem, dtype):
    """POT's `sinkhorn_log` on the problem, ms (one call per problem of the batch)."""
    if problem == "otA":
        mu, nu, c = ot_a(dtype)
        t = time.perf_counter()
        ot.sinkhorn2(mu, nu, c, 1e-3, method="sinkhorn_log", numItermax=200, stopThr=0)
        return (time.perf_counter() - t) * 1e3
    b, n = {"otBcpu": (8, 1024), "otB": (64, 2048)}[problem]
    mu, nu, c = ot_b(b, n, dtype)
    t = time.perf_counter()
    for k in range(b):
        ot.sinkhorn2(mu[k], nu[k], c, 1e-2, method="sinkhorn_log", numItermax=100, stopThr=0)
    return (time.perf_counter() - t) * 1e3


def logot_run(binary, problem, extra=()):
    cmd = [binary, "bench", "--problem", problem, "--json", *extra]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def summary(ts):
    return {"median": statistics.median(ts), "min": min(ts), "max": max(ts), "all": ts}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("problem", nargs="?", default="otBcpu", choices=["otBcpu", "otB", "otA"])
    ap.add_argument("--pot-dtype", default="float64")
    ap.add_argument("--logot", default="target/release/logot")
    ap.add_argument("--before", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    dtype = np.dtype(a.pot_dtype)
    if a.problem == "otA":
        pot_run(a.problem, dtype)  # warm-up: otA is short enough for first-call costs to show
    runs = {"logot": [], "pot": [], "before": []}
    last = None
    for _ in range(a.repeats):
        last = logot_run(a.logot, a.problem)
        runs["logot"].append(last["ms"])
        runs["pot"].append(pot_run(a.problem, dtype))
        if a.before:
            runs["before"].append(logot_run(a.before, a.problem)["ms"])
    f64 = logot_run(a.logot, a.problem, ["--f64"])
    rel = abs(last["distance_first"] - f64["distance_first"]) / abs(f64["distance_first"])
    out = {
        "problem": a.problem,
        "pot_dtype": str(dtype),
        "repeats": a.repeats,
        "logot_ms": summary(runs["logot"]),
        "pot_sinkhorn_log_ms": summary(runs["pot"]),
        "speedup_vs_pot": statistics.median(runs["pot"]) / statistics.median(runs["logot"]),
        "f32_vs_f64_distance_first": rel,
        "logot_distance_first": last["distance_first"],
    }
    if a.before:
        out["before_ms"] = summary(runs["before"])
        out["speedup_vs_before"] = statistics.median(runs["before"]) / statistics.median(runs["logot"])
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
