// Separable log-domain convolutions on regular grids (CostSource::Grid), mirroring
// src/backend/cpu/grid.rs. A grid of shape (N_0, …, N_{d−1}) on linspace(0, 1, N_k)
// has exp(−C/ε) = Π_k exp(−(t_i − t_j)²/ε), so LSE_y(L_y − C(x, y)/ε) is one 1-D pass
// per axis: L'[…, i, …] = LSE_j(L[…, j, …] − (t_i − t_j)²/ε).
//
// One block per line (grid-stride over lines): the line (N ≤ 1024 values) is staged in
// shared memory, then each thread computes outputs i with a one-pass (max, sum)
// log-sum-exp over j, the 1-D cost computed on the fly. A block reads its whole line
// before writing it, so passes may run in place.

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
// A pass splits (line, 32 outputs) items over all warps of the cluster; one lane per
// output, a two-pass (max, then Σ exp2) log-sum-exp in log2 units against a table
// T_a[j][i] = (t_i − t_j)²·log2(e)/ε of each axis in shared memory. Passes ping-pong
// between two scratch arrays and meet at a cluster barrier (release/acquire), after
// which data written by other CTAs is read with ld.global.cg (from L2).
#define GRID_FUSED_WARPS 16
#ifndef GRID_FUSED_PROFILE
#define GRID_FUSED_PROFILE 0  // timing experiments only (LOGOT_CUDA_DEFINES), see below
#endif

__device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ u32 cluster_size() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

template <typename T> __device__ __forceinline__ T ld_cg(const T *p) { return __ldcg(p); }

// One pass along axis a of the K images of problem p: dst = LSE pass of src·in_scale
// (log2 units). final_lm: dst = ε·(lm − ln2·L') with lm = final_lm (natural log), or
// ε·(−ln2·L') when lm_zero; otherwise dst = L' (log2 units).
template <typename T>
__device__ __forceinline__ void fused_pass(const T *src, T *dst, T in_scale, const T *table,
                                           T *lbuf, int n, int inner, int N, int K,
                                           const T *final_lm, bool last_axis, bool lm_zero,
                                           T eps, int gwarp, int nwarps, int lane) {
  const T ninf = Num<T>::neg_inf();
#if GRID_FUSED_PROFILE == 1
  return;  // timing experiment: barriers and the pointwise step only
#endif
  const int per_img = N / n;  // lines per image
  const int chunks = (n + 31) >> 5;
  const int items = per_img * K * chunks;
  for (int it = gwarp; it < items; it += nwarps) {
    const int line = it / chunks, chunk = it - line * chunks;
    const int k = line / per_img, rest = line - k * per_img;
    const int o = rest / inner, r = rest - o * inner;
    const long long base = (long long)k * N + (long long)o * n * inner + r;
    __syncwarp();
    for (int t = lane; t < n; t += 32) lbuf[t] = ld_cg(src + base + (long long)t * inner) * in_scale;
    __syncwarp();
    const int i = chunk * 32 + lane;
    if (i < n) {
      // Four independent chains per pass, so the shared-memory loads overlap.
      const T *col = table + i;
      T m4[4] = {ninf, ninf, ninf, ninf};
      int j = 0;
      for (; j + 4 <= n; j += 4)
#pragma unroll
        for (int q = 0; q < 4; ++q) m4[q] = fmax(m4[q], lbuf[j + q] - col[(j + q) * n]);
      for (; j < n; ++j) m4[0] = fmax(m4[0], lbuf[j] - col[j * n]);
      const T m = fmax(fmax(m4[0], m4[1]), fmax(m4[2], m4[3]));
      T res = ninf;
      if (GRID_FUSED_PROFILE == 2) {
        res = m;  // timing experiment: no sum pass
      } else if (m != ninf) {
        T s4[4] = {T(0), T(0), T(0), T(0)};
        j = 0;
        for (; j + 4 <= n; j += 4)
#pragma unroll
          for (int q = 0; q < 4; ++q) s4[q] += Num<T>::exp2(lbuf[j + q] - col[(j + q) * n] - m);
        for (; j < n; ++j) s4[0] += Num<T>::exp2(lbuf[j] - col[j * n] - m);
        res = m + Num<T>::log2((s4[0] + s4[1]) + (s4[2] + s4[3]));
      }
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
  // Per-axis sizes, table offsets and strides as scalars (no local arrays: a table pointer
  // kept in one would lose its shared-memory address space).
  const int d1 = ndim > 1 ? n1 : 1, d2 = ndim > 2 ? n2 : 1;
  const int N = n0 * d1 * d2;
  const int nmax = max(n0, max(d1, d2));
  const int t1 = n0 * n0, t2 = t1 + (ndim > 1 ? n1 * n1 : 0), tend = t2 + (ndim > 2 ? n2 * n2 : 0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T *lbuf = sm + tend + warp * nmax;
  const T s = T(LOGOT_LOG2E) / eps;
  for (int e = threadIdx.x; e < tend; e += blockDim.x) {
    const int a = e < t1 ? 0 : (e < t2 ? 1 : 2);
    const int n = a == 0 ? n0 : (a == 1 ? n1 : n2);
    const int r = e - (a == 0 ? 0 : (a == 1 ? t1 : t2));
    const int j = r / n, i = r - j * n;
    const T d = grid_coord<T>(n, i) - grid_coord<T>(n, j);
    sm[e] = d * d * s;
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
      const T *table = sm + (a == 0 ? 0 : (a == 1 ? t1 : t2));
      T *out = last ? dst : ((a & 1) ? sb : sa);
      fused_pass<T>(in, out, scale, table, lbuf, n, inner, N, K, lm, last, lm_zero, eps, gwarp,
                    nwarps, lane);
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
