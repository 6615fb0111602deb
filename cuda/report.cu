// The plan report of a dense cost (Backend::plan_report): the row and column sums of
// P_ij = exp((f_i + g_j - C_ij)/eps), the transport cost and the mass, evaluated entry by
// entry from the stored f, g and C in one pass over the cost, so the reported errors are
// those of the plan the potentials define. Every sum runs in a fixed order (lanes, a fixed
// shuffle tree, warps, tiles), so the result does not depend on scheduling.
//
// Layout: f is B×n, g is B×m, C is n×m (shared: cstride = 0) or B×n×m (cstride = n·m).
//
// The exponent t = (f + g - C)·log2(e)/eps of an f32 plan is evaluated in f32 without
// losing the cancellation between f + g and C: each term is scaled (in f64 for the
// potentials, with an exact two-product for C) and split as x = hi + lo, hi a multiple of a
// power of two q chosen per block so that hi_f + hi_g - hi_C is exact, and
// t = (hi_f + hi_g - hi_C) + (lo_f + lo_g - lo_C) is within one rounding of the exact
// exponent (|lo| ≤ q/2 with q ≈ 2^-20·max|f|,|g| in scaled units). Each entry is then one
// exp2 (MUFU, about 2 ulp). Sums: f32 over a lane's REPORT_K entries and a warp's 32 lanes
// (a pairwise tree), f64 from there on. f64 plans evaluate the exponent and the exponential
// in f64 and sum in f64.
//
// Grid of report_tiles: x = (row chunk of `rows` ≤ REPORT_ROWS rows, a multiple of
// REPORT_RG chosen by the host so that small problems still fill the GPU) × (group of PB
// problems; PB =
// 4 in f32, 2 in f64, sharing each loaded and split entry of a shared cost), y = column
// blocks of REPORT_THREADS·REPORT_K columns (a warp owns a strip, lane l the columns
// l + 32·q). Outputs: rows_part[((b·n + i)·CB + cb)·2 + {0,1}] = (Σ_j P, Σ_j P·C)
// over the column block, cols_part[(b·RB + rb)·m + j] = Σ_i P over the row chunk.

#include "common.cuh"

#define REPORT_WARPS 4
#define REPORT_THREADS 128
#define REPORT_PB_F32 4
#define REPORT_PB_F64 2
#define REPORT_K 4
#define REPORT_ROWS 64
// Rows per group (between two row-sum reductions; the host rounds row chunks to it) and the
// blocks per multiprocessor the register budget aims at.
#define REPORT_RG 4
#define REPORT_MIN_BLOCKS 1
#define REPORT_FINISH_THREADS 256
#define REPORT_FINISH_BLOCKS 16

