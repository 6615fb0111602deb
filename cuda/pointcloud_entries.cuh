// Part of the point-cloud module (pointcloud.cu includes its parts in order, and NVRTC
// compiles them as one source): the entry points of the FMA kernels (d ≤ 16 and any d), and
// the clouds' preparation.

// ---------------------------------------------------------------------------------------
// Batched clouds: with `pair` = 1, problem b = blockIdx.y has its own pair of clouds, stored
// one after the other (`len` points of `width` values each: coordinates, norms or TF32
// operands); with `pair` = 0 every problem reads the shared pair. Every entry point whose
// grid has the problems along y moves its cloud pointers to its problem's pair with this.
// (The select, rather than pair·offset, lets ptxas keep the registers and occupancy of the
// shared-pair kernels: no kernel spills, the small-d ones keep their registers, the any-d
// and tensor-core ones take ≤ 18 more at the same blocks/SM.)
#define PC_PAIR(P, LEN, WIDTH) P += pair ? (long long)blockIdx.y * (long long)(LEN) * (WIDTH) : 0LL

// ---------------------------------------------------------------------------------------
// Entry points: D1 to D4 (exactly that many coordinates) and D16 (at most 16); `root`
// picks |x−y| over |x−y|² (both bodies are compiled, the branch is uniform); `pair` as
// PC_PAIR.
#define PC_STEP_ARGS(T)                                                                 \
  const T *out_pts, const T *red_pts, const T *other, const T *lm, T *out, T *part_m,   \
      T *part_s, int B, int K, int L, int d, T eps, T scale, int kslice, int root, int pair
#define PC_STEP_PASS out_pts, red_pts, other, lm, out, part_m, part_s, B, K, L, d, eps, scale, kslice
#define PC_ROWS_ARGS(T)                                                                 \
  const T *out_pts, const T *red_pts, const T *own, const T *other, const T *vals,      \
      long long vstride, T *mass, T *res, int K, int L, int d, int kv, T eps, T scale,  \
      int root, int mode, const T *own_adj, T alpha, int pair

#define PC_STEP(T, SUF, NAME, DMAX, DARG, TJ, MINB)                                     \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK, MINB)                               \
      NAME##_##SUF(PC_STEP_ARGS(T)) {                                                        \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    if (root)                                                                                \
      pc_sinkstep_body<T, DMAX, TJ, true, false>(out_pts, red_pts, other, lm, out, part_m,   \
                                                 part_s, B, K, L, dd, eps, scale, kslice);   \
    else                                                                                     \
      pc_sinkstep_body<T, DMAX, TJ, false, false>(out_pts, red_pts, other, lm, out, part_m,  \
                                                  part_s, B, K, L, dd, eps, scale, kslice);  \
  }

// The norm form (|x−y|² of centred clouds, f32): `scale` and `root` are not read.
// MINB: blocks per SM the kernel is compiled for (registers ≤ 65536 / (PC_BLOCK · MINB)).
#define PC_STEP_NORM(NAME, DMAX, DARG, TJ, MINB)                                             \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK, MINB)                               \
      NAME##_f32(PC_STEP_ARGS(float)) {                                                       \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    pc_sinkstep_body<float, DMAX, TJ, false, true>(out_pts, red_pts, other, lm, out, part_m, \
                                                   part_s, B, K, L, dd, eps, scale, kslice); \
  }

#define PC_ROWS_BODY(T, DMAX, CH, ROOT, MODE)                                                \
  pc_rows_body<T, DMAX, CH, ROOT, MODE>(out_pts, red_pts, own, other, vals, vstride, mass,   \
                                        res, K, L, dd, kv, eps, scale, own_adj, alpha)

