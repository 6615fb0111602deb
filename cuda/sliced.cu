// 1-D and sliced Wasserstein on the GPU, in f64: L problems on the line at once (the
// projections ⟨θ_l, x_i⟩ of two clouds on L directions, or L given pairs of lines).
//
// 1. sw_project: keys[l·P + i] = key(⟨θ_l, x_i⟩) (an unsigned key of the same order as the
//    reals, the CPU's `sort::key`), the point index as payload; positions n ≤ i < P (P the
//    power of two at or above n) hold the largest key, so they sort last. The dot product is
//    summed t = 0, 1, … without contraction, as the CPU sums it.
// 2. A bitonic sort of every segment of P (key, index) pairs in the total order of the pairs
//    (ties broken by index: the order of a stable sort): sw_sort_tiles sorts tiles of
//    SW_TILE pairs in shared memory, then for each size k > SW_TILE one sw_merge_step per
//    stride j ≥ SW_TILE over global memory and one sw_merge_tiles for the strides below.
// 3. sw_cumulate: the cumulative weights F_k = Σ_{k' ≤ k} w_(k') of each sorted side (one
//    block per segment, a scan in a fixed order); the second side's are clamped to the
//    first side's total so that both partition the same interval (0, F_tot].
// 4. sw_line: sorted point k of one side covers the quantiles (F_{k−1}, F_k]; it meets the
//    points j of the other side whose (G_{j−1}, G_j] overlap it, each overlap of length
//    len adding len·h(u_k − v_j) to its cost and len·h'(u_k − v_j) to its derivative (the
//    envelope theorem: ∂W/∂u_k = Σ_j P_kj h'(u_k − v_j)), written at the point's input
//    index. The pieces are those of the CPU's walk (the north-west corner rule).
// 5. sw_sum_rows: W_p^p of each segment, the costs summed in a fixed order;
//    sw_grad_points: ∂/∂x_i = scale · Σ_l s^l_i θ_l, l in order.

#include "common.cuh"

// Pairs a block sorts in shared memory (two per thread).
#define SW_TILE 2048
#define SW_TILE_THREADS 1024
// Threads of the scans and sums (one block per segment).
#define SW_SEG_THREADS 1024
// Threads of the elementwise kernels.
#define SW_THREADS 256

#define SW_PAD_KEY 0xffffffffffffffffULL
#define SW_PAD_INDEX 0xffffffffu

// The key of x: integer order = order of the reals (sign bit flipped for x ≥ 0, every bit
// for x < 0).
__device__ __forceinline__ u64 sw_key(double x) {
  const u64 b = (u64)__double_as_longlong(x);
  return b ^ ((u64)((long long)b >> 63) | 0x8000000000000000ULL);
}
__device__ __forceinline__ double sw_value(u64 k) {
  return __longlong_as_double((long long)((k >> 63) ? (k ^ 0x8000000000000000ULL) : ~k));
}

// h(t) = |t|^p and h'(t) (0 at t = 0).
__device__ __forceinline__ double sw_h(double t, double p) {
  if (p == 1.0) return fabs(t);
  if (p == 2.0) return t * t;
  return pow(fabs(t), p);
}
__device__ __forceinline__ double sw_dh(double t, double p) {
  if (p == 2.0) return 2.0 * t;
  if (t == 0.0) return 0.0;
  const double s = t > 0.0 ? 1.0 : -1.0;
  if (p == 1.0) return s;
  return p * pow(fabs(t), p - 1.0) * s;
}

// keys/idx of segment l = blockIdx.y: ⟨θ_l, x_i⟩ for the cloud x + l·xstride (n×d,
// row-major; xstride = 0 when every segment projects the same cloud), θ_l = theta[l·d ..].
extern "C" __global__ void sw_project(const double *x, long long xstride, long long n, int d,
                                      const double *theta, long long P, u64 *keys, u32 *idx) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long l = blockIdx.y;
  if (i >= P) return;
  const long long o = l * P + i;
  if (i < n) {
    const double *xi = x + l * xstride + i * d;
    const double *th = theta + l * d;
    double s = 0.0;
    for (int t = 0; t < d; ++t) s = __dadd_rn(s, __dmul_rn(xi[t], th[t]));
    keys[o] = sw_key(s);
    idx[o] = (u32)i;
  } else {
    keys[o] = SW_PAD_KEY;
    idx[o] = SW_PAD_INDEX;
  }
}

