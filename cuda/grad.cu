// Kernels of the implicit OT gradients and the batched CG (GradKernels), mirroring
// src/backend/cpu/grad.rs: plans are B×n×m, vectors B×n or B×m, row-major. Reductions
// accumulate in f64 (each product formed in T first, as on the CPU). Simple and correct:
// a warp per row for row reductions, a thread per output for column reductions.

#include "common.cuh"

#define GRAD_FULL 0xffffffffu

__device__ __forceinline__ double grad_warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(GRAD_FULL, v, off);
  return v;
}

// Row sums of (W ⊙ P)·x or W ⊙ P: out[row] = Σ_j w[b,i,j]·P[row,j]·x[b,j] for rows = B·n;
// x == nullptr means all ones, has_w == 0 means W = 1; W is B matrices (wstride = n·m) or one.
template <typename T>
__device__ __forceinline__ void grad_rows(const T *p, const T *x, const T *w, long long wstride,
                                          int has_w, T *out, long long rows, int n, int m) {
  const int lane = threadIdx.x & 31;
  const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < rows;
       row += nw) {
    const long long b = row / n, i = row - b * n;
    const T *pr = p + row * m;
    const T *xb = x ? x + b * m : nullptr;
    const T *wr = has_w ? w + b * wstride + i * m : nullptr;
    double acc = 0.0;
    for (int j = lane; j < m; j += 32) {
      T v = pr[j];
      if (has_w) v = wr[j] * v;
      if (xb) v = v * xb[j];
      acc += (double)v;
    }
    acc = grad_warp_sum(acc);
    if (lane == 0) out[row] = (T)acc;
  }
}

// Column sums: out[b,j] = Σ_i w[b,i,j]·P[b,i,j]·x[b,i]; one thread per (b, j).
template <typename T>
__device__ __forceinline__ void grad_cols(const T *p, const T *x, const T *w, long long wstride,
                                          int has_w, T *out, long long batch, int n, int m) {
  const long long total = batch * m;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += (long long)gridDim.x * blockDim.x) {
    const long long b = k / m, j = k - b * m;
    const T *pb = p + b * (long long)n * m + j;
    const T *wb = has_w ? w + b * wstride + j : nullptr;
    const T *xb = x ? x + b * n : nullptr;
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      T v = pb[(long long)i * m];
      if (has_w) v = wb[(long long)i * m] * v;
      if (xb) v = v * xb[i];
      acc += (double)v;
    }
    out[k] = (T)acc;
  }
}

// out = (alpha + beta·(W − a ⊕ c)) ⊙ P.
template <typename T>
__device__ __forceinline__ void grad_assemble(const T *p, const T *w, long long wstride,
                                              const T *a, const T *c, T alpha, T beta, T *out,
                                              long long total, int n, int m) {
  const long long per = (long long)n * m;
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += (long long)gridDim.x * blockDim.x) {
    const long long b = k / per, ij = k - b * per, i = ij / m, j = ij - i * m;
    out[k] = (alpha + beta * (w[b * wstride + ij] - a[b * n + i] - c[b * m + j])) * p[k];
  }
}

// out[b] = Σ_k x[b,k]·y[b,k] in f64; one warp per problem.
template <typename T>
__device__ __forceinline__ void grad_dot(const T *x, const T *y, double *out, long long batch,
                                         long long per) {
  const int lane = threadIdx.x & 31;
  const long long nw = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long b = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; b < batch;
       b += nw) {
    const T *xb = x + b * per, *yb = y + b * per;
    double acc = 0.0;
    for (long long k = lane; k < per; k += 32) acc += (double)xb[k] * (double)yb[k];
    acc = grad_warp_sum(acc);
    if (lane == 0) out[b] = acc;
  }
}

// mode 0: y += alpha[b]·x (skipped where alpha[b] = 0); mode 1: y = x + beta[b]·y.
template <typename T>
__device__ __forceinline__ void grad_scaled(const double *coef, const T *x, T *y, long long total,
                                            long long per, int mode) {
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += (long long)gridDim.x * blockDim.x) {
    const double c = coef[k / per];
    if (mode == 0) {
      if (c != 0.0) y[k] = y[k] + (T)c * x[k];
    } else {
      y[k] = x[k] + (T)c * y[k];
    }
  }
}

// mode 0: y = a⊙x (y not read); 1: y = a⊙x + beta·y; 2: y = 1/x where x > 0 and finite, else 0;
// 3: y = [x > 0].
template <typename T>
__device__ __forceinline__ void grad_elementwise(const T *a, const T *x, T beta, T *y,
                                                 long long total, int mode) {
  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < total;
       k += (long long)gridDim.x * blockDim.x) {
    const T v = x[k];
    T o;
    if (mode == 0) {
      o = a[k] * v;
    } else if (mode == 1) {
      o = a[k] * v + beta * y[k];
    } else if (mode == 2) {
      const T r = T(1) / v;
      o = (v > T(0) && r - r == T(0)) ? r : T(0);
    } else {
      o = v > T(0) ? T(1) : T(0);
    }
    y[k] = o;
  }
}

#define GRAD_KERNELS(T, SUF)                                                                   \
  extern "C" __global__ void grad_rows_##SUF(const T *p, const T *x, const T *w,              \
                                             long long wstride, int has_w, T *out,            \
                                             long long rows, int n, int m) {                  \
    grad_rows<T>(p, x, w, wstride, has_w, out, rows, n, m);                                   \
  }                                                                                           \
  extern "C" __global__ void grad_cols_##SUF(const T *p, const T *x, const T *w,              \
                                             long long wstride, int has_w, T *out,            \
                                             long long batch, int n, int m) {                 \
    grad_cols<T>(p, x, w, wstride, has_w, out, batch, n, m);                                  \
  }                                                                                           \
  extern "C" __global__ void grad_assemble_##SUF(const T *p, const T *w, long long wstride,   \
                                                 const T *a, const T *c, T alpha, T beta,     \
                                                 T *out, long long total, int n, int m) {     \
    grad_assemble<T>(p, w, wstride, a, c, alpha, beta, out, total, n, m);                     \
  }                                                                                           \
  extern "C" __global__ void grad_dot_##SUF(const T *x, const T *y, double *out,              \
                                            long long batch, long long per) {                 \
    grad_dot<T>(x, y, out, batch, per);                                                       \
  }                                                                                           \
  extern "C" __global__ void grad_scaled_##SUF(const double *coef, const T *x, T *y,          \
                                               long long total, long long per, int mode) {    \
    grad_scaled<T>(coef, x, y, total, per, mode);                                             \
  }                                                                                           \
  extern "C" __global__ void grad_elementwise_##SUF(const T *a, const T *x, T beta, T *y,     \
                                                    long long total, int mode) {              \
    grad_elementwise<T>(a, x, beta, y, total, mode);                                          \
  }

GRAD_KERNELS(float, f32)
GRAD_KERNELS(double, f64)