#define PC_ROWS(T, SUF, NAME, DMAX, DARG, CH)                                                \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK) NAME##_##SUF(PC_ROWS_ARGS(T)) {     \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    if (mode == 0) {                                                                         \
      if (root)                                                                              \
        PC_ROWS_BODY(T, DMAX, 1, true, 0);                                                   \
      else                                                                                   \
        PC_ROWS_BODY(T, DMAX, 1, false, 0);                                                  \
    } else if (mode == 1) {                                                                  \
      if (root)                                                                              \
        PC_ROWS_BODY(T, DMAX, DMAX, true, 1);                                                \
      else                                                                                   \
        PC_ROWS_BODY(T, DMAX, DMAX, false, 1);                                               \
    } else {                                                                                 \
      if (root)                                                                              \
        PC_ROWS_BODY(T, DMAX, CH, true, 2);                                                  \
      else                                                                                   \
        PC_ROWS_BODY(T, DMAX, CH, false, 2);                                                 \
    }                                                                                        \
  }

// Mode 3 (the adjoint-weighted field) in entry points of its own, so that the other modes
// keep their register budget.
#define PC_ADJ(T, SUF, NAME, DMAX, DARG)                                                     \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK) NAME##_##SUF(PC_ROWS_ARGS(T)) {     \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    if (root)                                                                                \
      PC_ROWS_BODY(T, DMAX, DMAX, true, 3);                                                  \
    else                                                                                     \
      PC_ROWS_BODY(T, DMAX, DMAX, false, 3);                                                 \
  }

// MB3, MB4, MB16: blocks per SM the d ≤ 3, d = 4 and d ≤ 16 half-steps are compiled for.
#define PC_ALL(T, SUF, TJ, MB3, MB4, MB16)                                              \
  PC_STEP(T, SUF, pc_sinkstep_d1, 1, 1, TJ, MB3)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d2, 2, 2, TJ, MB3)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d3, 3, 3, TJ, MB3)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d4, 4, 4, TJ, MB4)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d16, PC_DMAX, d, 2, MB16)                                 \
  PC_ROWS(T, SUF, pc_rows_d4, 4, d, PC_DMAX)                                            \
  PC_ROWS(T, SUF, pc_rows_d16, PC_DMAX, d, PC_DMAX)                                     \
  PC_ADJ(T, SUF, pc_adjoint_d4, 4, d)                                                   \
  PC_ADJ(T, SUF, pc_adjoint_d16, PC_DMAX, d)                                            \
  extern "C" __global__ void pc_reduce_##SUF(const T *x, double *out, int L) {               \
    pc_reduce<T>(x, out, L);                                                            \
  }                                                                                          \
  extern "C" __global__ void pc_plan_##SUF(const T *x, const T *y, const T *f, const T *g,   \
                                           T *P, int B, int n, int m, int d, int root,  \
                                           T eps, int pair) {                           \
    pc_plan<T>(x, y, f, g, P, B, n, m, d, root, eps, pair);                             \
  }
// Any dimension: the half-step, the row sums (`diff` picks the exact difference form, for
// many channels at d ≤ PC_DMAX on uncentred clouds) and the squared norms.
#define PC_DN_PASS out_pts, red_pts, out_nrm, red_nrm, own, other, h, vals, vstride, mass, res, K, L, d, kv, eps
#define PC_DN_ROWS(T, ROOT)                                                                  \
  if (mode == 0)                                                                             \
    pc_rows_dn_body<T, ROOT, 0, false>(PC_DN_PASS);                                          \
  else if (mode == 1)                                                                        \
    pc_rows_dn_body<T, ROOT, 1, false>(PC_DN_PASS);                                          \
  else if (diff)                                                                             \
    pc_rows_dn_body<T, ROOT, 2, true>(PC_DN_PASS);                                           \
  else                                                                                       \
    pc_rows_dn_body<T, ROOT, 2, false>(PC_DN_PASS);