template <typename T> struct ReportNum;
// f32: a scaled value split as hi (a multiple of q) + lo, partial sums in f32.
template <> struct ReportNum<float> {
  typedef float Acc;
  static constexpr int PB = REPORT_PB_F32;
  // A potential x·s (s in f64) as (hi, lo); -inf stays (-inf, 0).
  static __device__ __forceinline__ void split_pot(float x, double s, float q, float inv_q,
                                                   float &hi, float &lo) {
    const double v = (double)x * s;
    const float vf = (float)v;
    if (!isfinite(vf)) {
      hi = vf;
      lo = 0.f;
      return;
    }
    hi = rintf(vf * inv_q) * q;
    lo = (float)(v - (double)hi);
  }
  // A cost c·s with s = s_hi + s_lo: the rounded product, its exact error by an FMA, then
  // the product rounded to a multiple of q (unless it is already one: |v| ≥ 2^24·q).
  static __device__ __forceinline__ void split_cost(float c, float s_hi, float s_lo, float q,
                                                    float inv_q, float &hi, float &lo) {
    const float v = c * s_hi;
    const float err = fmaf(c, s_hi, -v) + c * s_lo;
    const float hq = rintf(v * inv_q) * q;
    const float h = fabsf(v) < 16777216.f * q ? hq : v;
    hi = h;
    lo = isfinite(v) ? (v - h) + err : 0.f;
  }
  static __device__ __forceinline__ float entry(float fh, float fl, float gh, float gl, float ch,
                                                float cl) {
    const float t = ((fh + gh) - ch) + ((fl + gl) - cl);
    return Num<float>::exp2(t);  // -inf gives 0
  }
  // |x·s| for the quantum, 0 where x·s is not a finite f32.
  static __device__ __forceinline__ float abs_scaled(float x, double s) {
    const float v = (float)((double)x * s);
    return isfinite(v) ? fabsf(v) : 0.f;
  }
};
// f64: hi = x·s in f64, lo = 0; the exponent and exp2 in f64.
template <> struct ReportNum<double> {
  typedef double Acc;
  static constexpr int PB = REPORT_PB_F64;
  static __device__ __forceinline__ void split_pot(double x, double s, double, double,
                                                   double &hi, double &lo) {
    hi = x * s;
    lo = 0.0;
  }
  static __device__ __forceinline__ void split_cost(double c, double s_hi, double, double,
                                                    double, double &hi, double &lo) {
    hi = c * s_hi;
    lo = 0.0;
  }
  static __device__ __forceinline__ double entry(double fh, double, double gh, double, double ch,
                                                 double) {
    return ::exp2((fh + gh) - ch);
  }
  static __device__ __forceinline__ float abs_scaled(double, double) { return 0.f; }
};

// The block's quantum q = 2^(E - 20) with 2^E ≥ every finite |scaled potential| the block
// uses (so hi_f + hi_g - hi_C is exact): from the bits of the block-wide maximum.
__device__ __forceinline__ float report_quantum(float amax) {
  int e;
  // frexpf: amax = m·2^e with m in [0.5, 1): 2^e ≥ amax.
  (void)frexpf(fmaxf(amax, 1e-30f), &e);
  return ldexpf(1.f, e - 20);
}

// Reduces v[0..N) over the 32 lanes of a warp, halving the values at each of the 5 steps:
// afterwards v[k] (k < N/32) holds the warp's sum of value index k + (N/32)·lane (N ≥ 32),
// or v[0] that of index lane/(32/N) (N < 32, N a power of two).
template <typename A, int N>
__device__ __forceinline__ void warp_transpose_sum(A (&v)[N]) {
  const int lane = threadIdx.x & 31;
  int c = N;
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) {
    const bool up = (lane & o) != 0;
    c >>= 1;
    if (c == 0) {  // one value left: a plain butterfly step
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
      c = 1;
      continue;
    }
#pragma unroll
    for (int k = 0; k < N / 2; ++k) {
      if (k < c) {
        const A send = up ? v[k] : v[k + c];
        const A keep = up ? v[k + c] : v[k];
        v[k] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    }
  }
}

