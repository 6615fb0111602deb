// Dense linear algebra for logot::backend::linalg::LinalgKernels (see
// src/backend/cuda/ops/linalg.rs): the batched M×3 SVD, GEMM with operands read transposed in
// place, the symmetric product op(A)·op(A)ᵀ (upper tiles only, each written with its
// mirror), the Frobenius norm and a scaled copy. Matrices are row-major.

#include "common.cuh"

// ---------------------------------------------------------------------------------------
// Four consecutive elements (16-byte aligned when vectorised).
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ void ld4(const float *p, float (&o)[4]) {
  float4 x = *reinterpret_cast<const float4 *>(p);
  o[0] = x.x;
  o[1] = x.y;
  o[2] = x.z;
  o[3] = x.w;
}
__device__ __forceinline__ void ld4(const double *p, double (&o)[4]) {
  double2 x = *reinterpret_cast<const double2 *>(p);
  double2 y = *reinterpret_cast<const double2 *>(p + 2);
  o[0] = x.x;
  o[1] = x.y;
  o[2] = y.x;
  o[3] = y.y;
}
__device__ __forceinline__ void st4(float *p, const float (&o)[4]) {
  *reinterpret_cast<float4 *>(p) = make_float4(o[0], o[1], o[2], o[3]);
}
__device__ __forceinline__ void st4(double *p, const double (&o)[4]) {
  *reinterpret_cast<double2 *>(p) = make_double2(o[0], o[1]);
  *reinterpret_cast<double2 *>(p + 2) = make_double2(o[2], o[3]);
}

// ---------------------------------------------------------------------------------------
// GEMM / SYRK: C ← α·op(A)·op(B) + β·C. Block tile 128×128, k-slices of 8, 256 threads,
// each thread an 8×8 register block (two 4-row × two 4-column groups, 64 apart, so that
// its shared-memory reads are 16-byte vectors without bank conflicts). Both operands are
// staged k-major in shared memory (As[k][row], Bs[k][col]); a slice of the next k-step is
// prefetched into registers while the current one is multiplied (double buffering, one
// barrier per k-step). An operand whose rows run along k (A not transposed, B transposed)
// is transposed on its way into shared memory; the other is copied as 16-byte vectors.
// ---------------------------------------------------------------------------------------
#define GEMM_BM 128
#define GEMM_PAD 4

// One thread's 4 elements of a 128×8 slice of op(X) (rows r0.., k-columns k0..).
// KC: element (r, k) at x[r·ld + k] (rows run along k); thread t takes row t/2 and
// k = k0 + 4·(t%2) + 0..3. Otherwise element (r, k) at x[k·ld + r]; thread t takes
// k = k0 + t/32 and rows 4·(t%32) + 0..3. Entries outside rows×k are 0.
template <typename T, bool KC>
__device__ __forceinline__ void gemm_load(const T *__restrict__ x, long long ld, int rows, int k,
                                          int r0, int k0, bool vec, T (&reg)[4]) {
  const int t = threadIdx.x;
  if (KC) {
    const int r = r0 + (t >> 1), kk = k0 + (t & 1) * 4;
    const T *p = x + (long long)r * ld + kk;
    if (vec && r < rows && kk + 3 < k) {
      ld4(p, reg);
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) reg[c] = (r < rows && kk + c < k) ? p[c] : T(0);
    }
  } else {
    const int kk = k0 + (t >> 5), r = r0 + (t & 31) * 4;
    const T *p = x + (long long)kk * ld + r;
    if (vec && kk < k && r + 3 < rows) {
      ld4(p, reg);
    } else {
#pragma unroll
      for (int c = 0; c < 4; ++c) reg[c] = (kk < k && r + c < rows) ? p[c] : T(0);
    }
  }
}

template <typename T, bool KC>
__device__ __forceinline__ void gemm_store(T (*s)[GEMM_BM + GEMM_PAD], const T (&reg)[4]) {
  const int t = threadIdx.x;
  if (KC) {
    // Rows t/2 (16 per warp) at k-rows 0..3 or 4..7: the padding of 4 puts the two
    // halves of the warp in different banks.
    const int r = t >> 1, kk = (t & 1) * 4;
#pragma unroll
    for (int c = 0; c < 4; ++c) s[kk + c][r] = reg[c];
  } else {
    st4(&s[t >> 5][(t & 31) * 4], reg);
  }
}

// Tile (bm, bn) of C. SYRK: op(B) = op(A)ᵀ (B is A), bm ≤ bn, and each element (i, j),
// i ≤ j, is written to (i, j) and (j, i); on a diagonal tile the elements below the
// diagonal are skipped (their mirrors write them). With β ≠ 0 only (i, j), i ≤ j, is read.
// Write the 4×4 block v (α·op(A)·op(B) already applied) at rows gi.., columns gj.. of C,
// adding β·C (read only when β ≠ 0). SYRK: also to the mirrored positions; on a diagonal
// tile the elements below the diagonal are skipped (their mirrors write them).
template <typename T, bool SYRK>
__device__ __forceinline__ void gemm_write4x4(T *__restrict__ C, int m, int n, int gi, int gj,
                                              bool diag, T beta, T (&v)[4][4]) {
  const bool read_c = beta != T(0);
  if ((n & 3) == 0 && gi + 3 < m && gj + 3 < n && !diag) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      T *p = C + (long long)(gi + r) * n + gj;
      if (read_c) {
        T old[4];
        ld4(p, old);
#pragma unroll
        for (int c = 0; c < 4; ++c) v[r][c] = fma(beta, old[c], v[r][c]);
      }
      st4(p, v[r]);
    }
    if (SYRK) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const T col[4] = {v[0][c], v[1][c], v[2][c], v[3][c]};
        st4(C + (long long)(gj + c) * n + gi, col);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = gi + r, j = gj + c;
        if (i >= m || j >= n || (diag && i > j)) continue;
        T *p = C + (long long)i * n + j;
        T x = v[r][c];
        if (read_c) x = fma(beta, *p, x);
        *p = x;
        if (SYRK) C[(long long)j * n + i] = x;
      }
    }
  }
}

