#!/usr/bin/env python3
"""Time exact OT in one run: POT's network simplex against logot, on the `emd{n}` and
`emdbatch` problems.

    cargo build --release --example exact_npy
    python3 scripts/bench-exact-vs-pot.py [emd1000] [emd5000] [emdbatch2] [emdbatch784] \
        [--repeat K] [--candidates K]

* emd{n} (emd1000, emd5000): n = m points uniform in [0,1]^2, weights 0.5 + U[0,1) normalised,
  squared Euclidean cost `ot.dist(x, y)` formed beforehand (not timed on either side).
  POT: `ot.emd2(a, b, M, numItermax=10**8)` (its default of 100,000 pivots stops before
  the optimum on this problem). logot: `exact::emd` on the same matrix (`emd`), and
  `exact::emd_points` on the clouds with costs computed when read (`emd-points`, no
  n×n matrix); with `--candidates K`, also `exact::emd` pricing K candidate columns a row
  first (`EmdParams::candidates_per_row`).
* emdbatch{d}: B = 64 minibatches of 1024 points uniform in [0,1]^d (d = 2 or 784), uniform
  weights. POT: a loop over the batch of `M = ot.dist(x[k], y[k]); ot.emd2(u, u, M,
  numItermax=10**8)` (cost matrices timed). logot: `exact::emd_points_batch` (each
  problem's cost matrix computed in it, problems in parallel over rayon on every core),
  with the solver chosen automatically and with each solver forced.

logot is timed inside `examples/exact_npy.rs` around the call, the inputs already read.
The two sides alternate within each repeat; the medians, their ratio, the largest relative
difference of the costs and the machine's load average before and after are printed as one
JSON object.
"""
import json, os, subprocess, sys, tempfile, time
import numpy as np
import ot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "examples", "exact_npy")


def logot(*args):
    out = subprocess.run([BIN, *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def median(v):
    return float(np.median(v))


def emd_n(tmp, repeat, n, candidates):
    rng = np.random.default_rng(n)
    x, y = rng.random((n, 2)), rng.random((n, 2))
    a = rng.random(n) + 0.5
    a /= a.sum()
    b = rng.random(n) + 0.5
    b /= b.sum()
    M = ot.dist(x, y)
    files = {k: os.path.join(tmp, f"{k}{n}.npy") for k in "abMxy"}
    for k, v in zip("abMxy", (a, b, M, x, y)):
        np.save(files[k], v)
    pot, ours, ours_pts, ours_cand, costs = [], [], [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        c = ot.emd2(a, b, M, numItermax=10**8)
        pot.append((time.perf_counter() - t) * 1e3)
        r = logot("emd", files["a"], files["b"], files["M"])
        ours.append(r["ms"])
        rp = logot("emd-points", files["a"], files["b"], files["x"], files["y"])
        ours_pts.append(rp["ms"])
        if candidates:
            rc = logot("emd", files["a"], files["b"], files["M"], "--method", "simplex",
                       "--candidates", str(candidates))
            ours_cand.append(rc["ms"])
            costs.append((float(c), rc["costs"][0], rc["costs"][0], rc["exact"], rc["exact"], rc["iterations"]))
        costs.append((float(c), r["costs"][0], rp["costs"][0], r["exact"], rp["exact"], r["iterations"]))
    rel = max(abs(l - p) / abs(p) for p, l, _, _, _, _ in costs)
    rel_pts = max(abs(l - p) / abs(p) for p, _, l, _, _, _ in costs)
    out = {
        "problem": f"emd{n}",
        "pot_ms": pot,
        "logot_emd_ms": ours,
        "logot_emd_points_ms": ours_pts,
        "pot_median_ms": median(pot),
        "logot_emd_median_ms": median(ours),
        "logot_emd_points_median_ms": median(ours_pts),
        "speedup_emd": median(pot) / median(ours),
        "speedup_emd_points": median(pot) / median(ours_pts),
        "max_rel_cost_diff": rel,
        "max_rel_cost_diff_points": rel_pts,
        "logot_exact": all(e and f for _, _, _, e, f, _ in costs),
        "logot_pivots": costs[0][5],
        "cost": costs[0][0],
    }
    if candidates:
        out[f"logot_emd_candidates{candidates}_median_ms"] = median(ours_cand)
        out[f"speedup_emd_candidates{candidates}"] = median(pot) / median(ours_cand)
    return out


def emdbatch(tmp, repeat, d):
    rng = np.random.default_rng(64 + d)
    B, n = 64, 1024
    x, y = rng.random((B, n, d)), rng.random((B, n, d))
    u = np.full(n, 1.0 / n)
    files = {k: os.path.join(tmp, f"{k}{d}.npy") for k in ("mu", "nu", "x", "y")}
    np.save(files["mu"], np.tile(u, (B, 1)))
    np.save(files["nu"], np.tile(u, (B, 1)))
    np.save(files["x"], x)
    np.save(files["y"], y)
    args = (files["mu"], files["nu"], files["x"], files["y"])
    methods = ("auto", "simplex", "assignment")
    pot, ours = [], {m: [] for m in methods}
    pot_costs, our_costs, exact = None, {}, True
    for _ in range(repeat):
        t = time.perf_counter()
        pc = []
        for k in range(B):
            M = ot.dist(x[k], y[k])
            pc.append(ot.emd2(u, u, M, numItermax=10**8))
        pot.append((time.perf_counter() - t) * 1e3)
        pot_costs = np.array(pc)
        for m in methods:
            r = logot("emd-batch", *args, "--method", m)
            ours[m].append(r["ms"])
            our_costs[m] = np.array(r["costs"])
            exact &= r["all_exact"]
    out = {
        "problem": f"emdbatch{d}",
        "pot_ms": pot,
        "pot_median_ms": median(pot),
        "logot_exact_all": bool(exact),
    }
    for m in methods:
        out[f"logot_{m}_ms"] = ours[m]
        out[f"logot_{m}_median_ms"] = median(ours[m])
        out[f"speedup_{m}"] = median(pot) / median(ours[m])
        out[f"max_rel_cost_diff_{m}"] = float(np.max(np.abs(our_costs[m] - pot_costs) / np.abs(pot_costs)))
    return out


def main():
    args = sys.argv[1:]
    repeat = 3
    if "--repeat" in args:
        k = args.index("--repeat")
        repeat = int(args[k + 1])
        del args[k : k + 2]
    candidates = 0
    if "--candidates" in args:
        k = args.index("--candidates")
        candidates = int(args[k + 1])
        del args[k : k + 2]
    problems = args or ["emd1000", "emd5000", "emdbatch2", "emdbatch784"]
    load0 = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in problems:
            if p.startswith("emdbatch"):
                results.append(emdbatch(tmp, repeat, int(p[len("emdbatch"):])))
            elif p.startswith("emd") and p[3:].isdigit():
                results.append(emd_n(tmp, repeat, int(p[3:]), candidates))
            else:
                raise SystemExit(f"unknown problem {p}")
    print(json.dumps({
        "cores": os.cpu_count(),
        "pot": ot.__version__,
        "load_before": load0,
        "load_after": os.getloadavg(),
        "results": results,
    }, indent=1))


if __name__ == "__main__":
    main()