#define PC_DN(T, SUF)                                                                        \
  extern "C" __global__ void __launch_bounds__(256, 1)                                       \
      pc_sinkstep_dn_##SUF(const T *out_pts, const T *red_pts, const T *out_nrm,             \
                           const T *red_nrm, const T *other, const T *lm, T *out, T *part_m, \
                           T *part_s, int B, int K, int L, int d, T eps, int kslice,         \
                           int root, int pair) {                                             \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    PC_PAIR(out_nrm, L, 1);                                                                  \
    PC_PAIR(red_nrm, K, 1);                                                                  \
    if (root)                                                                                \
      pc_sinkstep_dn_body<T, true>(out_pts, red_pts, out_nrm, red_nrm, other, lm, out,       \
                                   part_m, part_s, B, K, L, d, eps, kslice);                 \
    else                                                                                     \
      pc_sinkstep_dn_body<T, false>(out_pts, red_pts, out_nrm, red_nrm, other, lm, out,      \
                                    part_m, part_s, B, K, L, d, eps, kslice);                \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256, 1)                                       \
      pc_rows_dn_##SUF(const T *out_pts, const T *red_pts, const T *out_nrm,                 \
                       const T *red_nrm, const T *own, const T *other, const T *h,           \
                       const T *vals, long long vstride, T *mass, T *res, int K, int L,      \
                       int d, int kv, T eps, int root, int mode, int diff, int pair) {       \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    PC_PAIR(out_nrm, L, diff ? d : 1);                                                       \
    PC_PAIR(red_nrm, K, diff ? d : 1);                                                       \
    if (root) {                                                                              \
      PC_DN_ROWS(T, true)                                                                    \
    } else {                                                                                 \
      PC_DN_ROWS(T, false)                                                                   \
    }                                                                                        \
  }                                                                                          \
  extern "C" __global__ void pc_sqnorms_##SUF(const T *pts, T *out, int len, int d, int B) { \
    pc_sqnorms<T>(pts, out, len, d, B);                                                      \
  }
// Outputs per thread for d ≤ 4: 4 in f32 (79 registers for d = 3), 2 in f64 (the norm-form
// entry points below take their own).
PC_ALL(float, f32, 4, 3, 2, 3)
PC_ALL(double, f64, 2, 1, 1, 1)
// d ≤ 2: 8 outputs per thread at 2 blocks per SM (128 registers) halve the shared loads per
// pair, which pays at d = 1 and 2 (not at d = 3, where the MMA kernel runs anyway).
PC_STEP_NORM(pc_sinkstep_nf_d1, 1, 1, 8, 2)
PC_STEP_NORM(pc_sinkstep_nf_d2, 2, 2, 8, 2)
PC_STEP_NORM(pc_sinkstep_nf_d16, PC_DMAX, d, 2, 1)
PC_DN(float, f32)
PC_DN(double, f64)

// ---------------------------------------------------------------------------------------
// Preparing clouds on the device (from row-major points, the caller's memory or an
// upload): per-coordinate numbers, the centring with the structure-of-arrays transpose, and
// the largest squared norms, so that a cloud from host arrays and one from device buffers
// go through the same steps.

// Per pair b and coordinate t of B row-major pairs x (B×n×d), y (B×m×d), over the n + m
// points (one block per (t, b), blockIdx.x = t, blockIdx.y = b), in f64:
// out[4·(b·d + t)..] = (Σ, min, max, #non-finite), mean[b·d + t] = Σ/(n + m); NaN takes
// no part in min/max.
template <typename T>
__device__ __forceinline__ void pc_coord_stats(const T *__restrict__ x, const T *__restrict__ y,
                                               double *__restrict__ out,
                                               double *__restrict__ mean, int n, int m, int d) {
  __shared__ double scratch[32];
  __shared__ double lo_s[32], hi_s[32];
  const double inf = -(double)Num<double>::neg_inf();
  const int t = blockIdx.x;
  const long long b = blockIdx.y;
  const T *xb = x + b * n * (long long)d, *yb = y + b * m * (long long)d;
  double sum = 0.0, lo = inf, hi = -inf, bad = 0.0;
  for (long long k = threadIdx.x; k < (long long)n + m; k += blockDim.x) {
    const double v = (double)(k < n ? xb[k * d + t] : yb[(k - n) * d + t]);
    sum += v;
    lo = fmin(lo, v);
    hi = fmax(hi, v);
    bad += isfinite(v) ? 0.0 : 1.0;
  }
  block_min_max(lo, hi, lo_s, hi_s);
  sum = block_sum(sum, scratch);
  __syncthreads();
  bad = block_sum(bad, scratch);
  if (threadIdx.x == 0) {
    double *o = out + 4 * (b * d + t);
    o[0] = sum;
    o[1] = lo;
    o[2] = hi;
    o[3] = bad;
    mean[b * d + t] = sum / (double)((long long)n + m);
  }
}

