// Log-domain Sinkhorn kernels: the batched one-pass LSE half-step (tiled like a GEMM),
// a fused whole-loop kernel for small problems, marginal errors, transport costs, plans.
//
// Conventions. A half-step reduces over k (length K) for each output l (length L):
//   out[b,l] = eps·lm[b,l] − phi·eps·LSE_k((other[b,k] − R[k,l]) / eps)
// (phi = 1 balanced; phi = ρ/(ρ + eps) for a side relaxed by ρ·KL, unbalanced OT)
// where R is "reduction-major": C (n×m) for the g-update (k = i, l = j) and Cᵀ (m×n) for
// the f-update. In-kernel values are base 2: x = other·s − R·s with s = log2(e)/eps.
//
// The kernel families live in parts that this file includes in order (one translation
// unit, one module): sinkstep_tiled.cuh (the tiled half-step), sinkstep_fused.cuh (the
// fused small-problem loop) and sinkstep_plans.cuh (marginal errors, transport costs,
// plans, elementwise kernels); the entry points follow.

#include "common.cuh"
#include "sinkstep_tiled.cuh"
#include "sinkstep_fused.cuh"
#include "sinkstep_plans.cuh"

// ---------------------------------------------------------------------------------------
// Entry points (one per precision and configuration). Names are looked up by the host.
#define TILED_ARGS(T)                                                                        \
  const T *R, long long cost_stride, const T *other, const T *lm, T *out, T *part_m,         \
      T *part_s, int B, int K, int L, T eps, int kslice, int split_hints, T phi
#define TILED_PASS \
  R, cost_stride, other, lm, out, part_m, part_s, B, K, L, eps, kslice, split_hints, phi

// The input checks' numbers of each row of `per` entries, in f64, each row cut into `parts`
// equal chunks, one block a chunk (block b: row b / parts, chunk b % parts), so that a few
// long rows fill the GPU: out[5b..] = (Σ x, min x, max x, #non-finite, #negative) of the
// chunk; NaN takes no part in min/max. The host combines the chunks of a row in order.
template <typename T>
__device__ __forceinline__ void row_stats(const T *__restrict__ x, double *__restrict__ out,
                                          long long per, int parts) {
  __shared__ double scratch[32];
  __shared__ double lo_s[32], hi_s[32];
  const double inf = -(double)Num<double>::neg_inf();
  const long long row = blockIdx.x / parts, chunk = blockIdx.x % parts;
  const long long len = (per + parts - 1) / parts;
  const long long first = chunk * len, last = min(per, first + len);
  const T *r = x + row * per;
  double sum = 0.0, lo = inf, hi = -inf, bad = 0.0, neg = 0.0;
  for (long long k = first + threadIdx.x; k < last; k += blockDim.x) {
    const double v = (double)r[k];
    sum += v;
    lo = fmin(lo, v);
    hi = fmax(hi, v);
    bad += isfinite(v) ? 0.0 : 1.0;
    neg += v < 0.0 ? 1.0 : 0.0;
  }
  block_min_max(lo, hi, lo_s, hi_s);
  sum = block_sum(sum, scratch);
  __syncthreads();
  bad = block_sum(bad, scratch);
  __syncthreads();
  neg = block_sum(neg, scratch);
  if (threadIdx.x == 0) {
    double *o = out + 5 * (long long)blockIdx.x;
    o[0] = sum;
    o[1] = lo;
    o[2] = hi;
    o[3] = bad;
    o[4] = neg;
  }
}

// y = ln x (−∞ for x = 0).
template <typename T>
__device__ __forceinline__ void elem_log(const T *__restrict__ x, T *__restrict__ y,
                                         long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    y[e] = log(x[e]);
}

// The start potential of a marginal: 0 where a > 0, −∞ elsewhere (zero-mass bins).
template <typename T>
__device__ __forceinline__ void start_potential(const T *__restrict__ a, T *__restrict__ out,
                                                long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    out[e] = a[e] > T(0) ? T(0) : Num<T>::neg_inf();
}

