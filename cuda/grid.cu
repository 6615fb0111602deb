// Separable log-domain convolutions on regular grids (CostSource::Grid), mirroring
// src/backend/cpu/grid.rs. A grid of shape (N_0, …, N_{d−1}) on linspace(0, 1, N_k)
// has exp(−C/ε) = Π_k exp(−(t_i − t_j)²/ε), so LSE_y(L_y − C(x, y)/ε) is one 1-D pass
// per axis: L'[…, i, …] = LSE_j(L[…, j, …] − (t_i − t_j)²/ε).
//
// One block per line (grid-stride over lines): the line (N ≤ 1024 values) is staged in
// shared memory, then each thread computes outputs i with a one-pass (max, sum)
// log-sum-exp over j, the 1-D cost computed on the fly. A block reads its whole line
// before writing it, so passes may run in place.

#include "common.cuh"

#define GRID_MAX_N 1024

template <typename T> __device__ __forceinline__ T grid_log(T x);
template <> __device__ __forceinline__ float grid_log<float>(float x) { return logf(x); }
template <> __device__ __forceinline__ double grid_log<double>(double x) { return ::log(x); }

// linspace(0, 1, n)[i], exactly as GridCost::coordinate.
template <typename T> __device__ __forceinline__ T grid_coord(int n, int i) {
  if (n <= 1) return T(0);
  if (i + 1 == n) return T(1);
  return T((double)i * (1.0 / (double)(n - 1)));
}

// One pass along an axis of length n with `inner` points after it (lines = outer·inner,
// the batch folded into outer). Inputs are multiplied by `in_scale` (1/ε on the first pass).
// weighted: the kernel of k·c (log term −c/ε + ln c) on this axis, for ⟨P, C⟩.
// final_step: out = ε·(lm − L') (−∞ where lm is −∞), the sinkstep output; else out = L'.
template <typename T>
__device__ __forceinline__ void grid_pass(const T *in, T *out, const T *lm, long long lines,
                                          int n, long long inner, T eps, T in_scale,
                                          int weighted, int final_step) {
  __shared__ T line_v[GRID_MAX_N];
  __shared__ T coord[GRID_MAX_N];
  const T ninf = Num<T>::neg_inf();
  for (int k = threadIdx.x; k < n; k += blockDim.x) coord[k] = grid_coord<T>(n, k);
  for (long long line = blockIdx.x; line < lines; line += gridDim.x) {
    long long o = line / inner, r = line - o * inner;
    long long base = o * (long long)n * inner + r;
    __syncthreads();
    for (int k = threadIdx.x; k < n; k += blockDim.x) line_v[k] = in[base + k * inner] * in_scale;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      T ti = coord[i];
      T m = ninf, s = T(0);
      for (int j = 0; j < n; ++j) {
        T d = ti - coord[j];
        T c = d * d;
        T v;
        if (weighted) {
          if (c == T(0)) continue;
          v = line_v[j] - c / eps + grid_log<T>(c);
        } else {
          v = line_v[j] - c / eps;
        }
        if (v == ninf) continue;
        if (v > m) {
          s = s * Num<T>::exp(m - v) + T(1);
          m = v;
        } else {
          s += Num<T>::exp(v - m);
        }
      }
      T res = (m == ninf) ? ninf : m + grid_log<T>(s);
      long long idx = base + i * inner;
      if (final_step) {
        T l = lm[idx];
        out[idx] = (l == ninf) ? ninf : eps * (l - res);
      } else {
        out[idx] = res;
      }
    }
  }
}

// Per problem: Σ_x exp(f_x/ε + r_x), summed in f64 into sums[p] (one block per problem).
template <typename T>
__device__ __forceinline__ void grid_cost_sum(const T *f, const T *r, double *sums, int per,
                                              T eps) {
  __shared__ double scratch[32];
  long long p = blockIdx.x;
  const T *fp = f + p * per;
  const T *rp = r + p * per;
  double inv = 1.0 / (double)eps;
  double acc = 0.0;
  for (int x = threadIdx.x; x < per; x += blockDim.x) {
    double v = (double)fp[x] * inv + (double)rp[x];
    if (v != Num<double>::neg_inf()) acc += ::exp(v);
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) sums[p] += acc;
}

#define GRID_KERNELS(T, SUF)                                                                  \
  extern "C" __global__ void __launch_bounds__(256)                                          \
      grid_pass_##SUF(const T *in, T *out, const T *lm, long long lines, int n,             \
                      long long inner, T eps, T in_scale, int weighted, int final_step) {    \
    grid_pass<T>(in, out, lm, lines, n, inner, eps, in_scale, weighted, final_step);        \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                          \
      grid_cost_sum_##SUF(const T *f, const T *r, double *sums, int per, T eps) {            \
    grid_cost_sum<T>(f, r, sums, per, eps);                                                  \
  }

GRID_KERNELS(float, f32)
GRID_KERNELS(double, f64)

