// Part of the linear-algebra module (linalg.cu includes it, and NVRTC compiles them as one
// source): the f32 GEMM on tensor cores.

// ---------------------------------------------------------------------------------------
// Tensor-core GEMM (f32 only): C ← α·op(A)·op(B) + β·C on mma.sync m16n8k8 TF32 tiles,
// accumulated in f32. SPLIT: each operand split a = a_big + a_small (a_big = tf32(a),
// a_small = tf32(a − a_big)) and a_small·b_big + a_big·b_small + a_big·b_big accumulated
// (TF32x3: about 2^-21 per product, near f32's own rounding, at 3× the MMA work); else one
// TF32 product (about 2^-10 per product). Each k-step's products are summed from zero on
// the tensor cores and added to the total in f32. Block tile 128×128, k-steps of 16, 256 threads;
// warp w computes rows (w % 2)·64 and columns (w / 2)·32 (4 × 4 tiles of 16×8). Both
// operands are staged "k-contiguous" in shared memory (As[row][k], Bs[col][k], rows padded
// to 20 words, so the fragment reads of a warp, rows g and words t, hit 32 distinct banks);
// an operand whose rows do not run along k is transposed on its way in. The next k-step's
// slice is loaded into registers while the current one is multiplied. Entries outside the
// matrices read as 0, so any m, n, k work. Fragments (PTX ISA, g = lane >> 2, t = lane & 3):
// A a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); B b0 (k = t, n = g), b1 (k = t+4,
// n = g); C c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
// ---------------------------------------------------------------------------------------
#define GEMM_TC_BM 128
#define GEMM_TC_BK 16
#define GEMM_TC_THREADS 256
#define GEMM_TC_LD (GEMM_TC_BK + 4)

__device__ __forceinline__ u32 gemm_tf32(float v) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return r;
}

// d += a·b on one 16×8×8 TF32 tile.
__device__ __forceinline__ void gemm_mma_tf32(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One thread's 8 elements of a 128×16 slice of op(X) (rows r0.., k-columns k0..), element
// e = i·256 + thread. KC: element (r, k) at x[r·ld + k] (rows run along k), e = 16r + k;
// otherwise at x[k·ld + r], e = 128k + r (consecutive threads read consecutive addresses).
template <bool KC>
__device__ __forceinline__ void gemm_tc_load(const float *__restrict__ x, long long ld, int rows,
                                             int k, int r0, int k0, float (&reg)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int e = i * GEMM_TC_THREADS + (int)threadIdx.x;
    const int r = KC ? e / GEMM_TC_BK : e % GEMM_TC_BM;
    const int kk = KC ? e % GEMM_TC_BK : e / GEMM_TC_BM;
    const int gr = r0 + r, gk = k0 + kk;
    reg[i] = (gr < rows && gk < k) ? x[KC ? (long long)gr * ld + gk : (long long)gk * ld + gr]
                                   : 0.f;
  }
}

template <bool KC>
__device__ __forceinline__ void gemm_tc_store(float (*s)[GEMM_TC_LD], const float (&reg)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int e = i * GEMM_TC_THREADS + (int)threadIdx.x;
    const int r = KC ? e / GEMM_TC_BK : e % GEMM_TC_BM;
    const int kk = KC ? e % GEMM_TC_BK : e / GEMM_TC_BM;
    s[r][kk] = reg[i];
  }
}

// The TF32 word of v and, with SPLIT, the TF32 word of its remainder.
template <bool SPLIT>
__device__ __forceinline__ void gemm_tc_split(float v, u32 &big, u32 &small) {
  big = gemm_tf32(v);
  if (SPLIT) small = gemm_tf32(v - __uint_as_float(big));
}

