"""The Python layer's overhead on a small problem: `logot.wasserstein` (n = 100) against the
same library call timed in Rust.

    python python/bench/overhead.py [--n 100] [--repeats 2000] [--rounds 7] [--json]

The Rust side (`logot._logot._time_wasserstein`) times `Solver::solve(&Problem::new(..))`
per call with `std::time::Instant`, either from a plain thread (as a Rust program calls the
library, and as the Python call runs small dense problems, B·n·m < 2^16, where no kernel
splits: the like-for-like reference at n = 100) or on a rayon worker (`--on-pool`: the path
the Python call takes for larger problems, which saves a thread hand-off per kernel); the
Python side
times `logot.wasserstein(mu, nu, cost, eps)` per call with `time.perf_counter_ns`, which adds
the argument handling, the conversions, the GIL release and the result. The two are
measured in alternating pairs (one Python call, then one Rust-timed call) so that both see
the same machine load; the overhead is the median over pairs of (Python − Rust), which is
robust to load that drifts between pairs. Set RAYON_NUM_THREADS=1 on a busy machine for
steadier numbers.

On a machine with more runnable threads than cores, wall-clock differences of a few
microseconds drown in scheduling delays. The script therefore also reports the CPU time of
the calling (Python) thread per call (`time.thread_time_ns`): the compute runs on a rayon
worker, so this is the Python layer's and the bindings' own work (argument handling,
conversions, results), unaffected by other processes; the same figure for a bare call of
the compiled timing function gives the floor of any Python-to-Rust call.
"""

import argparse
import json
import statistics
import time

import numpy as np

import logot


def problem(n):
    """otA-like: two Gaussian bumps on linspace(0, 100, n), cost (x_i − x_j)²/max."""
    x = np.linspace(0, 100, n)
    mu = np.exp(-0.5 * ((x - 20) / 10) ** 2)
    nu = np.exp(-0.5 * ((x - 60) / 30) ** 2)
    cost = (x[:, None] - x[None, :]) ** 2
    return mu / mu.sum(), nu / nu.sum(), cost / cost.max()


def python_times(mu, nu, cost, eps, repeats):
    out = []
    for _ in range(repeats):
        t = time.perf_counter_ns()
        logot.wasserstein(mu, nu, cost, eps)
        out.append((time.perf_counter_ns() - t) * 1e-9)
    return out


def thread_cpu(call, repeats):
    out = []
    for _ in range(repeats):
        t = time.thread_time_ns()
        call()
        out.append((time.thread_time_ns() - t) * 1e-9)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--eps", type=float, default=1e-2)
    p.add_argument("--repeats", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--on-pool", action="store_true", help="time the Rust call on a rayon worker")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    mu, nu, cost = problem(args.n)
    eps = args.eps
    r = logot.solve(mu, nu, cost, eps)
    # Warm up both paths.
    python_times(mu, nu, cost, eps, 200)
    logot._logot._time_wasserstein(mu, nu, cost, eps, 200, args.on_pool)
    rounds = []
    rust = logot._logot._time_wasserstein
    for _ in range(args.rounds):
        pairs = []
        for _ in range(args.repeats):
            t = time.perf_counter_ns()
            logot.wasserstein(mu, nu, cost, eps)
            py = (time.perf_counter_ns() - t) * 1e-9
            pairs.append((py, rust(mu, nu, cost, eps, 1, args.on_pool)[0]))
        rounds.append((
            statistics.median(py for py, _ in pairs),
            statistics.median(rs for _, rs in pairs),
            statistics.median(py - rs for py, rs in pairs),
        ))
    overhead = statistics.median(d for _, _, d in rounds)
    cpu_layer = statistics.median(thread_cpu(lambda: logot.wasserstein(mu, nu, cost, eps), args.repeats))
    cpu_bare = statistics.median(thread_cpu(lambda: rust(mu, nu, cost, eps, 1, True), args.repeats))
    result = {
        "n": args.n,
        "eps": eps,
        "rust_on_pool": args.on_pool,
        "iterations": r.convergence.iterations,
        "python_us": statistics.median(py for py, _, _ in rounds) * 1e6,
        "rust_us": statistics.median(rs for _, rs, _ in rounds) * 1e6,
        "overhead_us": overhead * 1e6,
        "rounds_us": [[py * 1e6, rs * 1e6, d * 1e6] for py, rs, d in rounds],
        "python_thread_cpu_us": cpu_layer * 1e6,
        "bare_call_thread_cpu_us": cpu_bare * 1e6,
    }
    if args.json:
        print(json.dumps(result))
    else:
        where = "on a rayon worker" if args.on_pool else "from a plain thread"
        print(f"n = {args.n}, eps = {eps}, {r.convergence.iterations} iterations; Rust timed {where}")
        for py, rs, d in rounds:
            print(f"  python {py * 1e6:9.1f} us   rust {rs * 1e6:9.1f} us   paired difference {d * 1e6:7.1f} us")
        print(f"median overhead of the Python call (wall clock, paired): {overhead * 1e6:.1f} us")
        print(f"CPU time of the calling thread per logot.wasserstein call: {cpu_layer * 1e6:.1f} us "
              f"(a bare call into the module: {cpu_bare * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