// Tile (bm, bn) of C with 256 threads, each an 8×8 register block (used for f64).
template <typename T, int BK, bool TA, bool TB, bool SYRK>
__device__ __forceinline__ void gemm_tile(int bm, int bn, int m, int n, int k, T alpha,
                                          const T *__restrict__ A, const T *__restrict__ B,
                                          T beta, T *__restrict__ C) {
  // BK = 8·SL: the k-step is loaded as SL slices of 8, each prefetched into registers
  // while the previous 8 k-rows are multiplied and stored into the other buffer after them.
  constexpr int SL = BK / 8;
  __shared__ __align__(16) T As[2][BK][GEMM_BM + GEMM_PAD];
  __shared__ __align__(16) T Bs[2][BK][GEMM_BM + GEMM_PAD];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // A warp covers 4 thread-rows × 8 thread-columns: its fragment reads touch 4 (A) and
  // 8 (B) distinct 16-byte vectors, one shared-memory wavefront each.
  const int ty = (warp >> 1) * 4 + (lane >> 3), tx = (warp & 1) * 8 + (lane & 7);
  const int m0 = bm * GEMM_BM, n0 = bn * GEMM_BM;
  // op(A) (m×k): A stored m×k (rows along k) or, transposed, k×m.
  // op(B) (k×n): B stored k×n (columns across), or, transposed, n×k (columns along k).
  constexpr bool AKC = !TA, BKC = TB;
  const long long lda = TA ? m : k, ldb = TB ? k : n;
  const bool va = (lda & 3) == 0, vb = (ldb & 3) == 0;
  T ra[4], rb[4];
  T acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = T(0);
  const int tiles = (k + BK - 1) / BK;
#pragma unroll
  for (int sl = 0; sl < SL; ++sl) {
    gemm_load<T, AKC>(A, lda, m, k, m0, 8 * sl, va, ra);
    gemm_load<T, BKC>(B, ldb, n, k, n0, 8 * sl, vb, rb);
    gemm_store<T, AKC>(&As[0][8 * sl], ra);
    gemm_store<T, BKC>(&Bs[0][8 * sl], rb);
  }
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    const int kn = (t + 1) * BK;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk % 8 == 0 && more) {
        if (kk > 0) {
          gemm_store<T, AKC>(&As[cur ^ 1][kk - 8], ra);
          gemm_store<T, BKC>(&Bs[cur ^ 1][kk - 8], rb);
        }
        gemm_load<T, AKC>(A, lda, m, k, m0, kn + kk, va, ra);
        gemm_load<T, BKC>(B, ldb, n, k, n0, kn + kk, vb, rb);
      }
      T a0[4], a1[4], b0[4], b1[4];
      ld4(&As[cur][kk][ty * 4], a0);
      ld4(&As[cur][kk][64 + ty * 4], a1);
      ld4(&Bs[cur][kk][tx * 4], b0);
      ld4(&Bs[cur][kk][64 + tx * 4], b1);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          acc[i][j] = fma(a0[i], b0[j], acc[i][j]);
          acc[i][4 + j] = fma(a0[i], b1[j], acc[i][4 + j]);
          acc[4 + i][j] = fma(a1[i], b0[j], acc[4 + i][j]);
          acc[4 + i][4 + j] = fma(a1[i], b1[j], acc[4 + i][4 + j]);
        }
      }
    }
    if (more) {
      gemm_store<T, AKC>(&As[cur ^ 1][BK - 8], ra);
      gemm_store<T, BKC>(&Bs[cur ^ 1][BK - 8], rb);
    }
    __syncthreads();
  }
  const bool diag = SYRK && bm == bn;
#pragma unroll
  for (int ih = 0; ih < 2; ++ih) {
#pragma unroll
    for (int jh = 0; jh < 2; ++jh) {
      T v[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) v[r][c] = alpha * acc[ih * 4 + r][jh * 4 + c];
      gemm_write4x4<T, SYRK>(C, m, n, m0 + ih * 64 + ty * 4, n0 + jh * 64 + tx * 4, diag, beta, v);
    }
  }
}

