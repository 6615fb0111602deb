#!/usr/bin/env python3
"""Time sliced Wasserstein in one run: NumPy's sort floor, POT and logot, on the `sliced`
problem (n = m = 10^6 points uniform in [0,1]^3 and in [0.1,0.9]^3, uniform weights,
256 directions drawn by POT from seed 0, p = 2).

    python3 scripts/bench-sliced-vs-pot.py [n] [L] [repeat] [pot_repeat]   # needs numpy and POT

* NumPy's sort floor: only the `np.sort` calls on the projections, laid out contiguous per
  direction (`(X @ P).T`, formed beforehand and not timed): the least any sort-based
  method can spend in NumPy on one core.
* POT: `ot.sliced_wasserstein_distance(X_s, X_t, projections=P, p=2)`, called on chunks of
  16 directions (all 256 at once need more than the machine's 24 GiB) and combined from
  each chunk's `projected_emds`, which is POT's value for all of them.
* logot: `examples/exact_sliced_npy.rs` (release build, rayon on every core), timed inside
  the binary around `sliced_wasserstein_distance` (projections, sorts and merges of every
  direction), the clouds already read.

Prints one JSON object with the medians, the ratios and the machine's load average before
and after.
"""
import json, os, subprocess, sys, tempfile, time
import numpy as np
import ot


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    L = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    pot_repeat = int(sys.argv[4]) if len(sys.argv) > 4 else repeat  # POT is the slow one
    load0 = os.getloadavg()
    rng = np.random.default_rng(0)
    xs = rng.random((n, 3))
    xt = rng.random((n, 3)) * 0.8 + 0.1
    P = ot.sliced.get_random_projections(3, L, seed=0)
    chunk = 16

    floor = []
    for _ in range(repeat):
        total = 0.0
        for c in range(0, L, chunk):
            a = np.ascontiguousarray((xs @ P[:, c:c + chunk]).T)
            b = np.ascontiguousarray((xt @ P[:, c:c + chunk]).T)
            t = time.perf_counter()
            a.sort(axis=1)
            b.sort(axis=1)
            total += time.perf_counter() - t
        floor.append(total * 1e3)

    pot, pot_value = [], None
    for _ in range(pot_repeat):
        t = time.perf_counter()
        emds = []
        for c in range(0, L, chunk):
            _, log = ot.sliced_wasserstein_distance(xs, xt, projections=P[:, c:c + chunk], p=2, log=True)
            emds.append(np.asarray(log["projected_emds"]))
        pot_value = float(np.mean(np.concatenate(emds)) ** 0.5)
        pot.append((time.perf_counter() - t) * 1e3)

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        for name, arr in [("xs", xs), ("xt", xt), ("P", P)]:
            np.save(os.path.join(d, name + ".npy"), arr)
        subprocess.run(["cargo", "build", "--release", "-q", "--example", "exact_sliced_npy"], cwd=root, check=True)
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
        out = subprocess.run([os.path.join(target, "release", "examples", "exact_sliced_npy"),
                              os.path.join(d, "xs.npy"), os.path.join(d, "xt.npy"),
                              "--projections", os.path.join(d, "P.npy"), "--repeat", str(repeat)],
                             check=True, capture_output=True, text=True).stdout
    lg = json.loads(out)
    med = lambda v: sorted(v)[len(v) // 2]
    print(json.dumps({
        "problem": f"sliced n=m={n} d=3 L={L} p=2",
        "numpy_sort_floor_ms": med(floor), "numpy_sort_floor_all_ms": floor,
        "pot_ms": med(pot), "pot_all_ms": pot,
        "logot_ms": lg["median_ms"], "logot_all_ms": lg["times_ms"], "logot_threads": lg["threads"],
        "logot_over_floor": lg["median_ms"] / med(floor),
        "pot_over_logot": med(pot) / lg["median_ms"],
        "pot_value": pot_value, "logot_value": lg["distance"],
        "relative_difference": abs(lg["distance"] - pot_value) / pot_value,
        "cpu_count": os.cpu_count(), "loadavg_before": load0, "loadavg_after": os.getloadavg(),
    }))


if __name__ == "__main__":
    main()