// dst[e] = T(src[e] + delta[e / per]) with the sum in f64 (a zero delta copies).
template <typename T>
__device__ __forceinline__ void offset_rows(const T *__restrict__ src, T *__restrict__ dst,
                                            const double *__restrict__ delta, long long per,
                                            long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x) {
    const double d = delta[e / per];
    dst[e] = d == 0.0 ? src[e] : (T)((double)src[e] + d);
  }
}

// dst[e] = src[e] where a[e] = 0 (a marginal's zero-mass bins), unchanged elsewhere.
template <typename T>
__device__ __forceinline__ void where_empty(const T *__restrict__ a, const T *__restrict__ src,
                                            T *__restrict__ dst, long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    if (a[e] == T(0)) dst[e] = src[e];
}

// The tiles of the entry points below: TB, TJ, WB, WJ, WARPS, KW of TiledCfg (8 warps,
// 256 threads, in each). The host reads these lines (src/backend/cuda/ops/tiled.rs) for the
// launch shapes and the shared memory.
#define TILE_S16 4, 4, 4, 8, 8, 16
#define TILE_R16 4, 2, 4, 8, 8, 16
#define TILE_S4 4, 4, 1, 32, 8, 8
#define TILE_B1 1, 4, 1, 32, 8, 8

// Shared cost, 16 batch rows × 32 outputs per block, 8 warps × 16 k per stage; the
// factored variant (FACT) needs each warp's area for A and K besides the stages.
#define SHARED16(T, SUF, MINB)                                                               \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                    \
      sinkstep_s16_factored_##SUF(TILED_ARGS(T)) {                                           \
    sinkstep_tiled<T, TILE_S16, 0, false, true>(TILED_PASS);                                 \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256, MINB) report_s16_##SUF(TILED_ARGS(T)) {  \
    sinkstep_tiled<T, TILE_R16, 1, false>(TILED_PASS);                                       \
  }
SHARED16(float, f32, 2)
SHARED16(double, f64, 1)

// Shared cost, few problems (2 to 7): 4 batch rows × 128 outputs per block, 16 outputs a
// thread. There are few blocks, so the host splits the reduction across blocks.
#define SHARED4(T, SUF, MINB)                                                                \
  extern "C" __global__ void __launch_bounds__(256, MINB) sinkstep_s4_##SUF(TILED_ARGS(T)) { \
    sinkstep_tiled<T, TILE_S4, 0>(TILED_PASS);                                               \
  }
SHARED4(float, f32, 2)
SHARED4(double, f64, 1)

// One batch row × 128 outputs per block (per-problem costs, or few problems).
#define ROW1(T, SUF)                                                                         \
  extern "C" __global__ void __launch_bounds__(256) sinkstep_b1_##SUF(TILED_ARGS(T)) {       \
    sinkstep_tiled<T, TILE_B1, 0>(TILED_PASS);                                               \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256) report_b1_##SUF(TILED_ARGS(T)) {         \
    sinkstep_tiled<T, TILE_B1, 1>(TILED_PASS);                                               \
  }
ROW1(float, f32)
ROW1(double, f64)

// Per problem: Σ_j |ν_bj − mass_bj| and Σ_j share_bj (one block per problem).
template <typename T>
__device__ __forceinline__ void report_sum(const T *__restrict__ nu, const T *__restrict__ mass,
                                           const T *__restrict__ share, double *__restrict__ out,
                                           int per) {
  __shared__ double scratch[32];
  const long long base = (long long)blockIdx.x * per;
  double e = 0.0, c = 0.0;
  for (int k = threadIdx.x; k < per; k += blockDim.x) {
    e += fabs((double)nu[base + k] - (double)mass[base + k]);
    c += (double)share[base + k];
  }
  e = block_sum(e, scratch);
  __syncthreads();
  c = block_sum(c, scratch);
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = e;
    out[2 * blockIdx.x + 1] = c;
  }
}