// The same tile with 128 threads, each an 8×16 register block (used for f32): per k-row a
// thread reads 2 + 4 16-byte vectors from shared memory for 128 FMAs. One thread's share
// of a 128×8 slice is 8 elements: KC, row t and k0..k0+7; otherwise k-row t/16 and rows
// 4·(t%16) + 0..3 and 64 + 4·(t%16) + 0..3.
template <typename T, bool KC>
__device__ __forceinline__ void gemm_load_w(const T *__restrict__ x, long long ld, int rows,
                                            int k, int r0, int k0, bool vec, T (&reg)[8]) {
  const int t = threadIdx.x;
  if (KC) {
    const int r = r0 + t;
    const T *p = x + (long long)r * ld + k0;
    if (vec && r < rows && k0 + 7 < k) {
      T q[4];
      ld4(p, q);
#pragma unroll
      for (int c = 0; c < 4; ++c) reg[c] = q[c];
      ld4(p + 4, q);
#pragma unroll
      for (int c = 0; c < 4; ++c) reg[4 + c] = q[c];
    } else {
#pragma unroll
      for (int c = 0; c < 8; ++c) reg[c] = (r < rows && k0 + c < k) ? p[c] : T(0);
    }
  } else {
    const int kk = k0 + (t >> 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + h * 64 + (t & 15) * 4;
      const T *p = x + (long long)kk * ld + r;
      if (vec && kk < k && r + 3 < rows) {
        T q[4];
        ld4(p, q);
#pragma unroll
        for (int c = 0; c < 4; ++c) reg[4 * h + c] = q[c];
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) reg[4 * h + c] = (kk < k && r + c < rows) ? p[c] : T(0);
      }
    }
  }
}

template <typename T, bool KC>
__device__ __forceinline__ void gemm_store_w(T (*s)[GEMM_BM + GEMM_PAD], const T (&reg)[8]) {
  const int t = threadIdx.x;
  if (KC) {
#pragma unroll
    for (int c = 0; c < 8; ++c) s[c][t] = reg[c];
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const T q[4] = {reg[4 * h], reg[4 * h + 1], reg[4 * h + 2], reg[4 * h + 3]};
      st4(&s[t >> 4][h * 64 + (t & 15) * 4], q);
    }
  }
}

template <typename T, int BK, bool TA, bool TB, bool SYRK>
__device__ __forceinline__ void gemm_tile_w(int bm, int bn, int m, int n, int k, T alpha,
                                            const T *__restrict__ A, const T *__restrict__ B,
                                            T beta, T *__restrict__ C) {
  constexpr int SL = BK / 8;
  // Dynamic shared memory: 2 operands × 2 buffers × BK × (128 + 4) elements.
  extern __shared__ __align__(16) unsigned char gemm_smem[];
  typedef T Stage[BK][GEMM_BM + GEMM_PAD];
  Stage *As = reinterpret_cast<Stage *>(gemm_smem);
  Stage *Bs = As + 2;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Warp w: thread-rows 4w..4w+3 × thread-columns 0..7; rows 4·ty (+64), columns
  // 4·tx + 32·j (j < 4): 4 (A) and 8 (B) distinct 16-byte vectors per warp read.
  const int ty = warp * 4 + (lane >> 3), tx = lane & 7;
  const int m0 = bm * GEMM_BM, n0 = bn * GEMM_BM;
  constexpr bool AKC = !TA, BKC = TB;
  const long long lda = TA ? m : k, ldb = TB ? k : n;
  const bool va = (lda & 3) == 0, vb = (ldb & 3) == 0;
  T ra[8], rb[8];
  T acc[8][16];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 16; ++j) acc[i][j] = T(0);
  const int tiles = (k + BK - 1) / BK;
#pragma unroll
  for (int sl = 0; sl < SL; ++sl) {
    gemm_load_w<T, AKC>(A, lda, m, k, m0, 8 * sl, va, ra);
    gemm_load_w<T, BKC>(B, ldb, n, k, n0, 8 * sl, vb, rb);
    gemm_store_w<T, AKC>(&As[0][8 * sl], ra);
    gemm_store_w<T, BKC>(&Bs[0][8 * sl], rb);
  }
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < tiles;
    const int kn = (t + 1) * BK;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk % 8 == 0 && more) {
        if (kk > 0) {
          gemm_store_w<T, AKC>(&As[cur ^ 1][kk - 8], ra);
          gemm_store_w<T, BKC>(&Bs[cur ^ 1][kk - 8], rb);
        }
        gemm_load_w<T, AKC>(A, lda, m, k, m0, kn + kk, va, ra);
        gemm_load_w<T, BKC>(B, ldb, n, k, n0, kn + kk, vb, rb);
      }
      T a[8], b[16];
      {
        T q[4];
        ld4(&As[cur][kk][ty * 4], q);
#pragma unroll
        for (int c = 0; c < 4; ++c) a[c] = q[c];
        ld4(&As[cur][kk][64 + ty * 4], q);
#pragma unroll
        for (int c = 0; c < 4; ++c) a[4 + c] = q[c];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          ld4(&Bs[cur][kk][32 * j + tx * 4], q);
#pragma unroll
          for (int c = 0; c < 4; ++c) b[4 * j + c] = q[c];
        }
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 16; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    if (more) {
      gemm_store_w<T, AKC>(&As[cur ^ 1][BK - 8], ra);
      gemm_store_w<T, BKC>(&Bs[cur ^ 1][BK - 8], rb);
    }
    __syncthreads();
  }
  const bool diag = SYRK && bm == bn;
#pragma unroll
  for (int ih = 0; ih < 2; ++ih) {
#pragma unroll
    for (int jh = 0; jh < 4; ++jh) {
      T v[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) v[r][c] = alpha * acc[ih * 4 + r][jh * 4 + c];
      gemm_write4x4<T, SYRK>(C, m, n, m0 + ih * 64 + ty * 4, n0 + jh * 32 + tx * 4, diag, beta, v);
    }
  }
}