// The row groups of one report_tiles block: REPORT_RG rows at a time, every entry of the
// group evaluated without a branch (rows, columns and problems past the ends have a −∞
// potential, so their entries are 0, and read an entry of the cost that exists), then the
// group's row sums reduced over the warp and the block's warps in a fixed order, and the
// lanes' f32 column partials added to their f64 sums.
template <typename T, bool SHARED>
__device__ __forceinline__ void report_row_groups(
    const T *__restrict__ c, long long cstride, int b0, int pc, int n, int m, int i0, int j0,
    int rend, int cb, int CB, const T (*fs)[REPORT_ROWS][2],
    const T (&gh)[ReportNum<T>::PB][REPORT_K], const T (&gl)[ReportNum<T>::PB][REPORT_K],
    T s_hi, T s_lo, T qn, T inv_q, double (*cold_s)[REPORT_THREADS],
    typename ReportNum<T>::Acc (*rows_s)[REPORT_RG * ReportNum<T>::PB * 2],
    double *__restrict__ rows_part) {
  typedef ReportNum<T> RN;
  typedef typename RN::Acc A;
  constexpr int PB = RN::PB, K = REPORT_K, RG = REPORT_RG;
  constexpr int NV = RG * PB * 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Columns past m read column m − 1 and rows past n row n − 1: their potentials are −∞.
  int jc[K];
#pragma unroll
  for (int q = 0; q < K; ++q) jc[q] = min(j0 + 32 * q, m - 1);
  const T *cp[SHARED ? 1 : PB];
#pragma unroll
  for (int p = 0; p < (SHARED ? 1 : PB); ++p)
    cp[p] = c + (long long)(b0 + min(p, pc - 1)) * cstride;
  for (int r0 = 0; r0 < rend; r0 += RG) {
    A v[NV];  // v[(r·PB + p)·2 + {0: Σ P, 1: Σ P·C}]
    A colf[PB][K];
#pragma unroll
    for (int k = 0; k < NV; ++k) v[k] = A(0);
#pragma unroll
    for (int p = 0; p < PB; ++p)
#pragma unroll
      for (int q = 0; q < K; ++q) colf[p][q] = A(0);
#pragma unroll
    for (int r = 0; r < RG; ++r) {
      const long long row = (long long)min(i0 + r0 + r, n - 1) * m;
      T fh[PB], fl[PB];
#pragma unroll
      for (int p = 0; p < PB; ++p) {
        fh[p] = fs[p][r0 + r][0];  // −∞ past the chunk's rows or the batch
        fl[p] = fs[p][r0 + r][1];
      }
#pragma unroll
      for (int q = 0; q < K; ++q) {
        const long long at = row + jc[q];
        T ch[SHARED ? 1 : PB], cl[SHARED ? 1 : PB], cv[SHARED ? 1 : PB];
#pragma unroll
        for (int p = 0; p < (SHARED ? 1 : PB); ++p) {
          cv[p] = cp[p][at];
          RN::split_cost(cv[p], s_hi, s_lo, qn, inv_q, ch[p], cl[p]);
        }
#pragma unroll
        for (int p = 0; p < PB; ++p) {
          const int k = SHARED ? 0 : p;
          const A e = (A)RN::entry(fh[p], fl[p], gh[p][q], gl[p][q], ch[k], cl[k]);
          v[(r * PB + p) * 2] += e;
          v[(r * PB + p) * 2 + 1] += e * (A)cv[k];
          colf[p][q] += e;
        }
      }
    }
#pragma unroll
    for (int p = 0; p < PB; ++p)
#pragma unroll
      for (int q = 0; q < K; ++q) cold_s[p * K + q][threadIdx.x] += (double)colf[p][q];
    // Rows: the warp's sums over its strip (a fixed tree), then the block's warps in order.
    warp_transpose_sum(v);
    if (NV >= 32) {
#pragma unroll
      for (int k = 0; k < (NV >= 32 ? NV / 32 : 1); ++k) rows_s[warp][k + (NV / 32) * lane] = v[k];
    } else if (lane % (32 / NV) == 0) {
      rows_s[warp][lane / (32 / NV)] = v[0];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < NV; idx += REPORT_THREADS) {
      const int r = idx / (2 * PB), p = (idx / 2) % PB, which = idx & 1;
      const int i = i0 + r0 + r;
      if (p < pc && r0 + r < rend) {
        double s = 0.0;
#pragma unroll
        for (int w = 0; w < REPORT_WARPS; ++w) s += (double)rows_s[w][idx];
        rows_part[(((long long)(b0 + p) * n + i) * CB + cb) * 2 + which] = s;
      }
    }
    __syncthreads();
  }
}

