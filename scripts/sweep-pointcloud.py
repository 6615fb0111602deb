#!/usr/bin/env python3
"""Point clouds over shapes and data sets: `logot bench` against FlashSinkhorn in one run.

    python3 scripts/sweep-pointcloud.py --logot target/release/logot --flash-wheels WHEELS
        [--n 4096,10000,40000,200000] [--d 3,7,16,32,64,384,1024]
        [--data uniform,clustered,sphere] [--weights uniform,random]
        [--modes default,exact,tf32] [--eps-rel 0.05] [--seed 0] [--rounds 2] [--runs 3]
        [--budget SECONDS] [--out sweep.jsonl] [--fresh] [--no-autotune] [--cpu-only]

The grid is every (N, d, data, weights) cell of the lists given, N = 200000 only with
d <= 64 (--big-n-max-d), smallest cells first. For each cell:

1. `logot bench --backend cuda --problem otC64 --points N --dim D --data DATA --weights W
   --seed S --eps-rel R --json [--precision MODE]` for each logot precision mode ("default"
   runs without --precision); the first call also writes the clouds it drew with `--dump`.
   logot times 10 Sinkhorn iterations (20 half-steps) from zero potentials; each timed run
   ends with f read back to the host (`runs_ms`, after one untimed warm-up).
2. FlashSinkhorn 0.4.1 on the dumped clouds, with TF32 (its default) and strict fp32:
   `SamplesLoss("sinkhorn", backend="alternating", use_epsilon_scaling=False, eps=ε,
   n_iters=10, half_cost=False, normalize=False, debias=False, potentials=False,
   autotune=True, allow_tf32=…)(a, x, b, y)`, timed by the wall clock around the call and
   the read-back of its result (`.item()`), as logot's runs are; the CUDA-event time of the
   same runs is kept as `gpu_ms`. Two untimed warm-up calls first (autotuning).
3. Steps 1 and 2 alternate --rounds times (logot, Flash, logot, Flash, …; --runs timed runs
   each turn); the medians are over all timed runs of a side.

What is matched (read from the FlashSinkhorn 0.4.1 wheel, samples_loss.py and
sinkhorn_solvers.py): its cost is `cost_scale·|x − y|²` with `cost_scale = 1` unless
`half_cost=True`, the full squared Euclidean distance of logot's point clouds; its `eps` is
used as given in `exp(−C/ε)` when `use_epsilon_scaling=False` (no blur², no scaling), so it
gets the ε logot reports in meta.json (R × the mean cost of the drawn clouds); `a`, `b` are
the dumped weights (they sum to 1; `normalize=False` passes them unchanged); 10 iterations,
each an f-update and a g-update, are logot's 20 half-steps. FlashSinkhorn centres the clouds
(the cost is unchanged) and with TF32 rounds the centred coordinates to TF32. What differs:
logot starts from zero potentials in its convention (`P = exp((f + g − C)/ε)`) with the
g-update first; FlashSinkhorn from zero in GeomLoss's (`P = a·b·exp(…)`) with the f-update
first. Both do the same work per iteration; their iterates agree up to constants only for
uniform weights.

Writes one JSON line per cell to --out (appended as each cell ends, so a run stopped by a
time limit keeps what it measured; cells already in the file are skipped unless --fresh),
then prints a markdown table: every cell with the medians and the ratios logot/Flash
(default and the fastest logot mode over Flash TF32, exact over Flash fp32), the worst and
best cell and the geometric mean of each ratio, and per shape (N, d) the slowest data set
over uniform data with uniform weights, for each logot mode and for Flash TF32.

--cpu-only runs logot on the CPU backend (modes: default only unless --modes is given) and
skips FlashSinkhorn and torch: the check that the script runs, on a small grid.
"""
import argparse, glob, itertools, json, math, os, shutil, statistics, subprocess, sys, tempfile, time

ITERS = 10


def ints(s):
    return [int(v) for v in s.split(",") if v]


def words(s):
    return [v for v in s.split(",") if v]


def median(v):
    return statistics.median(v) if v else float("nan")


def logot_bench(args, cell, mode, dump=None):
    n, d, data, weights = cell
    cmd = [args.logot, "bench", "--backend", "cpu" if args.cpu_only else "cuda",
           "--problem", "otC64", "--points", str(n), "--dim", str(d), "--data", data,
           "--weights", weights, "--seed", str(args.seed), "--eps-rel", str(args.eps_rel),
           "--runs", str(args.runs), "--json"]
    if mode != "default":
        cmd += ["--precision", mode]
    if dump:
        cmd += ["--dump", dump]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout)