// Grouped tile order: 8 tile-rows at a time walk the tile-columns, so that a wave of
// blocks shares panels of A and B in L2.
template <typename T, int BK, bool W, bool TA, bool TB>
__device__ __forceinline__ void gemm_entry(const T *A, const T *B, T *C, int m, int n, int k,
                                           T alpha, T beta) {
  const int mt = (m + GEMM_BM - 1) / GEMM_BM, nt = (n + GEMM_BM - 1) / GEMM_BM;
  const int pid = blockIdx.x, group = 8;
  const int per_group = group * nt;
  const int first = (pid / per_group) * group;
  const int rows = min(mt - first, group);
  const int bm = first + (pid % per_group) % rows, bn = (pid % per_group) / rows;
  if (W)
    gemm_tile_w<T, BK, TA, TB, false>(bm, bn, m, n, k, alpha, A, B, beta, C);
  else
    gemm_tile<T, BK, TA, TB, false>(bm, bn, m, n, k, alpha, A, B, beta, C);
}

// Tiles (bi, bj), bi ≤ bj, enumerated column by column: id = bj(bj+1)/2 + bi.
template <typename T, int BK, bool W, bool TA>
__device__ __forceinline__ void syrk_entry(const T *A, T *C, int n, int k, T alpha, T beta) {
  const long long id = blockIdx.x;
  long long bj = (long long)((sqrt(8.0 * (double)id + 1.0) - 1.0) * 0.5);
  while (bj * (bj + 1) / 2 > id) --bj;
  while ((bj + 1) * (bj + 2) / 2 <= id) ++bj;
  const int bi = (int)(id - bj * (bj + 1) / 2);
  // op(A)·op(A)ᵀ: A stored n×k gives (A, Aᵀ) = (no, yes); stored k×n gives (yes, no).
  if (W)
    gemm_tile_w<T, BK, TA, !TA, true>(bi, (int)bj, n, n, k, alpha, A, A, beta, C);
  else
    gemm_tile<T, BK, TA, !TA, true>(bi, (int)bj, n, n, k, alpha, A, A, beta, C);
}

// f32: 128 threads of 8×16 outputs, k-steps of 16, two blocks per SM; f64: 256 threads of
// 8×8, k-steps of 8 (static shared memory). The host reads these lines.
#define GEMM_F32_BK 16
#define GEMM_F32_THREADS 128
#define GEMM_F64_THREADS 256
#define LOGOT_GEMM(NAME, T, BK, W, TA, TB, THREADS, MINB)                                   \
  extern "C" __global__ void __launch_bounds__(THREADS, MINB)                               \
      NAME(const T *A, const T *B, T *C, int m, int n, int k, T alpha, T beta) {            \
    gemm_entry<T, BK, W, TA, TB>(A, B, C, m, n, k, alpha, beta);                            \
  }
LOGOT_GEMM(gemm_nn_f32, float, GEMM_F32_BK, true, false, false, GEMM_F32_THREADS, 2)
LOGOT_GEMM(gemm_nt_f32, float, GEMM_F32_BK, true, false, true, GEMM_F32_THREADS, 2)
LOGOT_GEMM(gemm_tn_f32, float, GEMM_F32_BK, true, true, false, GEMM_F32_THREADS, 2)
LOGOT_GEMM(gemm_tt_f32, float, GEMM_F32_BK, true, true, true, GEMM_F32_THREADS, 2)
LOGOT_GEMM(gemm_nn_f64, double, 8, false, false, false, GEMM_F64_THREADS, 1)
LOGOT_GEMM(gemm_nt_f64, double, 8, false, false, true, GEMM_F64_THREADS, 1)
LOGOT_GEMM(gemm_tn_f64, double, 8, false, true, false, GEMM_F64_THREADS, 1)
LOGOT_GEMM(gemm_tt_f64, double, 8, false, true, true, GEMM_F64_THREADS, 1)

#define LOGOT_SYRK(NAME, T, BK, W, TA, THREADS, MINB)                                       \
  extern "C" __global__ void __launch_bounds__(THREADS, MINB)                               \
      NAME(const T *A, T *C, int n, int k, T alpha, T beta) {                               \
    syrk_entry<T, BK, W, TA>(A, C, n, k, alpha, beta);                                      \
  }
LOGOT_SYRK(syrk_n_f32, float, GEMM_F32_BK, true, false, GEMM_F32_THREADS, 2)
LOGOT_SYRK(syrk_t_f32, float, GEMM_F32_BK, true, true, GEMM_F32_THREADS, 2)
LOGOT_SYRK(syrk_n_f64, double, 8, false, false, GEMM_F64_THREADS, 1)
LOGOT_SYRK(syrk_t_f64, double, 8, false, true, GEMM_F64_THREADS, 1)

#include "linalg_mma.cuh"

