#!/usr/bin/env python3
"""Time dense entropic Gromov-Wasserstein in one run: POT and the logot command line on the
same problem (scripts/bench-gromov-vs-pot.py compares the Python package).

    python3 scripts/bench-gromov-cli-vs-pot.py [--n 4000] [--m 5000] [--iters 100] [--eps 5e-3]
        [--repeat 1] [--backend cpu|cuda] [--f32]          # needs numpy and POT

The problem is `logot bench --problem gw`'s: n points uniform in [0,1]^2 and m in [0,1]^3
(NumPy's default_rng(0)), structures the squared Euclidean distances within each cloud
divided by their largest entry, uniform weights, the square loss, epsilon = 5e-3, `--iters`
outer iterations run in full (tol = 0) from the product plan, inner Sinkhorn solves of at
most 1000 iterations to 1e-9 (POT's defaults; POT measures the inner error in the l2 norm
of the column sums, logot in l1 relative to the mass). The arrays are written once to .npy
and read by both, so both solve the same problem.

* POT (NumPy, CPU): `ot.gromov.entropic_gromov_wasserstein(..., solver="PGD")` in float64.
* POT (torch CUDA tensors), when torch with CUDA is present: the same call on the GPU.
* logot: `logot gw` (release build; `--backend cuda` builds with the `cuda` feature), timed
  inside the binary around the solve (`solve_ms`: uploads, every outer iteration, the plan
  read back; reading the .npy files apart).

Prints one JSON object with the medians, the ratios, both values, the machine's cores and its
load average before and after.
"""
import argparse, json, os, subprocess, tempfile, time
import numpy as np
import ot


def problem(n, m):
    rng = np.random.default_rng(0)
    x, y = rng.random((n, 2)), rng.random((m, 3))
    c1, c2 = ot.dist(x, x), ot.dist(y, y)
    return c1 / c1.max(), c2 / c2.max(), np.full(n, 1.0 / n), np.full(m, 1.0 / m)


def pot_run(c1, c2, p, q, eps, iters):
    t = time.perf_counter()
    T, log = ot.gromov.entropic_gromov_wasserstein(
        c1, c2, p, q, "square_loss", eps, max_iter=iters, tol=0.0, log=True)
    value = float(log["gw_dist"])
    try:  # torch tensors: wait for the device before stopping the clock
        import torch
        if torch.is_tensor(T) and T.is_cuda:
            torch.cuda.synchronize()
    except ImportError:
        pass
    return (time.perf_counter() - t) * 1e3, value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--m", type=int, default=None)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--eps", type=float, default=5e-3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--f32", action="store_true", help="logot in float32 (POT stays float64)")
    a = ap.parse_args()
    n = a.n
    m = a.m if a.m is not None else (5 * n + 3) // 4
    load0 = os.getloadavg()
    c1, c2, p, q = problem(n, m)
    med = lambda v: sorted(v)[len(v) // 2]

    pot = [pot_run(c1, c2, p, q, a.eps, a.iters) for _ in range(a.repeat)]
    out = {
        "problem": f"entropic GW n={n} m={m} eps={a.eps} outer={a.iters} square loss",
        "cores": os.cpu_count(),
        "pot_numpy_ms": med([t for t, _ in pot]),
        "pot_numpy_all_ms": [t for t, _ in pot],
        "pot_value": pot[0][1],
    }
    try:
        import torch
        if torch.cuda.is_available():
            tc = [torch.tensor(v, device="cuda") for v in (c1, c2, p, q)]
            pot_run(*tc, a.eps, 1)  # warm-up: CUDA context and kernels
            runs = [pot_run(*tc, a.eps, a.iters) for _ in range(a.repeat)]
            out["pot_torch_cuda_ms"] = med([t for t, _ in runs])
            out["pot_torch_cuda_value"] = runs[0][1]
    except ImportError:
        pass

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    build = ["cargo", "build", "--release", "-q", "-p", "logot-cli"]
    if a.backend == "cuda":
        build += ["--features", "cuda"]
    subprocess.run(build, cwd=root, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    with tempfile.TemporaryDirectory() as d:
        files = {}
        for name, arr in [("c1", c1), ("c2", c2), ("p", p), ("q", q)]:
            files[name] = os.path.join(d, name + ".npy")
            np.save(files[name], arr)
        cmd = [os.path.join(target, "release", "logot"), "gw",
               "--c1", files["c1"], "--c2", files["c2"], "--p", files["p"], "--q", files["q"],
               "--eps", str(a.eps), "--max-iters", str(a.iters), "--tol", "0",
               "--backend", a.backend] + (["--f32"] if a.f32 else [])
        runs = []
        for _ in range(a.repeat + (1 if a.backend == "cuda" else 0)):
            runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                                  text=True).stdout))
        if a.backend == "cuda":
            runs = runs[1:]  # the first run compiles the kernels
    lg_ms = [r["solve_ms"] for r in runs]
    out.update({
        "logot_backend": a.backend,
        "logot_dtype": runs[0]["dtype"],
        "logot_ms": med(lg_ms),
        "logot_all_ms": lg_ms,
        "logot_value": runs[0]["value"],
        "logot_inner_iterations": runs[0]["inner_iterations"],
        "logot_inner_unconverged": runs[0]["inner_unconverged"],
        "pot_numpy_over_logot": out["pot_numpy_ms"] / med(lg_ms),
        "relative_value_difference": abs(runs[0]["value"] - out["pot_value"]) / abs(out["pot_value"]),
        "load_before": load0,
        "load_after": os.getloadavg(),
    })
    if "pot_torch_cuda_ms" in out:
        out["pot_torch_cuda_over_logot"] = out["pot_torch_cuda_ms"] / med(lg_ms)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