class Flash:
    """FlashSinkhorn on one dumped problem, TF32 and strict fp32."""

    def __init__(self, dump, meta, autotune):
        import numpy as np
        import torch
        from flash_sinkhorn import SamplesLoss
        self.torch = torch
        load = lambda name: torch.from_numpy(np.load(os.path.join(dump, name)).astype(np.float32)).cuda()
        self.x, self.y, self.a, self.b = load("x.npy"), load("y.npy"), load("a.npy"), load("b.npy")
        self.loss = {
            tf32: SamplesLoss("sinkhorn", backend="alternating", use_epsilon_scaling=False,
                              eps=float(meta["eps"]), n_iters=ITERS, half_cost=False,
                              normalize=False, debias=False, potentials=False,
                              autotune=autotune, allow_tf32=tf32)
            for tf32 in (True, False)
        }
        self.warm = set()

    def time(self, tf32, runs):
        torch, fn = self.torch, self.loss[tf32]
        call = lambda: fn(self.a, self.x, self.b, self.y)
        if tf32 not in self.warm:
            for _ in range(2):
                call().item()
            self.warm.add(tf32)
        wall, gpu, value = [], [], None
        for _ in range(runs):
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t = time.perf_counter()
            start.record()
            out = call()
            end.record()
            value = out.item()
            wall.append((time.perf_counter() - t) * 1e3)
            gpu.append(start.elapsed_time(end))
        return wall, gpu, value


def run_cell(args, cell, workdir):
    n, d, data, weights = cell
    dump = os.path.join(workdir, f"n{n}_d{d}_{data}_{weights}")
    logot = {m: {"runs_ms": []} for m in args.modes}
    flash = {} if args.cpu_only else {k: {"runs_ms": [], "gpu_ms": []} for k in ("tf32", "fp32")}
    meta, solver = None, None
    for r in range(args.rounds):
        for mode in args.modes:
            j = logot_bench(args, cell, mode, dump if meta is None else None)
            if meta is None:
                with open(os.path.join(dump, "meta.json")) as f:
                    meta = json.load(f)
            rec = logot[mode]
            rec["runs_ms"] += j["runs_ms"]
            rec["precision"] = j.get("precision")
            rec["marginal_error"] = j.get("marginal_error")
            rec["f_first"] = j.get("f_first")
        if not args.cpu_only:
            if solver is None:
                solver = Flash(dump, meta, args.autotune)
            for key, tf32 in (("tf32", True), ("fp32", False)):
                wall, gpu, value = solver.time(tf32, args.runs)
                flash[key]["runs_ms"] += wall
                flash[key]["gpu_ms"] += gpu
                flash[key]["cost"] = value
    for rec in list(logot.values()) + list(flash.values()):
        rec["ms"] = median(rec["runs_ms"])
        if "gpu_ms" in rec:
            rec["gpu_ms_median"] = median(rec["gpu_ms"])
    shutil.rmtree(dump, ignore_errors=True)
    row = {"n": n, "d": d, "data": data, "weights": weights, "seed": args.seed,
           "eps": meta["eps"], "eps_rel": args.eps_rel, "mean_cost": meta["mean_cost"],
           "iterations": ITERS, "backend": "cpu" if args.cpu_only else "cuda",
           "logot": logot, "flash": flash or None}
    row["ratios"] = ratios(row)
    return row


def ratios(row):
    """logot over Flash: default and the fastest mode over TF32, exact over fp32."""
    lg, fl = row["logot"], row["flash"]
    if not fl:
        return {}
    out = {}
    if "default" in lg:
        out["default_over_tf32"] = lg["default"]["ms"] / fl["tf32"]["ms"]
    out["fastest_over_tf32"] = min(r["ms"] for r in lg.values()) / fl["tf32"]["ms"]
    if "exact" in lg:
        out["exact_over_fp32"] = lg["exact"]["ms"] / fl["fp32"]["ms"]
    return out


def key(row):
    return (row["n"], row["d"], row["data"], row["weights"])