// ---------------------------------------------------------------------------------------
// Batched M×3 SVD, one warp per matrix (grid-stride over the batch), everything in f64
// (f32 entries convert exactly). Lane l holds rows 4(l + 32c) .. +3 of chunk c (12
// consecutive values: three 16-byte loads when M % 4 == 0). With CH > 0 the CH chunks
// (M ≤ 128·CH) stay in registers and A is read once; with CH = 0 every pass reads A
// again (from L2 for the passes after the first).
//   1. (f64 only) power-of-two scaling of A so that max|a| ∈ [1, 2);
//   2. G = AᵀA by warp reduction; cyclic Jacobi G = V·Λ·Vᵀ (identical in every lane);
//   3. polish (f64, or an f32 matrix with λ_min < 1e-6·λ_max): the Gram of W = A·V is
//      recomputed from A and its off-diagonal entries rotated away (one-sided Jacobi, as
//      on the CPU), until they are below tol·sqrt(w_pp·w_qq); S_k = ‖w_k‖;
//   4. sort descending (stable), signs (largest-|·| entry of each v_k positive), rank
//      threshold S_k ≤ tol·S_0, U = A·V·diag(1/S) for the kept columns;
//   5. rank-deficient columns: orthonormal completion by Gram–Schmidt of the canonical
//      vector with the largest residual (zero column when that residual is ≤ 1/4).
// ---------------------------------------------------------------------------------------
#define SVD_WARPS 4
#define SVD_JACOBI_SWEEPS 10
#define SVD_POLISH_SWEEPS 3
#define SVD_EPS64 2.220446049250313e-16

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ double warp_max(double v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

template <typename T>
__device__ __forceinline__ void svd_load(const T *__restrict__ a, long long r0, int m, bool vec,
                                         T (&x)[12]) {
  if (vec && r0 + 4 <= m) {
    const T *p = a + r0 * 3;
    T q[4];
#pragma unroll
    for (int h = 0; h < 3; ++h) {
      ld4(p + 4 * h, q);
#pragma unroll
      for (int e = 0; e < 4; ++e) x[4 * h + e] = q[e];
    }
  } else {
#pragma unroll
    for (int e = 0; e < 12; ++e) x[e] = (r0 + e / 3 < m) ? a[r0 * 3 + e] : T(0);
  }
}

// The rows of one matrix, cached in registers (CH > 0) or re-read from memory (CH = 0).
template <typename T, int CH> struct SvdRows {
  T cache[CH > 0 ? CH : 1][12];
  const T *a;
  int m;
  bool vec;
  int lane;

  __device__ __forceinline__ void load() {
    if (CH > 0) {
#pragma unroll
      for (int c = 0; c < CH; ++c) {
        const long long r0 = 4LL * (lane + 32 * c);
        if (r0 < m) {
          svd_load(a, r0, m, vec, cache[c]);
        } else {
#pragma unroll
          for (int e = 0; e < 12; ++e) cache[c][e] = T(0);
        }
      }
    }
  }

  // f(row0, x[12]) for each group of 4 rows this lane holds (rows ≥ m are zero).
  template <typename F> __device__ __forceinline__ void each(F &&f) const {
    if (CH > 0) {
#pragma unroll
      for (int c = 0; c < CH; ++c) f(4LL * (lane + 32 * c), cache[c]);
    } else {
      const int chunks = (m + 127) / 128;
      for (int c = 0; c < chunks; ++c) {
        const long long r0 = 4LL * (lane + 32 * c);
        if (r0 >= m) continue;
        T x[12];
        svd_load(a, r0, m, vec, x);
        f(r0, x);
      }
    }
  }
};

// Rotation zeroing entry (p, q): ζ = (a_qq − a_pp)/(2a_pq), t = sign(ζ)/(|ζ| + sqrt(1 + ζ²)),
// c = 1/sqrt(1 + t²), s = c·t (as on the CPU).
__device__ __forceinline__ void svd_rotation(double app, double aqq, double apq, double &c,
                                             double &s, double &t) {
  const double zeta = (aqq - app) / (2.0 * apq);
  const double sg = zeta > 0.0 ? 1.0 : (zeta < 0.0 ? -1.0 : 0.0);
  t = sg / (fabs(zeta) + hypot(1.0, zeta));
  c = 1.0 / sqrt(1.0 + t * t);
  s = c * t;
}

// One two-sided Jacobi rotation of the symmetric g on pair (p, q), accumulated into v.
template <int P, int Q>
__device__ __forceinline__ void svd_rotate(double (&g)[3][3], double (&v)[3][3], double c,
                                           double s, double t) {
  constexpr int R = 3 - P - Q;
  const double apq = g[P][Q], arp = g[R][P], arq = g[R][Q];
  g[P][P] -= t * apq;
  g[Q][Q] += t * apq;
  g[P][Q] = 0.0;
  g[Q][P] = 0.0;
  g[R][P] = c * arp - s * arq;
  g[P][R] = g[R][P];
  g[R][Q] = s * arp + c * arq;
  g[Q][R] = g[R][Q];
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const double vp = v[i][P], vq = v[i][Q];
    v[i][P] = c * vp - s * vq;
    v[i][Q] = s * vp + c * vq;
  }
}

// Cyclic Jacobi step on pair (p, q) of the eigensolver; returns whether it rotated.
template <int P, int Q>
__device__ __forceinline__ bool svd_jacobi_pair(double (&g)[3][3], double (&v)[3][3]) {
  const double apq = g[P][Q];
  if (apq == 0.0 || fabs(apq) <= SVD_EPS64 * sqrt(fabs(g[P][P] * g[Q][Q]))) {
    g[P][Q] = 0.0;
    g[Q][P] = 0.0;
    return false;
  }
  double c, s, t;
  svd_rotation(g[P][P], g[Q][Q], apq, c, s, t);
  svd_rotate<P, Q>(g, v, c, s, t);
  return true;
}

