"""The Python layer's overhead on a small problem: `logot.wasserstein` (n = 100) against the
same library call timed in Rust.

    python python/bench/overhead.py [--n 100] [--repeats 2000] [--rounds 7] [--json]

The figure is measured inside each call. The bindings time the library work they do (the
`Problem::batch` and `Solver::solve` a Rust program would call, with `std::time::Instant`)
and `logot._logot._last_compute_seconds()` returns it, so a call's overhead is its
`time.perf_counter_ns` wall time minus the time of its own Rust computation: the argument
handling, the conversions, the GIL release and the result. Both halves see the same inputs,
the same heap and the same machine load. The overhead is the median over calls (per round,
then over rounds).

A separate Rust-timed call (`logot._logot._time_wasserstein`: `Solver::solve(&Problem::new
(..))` from a plain thread, as small dense problems, B·n·m < 2^16, run in the Python call;
`--on-pool` on a rayon worker, the larger problems' path) follows each Python call, and the
median paired difference is reported beside. It is the weaker figure: the same solve can
run tens of microseconds faster in one of the two paths in one process and slower in the
next (where its buffers land in the heap), which drowns an overhead of a few.

The CPU time of the calling thread per call (`time.thread_time_ns`) is reported too, with
the same figure for a bare call into the compiled module, the floor of any Python-to-Rust
call. Set RAYON_NUM_THREADS=1 on a busy machine for steadier numbers.
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
    inside = logot._logot._last_compute_seconds
    for _ in range(args.rounds):
        calls = []
        for _ in range(args.repeats):
            t = time.perf_counter_ns()
            logot.wasserstein(mu, nu, cost, eps)
            py = (time.perf_counter_ns() - t) * 1e-9
            calls.append((py, inside(), rust(mu, nu, cost, eps, 1, args.on_pool)[0]))
        rounds.append((
            statistics.median(py for py, _, _ in calls),
            statistics.median(rs for _, _, rs in calls),
            statistics.median(py - rs for py, _, rs in calls),
            statistics.median(py - own for py, own, _ in calls),
        ))
    overhead = statistics.median(d for *_, d in rounds)
    paired = statistics.median(d for _, _, d, _ in rounds)
    cpu_layer = statistics.median(thread_cpu(lambda: logot.wasserstein(mu, nu, cost, eps), args.repeats))
    cpu_bare = statistics.median(thread_cpu(lambda: rust(mu, nu, cost, eps, 1, True), args.repeats))
    result = {
        "n": args.n,
        "eps": eps,
        "rust_on_pool": args.on_pool,
        "iterations": r.convergence.iterations,
        "python_us": statistics.median(py for py, *_ in rounds) * 1e6,
        "rust_us": statistics.median(rs for _, rs, *_ in rounds) * 1e6,
        "overhead_us": overhead * 1e6,
        "paired_difference_us": paired * 1e6,
        "rounds_us": [[v * 1e6 for v in round_] for round_ in rounds],
        "python_thread_cpu_us": cpu_layer * 1e6,
        "bare_call_thread_cpu_us": cpu_bare * 1e6,
    }
    if args.json:
        print(json.dumps(result))
    else:
        where = "on a rayon worker" if args.on_pool else "from a plain thread"
        print(f"n = {args.n}, eps = {eps}, {r.convergence.iterations} iterations; Rust timed {where}")
        for py, rs, d, own in rounds:
            print(f"  python {py * 1e6:9.1f} us   overhead in the call {own * 1e6:6.1f} us   "
                  f"separate rust call {rs * 1e6:9.1f} us   paired difference {d * 1e6:7.1f} us")
        print(f"median overhead of the Python call over its own Rust computation: {overhead * 1e6:.1f} us")
        print(f"median paired difference against a separate Rust-timed call: {paired * 1e6:.1f} us")
        print(f"CPU time of the calling thread per logot.wasserstein call: {cpu_layer * 1e6:.1f} us "
              f"(a bare call into the module: {cpu_bare * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
