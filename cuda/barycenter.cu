// Elementwise/reduction kernels of the barycenter loop (BarycenterKernels), mirroring
// src/backend/cpu/barycenter.rs. Layouts: v, g are P×K×m; weights P×K; bar P×m.

#include "common.cuh"

// bar[p,x] = −Σ_k w[p,k]·v[p,k,x].
template <typename T>
__device__ __forceinline__ void bary_log_mean(const T *w, const T *v, T *bar, long long total,
                                              int k, int m) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    long long p = i / m, x = i - p * m;
    const T *vp = v + p * (long long)k * m + x;
    const T *wp = w + p * k;
    T acc = T(0);
    for (int j = 0; j < k; ++j) acc = acc - wp[j] * vp[(long long)j * m];
    bar[i] = acc;
  }
}

// Unbalanced barycenters: the weighted power mean in the log domain, in double,
// bar[p,x] = x* + log1p(Σ_k w_k·expm1(t·(x_k − x*)) / Σ_k w_k) / t with x_k = −v[p,k,x] and
// x* = max over w_k > 0 (log of the plain mean where that sum is below −1/2); t = 0 gives the
// weighted mean of x_k. Mirrors log_power_mean in src/backend/barycenter.rs.
template <typename T>
__device__ __forceinline__ void bary_log_power_mean(const T *w, const T *v, T *bar,
                                                    long long total, int k, int m, T t) {
  const double ninf = __longlong_as_double(0xfff0000000000000ULL);
  const double td = (double)t;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    long long p = i / m, x = i - p * m;
    const T *vp = v + p * (long long)k * m + x;
    const T *wp = w + p * k;
    double top = ninf, wsum = 0.0;
    for (int j = 0; j < k; ++j) {
      double wj = (double)wp[j];
      if (wj > 0.0) {
        top = fmax(top, -(double)vp[(long long)j * m]);
        wsum += wj;
      }
    }
    double out;
    if (!(wsum > 0.0)) {
      out = ninf;
    } else if (top == ninf || top == -ninf) {
      out = top;
    } else if (td == 0.0) {
      double mean = 0.0;
      for (int j = 0; j < k; ++j) {
        double wj = (double)wp[j];
        if (wj > 0.0) mean += wj * -(double)vp[(long long)j * m];
      }
      out = mean / wsum;
    } else {
      double below = 0.0, sum = 0.0;
      for (int j = 0; j < k; ++j) {
        double wj = (double)wp[j];
        if (wj > 0.0) {
          double d = td * (-(double)vp[(long long)j * m] - top);
          below += wj * ::expm1(d);
          sum += wj * ::exp(d);
        }
      }
      double s = below / wsum;
      double lm = s > -0.5 ? ::log1p(s) : ::log(sum / wsum);
      out = top + lm / td;
    }
    bar[i] = (T)out;
  }
}

// g[p,k,x] = bar[p,x] + v[p,k,x].
template <typename T>
__device__ __forceinline__ void bary_potential(const T *bar, const T *v, T *g, long long total,
                                               int k, int m) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    long long x = i % m, p = i / ((long long)k * m);
    g[i] = bar[p * m + x] + v[i];
  }
}

// err[p] = Σ_x std_k exp((g − v)/ε) (population std, two-pass, f64); one block per problem.
template <typename T>
__device__ __forceinline__ void bary_spread(const T *g, const T *v, T *err, int k, int m, T eps) {
  __shared__ double scratch[32];
  long long p = blockIdx.x;
  const T *gp = g + p * (long long)k * m;
  const T *vp = v + p * (long long)k * m;
  double inv = 1.0 / (double)eps;
  double total = 0.0;
  for (int x = threadIdx.x; x < m; x += blockDim.x) {
    double mean = 0.0;
    for (int j = 0; j < k; ++j)
      mean += ::exp(((double)gp[(long long)j * m + x] - (double)vp[(long long)j * m + x]) * inv);
    mean /= (double)k;
    double var = 0.0;
    for (int j = 0; j < k; ++j) {
      double d =
          ::exp(((double)gp[(long long)j * m + x] - (double)vp[(long long)j * m + x]) * inv) - mean;
      var += d * d;
    }
    total += ::sqrt(var / (double)k);
  }
  total = block_sum(total, scratch);
  if (threadIdx.x == 0) err[p] = (T)total;
}

#define BARY_KERNELS(T, SUF)                                                                  \
  extern "C" __global__ void bary_log_mean_##SUF(const T *w, const T *v, T *bar,             \
                                                 long long total, int k, int m) {            \
    bary_log_mean<T>(w, v, bar, total, k, m);                                                \
  }                                                                                          \
  extern "C" __global__ void bary_log_power_mean_##SUF(const T *w, const T *v, T *bar,       \
                                                       long long total, int k, int m, T t) { \
    bary_log_power_mean<T>(w, v, bar, total, k, m, t);                                       \
  }                                                                                          \
  extern "C" __global__ void bary_potential_##SUF(const T *bar, const T *v, T *g,            \
                                                  long long total, int k, int m) {           \
    bary_potential<T>(bar, v, g, total, k, m);                                               \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                          \
      bary_spread_##SUF(const T *g, const T *v, T *err, int k, int m, T eps) {               \
    bary_spread<T>(g, v, err, k, m, eps);                                                    \
  }

BARY_KERNELS(float, f32)
BARY_KERNELS(double, f64)