// Polish step on pair (p, q) of the Gram of W (entries recomputed from A each sweep).
template <int P, int Q>
__device__ __forceinline__ bool svd_polish_pair(double (&g)[3][3], double (&v)[3][3],
                                                double tol) {
  const double gpq = g[P][Q];
  if (gpq == 0.0 || fabs(gpq) <= tol * sqrt(g[P][P] * g[Q][Q])) return false;
  double c, s, t;
  svd_rotation(g[P][P], g[Q][Q], gpq, c, s, t);
  svd_rotate<P, Q>(g, v, c, s, t);
  return true;
}

// Gram of W = x·V over the warp's rows (in every lane).
template <typename T, int CH>
__device__ __forceinline__ void svd_gram(const SvdRows<T, CH> &rows, double scale,
                                         const double (&v)[3][3], bool identity,
                                         double (&g)[3][3]) {
  double s00 = 0, s01 = 0, s02 = 0, s11 = 0, s12 = 0, s22 = 0;
  rows.each([&](long long, const T(&x)[12]) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const double x0 = (double)x[3 * r] * scale, x1 = (double)x[3 * r + 1] * scale,
                   x2 = (double)x[3 * r + 2] * scale;
      double w0 = x0, w1 = x1, w2 = x2;
      if (!identity) {
        w0 = x0 * v[0][0] + x1 * v[1][0] + x2 * v[2][0];
        w1 = x0 * v[0][1] + x1 * v[1][1] + x2 * v[2][1];
        w2 = x0 * v[0][2] + x1 * v[1][2] + x2 * v[2][2];
      }
      s00 = fma(w0, w0, s00);
      s01 = fma(w0, w1, s01);
      s02 = fma(w0, w2, s02);
      s11 = fma(w1, w1, s11);
      s12 = fma(w1, w2, s12);
      s22 = fma(w2, w2, s22);
    }
  });
  s00 = warp_sum(s00);
  s01 = warp_sum(s01);
  s02 = warp_sum(s02);
  s11 = warp_sum(s11);
  s12 = warp_sum(s12);
  s22 = warp_sum(s22);
  g[0][0] = s00;
  g[0][1] = s01;
  g[0][2] = s02;
  g[1][0] = s01;
  g[1][1] = s11;
  g[1][2] = s12;
  g[2][0] = s02;
  g[2][1] = s12;
  g[2][2] = s22;
}

template <typename T, int CH>
__device__ __forceinline__ void svd3_body(const T *__restrict__ A, T *__restrict__ U,
                                          T *__restrict__ S, T *__restrict__ VT, int batch,
                                          int m, double tol) {
  const int lane = threadIdx.x & 31;
  const long long warp0 = (long long)blockIdx.x * SVD_WARPS + (threadIdx.x >> 5);
  const long long stride = (long long)gridDim.x * SVD_WARPS;
  const long long per = 3LL * m;
  for (long long b = warp0; b < batch; b += stride) {
    SvdRows<T, CH> rows;
    rows.a = A + b * per;
    rows.m = m;
    rows.vec = (m & 3) == 0;
    rows.lane = lane;
    rows.load();
    double scale = 1.0;
    if (sizeof(T) == 8) {
      // Power-of-two scaling (exact): keeps AᵀA in range.
      double amax = 0.0;
      rows.each([&](long long, const T(&x)[12]) {
#pragma unroll
        for (int e = 0; e < 12; ++e) amax = fmax(amax, fabs((double)x[e]));
      });
      amax = warp_max(amax);
      if (amax > 0.0) {
        int e2 = (int)floor(log2(amax));
        e2 = e2 < -1000 ? -1000 : (e2 > 1000 ? 1000 : e2);
        scale = ldexp(1.0, -e2);
      }
    }
    double v[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    double g[3][3];
    svd_gram(rows, scale, v, true, g);
    for (int sweep = 0; sweep < SVD_JACOBI_SWEEPS; ++sweep) {
      bool rotated = svd_jacobi_pair<0, 1>(g, v);
      rotated |= svd_jacobi_pair<0, 2>(g, v);
      rotated |= svd_jacobi_pair<1, 2>(g, v);
      if (!rotated) break;
    }
    double norms[3] = {g[0][0], g[1][1], g[2][2]};
    const double lmax = fmax(norms[0], fmax(norms[1], norms[2]));
    const double lmin = fmin(norms[0], fmin(norms[1], norms[2]));
    // An f32 matrix with λ_min ≥ 1e-6·λ_max: the Gram's eigenvalues are accurate to
    // ε64·κ² ≤ 1e-10 relative, far below f32 rounding; otherwise polish.
    const bool polish = sizeof(T) == 8 || lmin < 1e-6 * lmax;
    if (polish) {
      for (int sweep = 0;; ++sweep) {
        double w[3][3];
        svd_gram(rows, scale, v, false, w);
        norms[0] = w[0][0];
        norms[1] = w[1][1];
        norms[2] = w[2][2];
        if (sweep == SVD_POLISH_SWEEPS) break;
        bool rotated = svd_polish_pair<0, 1>(w, v, tol);
        rotated |= svd_polish_pair<0, 2>(w, v, tol);
        rotated |= svd_polish_pair<1, 2>(w, v, tol);
        if (!rotated) break;
      }
    }
#pragma unroll
    for (int k = 0; k < 3; ++k) norms[k] = fmax(norms[k], 0.0);
    // Stable sort, descending.
    int order[3] = {0, 1, 2};
    if (norms[order[1]] > norms[order[0]]) {
      int t = order[0];
      order[0] = order[1];
      order[1] = t;
    }
    if (norms[order[2]] > norms[order[1]]) {
      int t = order[1];
      order[1] = order[2];
      order[2] = t;
      if (norms[order[1]] > norms[order[0]]) {
        t = order[0];
        order[0] = order[1];
        order[1] = t;
      }
    }
    double vs[3][3], sv[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int o = order[k];
      sv[k] = sqrt(o == 0 ? norms[0] : (o == 1 ? norms[1] : norms[2]));
#pragma unroll
      for (int i = 0; i < 3; ++i) vs[i][k] = o == 0 ? v[i][0] : (o == 1 ? v[i][1] : v[i][2]);
    }
    // Signs: the largest-|·| entry of each v_k positive (the first on ties).
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      int big = 0;
      if (fabs(vs[1][k]) > fabs(vs[big][k])) big = 1;
      if (fabs(vs[2][k]) > fabs(vs[big][k])) big = 2;
      const double bv = big == 0 ? vs[0][k] : (big == 1 ? vs[1][k] : vs[2][k]);
      if (bv < 0.0) {
#pragma unroll
        for (int i = 0; i < 3; ++i) vs[i][k] = -vs[i][k];
      }
    }
    double inv[3];
    bool keep[3];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      keep[k] = k < m && sv[k] > tol * sv[0];
      inv[k] = keep[k] ? 1.0 / sv[k] : 0.0;
    }
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      if (lane == k) {
        S[b * 3 + k] = keep[k] ? T(sv[k] / scale) : T(0);
#pragma unroll
        for (int i = 0; i < 3; ++i) VT[b * 9 + k * 3 + i] = T(vs[i][k]);
      }
    }
    // U = A·V·diag(1/S) (zero columns where not kept).
    T *u = U + b * per;
    const bool vec = (m & 3) == 0;
    rows.each([&](long long r0, const T(&x)[12]) {
      T o[12];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const double x0 = (double)x[3 * r] * scale, x1 = (double)x[3 * r + 1] * scale,
                     x2 = (double)x[3 * r + 2] * scale;
#pragma unroll
        for (int k = 0; k < 3; ++k)
          o[3 * r + k] = T((x0 * vs[0][k] + x1 * vs[1][k] + x2 * vs[2][k]) * inv[k]);
      }
      if (vec && r0 + 4 <= m) {
#pragma unroll
        for (int h = 0; h < 3; ++h) {
          const T q[4] = {o[4 * h], o[4 * h + 1], o[4 * h + 2], o[4 * h + 3]};
          st4(u + r0 * 3 + 4 * h, q);
        }
      } else {
#pragma unroll
        for (int e = 0; e < 12; ++e)
          if (r0 + e / 3 < m) u[r0 * 3 + e] = o[e];
      }
    });
    if (keep[0] && keep[1] && keep[2]) continue;
    // Orthonormal completion (rare): column k of U is the scratch vector.
    __syncwarp();
    int set[3];
    int nset = 0;
