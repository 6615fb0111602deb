"""`logot.torch.bistochastic` forward + backward on CUDA tensors (the hyper-connection shape:
B = 65536 matrices 16×16, float32), timed with CUDA events on the current stream.

    python python/bench/torch_bistochastic.py [--batch 65536] [--n 16] [--iters 20]
                                              [--dtype float32] [--repeats 50] [--warmup 10]
                                              [--chain 20] [--host]

Prints one JSON object (times in milliseconds, medians over `repeats` after `warmup` calls):

* ``forward_ms``: ``r = lt.bistochastic(x)`` (autograd graph recorded);
* ``backward_ms``: ``r.backward(g)`` (the implicit backward);
* ``total_ms``: forward and backward in one timed region;
* ``total_pipelined_ms``: ``--chain`` forward + backward pairs queued back to back in one
  timed region, per pair (no call waits for the GPU, so the host's per-call work overlaps
  the kernels: the cost in a training loop);
* ``total_graph_ms``: the pair captured once into a CUDA graph (``torch.cuda.graph``),
  replayed ``--chain`` times per timed region, per pair (no host work per call: the cost in a
  captured training step, e.g. ``torch.compile(mode="reduce-overhead")``);
* ``forward_kernel_ms`` / ``backward_kernel_ms``: the compiled module's in-place entry
  points called directly on preallocated tensors (the library's kernels, the statistics
  left on the device, without autograd or the Python layer): the reference for the layer's
  cost;
* with ``--host``: ``host_total_ms``, the same forward and backward through numpy arrays and
  the CUDA backend (two host round trips: the host-array path);
* ``max_abs_diff_vs_host`` (with ``--host``): the largest difference between the two paths'
  R and dX (0 expected: the same kernels on the same data).

Needs only torch, numpy and logot (the wheel of python/scripts/build-gpu-wheel.sh).
"""

import argparse
import json
import statistics

import torch

import logot
import logot.torch as lt
from logot import _logot


def timed(fn, repeats, warmup):
    """Median GPU time of `fn()` in ms (CUDA events on the current stream)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times), times


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--chain", type=int, default=20, help="pairs queued per timed region (pipelined)")
    p.add_argument("--host", action="store_true", help="also time the host-copy path")
    args = p.parse_args()
    dtype = getattr(torch, args.dtype)
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    b, n = args.batch, args.n
    # mhc16: X ~ U[0, 4), G ~ N(0, 1).
    x = (4 * torch.rand(b, n, n, device=dev, dtype=dtype, generator=gen)).requires_grad_()
    g = torch.randn(b, n, n, device=dev, dtype=dtype, generator=gen)

    def forward():
        return lt.bistochastic(x, args.iters)

    r = forward()

    def backward():
        x.grad = None
        r.backward(g, retain_graph=True)

    def total():
        x.grad = None
        lt.bistochastic(x, args.iters).backward(g)

    fwd, _ = timed(forward, args.repeats, args.warmup)
    bwd, _ = timed(backward, args.repeats, args.warmup)
    tot, tot_all = timed(total, args.repeats, args.warmup)

    def chain():
        for _ in range(args.chain):
            total()

    piped, _ = timed(chain, max(5, args.repeats // 5), 2)
    lt.bistochastic_stats()

    # The pair captured into a CUDA graph (torch's recipe: warm-up on a side stream), replayed
    # `chain` times per timed region: the layer without host work per call. A leaf of its
    # own: the graphs above keep `x`'s gradient accumulator on the default stream, which a
    # capture cannot depend on.
    xg = x.detach().clone().requires_grad_()

    def step():
        xg.grad = None
        lt.bistochastic(xg, args.iters).backward(g)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    xg.grad = None
    with torch.cuda.graph(graph):
        lt.bistochastic(xg, args.iters).backward(g)

    def replays():
        for _ in range(args.chain):
            graph.replay()

    graphed, _ = timed(replays, max(5, args.repeats // 5), 2)

    # The in-place entry points alone, on preallocated tensors.
    xd, rd, dxd = x.detach().contiguous(), torch.empty_like(x), torch.empty_like(x)
    device = x.device.index or 0
    cap = torch.utils.dlpack.to_dlpack

    def stream():
        return torch.cuda.current_stream(device).cuda_stream

    fwd_words, bwd_words = _logot._bistochastic_words(b, device)
    sw = torch.empty(fwd_words, dtype=torch.int64, device=dev)
    bw = torch.empty(bwd_words, dtype=torch.int64, device=dev)

    def fwd_kernel():
        _logot._bistochastic_cuda(cap(xd), (cap(rd), cap(sw)), args.iters, 0.0, stream(), False)

    def bwd_kernel():
        _logot._bistochastic_backward_cuda(cap(rd), cap(g), (cap(dxd), cap(bw)), (None, 1000), stream(), False)

    fwd_k, _ = timed(fwd_kernel, args.repeats, args.warmup)
    bwd_k, _ = timed(bwd_kernel, args.repeats, args.warmup)

    out = {
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "logot": logot.__version__,
        "batch": b,
        "n": n,
        "iters": args.iters,
        "dtype": args.dtype,
        "repeats": args.repeats,
        "zero_copy": lt.CUDA_ZERO_COPY,
        "forward_ms": fwd,
        "backward_ms": bwd,
        "total_ms": tot,
        "total_ms_min": min(tot_all),
        "total_pipelined_ms": piped / args.chain,
        "forward_kernel_ms": fwd_k,
        "backward_kernel_ms": bwd_k,
        "layer_overhead_ms": tot - (fwd_k + bwd_k),
        "pipelined_vs_kernels": piped / args.chain / (fwd_k + bwd_k),
        "total_graph_ms": graphed / args.chain,
        "graph_vs_kernels": graphed / args.chain / (fwd_k + bwd_k),
    }
    if args.host:
        xh, gh = x.detach().cpu().numpy(), g.cpu().numpy()

        def host():
            rh = logot.bistochastic(xh, args.iters, backend="cuda").r
            dxh = logot.bistochastic_backward(rh, gh, backend="cuda").dx
            return torch.from_numpy(rh).to(dev), torch.from_numpy(dxh).to(dev)

        out["host_total_ms"], _ = timed(host, max(5, args.repeats // 5), 2)
        rh, dxh = host()
        x.grad = None
        r = lt.bistochastic(x, args.iters)
        r.backward(g)
        out["max_abs_diff_vs_host"] = max(float((r.detach() - rh).abs().max()), float((x.grad - dxh).abs().max()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
