#!/usr/bin/env python3
"""Time sliced Wasserstein on the GPU in one run: POT's `ot.sliced_wasserstein_distance` on
torch CUDA tensors against `logot bench --problem sliced --backend cuda` on the same clouds
and directions.

    python3 scripts/bench-sliced-gpu-vs-pot.py [--points 50000] [--dim 64] \
        [--projections 128] [--repeat 5] [--logot PATH]     # needs torch (CUDA) and POT

The clouds: n points uniform in [0,1]^d and n in [0.1,0.9]^d (numpy's generator, seed 0),
float32, uniform weights, written to .npy once and read by both sides. The directions: POT's
`get_random_projections(d, L, seed=0)` (NumPy), which logot draws identically from seed 0.
POT: `ot.sliced_wasserstein_distance(X, Y, projections=P, p=2)` with X, Y, P torch float32
tensors on the GPU, timed twice: with the clouds already on the GPU, and from the NumPy
arrays (the copy to the GPU included, as logot's runs include it); each call synchronised,
`repeat` timed calls after one warm-up. logot: its median over `repeat` timed runs after one
warm-up, each from the clouds on the host to the distance on the host (computed in float64).
Prints one JSON object with the medians, the ratios and both values.
"""
import argparse, json, os, subprocess, tempfile, time
import numpy as np
import ot
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def median(v):
    return sorted(v)[len(v) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--points", type=int, default=50_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--projections", type=int, default=128)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--logot", default=os.path.join(TARGET, "release", "logot"))
    a = p.parse_args()
    n, d, L = a.points, a.dim, a.projections
    rng = np.random.default_rng(0)
    xs = rng.random((n, d), dtype=np.float32)
    xt = (rng.random((n, d), dtype=np.float32) * 0.8 + 0.1).astype(np.float32)
    P = ot.sliced.get_random_projections(d, L, seed=0)
    dev = torch.device("cuda")
    Pt = torch.from_numpy(P.astype(np.float32)).to(dev)

    def pot_resident(X, Y):
        r = ot.sliced_wasserstein_distance(X, Y, projections=Pt, p=2)
        return float(r)  # waits for the GPU

    def pot_from_host():
        X = torch.from_numpy(xs).to(dev)
        Y = torch.from_numpy(xt).to(dev)
        return pot_resident(X, Y)

    X, Y = torch.from_numpy(xs).to(dev), torch.from_numpy(xt).to(dev)
    pot_value = pot_resident(X, Y)
    resident = []
    for _ in range(a.repeat):
        torch.cuda.synchronize()
        t = time.perf_counter()
        pot_resident(X, Y)
        resident.append((time.perf_counter() - t) * 1e3)
    pot_from_host()
    from_host = []
    for _ in range(a.repeat):
        torch.cuda.synchronize()
        t = time.perf_counter()
        pot_from_host()
        from_host.append((time.perf_counter() - t) * 1e3)
    del X, Y
    torch.cuda.empty_cache()

    with tempfile.TemporaryDirectory() as tmp:
        for name, arr in [("x", xs), ("y", xt)]:
            np.save(os.path.join(tmp, name + ".npy"), arr)
        out = subprocess.run(
            [a.logot, "bench", "--problem", "sliced", "--backend", "cuda",
             "--x", os.path.join(tmp, "x.npy"), "--y", os.path.join(tmp, "y.npy"),
             "--projections", str(L), "--runs", str(a.repeat), "--json"],
            check=True, capture_output=True, text=True).stdout
    lg = json.loads(out.strip().splitlines()[-1])
    print(json.dumps({
        "problem": f"sliced n=m={n} d={d} L={L} p=2 float32",
        "gpu": torch.cuda.get_device_name(0),
        "pot": ot.__version__, "torch": torch.__version__,
        "pot_resident_ms": median(resident), "pot_resident_all_ms": resident,
        "pot_from_host_ms": median(from_host), "pot_from_host_all_ms": from_host,
        "logot_ms": lg["ms"], "logot_all_ms": lg["runs_ms"],
        "pot_resident_over_logot": median(resident) / lg["ms"],
        "pot_from_host_over_logot": median(from_host) / lg["ms"],
        "pot_value": pot_value, "logot_value": lg["distance"],
        "relative_difference": abs(lg["distance"] - pot_value) / pot_value,
    }))


if __name__ == "__main__":
    main()