#pragma unroll
    for (int k = 0; k < 3; ++k)
      if (keep[k]) set[nset++] = k;
    for (int k = 0; k < 3; ++k) {
      if (keep[k]) continue;
      double best = -1.0;
      long long bi = 0;
      for (long long i = lane; i < m; i += 32) {
        double r = 0.0;
        for (int j = 0; j < nset; ++j) {
          const double q = (double)u[i * 3 + set[j]];
          r += q * q;
        }
        r = 1.0 - r;
        if (r > best) {
          best = r;
          bi = i;
        }
      }
      // Largest residual, the first row on ties.
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const double ob = __shfl_xor_sync(0xffffffffu, best, off);
        const long long oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ob > best || (ob == best && oi < bi)) {
          best = ob;
          bi = oi;
        }
      }
      if (best > 0.25) {
        for (long long i = lane; i < m; i += 32) u[i * 3 + k] = T(i == bi ? 1 : 0);
        for (int pass = 0; pass < 2; ++pass) {
          for (int j = 0; j < nset; ++j) {
            const int c = set[j];
            double d = 0.0;
            for (long long i = lane; i < m; i += 32) d += (double)u[i * 3 + c] * (double)u[i * 3 + k];
            d = warp_sum(d);
            for (long long i = lane; i < m; i += 32)
              u[i * 3 + k] = T((double)u[i * 3 + k] - d * (double)u[i * 3 + c]);
          }
        }
        double nrm = 0.0;
        for (long long i = lane; i < m; i += 32) {
          const double q = (double)u[i * 3 + k];
          nrm += q * q;
        }
        nrm = sqrt(warp_sum(nrm));
        for (long long i = lane; i < m; i += 32) u[i * 3 + k] = T((double)u[i * 3 + k] / nrm);
      }
      set[nset++] = k;
    }
    __syncwarp();
  }
}

#define LOGOT_SVD3(NAME, T, CH)                                                             \
  extern "C" __global__ void __launch_bounds__(SVD_WARPS * 32)                              \
      NAME(const T *A, T *U, T *S, T *VT, int batch, int m, double tol) {                   \
    svd3_body<T, CH>(A, U, S, VT, batch, m, tol);                                           \
  }
LOGOT_SVD3(svd3_c0_f32, float, 0)
LOGOT_SVD3(svd3_c1_f32, float, 1)
LOGOT_SVD3(svd3_c2_f32, float, 2)
LOGOT_SVD3(svd3_c4_f32, float, 4)
LOGOT_SVD3(svd3_c8_f32, float, 8)
LOGOT_SVD3(svd3_c0_f64, double, 0)

