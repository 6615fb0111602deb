#!/usr/bin/env python3
"""Point-cloud Sinkhorn on the CPU: `logot bench` against NumPy in one run.

    python3 scripts/bench-pointcloud-vs-numpy.py [--logot target/release/logot]
        [--before OTHER_LOGOT [--before-dims 64]] [--n 4096] [--dims 3,64,256,1024] [--runs 3]
        [--rounds 1] [--f64]

For each d: `logot bench --problem otC64 --points N --dim d --json` (10 iterations = 20
half-steps of point-cloud Sinkhorn from zero potentials, uniform weights, ε = 0.05, the
cost computed on the fly, N = M points uniform in [0, 1]^d), then the NumPy reference on the
same sizes: `ot.dist(x, y)` (squared Euclidean, BLAS) once, then 10 iterations of
`g = ε log ν − ε logsumexp((f − C)/ε, axis=0)`, `f = ε log μ − ε logsumexp((g − C)/ε, axis=1)`
(the order of `Backend::iterate`, so `f[0]` is comparable: same distribution, other samples)
(`scipy.special.logsumexp`). The NumPy side stores the N×M cost, so keep N within memory
(N = 8192 in f32: 256 MiB per N×M array).

With --rounds K, logot and NumPy run in turns (logot, NumPy, logot, NumPy, …; K turns of
each, --runs timed runs per turn), so that the load of a shared machine falls on both alike;
the medians are over all timed runs, with their spread (min, max).

Per half-step: logot's time over its 20 half-steps against NumPy's `ot.dist` plus one
log-sum-exp half-step (the cost formed anew, as logot does in every half-step):
`numpy_half_step_ms = dist_ms + iter_ms / 20`, `half_step_ratio = numpy_half_step_ms /
logot_half_step_ms`. `numpy_over_logot` compares the whole runs instead (NumPy forms the cost
once and reuses it for all 20 half-steps, N·M memory).

Prints one JSON line per d: both median times (ms), NumPy's split (ot.dist, iterations), the
ratios, and `cross_gflop_per_s`: the cross term's 2·d·N·M flops per half-step
over logot's whole time (a lower bound on the rate of the cross-term kernel, which shares the
time with the log-sum-exps). With `--before`, the same `logot bench` with another binary
(e.g. one built from main) for a before/after comparison in the same run.
"""
import argparse, json, os, subprocess, sys, time
import numpy as np
import ot
from scipy.special import logsumexp

EPS, ITERS = 0.05, 10


def logot_bench(binary, n, d, runs, f64):
    cmd = [binary, "bench", "--problem", "otC64", "--points", str(n), "--dim", str(d),
           "--runs", str(runs), "--json"] + (["--f64"] if f64 else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def numpy_sinkhorn(n, d, runs, dtype):
    rng = np.random.default_rng(0)
    x = rng.random((n, d)).astype(dtype)
    y = rng.random((n, d)).astype(dtype)
    log_w = np.full(n, -np.log(n), dtype=dtype)

    def run():
        t0 = time.perf_counter()
        c = ot.dist(x, y)  # squared Euclidean, |x|² + |y|² − 2·x·yᵀ by BLAS
        t1 = time.perf_counter()
        f = np.zeros(n, dtype=dtype)
        g = np.zeros(n, dtype=dtype)
        for _ in range(ITERS):
            g = EPS * log_w - EPS * logsumexp((f[:, None] - c) / EPS, axis=0)
            f = EPS * log_w - EPS * logsumexp((g[None, :] - c) / EPS, axis=1)
        t2 = time.perf_counter()
        return (t2 - t0) * 1e3, (t1 - t0) * 1e3, (t2 - t1) * 1e3, float(f[0])

    run()  # warm-up
    return [run() for _ in range(runs)]


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--logot", default="target/release/logot")
    ap.add_argument("--before", default=None)
    ap.add_argument("--before-dims", default="64", help="the dims to time --before at")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dims", default="3,64,256,1024")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1, help="turns of logot and NumPy, interleaved")
    ap.add_argument("--f64", action="store_true")
    a = ap.parse_args()
    dtype = np.float64 if a.f64 else np.float32
    for d in [int(v) for v in a.dims.split(",")]:
        row = {"n": a.n, "d": d, "dtype": np.dtype(dtype).name, "iterations": ITERS, "eps": EPS,
               "rounds": a.rounds, "loadavg_before": os.getloadavg()}
        lg, before, npy = [], [], []
        for _ in range(a.rounds):
            j = logot_bench(a.logot, a.n, d, a.runs, a.f64)
            lg += j["runs_ms"]
            row["logot_f_first"] = j["f_first"]
            if a.before and d in [int(v) for v in a.before_dims.split(",")]:
                before += logot_bench(a.before, a.n, d, a.runs, a.f64)["runs_ms"]
            npy += numpy_sinkhorn(a.n, d, a.runs, dtype)
        row["loadavg_after"] = os.getloadavg()
        row["logot_ms"] = median(lg)
        row["logot_min_max"] = [min(lg), max(lg)]
        if before:
            row["before_ms"] = median(before)
            row["speedup_vs_before"] = median(before) / row["logot_ms"]
        total = median([r[0] for r in npy])
        dist, iters = median([r[1] for r in npy]), median([r[2] for r in npy])
        row.update(numpy_ms=total, numpy_min_max=[min(r[0] for r in npy), max(r[0] for r in npy)],
                   numpy_dist_ms=dist, numpy_iter_ms=iters, numpy_f_first=npy[-1][3])
        row["numpy_over_logot"] = total / row["logot_ms"]
        half = 2 * ITERS
        row["logot_half_step_ms"] = row["logot_ms"] / half
        row["numpy_half_step_ms"] = dist + iters / half
        row["half_step_ratio"] = row["numpy_half_step_ms"] / row["logot_half_step_ms"]
        flops = 2.0 * d * a.n * a.n * half
        row["cross_gflop_per_s"] = flops / (row["logot_ms"] * 1e-3) / 1e9
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
