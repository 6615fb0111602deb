#!/usr/bin/env python3
"""`logot.pot.sinkhorn` against POT's `ot.sinkhorn` on the CPU, in one run, and where the
time goes.

    python3 scripts/bench-pot-sinkhorn.py [--n 300] [--eps 0.1] [--repeats 15] [--json]

Needs POT and the Python package (`pip install ./python POT`). The problem: n points drawn
uniformly in the unit square for each side (seeded), uniform weights, the squared Euclidean
cost (`ot.dist`), ε = `--eps`; POT's defaults otherwise (`numItermax=1000`,
`stopThr=1e-9`). Every figure is the median over `--repeats` calls, the calls of the
compared functions interleaved so that they see the same machine load. Each time is given
as wall-clock time and as the process's CPU time (all threads): on a machine shared with
other work, a call that runs longer than a scheduler slice waits for the CPU in proportion
to the load while a short one often does not, so the CPU time is the fairer ratio there.

What is printed:

1. The drop-in call against POT's default `method="sinkhorn"` (kernel domain, `u = a /
   Kv`), POT's `method="sinkhorn_log"`, and logot's own `coupling`, `solve` and
   `wasserstein` (the same solve without the plan or the potentials), with the iterations
   each ran and the time logot reports spent in the library (`_last_compute_seconds`).
2. The cost of one iteration: 100 iterations without a stopping test (POT `stopThr=0`,
   logot `tol=0`) in each, per iteration.
3. The iterations each needs to meet its own stopping test: POT's `‖Pᵀ1 − b‖₂ ≤ stopThr`
   against logot's `‖Pᵀ1 − b‖₁ ≤ tol` (checked every 10 iterations by both).
4. The floors of one iteration in each domain, timed with numpy on the same arrays: two
   matrix–vector products with `K = exp(−M/ε)` (the kernel domain's work) against `2·n·m`
   exponentials (the log domain's: a log-sum-exp over every entry in each half-step).
"""

import argparse
import json
import os
import statistics
import time

import numpy as np
import ot

import logot
import logot.pot as lpot
from logot import _logot


def problem(n, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(size=(n, 2)), rng.uniform(size=(n, 2))
    a = np.full(n, 1.0 / n)
    return a, a.copy(), ot.dist(x, y)


def timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - t, time.process_time() - c), out


