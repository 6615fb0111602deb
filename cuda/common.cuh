// Shared device helpers for logot's kernels, included by every kernel file. NVRTC has no
// standard headers (the host hands it the cuda/*.cuh files), so everything here uses CUDA
// built-ins only.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

#define LOGOT_LOG2E 1.4426950408889634
#define LOGOT_LN2 0.6931471805599453

// Per-precision numerics. Kernels work in base 2 ("log2 units"): a potential p at
// regularisation eps enters as p·log2(e)/eps, so every exponential is one exp2.
template <typename T> struct Num;

template <> struct Num<float> {
  static __device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
  // MUFU.EX2 (about 2 ulp); -inf gives +0, +inf gives +inf, NaN stays NaN.
  static __device__ __forceinline__ float exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  // MUFU.LG2: absolute error about 2^-22 (the result is added to a shift of log2 units).
  static __device__ __forceinline__ float log2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  static __device__ __forceinline__ float exp(float x) { return expf(x); }
  static __device__ __forceinline__ bool is_finite(float x) { return isfinite(x); }
};

template <> struct Num<double> {
  static __device__ __forceinline__ double neg_inf() {
    return __longlong_as_double(0xfff0000000000000ULL);
  }
  static __device__ __forceinline__ double exp2(double x) { return ::exp2(x); }
  static __device__ __forceinline__ double log2(double x) { return ::log2(x); }
  static __device__ __forceinline__ double exp(double x) { return ::exp(x); }
  static __device__ __forceinline__ bool is_finite(double x) { return isfinite(x); }
};

// Merge two (max, sum) pairs of a base-2 log-sum-exp: the result represents
// M + log2(S) of the union. -inf maxima (empty parts) never produce NaN.
template <typename T>
__device__ __forceinline__ void lse_merge(T &m, T &s, T m2, T s2) {
  T mx = m > m2 ? m : m2;
  if (mx == Num<T>::neg_inf()) {
    s = T(0);
    m = mx;
    return;
  }
  s = s * Num<T>::exp2(m - mx) + s2 * Num<T>::exp2(m2 - mx);
  m = mx;
}

// Merge across `width` consecutive lanes (width a power of two ≤ 32, groups aligned).
// Every lane of the warp must call it.
template <typename T>
__device__ __forceinline__ void lse_merge_lanes(T &m, T &s, int width) {
  for (int off = width >> 1; off > 0; off >>= 1) {
    T m2 = __shfl_xor_sync(0xffffffffu, m, off);
    T s2 = __shfl_xor_sync(0xffffffffu, s, off);
    lse_merge(m, s, m2, s2);
  }
}

// Asynchronous global→shared copies (sm_80+). `src_bytes` < size zero-fills the rest.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes) {
  u32 s = (u32)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(void *smem, const void *gmem, int src_bytes) {
  u32 s = (u32)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async8(void *smem, const void *gmem, int src_bytes) {
  u32 s = (u32)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Block-wide sum of a double (blockDim.x a multiple of 32, ≤ 1024); result in thread 0.
__device__ __forceinline__ double block_sum(double v, double *scratch32) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) scratch32[warp] = v;
  __syncthreads();
  int nw = blockDim.x >> 5;
  v = (threadIdx.x < nw) ? scratch32[threadIdx.x] : 0.0;
  if (warp == 0)
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The block's minimum and maximum of (lo, hi), valid in thread 0 (others: their warp's);
// `lo_s`, `hi_s`: 32 doubles each of shared memory. Ends with the block synchronised
// once (call before reusing the scratch).
__device__ __forceinline__ void block_min_max(double &lo, double &hi, double *lo_s,
                                              double *hi_s) {
  for (int off = 16; off > 0; off >>= 1) {
    lo = fmin(lo, __shfl_xor_sync(0xffffffffu, lo, off));
    hi = fmax(hi, __shfl_xor_sync(0xffffffffu, hi, off));
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) {
    lo_s[warp] = lo;
    hi_s[warp] = hi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < nw; ++w) {
      lo = fmin(lo, lo_s[w]);
      hi = fmax(hi, hi_s[w]);
    }
  }
}

// Thread-block clusters (sm_90). Without a cluster launch a CTA is a cluster of one.
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
// The shared-memory address of `p` (this CTA's) in the CTA of cluster rank `rank`.
__device__ __forceinline__ u32 cluster_addr(const void *p, u32 rank) {
  const u32 a = (u32)__cvta_generic_to_shared(p);
  u32 r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  return r;
}
__device__ __forceinline__ void st_cluster(u32 addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
__device__ __forceinline__ void st_cluster(u32 addr, double v) {
  asm volatile("st.shared::cluster.f64 [%0], %1;" ::"r"(addr), "d"(v) : "memory");
}
__device__ __forceinline__ void st_cluster4(u32 addr, float a, float b, float c, float d) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
}