#define OTHERS(T, SUF)                                                                       \
  extern "C" __global__ void sinkstep_finish_##SUF(const T *part_m, const T *part_s,         \
                                                   const T *lm, T *out, int B, int L,        \
                                                   int splits, T eps, T phi) {               \
    sinkstep_finish<T>(part_m, part_s, lm, out, B, L, splits, eps, phi);                     \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(FUSED_MAX_THREADS)                            \
      sinkhorn_fused_##SUF(const T *C, long long cost_stride, T *f, T *g, const T *lmu,      \
                           const T *lnu, int n, int m, T eps, int iters, int g_col,          \
                           int g_row, T phi_mu, T phi_nu) {                                  \
    sinkhorn_fused<T, FUSED_OUTPUTS>(C, cost_stride, f, g, lmu, lnu, n, m, eps, iters, g_col, \
                                     g_row, phi_mu, phi_nu);                                 \
  }                                                                                          \
  extern "C" __global__ void marginal_error_##SUF(const T *a, const T *old, const T *nw,     \
                                                  T *err, int per, T eps) {                  \
    marginal_error<T>(a, old, nw, err, per, eps);                                            \
  }                                                                                          \
  extern "C" __global__ void transport_cost_##SUF(const T *C, long long cost_stride,         \
                                                  const T *f, const T *g, double *partial,   \
                                                  int n, int m, int rows, T eps) {           \
    transport_cost<T>(C, cost_stride, f, g, partial, n, m, rows, eps);                       \
  }                                                                                          \
  extern "C" __global__ void plan_##SUF(const T *C, long long cost_stride, const T *f,       \
                                        const T *g, T *P, int B, int n, int m, T eps) {      \
    plan<T>(C, cost_stride, f, g, P, B, n, m, eps);                                          \
  }                                                                                          \
  extern "C" __global__ void fill_##SUF(T *out, long long len, T v) { fill<T>(out, len, v); } \
  extern "C" __global__ void relax_##SUF(T *out, const T *lm, long long len, T eps, T phi) {   \
    relax<T>(out, lm, len, eps, phi);                                                        \
  }                                                                                          \
  extern "C" __global__ void copy_block_##SUF(const T *src, long long src_pitch, T *dst,       \
                                             long long dst_pitch, long long rows,            \
                                             long long width) {                              \
    copy_block<T>(src, src_pitch, dst, dst_pitch, rows, width);                              \
  }                                                                                          \
  extern "C" __global__ void shard_softmin_##SUF(const T *parts, T *out, long long len,        \
                                                 int shards, T eps) {                        \
    shard_softmin<T>(parts, out, len, shards, eps);                                          \
  }                                                                                          \
  extern "C" __global__ void shard_sum_##SUF(const T *parts, T *out, long long len,            \
                                             int shards) {                                   \
    shard_sum<T>(parts, out, len, shards);                                                   \
  }                                                                                          \
  extern "C" __global__ void relaxed_side_##SUF(const T *a, const T *pot, const T *half,      \
                                                 double *out, int per, double eps, double rho, \
                                                 int exact) {                                \
    relaxed_side<T>(a, pot, half, out, per, eps, rho, exact);                                \
  }                                                                                          \
  extern "C" __global__ void report_sum_##SUF(const T *nu, const T *mass, const T *share,    \
                                              double *out, int per) {                        \
    report_sum<T>(nu, mass, share, out, per);                                                \
  }                                                                                          \
  extern "C" __global__ void transpose_##SUF(const T *in, T *out, int n, int m) {            \
    transpose<T>(in, out, n, m);                                                             \
  }                                                                                          \
  extern "C" __global__ void row_stats_##SUF(const T *x, double *out, long long per,         \
                                              int parts) {                                   \
    row_stats<T>(x, out, per, parts);                                                        \
  }                                                                                          \
  extern "C" __global__ void elem_log_##SUF(const T *x, T *y, long long len) {               \
    elem_log<T>(x, y, len);                                                                  \
  }                                                                                          \
  extern "C" __global__ void start_potential_##SUF(const T *a, T *out, long long len) {      \
    start_potential<T>(a, out, len);                                                         \
  }                                                                                          \
  extern "C" __global__ void offset_rows_##SUF(const T *src, T *dst, const double *delta,    \
                                               long long per, long long len) {               \
    offset_rows<T>(src, dst, delta, per, len);                                               \
  }                                                                                          \
  extern "C" __global__ void where_empty_##SUF(const T *a, const T *src, T *dst,             \
                                               long long len) {                              \
    where_empty<T>(a, src, dst, len);                                                        \
  }
OTHERS(float, f32)
OTHERS(double, f64)
