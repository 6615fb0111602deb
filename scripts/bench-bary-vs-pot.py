#!/usr/bin/env python3
"""Time POT and logot on the bary64 grid barycenter in one run, and compare the results.

    cargo build --release && python3 scripts/bench-bary-vs-pot.py [--reps 3]

bary64 (DESIGN.md): three 64×64 images (square, ring 4<r²<9, two disks of radius 2 at
(±2,±2) on linspace(−5,5)), weights (0.3, 0.3, 0.4), ε = 0.004, 100 iterations, no early
stop. POT: ot.bregman.convolutional_barycenter2d(..., method="sinkhorn_log"), float64.
logot: `logot bench --problem bary64 --json` (median of 5 runs after a warm-up; float64
and float32) and `logot barycenter --grid` on the same images for the L1 difference.
"""
import json, os, subprocess, sys, tempfile, time
import numpy as np
import ot


def shapes(n):
    xs = np.linspace(-5, 5, n)
    a = np.zeros((n, n)); a[n // 5:-n // 5, n // 5:-n // 5] = 1
    r2 = xs[None] ** 2 + xs[:, None] ** 2
    b = ((r2 > 4) & (r2 < 9)).astype(float)
    c = (((xs[None] - 2) ** 2 + (xs[:, None] - 2) ** 2 < 4) | ((xs[None] + 2) ** 2 + (xs[:, None] + 2) ** 2 < 4)).astype(float)
    imgs = np.stack([a / a.sum(), b / b.sum(), c / c.sum()]) + 1e-10
    return imgs / imgs.sum((1, 2), keepdims=True)


def logot(*args):
    exe = os.path.join(os.path.dirname(__file__), "..", "target", "release", "logot")
    return json.loads(subprocess.run([exe, *args], check=True, capture_output=True, text=True).stdout)


def main():
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
    imgs, w = shapes(64), np.array([0.3, 0.3, 0.4])
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        pot = ot.bregman.convolutional_barycenter2d(imgs, 0.004, weights=w, numItermax=100, stopThr=0.0,
                                                    method="sinkhorn_log", warn=False)
        times.append((time.perf_counter() - t) * 1e3)
    pot_ms = sorted(times)[len(times) // 2]
    f64 = logot("bench", "--problem", "bary64", "--json", "--f64")
    f32 = logot("bench", "--problem", "bary64", "--json")
    with tempfile.TemporaryDirectory() as d:
        np.save(f"{d}/h.npy", imgs); np.save(f"{d}/w.npy", w)
        logot("barycenter", "--inputs", f"{d}/h.npy", "--weights", f"{d}/w.npy", "--eps", "0.004", "--grid",
              "--iters", "100", "--tol", "0", "--out", f"{d}/bar.npy")
        l1 = float(np.abs(np.load(f"{d}/bar.npy") - pot).sum())
    print(json.dumps({
        "problem": "bary64 grid, eps=0.004, 100 iterations",
        "pot_conv_barycenter2d_log_ms": pot_ms, "pot_runs_ms": times,
        "logot_f64_ms": f64["ms"], "logot_f64_min_ms": f64["min_ms"], "logot_f32_ms": f32["ms"],
        "speedup_f64": pot_ms / f64["ms"], "speedup_f32": pot_ms / f32["ms"],
        "l1_logot_f64_vs_pot": l1, "threads": f64.get("threads"),
    }, indent=1))


if __name__ == "__main__":
    main()