__device__ __forceinline__ bool sw_greater(u64 ka, u32 ia, u64 kb, u32 ib) {
  return ka > kb || (ka == kb && ia > ib);
}

// One compare-exchange step of the bitonic network of size k at stride j over `tile`
// pairs in shared memory; `first` is the segment position of the tile's first pair.
__device__ __forceinline__ void sw_tile_step(u64 *k_s, u32 *i_s, long long tile,
                                             long long first, long long k, long long j) {
  for (long long q = threadIdx.x; q < tile / 2; q += blockDim.x) {
    const long long a = 2 * q - (q & (j - 1));
    const long long b = a + j;
    const bool up = ((first + a) & k) == 0;
    const u64 ka = k_s[a], kb = k_s[b];
    const u32 ia = i_s[a], ib = i_s[b];
    if (sw_greater(ka, ia, kb, ib) == up) {
      k_s[a] = kb;
      k_s[b] = ka;
      i_s[a] = ib;
      i_s[b] = ia;
    }
  }
  __syncthreads();
}

// Sort each tile of `tile` pairs (a power of two ≤ SW_TILE dividing P), in the direction
// the bitonic network of size 2·tile gives it.
extern "C" __global__ void __launch_bounds__(SW_TILE_THREADS)
    sw_sort_tiles(u64 *keys, u32 *idx, long long P, long long tile) {
  __shared__ u64 k_s[SW_TILE];
  __shared__ u32 i_s[SW_TILE];
  const long long base = (long long)blockIdx.x * tile;
  const long long first = base % P;
  for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
    k_s[t] = keys[base + t];
    i_s[t] = idx[base + t];
  }
  __syncthreads();
  for (long long k = 2; k <= tile; k <<= 1)
    for (long long j = k >> 1; j > 0; j >>= 1) sw_tile_step(k_s, i_s, tile, first, k, j);
  for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
    keys[base + t] = k_s[t];
    idx[base + t] = i_s[t];
  }
}

// The strides j < tile of the bitonic network of size k, each tile in shared memory.
extern "C" __global__ void __launch_bounds__(SW_TILE_THREADS)
    sw_merge_tiles(u64 *keys, u32 *idx, long long P, long long tile, long long k) {
  __shared__ u64 k_s[SW_TILE];
  __shared__ u32 i_s[SW_TILE];
  const long long base = (long long)blockIdx.x * tile;
  const long long first = base % P;
  for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
    k_s[t] = keys[base + t];
    i_s[t] = idx[base + t];
  }
  __syncthreads();
  for (long long j = tile >> 1; j > 0; j >>= 1) sw_tile_step(k_s, i_s, tile, first, k, j);
  for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
    keys[base + t] = k_s[t];
    idx[base + t] = i_s[t];
  }
}

// One stride j ≥ SW_TILE of the bitonic network of size k ≤ P over `pairs` = total/2
// compare-exchanges (segments of P never mix: j < P).
extern "C" __global__ void sw_merge_step(u64 *keys, u32 *idx, long long P, long long pairs,
                                         long long k, long long j) {
  const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pairs) return;
  const long long a = 2 * q - (q & (j - 1));
  const long long b = a + j;
  const bool up = ((a & (P - 1)) & k) == 0;
  const u64 ka = keys[a], kb = keys[b];
  const u32 ia = idx[a], ib = idx[b];
  if (sw_greater(ka, ia, kb, ib) == up) {
    keys[a] = kb;
    keys[b] = ka;
    idx[a] = ib;
    idx[b] = ia;
  }
}

