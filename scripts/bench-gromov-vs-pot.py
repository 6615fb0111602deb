#!/usr/bin/env python3
"""Gromov–Wasserstein from Python: logot against POT on the CPU, in one run.

    python3 scripts/bench-gromov-vs-pot.py [--n 200] [--m 250] [--eps 0.005] [--outer 20] [--repeats 3] [--json]

Needs POT and the Python package (`pip install ./python POT`). The problem: structures from
seeded points (n in 2-D, m in 3-D; squared distances, each divided by its largest entry),
uniform weights. Compared, each pair interleaved so that both see the same machine load
(median over `--repeats` calls, wall-clock and process CPU time):

1. entropic GW at ε = `--eps` with `--outer` outer iterations and no early stop (POT
   `tol=0`, logot `tol=0`), each inner Sinkhorn solve at its defaults (POT
   `ot.sinkhorn(method="sinkhorn")`: 1000 iterations, `stopThr=1e-9`; logot: log-domain, 1000
   iterations, relative L1 tolerance 1e-9), through `logot.pot.gromov` (POT's call);
2. exact GW (conditional gradient with the network simplex) at the defaults of both.

The values are printed beside the times: the entropic plans of the two differ by the inner
solves' tolerances, the exact ones are compared by value (a local method; see
python/tests/test_gromov.py for the agreement from the same initial plan).
"""

import argparse
import json
import statistics
import time

import numpy as np
import ot

import logot.pot as lpot


def problem(n, m, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(n, 2)), rng.normal(size=(m, 3))
    c1, c2 = ot.dist(x, x), ot.dist(y, y)
    return c1 / c1.max(), c2 / c2.max(), ot.unif(n), ot.unif(m)


def timed(f):
    w, c = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - w, time.process_time() - c


def compare(name, calls, repeats):
    times = {k: ([], []) for k in calls}
    values = {}
    for _ in range(repeats):
        for k, f in calls.items():
            values[k], w, c = timed(f)
            times[k][0].append(w)
            times[k][1].append(c)
    row = {k: dict(wall_s=statistics.median(w), cpu_s=statistics.median(c), value=float(values[k]))
           for k, (w, c) in times.items()}
    pot, ours = row["pot"], row["logot"]
    row["ratio_wall"] = pot["wall_s"] / ours["wall_s"]
    row["ratio_cpu"] = pot["cpu_s"] / ours["cpu_s"]
    print(f"{name}: POT {pot['wall_s']:.3f} s wall ({pot['cpu_s']:.3f} s CPU), value {pot['value']:.10g}; "
          f"logot {ours['wall_s']:.3f} s wall ({ours['cpu_s']:.3f} s CPU), value {ours['value']:.10g}; "
          f"POT/logot {row['ratio_wall']:.2f}× wall, {row['ratio_cpu']:.2f}× CPU")
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--m", type=int, default=250)
    ap.add_argument("--eps", type=float, default=0.005)
    ap.add_argument("--outer", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    c1, c2, p, q = problem(a.n, a.m)
    entropic = dict(epsilon=a.eps, max_iter=a.outer, tol=0.0)
    out = {"n": a.n, "m": a.m, "eps": a.eps, "outer": a.outer}
    out["entropic"] = compare(f"entropic GW {a.n}×{a.m}, ε = {a.eps}, {a.outer} outer iterations", {
        "pot": lambda: ot.gromov.entropic_gromov_wasserstein2(c1, c2, p, q, **entropic),
        "logot": lambda: lpot.gromov.entropic_gromov_wasserstein2(c1, c2, p, q, **entropic),
    }, a.repeats)
    out["exact"] = compare(f"exact GW {a.n}×{a.m}", {
        "pot": lambda: ot.gromov.gromov_wasserstein2(c1, c2, p, q),
        "logot": lambda: lpot.gromov.gromov_wasserstein2(c1, c2, p, q),
    }, a.repeats)
    if a.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
