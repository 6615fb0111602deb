// Part of the Sinkhorn module (sinkstep.cu includes its parts in order, and NVRTC
// compiles them as one source): marginal errors, transport costs, plans and the
// small elementwise kernels.

// ---------------------------------------------------------------------------------------
// err[b] = Σ_k |a − a·exp((old − new)/eps)| over a > 0 (one block per problem).
template <typename T>
__device__ __forceinline__ void marginal_error(const T *__restrict__ a, const T *__restrict__ old,
                                               const T *__restrict__ nw, T *__restrict__ err,
                                               int per, T eps) {
  __shared__ double scratch[32];
  const long long base = (long long)blockIdx.x * per;
  double acc = 0.0;
  for (int k = threadIdx.x; k < per; k += blockDim.x) {
    const T av = a[base + k];
    if (av > T(0)) {
      const T got = av * Num<T>::exp((old[base + k] - nw[base + k]) / eps);
      acc += (double)fabs(av - got);
    }
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) err[blockIdx.x] = (T)acc;
}

// One side of each problem of an unbalanced plan, in f64 (one block per problem; see
// RelaxedSide in src/backend/mod.rs, half_step_change beside it): with
// q = (pot − half)/eps, r = a·exp(q), d = pot − eps·log a and the relaxed half-step's change
// s = log(r'/r) = −phi·q − d/(rho + eps) (s = −q when exact, rho = ∞), over a > 0,
//   out[4b..] = (Σ |r' − r|, Σ r, Σ r·d, Σ r·q − r + a).
// s is formed from d/(rho + eps), never d/rho: rho ≪ eps does not magnify the rounding of d.
template <typename T>
__device__ __forceinline__ void relaxed_side(const T *__restrict__ a, const T *__restrict__ pot,
                                             const T *__restrict__ half, double *__restrict__ out,
                                             int per, double eps, double rho, int exact) {
  __shared__ double scratch[32];
  const long long base = (long long)blockIdx.x * per;
  double res = 0.0, mass = 0.0, dual = 0.0, kl = 0.0;
  for (int k = threadIdx.x; k < per; k += blockDim.x) {
    const double ak = (double)a[base + k];
    if (ak > 0.0) {
      const double pk = (double)pot[base + k], hk = (double)half[base + k];
      const double q = (pk - hk) / eps;
      const double d = pk - eps * log(ak);
      const double r = ak * exp(q);
      const double step = exact ? -q : -(rho / (rho + eps)) * q - d / (rho + eps);
      // r underflowed (or overflowed): r' = a·exp(q + step) directly.
      res += (r > 0.0 && isfinite(r)) ? r * fabs(expm1(step)) : fabs(ak * exp(q + step) - r);
      mass += r;
      dual += r * d;
      kl += r * q - r + ak;
    }
  }
  res = block_sum(res, scratch);
  __syncthreads();
  mass = block_sum(mass, scratch);
  __syncthreads();
  dual = block_sum(dual, scratch);
  __syncthreads();
  kl = block_sum(kl, scratch);
  if (threadIdx.x == 0) {
    double *o = out + 4 * (long long)blockIdx.x;
    o[0] = res;
    o[1] = mass;
    o[2] = dual;
    o[3] = kl;
  }
}

// Partial transport costs Σ_{i in rows, j} exp((f_i + g_j − C_ij)/eps)·C_ij, one double
// per (problem, row block); the host adds them.
template <typename T>
__device__ __forceinline__ void transport_cost(const T *__restrict__ Cm, long long cost_stride,
                                               const T *__restrict__ f, const T *__restrict__ g,
                                               double *__restrict__ partial, int n, int m,
                                               int rows, T eps) {
  __shared__ double scratch[32];
  const int b = blockIdx.y;
  const T *Cb = Cm + (long long)b * cost_stride;
  const T s = T(LOGOT_LOG2E) / eps;
  double acc = 0.0;
  for (int r = 0; r < rows; ++r) {
    const int i = blockIdx.x * rows + r;
    if (i >= n) break;
    const T fi = f[(long long)b * n + i];
    if (fi == Num<T>::neg_inf()) continue;
    T loc = T(0);
    for (int j = threadIdx.x; j < m; j += blockDim.x) {
      const T c = Cb[(long long)i * m + j];
      loc += Num<T>::exp2((fi + g[(long long)b * m + j] - c) * s) * c;
    }
    acc += (double)loc;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[(long long)b * gridDim.x + blockIdx.x] = acc;
}

// P[b,i,j] = exp((f_i + g_j − C_ij)/eps).
template <typename T>
__device__ __forceinline__ void plan(const T *__restrict__ Cm, long long cost_stride,
                                     const T *__restrict__ f, const T *__restrict__ g,
                                     T *__restrict__ P, int B, int n, int m, T eps) {
  const long long per = (long long)n * m, total = per * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / per, r = e % per;
    const int i = (int)(r / m), j = (int)(r % m);
    const T c = Cm[b * cost_stride + r];
    P[e] = Num<T>::exp((f[b * n + i] + g[b * m + j] - c) / eps);
  }
}

