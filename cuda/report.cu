// The plan report of a dense cost (Backend::plan_report): the row and column sums of
// P_ij = exp((f_i + g_j - C_ij)/eps), the transport cost and the mass, evaluated entry by
// entry from the stored f, g and C (exponent in f64, exponential in T, sums in f64), so
// the reported errors are those of the plan the potentials define. Every sum runs in a fixed order (lanes, then a fixed shuffle tree), so
// the result does not depend on scheduling.
//
// Layout: f is B×n, g is B×m, C is n×m (shared: cstride = 0) or B×n×m (cstride = n·m).

// One entry of the plan, P_ij = exp((f_i + g_j - C_ij)/eps): the exponent in f64 (the
// difference of the stored values, exact), its exponential in T's precision (f64: exp;
// f32: expf, within 2 ulp, on the single-precision pipe), summed by the callers in f64.
// 0 where a potential is -inf.
template <typename T> __device__ __forceinline__ double plan_entry(T fi, T gj, T cij, double inv_eps);
template <>
__device__ __forceinline__ double plan_entry<double>(double fi, double gj, double cij,
                                                     double inv_eps) {
  return exp((fi + gj - cij) * inv_eps); // exp(-inf) = 0
}
template <>
__device__ __forceinline__ double plan_entry<float>(float fi, float gj, float cij,
                                                    double inv_eps) {
  double t = ((double)fi + (double)gj - (double)cij) * inv_eps;
  return (double)expf((float)t); // expf(-inf) = 0
}

__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// One warp per row (b, i): rows[2·(b·n + i)] = Σ_j P_ij, rows[2·(…) + 1] = Σ_j P_ij·C_ij.
template <typename T>
__device__ void report_rows(const T *f, const T *g, const T *c, long long cstride, int B, int n,
                            int m, double inv_eps, double *rows) {
  long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  int lane = threadIdx.x & 31;
  if (warp >= (long long)B * n) return;
  int b = (int)(warp / n), i = (int)(warp % n);
  T fi = f[warp];
  const T *gb = g + (long long)b * m;
  const T *ci = c + b * cstride + (long long)i * m;
  double s = 0.0, t = 0.0;
  if (fi != Num<T>::neg_inf()) {
    for (int j = lane; j < m; j += 32) {
      T cij = ci[j];
      double p = plan_entry(fi, gb[j], cij, inv_eps);
      s += p;
      t += p * (double)cij;
    }
  }
  s = warp_sum(s);
  t = warp_sum(t);
  if (lane == 0) {
    rows[2 * warp] = s;
    rows[2 * warp + 1] = t;
  }
}

// One thread per column (b, j): cols[b·m + j] = Σ_i P_ij, i in order.
template <typename T>
__device__ void report_cols(const T *f, const T *g, const T *c, long long cstride, int B, int n,
                            int m, double inv_eps, double *cols) {
  long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)B * m) return;
  int b = (int)(idx / m), j = (int)(idx % m);
  T gj = g[idx];
  const T *fb = f + (long long)b * n;
  const T *cj = c + b * cstride + j;
  double s = 0.0;
  if (gj != Num<T>::neg_inf()) {
    for (int i = 0; i < n; ++i) s += plan_entry(fb[i], gj, cj[(long long)i * m], inv_eps);
  }
  cols[idx] = s;
}

// One block of 256 threads per problem b: out[4·b..] = (‖P1 − μ‖₁, ‖Pᵀ1 − ν‖₁, ⟨P, C⟩, ΣP).
template <typename T>
__device__ void report_finish(const double *rows, const double *cols, const T *mu, const T *nu,
                              int n, int m, double *out) {
  __shared__ double part[4][8];
  int b = blockIdx.x, tid = threadIdx.x;
  double er = 0.0, ec = 0.0, cost = 0.0, mass = 0.0;
  for (int i = tid; i < n; i += 256) {
    long long k = (long long)b * n + i;
    er += fabs(rows[2 * k] - (double)mu[k]);
    cost += rows[2 * k + 1];
    mass += rows[2 * k];
  }
  for (int j = tid; j < m; j += 256) {
    long long k = (long long)b * m + j;
    ec += fabs(cols[k] - (double)nu[k]);
  }
  er = warp_sum(er);
  ec = warp_sum(ec);
  cost = warp_sum(cost);
  mass = warp_sum(mass);
  int w = tid >> 5;
  if ((tid & 31) == 0) {
    part[0][w] = er;
    part[1][w] = ec;
    part[2][w] = cost;
    part[3][w] = mass;
  }
  __syncthreads();
  if (tid < 4) {
    double s = 0.0;
    for (int k = 0; k < 8; ++k) s += part[tid][k];
    out[4 * b + tid] = s;
  }
}

#define REPORT_KERNELS(T, SUF)                                                                   \
  extern "C" __global__ void __launch_bounds__(256)                                              \
      report_rows_##SUF(const T *f, const T *g, const T *c, long long cstride, int B, int n,      \
                        int m, double inv_eps, double *rows) {                                   \
    report_rows<T>(f, g, c, cstride, B, n, m, inv_eps, rows);                                    \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                              \
      report_cols_##SUF(const T *f, const T *g, const T *c, long long cstride, int B, int n,      \
                        int m, double inv_eps, double *cols) {                                   \
    report_cols<T>(f, g, c, cstride, B, n, m, inv_eps, cols);                                    \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256)                                              \
      report_finish_##SUF(const double *rows, const double *cols, const T *mu, const T *nu,      \
                          int n, int m, double *out) {                                           \
    report_finish<T>(rows, cols, mu, nu, n, m, out);                                             \
  }

REPORT_KERNELS(float, f32)
REPORT_KERNELS(double, f64)