template <typename T>
__device__ __forceinline__ void report_tiles(const T *__restrict__ f, const T *__restrict__ g,
                                             const T *__restrict__ c, long long cstride, int B,
                                             int n, int m, int rows, double scale,
                                             double *__restrict__ rows_part,
                                             double *__restrict__ cols_part) {
  typedef ReportNum<T> RN;
  typedef typename RN::Acc A;
  constexpr int PB = RN::PB, K = REPORT_K, RG = REPORT_RG;
  constexpr int NV = RG * PB * 2;  // row values per group: (Σ P, Σ P·C) per row and problem
  static_assert(NV % 32 == 0 || 32 % NV == 0, "row values");
  static_assert(REPORT_THREADS == 32 * REPORT_WARPS, "threads");
  __shared__ T fs[PB][REPORT_ROWS][2];
  __shared__ float amax_s;
  __shared__ A rows_s[REPORT_WARPS][NV];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // blockIdx.x = rb·G + z (problem groups vary fastest: blocks that run together share
  // the cost's rows), blockIdx.y = cb.
  const int G = (B + PB - 1) / PB;
  const int z = blockIdx.x % G, rb = blockIdx.x / G, cb = blockIdx.y;
  const int RB = gridDim.x / G, CB = gridDim.y;
  const int b0 = z * PB;
  const int pc = min(PB, B - b0);
  const int i0 = rb * rows;
  const int j0 = cb * (REPORT_THREADS * K) + warp * 32 * K + lane;
  const T ninf = Num<T>::neg_inf();
  const T s_hi = (T)scale;
  const T s_lo = (T)(scale - (double)s_hi);

  // The block's largest finite scaled potential, for the quantum.
  if (threadIdx.x == 0) amax_s = 0.f;
  __syncthreads();
  float amax = 0.f;
  for (int e = threadIdx.x; e < PB * REPORT_ROWS; e += REPORT_THREADS) {
    const int p = e / REPORT_ROWS, r = e % REPORT_ROWS;
    if (p < pc && r < rows && i0 + r < n)
      amax = fmaxf(amax, RN::abs_scaled(f[(long long)(b0 + p) * n + i0 + r], scale));
  }
#pragma unroll
  for (int p = 0; p < PB; ++p)
#pragma unroll
    for (int q = 0; q < K; ++q) {
      const int j = j0 + 32 * q;
      if (p < pc && j < m)
        amax = fmaxf(amax, RN::abs_scaled(g[(long long)(b0 + p) * m + j], scale));
    }
  for (int o = 16; o >= 1; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (lane == 0) atomicMax((int *)&amax_s, __float_as_int(amax));  // non-negative floats
  __syncthreads();
  const float qf = report_quantum(fminf(amax_s * 1.0000001f, 3.0e38f));
  const T qn = (T)qf, inv_q = (T)(1.f / qf);

  // Potentials, scaled and split: f of the chunk's rows in shared memory, g in registers.
  for (int e = threadIdx.x; e < PB * REPORT_ROWS; e += REPORT_THREADS) {
    const int p = e / REPORT_ROWS, r = e % REPORT_ROWS;
    T hi = ninf, lo = T(0);
    if (p < pc && r < rows && i0 + r < n)
      RN::split_pot(f[(long long)(b0 + p) * n + i0 + r], scale, qn, inv_q, hi, lo);
    fs[p][r][0] = hi;
    fs[p][r][1] = lo;
  }
  T gh[PB][K], gl[PB][K];
#pragma unroll
  for (int p = 0; p < PB; ++p)
#pragma unroll
    for (int q = 0; q < K; ++q) {
      const int j = j0 + 32 * q;
      gh[p][q] = ninf;
      gl[p][q] = T(0);
      if (p < pc && j < m)
        RN::split_pot(g[(long long)(b0 + p) * m + j], scale, qn, inv_q, gh[p][q], gl[p][q]);
    }
  __syncthreads();

  // This thread's column sums in f64, in shared memory (registers hold the f32 partials).
  __shared__ double cold_s[PB * K][REPORT_THREADS];
#pragma unroll
  for (int pq = 0; pq < PB * K; ++pq) cold_s[pq][threadIdx.x] = 0.0;

  const int rend = min(rows, n - i0);
  if (cstride == 0)
    report_row_groups<T, true>(c, cstride, b0, pc, n, m, i0, j0, rend, cb, CB, fs, gh, gl,
                               s_hi, s_lo, qn, inv_q, cold_s, rows_s, rows_part);
  else
    report_row_groups<T, false>(c, cstride, b0, pc, n, m, i0, j0, rend, cb, CB, fs, gh, gl,
                                s_hi, s_lo, qn, inv_q, cold_s, rows_s, rows_part);
  // Columns: this lane's sums over the chunk.
#pragma unroll
  for (int p = 0; p < PB; ++p)
#pragma unroll
    for (int q = 0; q < K; ++q) {
      const int j = j0 + 32 * q;
      if (p < pc && j < m)
        cols_part[((long long)(b0 + p) * RB + rb) * m + j] = cold_s[p * K + q][threadIdx.x];
    }
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Block (b, fb) of REPORT_FINISH_THREADS: the partial sums of problem b's rows and columns
// in the fb-th of gridDim.y slices, finished in a fixed order, and their contribution to
// (‖P1 − μ‖₁, ‖Pᵀ1 − ν‖₁, ⟨P, C⟩, ΣP): part[(b·gridDim.y + fb)·4 + k].
template <typename T>
__device__ void report_slices(const double *rows_part, const double *cols_part, const T *mu,
                              const T *nu, int n, int m, int CB, int RB, double *part) {
  __shared__ double red[4][REPORT_FINISH_THREADS / 32];
  const int b = blockIdx.x, fb = blockIdx.y, FB = gridDim.y, tid = threadIdx.x;
  double er = 0.0, ec = 0.0, cost = 0.0, mass = 0.0;
  const int ni = (n + FB - 1) / FB, mj = (m + FB - 1) / FB;
  for (int i = fb * ni + tid; i < min(n, (fb + 1) * ni); i += REPORT_FINISH_THREADS) {
    const long long k = (long long)b * n + i;
    double s = 0.0, t = 0.0;
    for (int x = 0; x < CB; ++x) {
      s += rows_part[(k * CB + x) * 2];
      t += rows_part[(k * CB + x) * 2 + 1];
    }
    er += fabs(s - (double)mu[k]);
    cost += t;
    mass += s;
  }
  for (int j = fb * mj + tid; j < min(m, (fb + 1) * mj); j += REPORT_FINISH_THREADS) {
    double s = 0.0;
    for (int y = 0; y < RB; ++y) s += cols_part[((long long)b * RB + y) * m + j];
    ec += fabs(s - (double)nu[(long long)b * m + j]);
  }
  er = warp_sum(er);
  ec = warp_sum(ec);
  cost = warp_sum(cost);
  mass = warp_sum(mass);
  const int w = tid >> 5;
  if ((tid & 31) == 0) {
    red[0][w] = er;
    red[1][w] = ec;
    red[2][w] = cost;
    red[3][w] = mass;
  }
  __syncthreads();
  if (tid < 4) {
    double s = 0.0;
    for (int k = 0; k < REPORT_FINISH_THREADS / 32; ++k) s += red[tid][k];
    part[((long long)b * FB + fb) * 4 + tid] = s;
  }
}

// Thread (b, k): out[4·b + k] = Σ over the FB slices, in order.
__device__ void report_finish(const double *part, int B, int FB, double *out) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= 4 * B) return;
  const int b = idx / 4, k = idx % 4;
  double s = 0.0;
  for (int x = 0; x < FB; ++x) s += part[((long long)b * FB + x) * 4 + k];
  out[idx] = s;
}