def medians(calls, repeats):
    """Median (wall, CPU) seconds of each named call, the calls interleaved; and each
    call's last output."""
    times = {k: [] for k in calls}
    outs = {}
    for _ in range(repeats):
        for k, fn in calls.items():
            dt, outs[k] = timed(fn)
            times[k].append(dt)
    return {k: tuple(statistics.median(t[i] for t in v) for i in (0, 1)) for k, v in times.items()}, outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--eps", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    a, b, M = problem(args.n)
    eps = args.eps
    report = dict(n=args.n, eps=eps, repeats=args.repeats, cpus=os.cpu_count(),
                  rayon_threads=os.environ.get("RAYON_NUM_THREADS"), pot=ot.__version__,
                  logot=logot.__version__)

    # 1. The calls as a user writes them (POT's defaults), with their iterations.
    library = {}

    def lg_solve():
        r = logot.solve(a, b, M, eps)
        library["solve"] = _logot._last_compute_seconds()
        return r

    def lg_coupling():
        r = logot.coupling(a, b, M, eps)
        library["coupling"] = _logot._last_compute_seconds()
        return r

    calls = {
        "pot sinkhorn": lambda: ot.sinkhorn(a, b, M, eps, log=True),
        "pot sinkhorn_log": lambda: ot.sinkhorn(a, b, M, eps, method="sinkhorn_log", log=True),
        "logot.pot.sinkhorn": lambda: lpot.sinkhorn(a, b, M, eps, log=True),
        "logot.coupling": lg_coupling,
        "logot.solve": lg_solve,
        "logot.wasserstein": lambda: logot.wasserstein(a, b, M, eps),
    }
    med, outs = medians(calls, args.repeats)
    iters = {
        "pot sinkhorn": outs["pot sinkhorn"][1]["niter"] + 1,
        "pot sinkhorn_log": outs["pot sinkhorn_log"][1]["niter"] + 1,
        "logot.pot.sinkhorn": outs["logot.pot.sinkhorn"][1]["niter"],
        "logot.coupling": outs["logot.coupling"].convergence.iterations,
        "logot.solve": outs["logot.solve"].convergence.iterations,
    }
    plan_pot, plan_lg = outs["pot sinkhorn"][0], outs["logot.pot.sinkhorn"][0]
    report["calls"] = {k: dict(ms=1e3 * w, cpu_ms=1e3 * c, iterations=iters.get(k)) for k, (w, c) in med.items()}
    report["library_ms"] = {k: 1e3 * v for k, v in library.items()}
    report["plans_max_abs_diff"] = float(np.abs(plan_pot - plan_lg).max())
    report["ratio_dropin_over_pot"] = dict(wall=med["logot.pot.sinkhorn"][0] / med["pot sinkhorn"][0],
                                          cpu=med["logot.pot.sinkhorn"][1] / med["pot sinkhorn"][1])

    # 2. One iteration: 100 iterations without a stopping test.
    k = 100
    per_iter, _ = medians({
        "pot sinkhorn": lambda: ot.sinkhorn(a, b, M, eps, numItermax=k, stopThr=0.0, warn=False),
        "pot sinkhorn_log": lambda: ot.sinkhorn(a, b, M, eps, method="sinkhorn_log", numItermax=k, stopThr=0.0,
                                                warn=False),
        "logot.solve": lambda: logot.solve(a, b, M, eps, max_iters=k, tol=0.0),
        "logot.solve float32": lambda: logot.solve(a.astype(np.float32), b.astype(np.float32),
                                                   M.astype(np.float32), eps, max_iters=k, tol=0.0),
    }, args.repeats)
    report["us_per_iteration"] = {name: dict(wall=1e6 * w / k, cpu=1e6 * c / k) for name, (w, c) in per_iter.items()}

    # 3. The iterations each stopping test needs, at POT's stopThr (checked every 10).
    _, log = ot.sinkhorn(a, b, M, eps, log=True, stopThr=1e-9, numItermax=100_000)
    r = logot.solve(a, b, M, eps, tol=1e-9, max_iters=100_000)
    report["iterations_to_1e-9"] = dict(pot_l2=log["niter"] + 1, logot_l1=r.convergence.iterations)

    # 4. The floors of one iteration: two GEMVs against 2·n·m exponentials (numpy).
    K = np.exp(-M / eps)
    v = np.ones(args.n)
    scratch = np.empty_like(M)

    # 100 iterations' worth of each, as the figures of 2. are.
    def gemvs():
        for _ in range(k):
            K @ v
            K.T @ v

    def exps():
        for _ in range(2 * k):
            np.exp(M, out=scratch)

    floors, _ = medians({"two GEMVs": gemvs, "2·n·m exponentials": exps}, args.repeats)
    report["floor_us"] = {name: dict(wall=1e6 * w / k, cpu=1e6 * c / k) for name, (w, c) in floors.items()}

    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"n = {args.n}, eps = {eps}, {os.cpu_count()} CPUs, RAYON_NUM_THREADS = {report['rayon_threads']}, "
          f"POT {ot.__version__}, logot {logot.__version__}; medians of {args.repeats}")
    print("\n1. The calls (POT's defaults: numItermax=1000, stopThr=1e-9)")
    for name, c in report["calls"].items():
        it = "" if c["iterations"] is None else f"{c['iterations']:6d} iterations"
        print(f"   {name:22s} {c['ms']:9.2f} ms wall {c['cpu_ms']:9.2f} ms CPU  {it}")
    for name, ms in report["library_ms"].items():
        print(f"   (logot.{name}: {ms:.2f} ms of it inside the library)")
    ratio = report["ratio_dropin_over_pot"]
    print(f"   logot.pot.sinkhorn / POT sinkhorn = {ratio['wall']:.2f} (wall), {ratio['cpu']:.2f} (CPU); "
          f"plans differ by at most {report['plans_max_abs_diff']:.2e}")
    print("\n2. One iteration (100 without a stopping test)")
    for name, us in report["us_per_iteration"].items():
        print(f"   {name:22s} {us['wall']:9.1f} µs wall {us['cpu']:9.1f} µs CPU")
    print("\n3. Iterations to meet stopThr = tol = 1e-9")
    it = report["iterations_to_1e-9"]
    print(f"   POT (‖Pᵀ1 − b‖₂): {it['pot_l2']}, logot (‖Pᵀ1 − b‖₁): {it['logot_l1']}")
    print("\n4. The floors of one iteration (numpy)")
    for name, us in report["floor_us"].items():
        print(f"   {name:22s} {us['wall']:9.1f} µs wall {us['cpu']:9.1f} µs CPU")


if __name__ == "__main__":
    main()