template <bool TA, bool TB, bool SPLIT>
__device__ __forceinline__ void gemm_tc_tile(int bm, int bn, int m, int n, int k, float alpha,
                                             const float *__restrict__ A,
                                             const float *__restrict__ B, float beta,
                                             float *__restrict__ C) {
  __shared__ __align__(16) float As[GEMM_TC_BM][GEMM_TC_LD];
  __shared__ __align__(16) float Bs[GEMM_TC_BM][GEMM_TC_LD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wm = (warp % 2) * 64, wn = (warp / 2) * 32;
  const int m0 = bm * GEMM_TC_BM, n0 = bn * GEMM_TC_BM;
  // op(A) m×k: stored m×k (rows along k, ld k) or k×m (ld m); op(B)ᵀ n×k: stored n×k
  // (transposed B, rows along k, ld k) or k×n (ld n).
  constexpr bool KA = !TA, KB = TB;
  const long long lda = TA ? m : k, ldb = TB ? k : n;
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;
  float ra[8], rb[8];
  gemm_tc_load<KA>(A, lda, m, k, m0, 0, ra);
  gemm_tc_load<KB>(B, ldb, n, k, n0, 0, rb);
  for (int k0 = 0; k0 < k; k0 += GEMM_TC_BK) {
    __syncthreads();
    gemm_tc_store<KA>(As, ra);
    gemm_tc_store<KB>(Bs, rb);
    __syncthreads();
    if (k0 + GEMM_TC_BK < k) {
      gemm_tc_load<KA>(A, lda, m, k, m0, k0 + GEMM_TC_BK, ra);
      gemm_tc_load<KB>(B, ldb, n, k, n0, k0 + GEMM_TC_BK, rb);
    }
    // The B fragments of both k8-steps of the stage.
    u32 bb[GEMM_TC_BK / 8][4][2], bs[GEMM_TC_BK / 8][4][2];
#pragma unroll
    for (int ks = 0; ks < GEMM_TC_BK / 8; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float *row = Bs[wn + j * 8 + g] + 8 * ks;
        gemm_tc_split<SPLIT>(row[t], bb[ks][j][0], bs[ks][j][0]);
        gemm_tc_split<SPLIT>(row[t + 4], bb[ks][j][1], bs[ks][j][1]);
      }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // The stage's products of row tile i summed from zero, then added to the total by
      // f32 adds (rounded to nearest): the tensor cores' own accumulation truncates, which
      // over thousands of same-signed products biases the sum by about 2^-23 per addition.
      float part[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) part[j][c] = 0.f;
#pragma unroll
      for (int ks = 0; ks < GEMM_TC_BK / 8; ++ks) {
        const float *r0 = As[wm + i * 16 + g] + 8 * ks, *r8 = As[wm + i * 16 + g + 8] + 8 * ks;
        u32 ab[4], as[4];
        gemm_tc_split<SPLIT>(r0[t], ab[0], as[0]);
        gemm_tc_split<SPLIT>(r8[t], ab[1], as[1]);
        gemm_tc_split<SPLIT>(r0[t + 4], ab[2], as[2]);
        gemm_tc_split<SPLIT>(r8[t + 4], ab[3], as[3]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (SPLIT) {
            gemm_mma_tf32(part[j], as, bb[ks][j]);
            gemm_mma_tf32(part[j], ab, bs[ks][j]);
          }
          gemm_mma_tf32(part[j], ab, bb[ks][j]);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] += part[j][c];
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = m0 + wm + i * 16 + g + (c >= 2 ? 8 : 0);
        const int col = n0 + wn + j * 8 + 2 * t + (c & 1);
        if (r < m && col < n) {
          float *out = C + (long long)r * n + col;
          const float v = alpha * acc[i][j][c];
          *out = beta == 0.f ? v : v + beta * *out;
        }
      }
}

// Grouped tile order as gemm_entry (8 tile-rows at a time walk the tile-columns).
template <bool TA, bool TB, bool SPLIT>
__device__ __forceinline__ void gemm_tc_entry(const float *A, const float *B, float *C, int m,
                                              int n, int k, float alpha, float beta) {
  const int mt = (m + GEMM_TC_BM - 1) / GEMM_TC_BM, nt = (n + GEMM_TC_BM - 1) / GEMM_TC_BM;
  const int pid = blockIdx.x, group = 8;
  const int per_group = group * nt;
  const int first = (pid / per_group) * group;
  const int rows = min(mt - first, group);
  const int bm = first + (pid % per_group) % rows, bn = (pid % per_group) / rows;
  gemm_tc_tile<TA, TB, SPLIT>(bm, bn, m, n, k, alpha, A, B, beta, C);
}

#define LOGOT_GEMM_TC(NAME, TA, TB, SPLIT)                                                  \
  extern "C" __global__ void __launch_bounds__(GEMM_TC_THREADS, 1)                          \
      NAME(const float *A, const float *B, float *C, int m, int n, int k, float alpha,      \
           float beta) {                                                                    \
    gemm_tc_entry<TA, TB, SPLIT>(A, B, C, m, n, k, alpha, beta);                            \
  }
LOGOT_GEMM_TC(gemm_tf32_nn, false, false, false)
LOGOT_GEMM_TC(gemm_tf32_nt, false, true, false)
LOGOT_GEMM_TC(gemm_tf32_tn, true, false, false)
LOGOT_GEMM_TC(gemm_tf32_tt, true, true, false)
LOGOT_GEMM_TC(gemm_tf32x3_nn, false, false, true)
LOGOT_GEMM_TC(gemm_tf32x3_nt, false, true, true)
LOGOT_GEMM_TC(gemm_tf32x3_tn, true, false, true)
LOGOT_GEMM_TC(gemm_tf32x3_tt, true, true, true)