extern "C" __global__ void report_finish_all(const double *part, int B, int FB, double *out) {
  report_finish(part, B, FB, out);
}

// The plan report of f32 point clouds (Backend::plan_report): each cost in f64 in the
// difference form Σ_k (x_k − y_k)² of the points as given (row-major, pairs×n×d and
// pairs×m×d; `pair` = 1 when each problem has its own pair), its square root for the
// Euclidean metric. A difference of two f32 values is exact in f64, so each cost is exact
// to f64's rounding, where the half-steps' form |x|² + |y|² − 2x·y rounds it by about
// 2^-24·(|x|² + |y|²), a large part of ε·tol at high d. The exponent (f + g − C)·log2(e)/ε
// and its exp2 in f64; the partial sums have report_tiles' layout, so report_slices
// finishes them. Grid: x = row chunks of `rows` rows (a multiple of RC_TR), y = column
// spans of `span` tiles of RC_THREADS columns, z = problems. A thread owns one column of
// each tile and accumulates RC_TR costs at once; the rows' sums over a tile are reduced
// over the warp (warp_transpose_sum) and the block's warps in a fixed order.
#define RC_THREADS 128
#define RC_TR 32
#define RC_KD 16
#define RC_SPAN_MAX 16

// 2^t in f64 to within a few ulps: t = k + r with k = rint(t), |r| ≤ 1/2, 2^r = exp(r·ln 2)
// by its Taylor series to degree 12 (remainder below 2e-16), then scaled by 2^k through the
// exponent bits. 0 below 2^-1074 (and for t = −∞); NaN stays NaN.
__device__ __forceinline__ double report_exp2(double t) {
  if (t < -1074.0) return 0.0;
  const double k = rint(t);
  const double x = (t - k) * 0.69314718055994530942;
  double p = 1.0 / 479001600.0;  // 1/12!
  p = fma(p, x, 1.0 / 39916800.0);
  p = fma(p, x, 1.0 / 3628800.0);
  p = fma(p, x, 1.0 / 362880.0);
  p = fma(p, x, 1.0 / 40320.0);
  p = fma(p, x, 1.0 / 5040.0);
  p = fma(p, x, 1.0 / 720.0);
  p = fma(p, x, 1.0 / 120.0);
  p = fma(p, x, 1.0 / 24.0);
  p = fma(p, x, 1.0 / 6.0);
  p = fma(p, x, 0.5);
  p = fma(p, x, 1.0);
  p = fma(p, x, 1.0);
  if (k >= -1022.0 && k <= 1023.0) return p * __longlong_as_double((long long)(k + 1023.0) << 52);
  return ldexp(p, (int)fmax(fmin(k, 2000.0), -2000.0));
}

