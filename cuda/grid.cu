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