// F[l·n + k] = Σ_{k' ≤ k} w(idx[l·P + k']) for segment l = blockIdx.x, with w = weights +
// l·wstride (by input index), or (k + 1)·uniform when weights is null. With `total` (the
// first side's cumulative weights, ntotal a segment), every F is clamped to that side's
// total and the last one set to it.
extern "C" __global__ void __launch_bounds__(SW_SEG_THREADS)
    sw_cumulate(const u32 *idx, long long P, long long n, const double *weights,
                long long wstride, double uniform, const double *total, long long ntotal,
                double *F) {
  __shared__ double warp_sums[SW_SEG_THREADS / 32];
  __shared__ double carry_s;
  const long long l = blockIdx.x;
  double *Fl = F + l * n;
  const double cap = total ? total[l * ntotal + ntotal - 1] : 0.0;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  if (threadIdx.x == 0) carry_s = 0.0;
  __syncthreads();
  for (long long c = 0; c < n; c += blockDim.x) {
    const long long k = c + threadIdx.x;
    double v;
    if (weights) {
      // An inclusive scan of the chunk: within each warp, then across the warps.
      double w = k < n ? weights[l * wstride + idx[l * P + k]] : 0.0;
      for (int off = 1; off < 32; off <<= 1) {
        const double o = __shfl_up_sync(0xffffffffu, w, off);
        if (lane >= off) w += o;
      }
      if (lane == 31) warp_sums[warp] = w;
      __syncthreads();
      double before = carry_s;
      for (int q = 0; q < warp; ++q) before += warp_sums[q];
      v = before + w;
      __syncthreads();
      if (threadIdx.x == blockDim.x - 1) {
        double all = carry_s;
        for (int q = 0; q < warps; ++q) all += warp_sums[q];
        carry_s = all;
      }
      __syncthreads();
    } else {
      v = (double)(k + 1) * uniform;
    }
    if (k < n) {
      if (total) v = (k == n - 1) ? cap : fmin(v, cap);
      Fl[k] = v;
    }
  }
}

// Segment l = blockIdx.y, sorted point k of side u (n points, keys at ku + l·Pu, cumulative
// weights F + l·n) against side v (m points, kv + l·Pv, G + l·m): cost[l·n + k] = Σ_j
// len·h(u_k − v_j) over the overlaps (when cost is not null) and, with grad,
// grad[l·n + idx] = Σ_j len·h'(u_k − v_j) at the point's input index.
extern "C" __global__ void sw_line(const u64 *ku, const u32 *iu, const double *F, long long n,
                                   long long Pu, const u64 *kv, const double *G, long long m,
                                   long long Pv, double p, double *cost, double *grad) {
  const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long l = blockIdx.y;
  if (k >= n) return;
  const double *Fl = F + l * n;
  const double *Gl = G + l * m;
  const double e = Fl[k];
  const double s = k > 0 ? Fl[k - 1] : 0.0;
  const double u = sw_value(ku[l * Pu + k]);
  double c = 0.0, g = 0.0;
  if (e > s) {
    // The first j with G_j > s (G_{m−1} is the common total ≥ e > s).
    long long lo = 0, hi = m - 1;
    while (lo < hi) {
      const long long mid = lo + (hi - lo) / 2;
      if (Gl[mid] > s)
        hi = mid;
      else
        lo = mid + 1;
    }
    for (long long j = lo; j < m; ++j) {
      const double gprev = j > 0 ? Gl[j - 1] : 0.0;
      if (gprev >= e) break;
      const double len = fmin(e, Gl[j]) - fmax(s, gprev);
      if (len > 0.0) {
        const double t = u - sw_value(kv[l * Pv + j]);
        c += len * sw_h(t, p);
        g += len * sw_dh(t, p);
      }
    }
  }
  if (cost) cost[l * n + k] = c;
  if (grad) grad[l * n + iu[l * Pu + k]] = g;
}

// out[l] = Σ_k c[l·n + k] for segment l = blockIdx.x: strided partial sums, then a tree,
// in a fixed order.
extern "C" __global__ void __launch_bounds__(SW_SEG_THREADS)
    sw_sum_rows(const double *c, long long n, double *out) {
  __shared__ double part[SW_SEG_THREADS];
  const long long l = blockIdx.x;
  double s = 0.0;
  for (long long k = threadIdx.x; k < n; k += blockDim.x) s += c[l * n + k];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x >> 1; w > 0; w >>= 1) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[l] = part[0];
}

// out[i·d + t] = scale · Σ_l gs[l·n + i] · theta[l·d + t] (l in order).
extern "C" __global__ void sw_grad_points(const double *gs, long long n, const double *theta,
                                          int L, int d, double scale, double *out) {
  const long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= n * d) return;
  const long long i = q / d;
  const int t = (int)(q % d);
  double s = 0.0;
  for (int l = 0; l < L; ++l) s += gs[(long long)l * n + i] * theta[(long long)l * d + t];
  out[q] = scale * s;
}