extern "C" __global__ void __launch_bounds__(RC_THREADS)
    report_cloud_tiles_f32(const float *__restrict__ x, const float *__restrict__ y, int pair,
                           int d, int root, const float *__restrict__ f,
                           const float *__restrict__ g, int n, int m, int rows, int span,
                           double scale, double *__restrict__ rows_part,
                           double *__restrict__ cols_part) {
  __shared__ double xs[RC_KD][RC_TR];
  __shared__ float ys[RC_THREADS][RC_KD + 1];
  __shared__ double red[RC_THREADS / 32][2 * RC_TR];
  __shared__ double row_sum[2 * RC_TR];
  __shared__ double col_sum[RC_SPAN_MAX][RC_THREADS];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rb = blockIdx.x, cb = blockIdx.y, b = blockIdx.z;
  const int RB = gridDim.x, CB = gridDim.y;
  const long long pb = pair ? b : 0;
  const float *xb = x + pb * (long long)n * d;
  const float *yb = y + pb * (long long)m * d;
  const float *fb = f + (long long)b * n;
  const float *gb = g + (long long)b * m;
  const int i_end = min(n, (rb + 1) * rows);
  const int span_first = cb * span * RC_THREADS;
  for (int t = 0; t < span; ++t) col_sum[t][tid] = 0.0;
  for (int i0 = rb * rows; i0 < i_end; i0 += RC_TR) {
    if (tid < 2 * RC_TR) row_sum[tid] = 0.0;
    for (int t = 0; t < span; ++t) {
      const int j0 = span_first + t * RC_THREADS;
      if (j0 >= m) break;
      const int j = j0 + tid;
      double acc[RC_TR];
#pragma unroll
      for (int r = 0; r < RC_TR; ++r) acc[r] = 0.0;
      for (int k0 = 0; k0 < d; k0 += RC_KD) {
        __syncthreads();
        for (int e = tid; e < RC_TR * RC_KD; e += RC_THREADS) {
          const int r = e / RC_KD, k = e % RC_KD, i = i0 + r, kk = k0 + k;
          xs[k][r] = (i < i_end && kk < d) ? (double)xb[(long long)i * d + kk] : 0.0;
        }
        for (int e = tid; e < RC_THREADS * RC_KD; e += RC_THREADS) {
          const int c = e / RC_KD, k = e % RC_KD, jj = j0 + c, kk = k0 + k;
          ys[c][k] = (jj < m && kk < d) ? yb[(long long)jj * d + kk] : 0.f;
        }
        __syncthreads();
        const int kn = min(RC_KD, d - k0);
        for (int k = 0; k < kn; ++k) {
          const double yk = (double)ys[tid][k];
#pragma unroll
          for (int r = 0; r < RC_TR; ++r) {
            const double dk = xs[k][r] - yk;
            acc[r] = fma(dk, dk, acc[r]);
          }
        }
      }
      const double gj = j < m ? (double)gb[j] : 0.0;
      double col = 0.0;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        double v[RC_TR];  // v[2q + h]: row half·16 + q, h = 0: P, 1: P·C
#pragma unroll
        for (int q = 0; q < RC_TR / 2; ++q) {
          const int r = half * (RC_TR / 2) + q, i = i0 + r;
          double p = 0.0, pc = 0.0;
          if (i < i_end && j < m) {
            const double c = root ? sqrt(acc[r]) : acc[r];
            // 0 for an empty bin's potential (−∞).
            p = report_exp2(((double)fb[i] + gj - c) * scale);
            pc = p > 0.0 ? p * c : 0.0;
          }
          col += p;
          v[2 * q] = p;
          v[2 * q + 1] = pc;
        }
        warp_transpose_sum<double, RC_TR>(v);
        red[warp][half * RC_TR + lane] = v[0];
      }
      if (j < m) col_sum[t][tid] += col;
      __syncthreads();
      if (tid < 2 * RC_TR) {
        double s = 0.0;
#pragma unroll
        for (int w = 0; w < RC_THREADS / 32; ++w) s += red[w][tid];
        row_sum[tid] += s;
      }
    }
    __syncthreads();
    if (tid < 2 * RC_TR) {
      const int i = i0 + tid / 2;
      if (i < i_end) rows_part[(((long long)b * n + i) * CB + cb) * 2 + (tid & 1)] = row_sum[tid];
    }
  }
  for (int t = 0; t < span; ++t) {
    const int j = span_first + t * RC_THREADS + tid;
    if (j < m) cols_part[((long long)b * RB + rb) * m + j] = col_sum[t][tid];
  }
}

#define REPORT_KERNELS(T, SUF)                                                                   \
  extern "C" __global__ void __launch_bounds__(REPORT_THREADS, REPORT_MIN_BLOCKS)              \
      report_tiles_##SUF(const T *f, const T *g, const T *c, long long cstride, int B, int n,    \
                         int m, int rows, double scale, double *rows_part, double *cols_part) {  \
    report_tiles<T>(f, g, c, cstride, B, n, m, rows, scale, rows_part, cols_part);               \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(REPORT_FINISH_THREADS)                            \
      report_slices_##SUF(const double *rows_part, const double *cols_part, const T *mu,         \
                          const T *nu, int n, int m, int CB, int RB, double *part) {             \
    report_slices<T>(rows_part, cols_part, mu, nu, n, m, CB, RB, part);                          \
  }

REPORT_KERNELS(float, f32)
REPORT_KERNELS(double, f64)