// B row-major clouds of len points (pts, B×len×d) less the per-pair means (mean[b·d + t],
// f64), written structure-of-arrays: out[b·len·d + t·len + i] = T(pts[b,i,t] − mean[b,t])
// (the difference in f64, rounded once).
template <typename T>
__device__ __forceinline__ void pc_centre_soa(const T *__restrict__ pts,
                                              const double *__restrict__ mean,
                                              T *__restrict__ out, int len, int d, int B) {
  const long long per = (long long)len * d, total = per * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / per, r = e % per, t = r / len, i = r % len;
    out[e] = (T)__dsub_rn((double)pts[b * per + i * d + t], mean[b * d + t]);
  }
}

// The largest |p|² (f64, summed over t in order, unfused as on the host) and the largest
// |p_t| (the scale of the F16 tensor-core operands) of the len points of structure-of-arrays
// cloud blockIdx.x of `pts` (B clouds one after the other): out[0] and out[1].
template <typename T>
__device__ __forceinline__ void pc_cloud_radii(const T *__restrict__ pts, double *__restrict__ out,
                                               int len, int d) {
  __shared__ double hi_s[2][32];
  const T *p = pts + (long long)blockIdx.x * len * d;
  double sq = 0.0, ab = 0.0;
  for (int i = threadIdx.x; i < len; i += blockDim.x) {
    double acc = 0.0, big = 0.0;
    for (int t = 0; t < d; ++t) {
      const double v = (double)p[(long long)t * len + i];
      acc = __dadd_rn(acc, __dmul_rn(v, v));
      big = fmax(big, fabs(v));
    }
    sq = fmax(sq, acc);
    ab = fmax(ab, big);
  }
  for (int off = 16; off > 0; off >>= 1) {
    sq = fmax(sq, __shfl_xor_sync(0xffffffffu, sq, off));
    ab = fmax(ab, __shfl_xor_sync(0xffffffffu, ab, off));
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) hi_s[0][warp] = sq, hi_s[1][warp] = ab;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < nw; ++w) sq = fmax(sq, hi_s[0][w]), ab = fmax(ab, hi_s[1][w]);
    out[0] = sq;
    out[1] = ab;
  }
}

#define PC_PREP(T, SUF)                                                                      \
  extern "C" __global__ void pc_coord_stats_##SUF(const T *x, const T *y, double *out,       \
                                                  double *mean, int n, int m, int d) {       \
    pc_coord_stats<T>(x, y, out, mean, n, m, d);                                             \
  }                                                                                          \
  extern "C" __global__ void pc_centre_soa_##SUF(const T *pts, const double *mean, T *out,   \
                                                 int len, int d, int B) {                    \
    pc_centre_soa<T>(pts, mean, out, len, d, B);                                             \
  }                                                                                          \
  /* block (b, c): pair b's x (c = 0, n points) or y (m), out[2·(c·B + b) .. + 2) */          \
  extern "C" __global__ void pc_cloud_radii_##SUF(const T *x, const T *y, double *out, int n, \
                                                  int m, int d) {                            \
    const bool ys = blockIdx.y == 1;                                                         \
    pc_cloud_radii<T>(ys ? y : x, out + 2 * (blockIdx.y * gridDim.x + blockIdx.x), ys ? m : n, \
                      d);                                                                    \
  }
PC_PREP(float, f32)
PC_PREP(double, f64)