// ---------------------------------------------------------------------------------------
// Whole barycenter iterations on a small grid, one launch: one thread-block cluster per
// problem (CL CTAs, blockIdx.x / CL = problem), every pass of every iteration inside. Per
// iteration, as the host loop of crate::barycenter does with separate kernels:
//   f_k = ε·(log a_k − LSE(g_k/ε − C))   (one 1-D pass per axis)
//   v_k = −ε·LSE(f_k/ε − C)
//   bar = −Σ_k w_k·v_k,   g_k = bar + v_k  (not after the last iteration)
// A pass splits (line, 64 outputs) items over all warps of the cluster (see fused_pass).
// Passes ping-pong between two scratch arrays and meet at a cluster barrier
// (release/acquire), after which data written by other CTAs is read with ld.global.cg
// (from L2).
#define GRID_FUSED_WARPS 16

template <typename T> __device__ __forceinline__ T ld_cg(const T *p) { return __ldcg(p); }

// (value, coordinate) pairs of a staged line, read as one 8- or 16-byte broadcast.
template <typename T> struct Pair;
template <> struct Pair<float> {
  typedef float2 V;
};
template <> struct Pair<double> {
  typedef double2 V;
};

// One pass along an axis of length n (`inner` points after it) of the K images of one
// problem: dst = LSE pass of src·in_scale (log2 units). With u_j = src_j·in_scale − s·t_j²,
//   L'_i = log2 Σ_j 2^(u_j + 2s·t_i·t_j) − s·t_i²,
// one FMA per term (the s·t_i² factor leaves the sum). A warp takes (line, 64 outputs)
// items: it stages the line's (u_j, t_j) pairs, then each lane reduces outputs i and i + 32
// with a max pass and a Σ exp2 pass. Last axis: dst = ε·(lm − ln2·L') (lm = final_lm, or 0
// when lm_zero); otherwise dst = L'.
template <typename T>
__device__ __forceinline__ void fused_pass(const T *src, T *dst, T in_scale, const T *coord,
                                           T *lbuf, int n, int inner, int N, int K,
                                           const T *final_lm, bool last_axis, bool lm_zero,
                                           T eps, T s, int gwarp, int nwarps, int lane) {
  typedef typename Pair<T>::V V;
  const T ninf = Num<T>::neg_inf();
  const int per_img = N / n;  // lines per image
  const int chunks = (n + 63) >> 6;
  const int items = per_img * K * chunks;
  const V *pairs = reinterpret_cast<const V *>(lbuf);
  for (int it = gwarp; it < items; it += nwarps) {
    const int line = it / chunks, chunk = it - line * chunks;
    const int k = line / per_img, rest = line - k * per_img;
    const int o = rest / inner, r = rest - o * inner;
    const long long base = (long long)k * N + (long long)o * n * inner + r;
    __syncwarp();
    for (int t = lane; t < n; t += 32) {
      const T tj = coord[t];
      lbuf[2 * t] = ld_cg(src + base + (long long)t * inner) * in_scale - s * tj * tj;
      lbuf[2 * t + 1] = tj;
    }
    __syncwarp();
    const int i0 = chunk * 64 + lane, i1 = i0 + 32;
    const T c0 = i0 < n ? T(2) * s * coord[i0] : T(0);
    const T c1 = i1 < n ? T(2) * s * coord[i1] : T(0);
    T m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
    int j = 0;
    for (; j + 2 <= n; j += 2) {
      const V p = pairs[j], q = pairs[j + 1];
      m0 = fmax(m0, fma(c0, p.y, p.x));
      m1 = fmax(m1, fma(c1, p.y, p.x));
      m2 = fmax(m2, fma(c0, q.y, q.x));
      m3 = fmax(m3, fma(c1, q.y, q.x));
    }
    if (j < n) {
      const V p = pairs[j];
      m0 = fmax(m0, fma(c0, p.y, p.x));
      m1 = fmax(m1, fma(c1, p.y, p.x));
    }
    const T ma = fmax(m0, m2), mb = fmax(m1, m3);
    T ra = ninf, rb = ninf;
    // Empty lines (every u = −∞) give −∞; exp2(−∞ − −∞) would be NaN, so shift by 0.
    const T sa_ = ma == ninf ? T(0) : ma, sb_ = mb == ninf ? T(0) : mb;
    T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
    j = 0;
    for (; j + 2 <= n; j += 2) {
      const V p = pairs[j], q = pairs[j + 1];
      s0 += Num<T>::exp2(fma(c0, p.y, p.x) - sa_);
      s1 += Num<T>::exp2(fma(c1, p.y, p.x) - sb_);
      s2 += Num<T>::exp2(fma(c0, q.y, q.x) - sa_);
      s3 += Num<T>::exp2(fma(c1, q.y, q.x) - sb_);
    }
    if (j < n) {
      const V p = pairs[j];
      s0 += Num<T>::exp2(fma(c0, p.y, p.x) - sa_);
      s1 += Num<T>::exp2(fma(c1, p.y, p.x) - sb_);
    }
    if (ma != ninf) ra = ma + Num<T>::log2(s0 + s2);
    if (mb != ninf) rb = mb + Num<T>::log2(s1 + s3);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = h == 0 ? i0 : i1;
      if (i >= n) continue;
      const T ti = coord[i];
      const T res = (h == 0 ? ra : rb) - s * ti * ti;
      const long long idx = base + (long long)i * inner;
      if (last_axis) {
        const T l = lm_zero ? T(0) : final_lm[idx];
        dst[idx] = l == ninf ? ninf : eps * (l - T(LOGOT_LN2) * res);
      } else {
        dst[idx] = res;
      }
    }
  }
}

