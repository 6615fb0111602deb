#!/usr/bin/env python3
"""Time exact minibatch OT in one run: POT's `ot.emd2` looped over a batch against
`logot bench --problem emdbatch` on the same clouds, on the CPU and (when built with CUDA
and a GPU is present) the GPU.

    cargo build --release -p logot-cli [--features cuda]
    python3 scripts/bench-emdbatch-vs-pot.py [--batch 64] [--points 1024] [--dim 16] \
        [--repeat 3] [--backends cpu,cuda] [--logot PATH]

The batch: B pairs of clouds of n points uniform in [0,1]^d (numpy's generator, seed
d + n + B), float64, uniform weights 1/n, squared Euclidean cost; written to .npy once and
read by both sides. POT: for each problem `M = ot.dist(x[k], y[k]); ot.emd2(u, u, M,
numItermax=10**8)` (the cost matrices are timed: logot forms its costs inside the solve).
logot: `logot bench --problem emdbatch --x X --y Y --f64` (its median over `--repeat` timed
runs after one warm-up, every result on the host). POT runs `--repeat` times too; the
medians, their ratios, the largest relative difference of the costs, whether every logot
result is certified exact and the machine's cores and load are printed as one JSON object.
"""
import argparse, json, os, subprocess, tempfile, time
import numpy as np
import ot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--points", type=int, default=1024)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--backends", default="cpu")
    p.add_argument("--logot", default=os.path.join(TARGET, "release", "logot"))
    a = p.parse_args()
    B, n, d = a.batch, a.points, a.dim
    rng = np.random.default_rng(d + n + B)
    x, y = rng.random((B, n, d)), rng.random((B, n, d))
    u = np.full(n, 1.0 / n)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        fx, fy = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
        np.save(fx, x)
        np.save(fy, y)
        pot, pot_costs = [], None
        for _ in range(a.repeat):
            t = time.perf_counter()
            costs = [ot.emd2(u, u, ot.dist(x[k], y[k]), numItermax=10**8) for k in range(B)]
            pot.append((time.perf_counter() - t) * 1e3)
            pot_costs = np.array(costs)
        out = {
            "problem": "emdbatch", "batch": B, "points": n, "dim": d,
            "pot_ms": pot, "pot_median_ms": float(np.median(pot)),
            "cores": os.cpu_count(),
        }
        for be in a.backends.split(","):
            cmd = [a.logot, "bench", "--problem", "emdbatch", "--backend", be, "--f64",
                   "--x", fx, "--y", fy, "--runs", str(a.repeat), "--json"]
            r = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                          text=True).stdout.strip().splitlines()[-1])
            ours = np.array(r["costs"])
            out[be] = {
                "ms": r["ms"], "runs_ms": r["runs_ms"],
                "speedup_vs_pot": out["pot_median_ms"] / r["ms"],
                "max_rel_cost_diff_vs_pot": float(np.max(np.abs(ours - pot_costs) / np.abs(pot_costs))),
                "all_exact": r["all_exact"], "solved_on_gpu": r["solved_on_gpu"],
                "relative_gap": r["relative_gap"], "max_violation": r["max_violation"],
            }
    out["load_before"], out["load_after"] = load0, os.getloadavg()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