def report(rows, modes):
    cols = [f"logot {m} (ms)" for m in modes]
    flash = any(r["flash"] for r in rows)
    if flash:
        cols += ["Flash TF32 (ms)", "Flash fp32 (ms)", "default / TF32", "fastest / TF32",
                 "exact / fp32"]
    print("| N = M | d | data | weights | ε | " + " | ".join(cols) + " |")
    print("|---" * (5 + len(cols)) + "|")
    fmt = lambda v: "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"
    for r in rows:
        cells = [fmt(r["logot"].get(m, {}).get("ms")) for m in modes]
        if flash:
            fl, q = r["flash"] or {}, r["ratios"]
            cells += [fmt(fl.get("tf32", {}).get("ms")), fmt(fl.get("fp32", {}).get("ms")),
                      fmt(q.get("default_over_tf32")), fmt(q.get("fastest_over_tf32")),
                      fmt(q.get("exact_over_fp32"))]
        print(f"| {r['n']} | {r['d']} | {r['data']} | {r['weights']} | {r['eps']:.4g} | "
              + " | ".join(cells) + " |")
    print()
    if flash:
        for name in ("default_over_tf32", "fastest_over_tf32", "exact_over_fp32"):
            vals = [(r["ratios"][name], r) for r in rows if name in r["ratios"]]
            if not vals:
                continue
            worst, best = max(vals, key=lambda v: v[0]), min(vals, key=lambda v: v[0])
            geo = math.exp(sum(math.log(v) for v, _ in vals) / len(vals))
            where = lambda r: f"N = {r['n']}, d = {r['d']}, {r['data']}, {r['weights']} weights"
            print(f"- {name}: worst {worst[0]:.3f} ({where(worst[1])}), best {best[0]:.3f} "
                  f"({where(best[1])}), geometric mean {geo:.3f} over {len(vals)} cells")
        print()
    # Data dependence: per shape, the slowest data set over uniform data with uniform weights.
    sides = [(f"logot {m}", lambda r, m=m: r["logot"].get(m, {}).get("ms")) for m in modes]
    if flash:
        sides.append(("Flash TF32", lambda r: (r["flash"] or {}).get("tf32", {}).get("ms")))
    print("| N = M | d | " + " | ".join(f"{s}: slowest / uniform" for s, _ in sides) + " |")
    print("|---|---" + "|---" * len(sides) + "|")
    shapes = sorted({(r["n"], r["d"]) for r in rows})
    for n, d in shapes:
        group = [r for r in rows if (r["n"], r["d"]) == (n, d)]
        base = next((r for r in group if (r["data"], r["weights"]) == ("uniform", "uniform")), None)
        cells = []
        for _, ms in sides:
            if base is None or ms(base) is None:
                cells.append("—")
                continue
            worst = max(group, key=lambda r: ms(r) or 0.0)
            cells.append(f"{ms(worst) / ms(base):.3f} ({worst['data']}, {worst['weights']} weights)")
        print(f"| {n} | {d} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logot", default="target/release/logot")
    ap.add_argument("--flash-wheels", default=None,
                    help="a folder of wheels (FlashSinkhorn 0.4.1) to pip install --no-deps first")
    ap.add_argument("--n", type=ints, default=[4096, 10000, 40000, 200000])
    ap.add_argument("--d", type=ints, default=[3, 7, 16, 32, 64, 384, 1024])
    ap.add_argument("--data", type=words, default=["uniform", "clustered", "sphere"])
    ap.add_argument("--weights", type=words, default=["uniform", "random"])
    ap.add_argument("--modes", type=words, default=None,
                    help="logot precisions: default (no --precision), exact, tf32x3, tf32, "
                         "f16x2, f16 (default: default,exact,tf32; default alone on the CPU)")
    ap.add_argument("--big-n", type=int, default=200000)
    ap.add_argument("--big-n-max-d", type=int, default=64,
                    help="cells with N >= --big-n run only at d <= this")
    ap.add_argument("--eps-rel", type=float, default=0.05, help="ε = R × the mean cost")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="timed runs per turn of each side")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds: start no new cell after this much time")
    ap.add_argument("--out", default="sweep-pointcloud.jsonl")
    ap.add_argument("--fresh", action="store_true", help="overwrite --out instead of resuming")
    ap.add_argument("--no-autotune", dest="autotune", action="store_false",
                    help="FlashSinkhorn with its default block sizes")
    ap.add_argument("--cpu-only", action="store_true")
    args = ap.parse_args()
    if args.modes is None:
        args.modes = ["default"] if args.cpu_only else ["default", "exact", "tf32"]
    if args.flash_wheels and not args.cpu_only:
        wheels = sorted(glob.glob(os.path.join(args.flash_wheels, "*.whl")))
        if not wheels:
            sys.exit(f"no wheels in {args.flash_wheels}")
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", *wheels], check=True)

    cells = [c for c in itertools.product(args.n, args.d, args.data, args.weights)
             if c[0] < args.big_n or c[1] <= args.big_n_max_d]
    cells.sort(key=lambda c: (c[0] * c[0] * max(c[1], 16), c))
    done = {}
    if os.path.exists(args.out) and not args.fresh:
        with open(args.out) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    done[key(r)] = r
    elif args.fresh and os.path.exists(args.out):
        os.remove(args.out)
    start, rows, skipped = time.time(), [], []
    with tempfile.TemporaryDirectory(prefix="sweep-pointcloud-") as workdir:
        for cell in cells:
            if cell in done:
                rows.append(done[cell])
                continue
            if args.budget is not None and time.time() - start > args.budget:
                skipped.append(cell)
                continue
            t = time.time()
            try:
                row = run_cell(args, cell, workdir)
            except Exception as e:  # a cell that fails is reported, the sweep goes on
                print(f"cell {cell} failed: {e}", file=sys.stderr, flush=True)
                continue
            row["wall_s"] = time.time() - t
            rows.append(row)
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"cell N = {cell[0]}, d = {cell[1]}, {cell[2]}, {cell[3]} weights: "
                  f"{row['wall_s']:.1f} s", file=sys.stderr, flush=True)
    rows.sort(key=lambda r: (r["n"], r["d"], r["data"], r["weights"]))
    report(rows, args.modes)
    if skipped:
        print(f"\n{len(skipped)} cells not run within the budget: "
              + ", ".join(f"({n}, {d}, {data}, {w})" for n, d, data, w in skipped))


if __name__ == "__main__":
    main()