template <typename T>
__device__ __forceinline__ void grid_bary_fused(const T *log_a, const T *w, T *g, T *f, T *v,
                                                T *bar, T *scratch, int K, int ndim, int n0,
                                                int n1, int n2, T eps, int iters) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sm = reinterpret_cast<T *>(smem_raw);
  // Per-axis sizes, coordinate offsets and strides as scalars (no local arrays: a pointer
  // kept in one would lose its shared-memory address space).
  const int d1 = ndim > 1 ? n1 : 1, d2 = ndim > 2 ? n2 : 1;
  const int N = n0 * d1 * d2;
  const int nmax = max(n0, max(d1, d2));
  const int o1 = n0, o2 = o1 + (ndim > 1 ? n1 : 0), oend = o2 + (ndim > 2 ? n2 : 0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // Coordinates of every axis, then two values per point of a line for each warp (16-byte
  // aligned: the host pads the coordinates to an even count).
  const int cpad = (oend + 1) & ~1;
  T *lbuf = sm + cpad + warp * 2 * nmax;
  const T s = T(LOGOT_LOG2E) / eps;
  for (int e = threadIdx.x; e < oend; e += blockDim.x) {
    const int a = e < o1 ? 0 : (e < o2 ? 1 : 2);
    const int n = a == 0 ? n0 : (a == 1 ? n1 : n2);
    sm[e] = grid_coord<T>(n, e - (a == 0 ? 0 : (a == 1 ? o1 : o2)));
  }
  __syncthreads();
  const int CL = (int)cluster_size();
  const long long p = blockIdx.x / CL;
  const int rank = (int)cluster_rank();
  const int wpc = blockDim.x >> 5;
  const int gwarp = rank * wpc + warp, nwarps = CL * wpc;
  const long long KN = (long long)K * N;
  const T *la = log_a + p * KN;
  const T *wp = w + p * K;
  T *gp = g + p * KN, *fp = f + p * KN, *vp = v + p * KN, *bp = bar + p * N;
  T *sa = scratch + p * 2 * KN, *sb = sa + KN;
  // One separable sinkstep: src (natural units) → dst, through the scratch arrays.
  auto sinkstep = [&](const T *src, T *dst, const T *lm, bool lm_zero) {
    const T *in = src;
    T scale = s;
    for (int a = 0; a < ndim; ++a) {
      const bool last = a + 1 == ndim;
      const int n = a == 0 ? n0 : (a == 1 ? n1 : n2);
      const int inner = a == 0 ? d1 * d2 : (a == 1 ? d2 : 1);
      const T *coord = sm + (a == 0 ? 0 : (a == 1 ? o1 : o2));
      T *out = last ? dst : ((a & 1) ? sb : sa);
      fused_pass<T>(in, out, scale, coord, lbuf, n, inner, N, K, lm, last, lm_zero, eps, s,
                    gwarp, nwarps, lane);
      cluster_barrier();
      in = out;
      scale = T(1);
    }
  };
  for (int it = 0; it < iters; ++it) {
    sinkstep(gp, fp, la, false);
    sinkstep(fp, vp, nullptr, true);
    const bool last = it + 1 == iters;
    for (int x = rank * blockDim.x + threadIdx.x; x < N; x += CL * blockDim.x) {
      T acc = T(0);
      for (int k = 0; k < K; ++k) acc -= wp[k] * ld_cg(vp + (long long)k * N + x);
      bp[x] = acc;
      if (!last)
        for (int k = 0; k < K; ++k) gp[(long long)k * N + x] = acc + ld_cg(vp + (long long)k * N + x);
    }
    cluster_barrier();
  }
}

#define GRID_FUSED(T, SUF)                                                                   \
  extern "C" __global__ void __launch_bounds__(32 * GRID_FUSED_WARPS)                        \
      grid_bary_fused_##SUF(const T *log_a, const T *w, T *g, T *f, T *v, T *bar,            \
                            T *scratch, int K, int ndim, int n0, int n1, int n2, T eps,      \
                            int iters) {                                                     \
    grid_bary_fused<T>(log_a, w, g, f, v, bar, scratch, K, ndim, n0, n1, n2, eps, iters);    \
  }
GRID_FUSED(float, f32)
GRID_FUSED(double, f64)