// ---------------------------------------------------------------------------------------
// Frobenius norm: per-block (scale, ssq) with norm = scale·sqrt(ssq), then one block merges
// them. f32 entries: ssq = Σx² in f64 (cannot overflow), scale = 1. f64 entries: the
// scaled sum of squares (scale = running max |x|), so nothing overflows; a NaN gives NaN,
// an infinity +∞.
// ---------------------------------------------------------------------------------------
struct Ssq {
  double scale, ssq;
};

__device__ __forceinline__ Ssq ssq_merge(Ssq a, Ssq b) {
  if (isnan(a.scale) || isnan(b.scale)) return {a.scale + b.scale, 1.0};
  if (isinf(a.scale) || isinf(b.scale)) return {__longlong_as_double(0x7ff0000000000000LL), 1.0};
  const double s = fmax(a.scale, b.scale);
  if (s == 0.0) return {0.0, a.ssq + b.ssq};
  const double ra = a.scale == s ? 1.0 : a.scale / s, rb = b.scale == s ? 1.0 : b.scale / s;
  return {s, a.ssq * ra * ra + b.ssq * rb * rb};
}

__device__ __forceinline__ Ssq block_ssq(Ssq v) {
  __shared__ double sc[32], sq[32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Ssq o = {__shfl_xor_sync(0xffffffffu, v.scale, off), __shfl_xor_sync(0xffffffffu, v.ssq, off)};
    v = ssq_merge(v, o);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) {
    sc[warp] = v.scale;
    sq[warp] = v.ssq;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < nw ? Ssq{sc[lane], sq[lane]} : Ssq{0.0, 0.0};
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      Ssq o = {__shfl_xor_sync(0xffffffffu, v.scale, off),
               __shfl_xor_sync(0xffffffffu, v.ssq, off)};
      v = ssq_merge(v, o);
    }
  }
  return v;
}

extern "C" __global__ void frob_partial_f32(const float *x, long long n, double *part) {
  double s = 0.0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const double v = x[i];
    s = fma(v, v, s);
  }
  Ssq r = block_ssq(Ssq{isnan(s) ? s : (isinf(s) ? s : 1.0), isnan(s) || isinf(s) ? 1.0 : s});
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = r.scale;
    part[2 * blockIdx.x + 1] = r.ssq;
  }
}

extern "C" __global__ void frob_partial_f64(const double *x, long long n, double *part) {
  double scale = 0.0, ssq = 0.0;
  bool nan = false, inf = false;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const double a = fabs(x[i]);
    if (isnan(a)) {
      nan = true;
    } else if (isinf(a)) {
      inf = true;
    } else if (a > scale) {
      const double r = scale / a;
      ssq = 1.0 + ssq * r * r;
      scale = a;
    } else if (a > 0.0) {
      const double r = a / scale;
      ssq += r * r;
    }
  }
  Ssq v = {scale, ssq};
  if (inf) v = {__longlong_as_double(0x7ff0000000000000LL), 1.0};
  if (nan) v = {__longlong_as_double(0x7ff8000000000000LL), 1.0};
  Ssq r = block_ssq(v);
  if (threadIdx.x == 0) {
    part[2 * blockIdx.x] = r.scale;
    part[2 * blockIdx.x + 1] = r.ssq;
  }
}

// Merge `parts` partials (one block) into out[0] = scale·sqrt(ssq).
extern "C" __global__ void frob_finish(const double *part, int parts, double *out) {
  Ssq v = {0.0, 0.0};
  for (int i = threadIdx.x; i < parts; i += blockDim.x) v = ssq_merge(v, Ssq{part[2 * i], part[2 * i + 1]});
  Ssq r = block_ssq(v);
  if (threadIdx.x == 0) out[0] = r.scale * sqrt(r.ssq);
}

// ---------------------------------------------------------------------------------------
// dst ← α·src (16-byte vectors, then the tail).
// ---------------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void scaled_copy_body(const T *__restrict__ src, T *__restrict__ dst,
                                                 long long n, T alpha) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long step = (long long)gridDim.x * blockDim.x;
  const long long n4 = n / 4;
  for (long long i = tid; i < n4; i += step) {
    T x[4];
    ld4(src + 4 * i, x);
#pragma unroll
    for (int c = 0; c < 4; ++c) x[c] *= alpha;
    st4(dst + 4 * i, x);
  }
  for (long long i = 4 * n4 + tid; i < n; i += step) dst[i] = alpha * src[i];
}
extern "C" __global__ void scaled_copy_f32(const float *src, float *dst, long long n, float alpha) {
  scaled_copy_body(src, dst, n, alpha);
}
extern "C" __global__ void scaled_copy_f64(const double *src, double *dst, long long n,
                                           double alpha) {
  scaled_copy_body(src, dst, n, alpha);
}

// ---------------------------------------------------------------------------------------
// C ← C + α·I for an n×n row-major C (the n diagonal entries, grid-stride).
// ---------------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void shift_diagonal_body(T *__restrict__ c, long long n, T alpha) {
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    c[i * (n + 1)] += alpha;
}
extern "C" __global__ void shift_diagonal_f32(float *c, long long n, float alpha) {
  shift_diagonal_body(c, n, alpha);
}
extern "C" __global__ void shift_diagonal_f64(double *c, long long n, double alpha) {
  shift_diagonal_body(c, n, alpha);
}