template <typename T>
__device__ __forceinline__ void fill(T *__restrict__ out, long long len, T v) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    out[e] = v;
}

// Unbalanced half-step from the balanced one, in place: out = (1 − phi)·eps·lm + phi·out,
// −∞ where lm = −∞ (zero-mass bins).
template <typename T>
__device__ __forceinline__ void relax(T *__restrict__ out, const T *__restrict__ lm, long long len,
                                      T eps, T phi) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x) {
    const T l = lm[e];
    out[e] = l == Num<T>::neg_inf() ? l : (T(1) - phi) * eps * l + phi * out[e];
  }
}

// A block of rows × width elements between two row pitches (a cluster's shares):
// dst[r·dst_pitch + c] = src[r·src_pitch + c].
template <typename T>
__device__ __forceinline__ void copy_block(const T *__restrict__ src, long long src_pitch,
                                           T *__restrict__ dst, long long dst_pitch,
                                           long long rows, long long width) {
  const long long len = rows * width;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x) {
    const long long r = e / width, c = e - r * width;
    dst[r * dst_pitch + c] = src[r * src_pitch + c];
  }
}

// The f half-step over the union of column shards from each shard's own (a cluster split
// by target points): out[i] = −eps·log Σ_k exp(−parts[k·len + i]/eps), from the smallest
// part. +inf parts (shards without mass) add nothing; all −inf (a zero-mass bin) gives −inf.
template <typename T>
__device__ __forceinline__ void shard_softmin(const T *__restrict__ parts, T *__restrict__ out,
                                              long long len, int shards, T eps) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x) {
    T lo = -Num<T>::neg_inf();
    for (int k = 0; k < shards; ++k) lo = fmin(lo, parts[k * len + e]);
    if (lo == Num<T>::neg_inf() || lo == -Num<T>::neg_inf()) {
      out[e] = lo;
      continue;
    }
    T sum = T(0);
    for (int k = 0; k < shards; ++k) sum += Num<T>::exp((lo - parts[k * len + e]) / eps);
    out[e] = lo - eps * log(sum);
  }
}

// Partial sums of column shards added in shard order: out[i] = Σ_k parts[k·len + i].
template <typename T>
__device__ __forceinline__ void shard_sum(const T *__restrict__ parts, T *__restrict__ out,
                                          long long len, int shards) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x) {
    T sum = T(0);
    for (int k = 0; k < shards; ++k) sum += parts[k * len + e];
    out[e] = sum;
  }
}

// out[b][j][i] = in[b][i][j] for a batch of n×m matrices; 32×32 tiles, 32×8 threads.
template <typename T>
__device__ __forceinline__ void transpose(const T *__restrict__ in, T *__restrict__ out, int n,
                                          int m) {
  __shared__ T tile[32][33];
  const long long base = (long long)blockIdx.z * n * m;
  const int i0 = blockIdx.y * 32, j0 = blockIdx.x * 32;
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int i = i0 + r, j = j0 + threadIdx.x;
    if (i < n && j < m) tile[r][threadIdx.x] = in[base + (long long)i * m + j];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < 32; r += 8) {
    const int j = j0 + r, i = i0 + threadIdx.x;
    if (i < n && j < m) out[base + (long long)j * n + i] = tile[threadIdx.x][r];
  }
}
