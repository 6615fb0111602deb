// Part of the point-cloud module (pointcloud.cu includes its parts in order, and NVRTC
// compiles them as one source): tensor-core operands and MMAs, and the split-f16 MMA
// half-step at d = 3 and 4 (pc_sinkstep_tn).

// ---------------------------------------------------------------------------------------
// Tensor-core cross term (f32 only, any d > PC_DMAX): the half-step of pc_sinkstep_dn with
// x·y on mma.sync fragments, TF32 (m16n8k8) or F16 (m16n8k16, twice the TF32 rate). Four
// precisions:
//   TF32   one product of the operands rounded to TF32 (cvt.rna: 10 explicit mantissa
//          bits), a relative error up to about 2^-10 per product;
//   TF32x3 each operand split a = a_big + a_small (a_big = tf32(a), a_small = tf32(a −
//          a_big)) and a_big·b_small + a_small·b_big + a_big·b_big accumulated: the dropped
//          a_small·b_small and the rounding of a_small leave about 2^-21 per product, near
//          f32's own rounding (3× the MMA work);
//   F16    each cloud scaled by a power of two S (its largest |coordinate| to (2^13, 2^14],
//          in f16's range) and rounded to f16 (10 explicit bits): an error up to 2^-11 of
//          the cloud's largest |coordinate| per coordinate; the dot product is S_x·S_y·x·y,
//          exact in f32 products and undone by `dot_scale` = 1/(S_x·S_y) in the epilogue;
//   F16x2  the scaled coordinate split as TF32x3 (a_big = f16(a), a_small = f16(a − a_big)),
//          three products: about 2^-22 of the largest |coordinate| per coordinate, at 1.5×
//          the work of TF32 and half that of TF32x3.
// The operands come split and rounded by pc_tc_split into point-major arrays of 32-bit
// words (one f32, or two f16 coordinates 2w and 2w+1) padded to `dp` (a multiple of
// PC_TC_DC) words, so that chunks go to shared memory by 16-byte cp.async and fragments come
// out of it by ldmatrix.
//
// Tiles. A block (8 warps) owns PC_TC_BL outputs and streams stages of reduced points. Two
// shapes: with the output tile resident in shared memory (small dp, where the epilogue
// weighs most), stages of PC_TC_BK points and warp w computing the 32×32 dot products of
// rows (w % 4)·32 and columns (w / 4)·32 (2 × 4 tiles of 16×8), two blocks per SM; with the
// output tile streamed by chunks (large dp, where the products weigh most), one block per
// SM, rows (w % 2)·64 per warp: split products take stages of PC_TC_BKS points, 64×32 per
// warp, columns (w / 2)·32 (4 × 4 tiles); single products PC_TC_BKS1 = 256, 64×64 per warp,
// columns (w / 2)·64 (4 × 8 tiles). Both tiles are reloaded every stage, so the operand
// bytes per product set the pace: 256 columns load 3/4 of 128's. Shared chunks of PC_TC_DC
// words are stored as two sub-blocks of 16 words, each [point][16] with
// the four 16-byte segments of each point permuted (pc_tc_seg). MMA step j of a sub-block
// takes its words 8j .. 8j+7 (segments 2j, 2j+1), and one ldmatrix.x4 gives a lane
// (g = lane >> 2, t = lane & 3) word t of a row of four 8-row matrices: the A fragments of a
// 16-row tile, or the B fragments of two 8-column tiles. Fragments (PTX ISA): TF32 m16n8k8,
// one coordinate a word: A a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4), B b0
// (k = t, n = g), b1 (k = t+4, n = g); F16 m16n8k16, two coordinates a word: A a0
// (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..), B b0 (k = 2t..2t+1,
// n = g), b1 (k = 2t+8.., n = g); so the same words feed both. C (both):
// c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1).
//
// Epilogue. |p − q|²: the row constant |p|² leaves the log-sum-exp, so the argument of
// column k is s·(other_k − |q_k|²) + 2s·p·q (one FMA; the row's s·|p|² is subtracted from
// its maximum at the end); |p − q|: c = max(|p|² + |q|² − 2·p·q, 0) and its square root as
// in pc_sinkstep_dn. Each thread keeps a (max, sum) pair for each of its 2·MI rows; the
// 4 lanes of a group merge by shuffles and the column warps through shared memory. With the
// output tile resident, |p − q|² and single products (F16, TF32: where the exponentials weigh
// most), the epilogue takes no maximum: the stage's products start from −m/s2 (m the row's
// shift, as the first MMA's C operand), the column terms come finished from shared memory, and
// a pair costs an FMA, an exponential and an add, the shifts being raised lazily as in
// pc_fold_stage. Outputs and split partials as pc_sinkstep_dn (the partial maxima include
// the −s·|p|² shift).
#define PC_TC_BL 128 /* output points per block of the tensor-core half-step */
#define PC_TC_BK 64   /* reduced points per stage, resident output tile */
#define PC_TC_BKS 128 /* reduced points per stage, streamed output tile, split products */
// Single products with the output tile streamed: stages of 256 points, 64×64 products per
// warp (100 KiB of shared memory); the host compiles 128 (64×32, as the split kernels) for a
// GPU with less (CudaBackend's `tc_stream_stage`).
#ifndef PC_TC_BKS1
#define PC_TC_BKS1 256 /* reduced points per stage, streamed output tile, single products */
#endif
#define PC_TC_DC 32  /* 32-bit words per shared chunk; dp is a multiple */
#define PC_TC_RSLOTS 3 /* slots of reduced chunks, single products on a resident tile (else 2) */

__device__ __forceinline__ float pc_tf32(float v) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

// A compile-time flag passed to a generic lambda (NVRTC has no <type_traits>).
template <bool V> struct PcFlag {
  static constexpr bool value = V;
};


// d = a·b + c on one 16×8×8 TF32 tile (HALF: one 16×8×16 f16 tile, two f16 a word); the
// operands are TF32 values (HALF: f16 pairs) in 32-bit registers.
template <bool HALF>
__device__ __forceinline__ void pc_mma_c(float (&d)[4], const u32 (&a)[4], const u32 *b,
                                         const float (&c)[4]) {
  if (HALF)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
  else
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
          "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// d += a·b, the same tile accumulating in place.
template <bool HALF>
__device__ __forceinline__ void pc_mma(float (&d)[4], const u32 (&a)[4], const u32 *b) {
  pc_mma_c<HALF>(d, a, b, d);
}

// Output o of a tensor-core half-step (of B·L) from its row's sum S·2^M (M with the
// −s·|p|² shift): ε·log μ_o − ε·ln 2·(M + log2 S), or split blockIdx.z's partials.
__device__ __forceinline__ void pc_tc_put(float *__restrict__ out, float *__restrict__ part_m,
                                          float *__restrict__ part_s,
                                          const float *__restrict__ lm, long long o,
                                          long long tot, float M, float S, float eps) {
  if (gridDim.z == 1) {
    const float lmv = lm[o];
    out[o] = lmv == Num<float>::neg_inf()
                 ? lmv
                 : eps * lmv - eps * float(LOGOT_LN2) * (M + Num<float>::log2(S));
  } else {
    part_m[blockIdx.z * tot + o] = M;
    part_s[blockIdx.z * tot + o] = S;
  }
}

// f16(a) in the high and f16(b) in the low half of a word (round to nearest even,
// subnormals kept), and a word's two halves back to f32.
__device__ __forceinline__ u32 pc_f16x2(float a, float b) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float2 pc_f16x2_back(u32 w) {
  unsigned short hi, lo;
  float a, b;
  asm("mov.b32 {%0, %1}, %2;" : "=h"(lo), "=h"(hi) : "r"(w));
  asm("cvt.f32.f16 %0, %1;" : "=f"(a) : "h"(hi));
  asm("cvt.f32.f16 %0, %1;" : "=f"(b) : "h"(lo));
  return make_float2(a, b);
}

// v rounded to f16 (nearest even, subnormals kept) and back to f32.
__device__ __forceinline__ float pc_f16_round(float v) {
  unsigned short h;
  float r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}

// ---------------------------------------------------------------------------------------
// The norm form on tensor cores for d ≤ 4 (f32, |x−y|² of centred clouds): the half-step of
// pc_sinkstep_nf_d*, with each thread's exponents formed by one split-f16 m16n8k16 MMA a
// tile instead of d FMAs a pair, so that a pair costs an exponential and an add:
//   v_lk − m_l = A_l·B_k + C_l,  A_l = (x'b, x'b, x's, x's, 2^15, 2^4, 2^-7, 0),
//                                B_k = (yb, ys, yb, ys, q0,   q1,  q2,   0),
// with x' = 2s·x/S and y·S (S = 2^a from the host, `scale`, balancing the two clouds'
// largest |coordinate|) split as x'b = f16(x'), x's = f16(x' − x'b) (y likewise); the column
// term q_k = s·(other_k − |y_k|²) in three f16 parts q0 = f16(q/2^15), q1 = f16(r1/2^4),
// q2 = f16(r2·2^7) of the exact remainders r1 = q − 2^15·q0, r2 = r1 − 2^4·q1, which leave
// at most 2^-34·|q| + 2^-32 (for |q| < 2^29, far past f32's use for v; a column without
// mass takes PC_TN_NOMASS, below every shift, and q is clamped to 2^30); and
// C_l = −m_l, the row's shift, as the MMA's accumulator input. The four products of a
// coordinate are (x'b + x's)(yb + ys) exactly (d = 4 drops x's·ys, 2^-22 of |x'||y|), each
// of x'b + x's, yb + ys is within 2^-22 of its f32 value and 2^-25 of 0 (f16 subnormals;
// the host's norm-form bound keeps |x'|, |y·S| below 2^5, far inside f16's range); the
// products are exact in f32 and summed with the tensor core's f32 accumulation. Lane (g, t)
// of warp w keeps rows 16·r + g and 16·r + g + 8 of its R tiles (A fragment: words 2t, 2t+1
// and 2t+8, 2t+9 of each row, two f16 a register), and reads its B fragment of a chunk of 8
// columns (column g, the same words) with one 8-byte shared load; the four lanes of a row
// each sum their own two columns of every chunk against their own shifts, raised lazily as
// in pc_fold_stage, and merge by shuffles at the end. Outputs and split partials as
// pc_sinkstep_body. PC_TN_POLY of each thread's 16 exponentials a chunk go to the FMA pipe
// by the degree-4 polynomial (2.9e-6 relative, on a quarter of the rows).
//
// The next stage's coordinates and column terms are copied into shared memory by cp.async
// while the block sums the current one, so a stage change waits for no global load; and the
// chunk loop stops at the slice's end, so the host may end slices at any 16 points
// (fill_split in step.rs) without summing a padded stage.
//
// The kernel is bound by the exponential unit (MUFU.EX2 near its peak, the warps' first stall
// the MIO queue, which MUFU goes through). A kernel that executes MMAs runs at a lower SM
// clock than the MMA-free FMA kernel (benches/probes/sm_clock.cu), but spends fewer issues a
// pair (4.8 against 6.3), so it is the faster one at d = 3 and 4. Its shape, each part chosen
// against its alternatives (docs/performance-history.md, "CUDA kernels"):
// - split f16 on one m16n8k16 rather than split TF32 on two m16n8k8;
// - 4 polynomial exponentials of 16, by a polynomial of degree 4;
// - 4 tiles a warp; blocks of 256 threads;
// - stages of 1024 points at d = 3; the chunk loop unrolled by 2; the cp.async copy.
// d = 1 and 2 run faster on their FMA kernels.
#define PC_TN_NOMASS (-2146435072.0f) /* −65504·2^15: the column term without mass */
#define PC_TN_QMAX 1073741824.0f      /* 2^30: the largest |q| of a column with mass */
#define PC_TN_M0 (-1073741824.0f)    /* −2^30: a first shift, above every massless term */
#define PC_TN_R 4 /* m16 row tiles per warp of pc_sinkstep_tn */
#define PC_TN_UNROLL 2 /* the chunk loop's unroll at d = 3 */
#define PC_TN_UNROLL4 2 /* and at d = 4 */
// Reduced points per stage of pc_sinkstep_tn at d = 4, and at d = 3 (its 48 KiB of static
// shared memory; at d = 4 the same 1024 would take 52 KiB).
#define PC_TN_KT 512
#define PC_TN_KT3 1024
#define PC_TN_POLY 4 /* of a thread's 4·R exponentials a chunk, by pc_exp2_poly<4> */

// Products per coordinate: 4 while 4·D + 3 words fit the MMA's 16.
template <int D> struct PcTn {
  static constexpr int UNROLL = D == 3 ? PC_TN_UNROLL : PC_TN_UNROLL4;
  static constexpr int KT = D == 3 ? PC_TN_KT3 : PC_TN_KT;
  static constexpr int P = 4 * D + 3 <= 16 ? 4 : 3;
  static_assert(P * D + 3 <= 16, "one m16n8k16 MMA a tile");
};

// Word k of A (own point: parts b, s of x', and the scales of q's parts as `q`) or of B
// (reduced point: parts b, s of y, and q's three parts), 0 past the used words.
template <int D, bool ROW>
__device__ __forceinline__ float pc_tn_word(int k, const float (&b)[D], const float (&s)[D],
                                            const float (&q)[3]) {
  constexpr int P = PcTn<D>::P;
  float r = 0.0f;
#pragma unroll
  for (int t = 0; t < D; ++t) {
    if (k == t) r = b[t];
    if (k == D + t) r = ROW ? b[t] : s[t];
    if (k == 2 * D + t) r = ROW ? s[t] : b[t];
    if (P == 4 && k == 3 * D + t) r = s[t];
  }
#pragma unroll
  for (int e = 0; e < 3; ++e)
    if (k == P * D + e) r = q[e];
  return r;
}

// Words k and k + 1 (f16 values) as one fragment register, word k in the low half.
template <int D, bool ROW>
__device__ __forceinline__ u32 pc_tn_pair(int k, const float (&b)[D], const float (&s)[D],
                                          const float (&q)[3]) {
  return pc_f16x2(pc_tn_word<D, ROW>(k + 1, b, s, q), pc_tn_word<D, ROW>(k, b, s, q));
}

// The B fragment of a lane for chunk `c` of the stage.
__device__ __forceinline__ void pc_tn_lds(u32 (&w)[2], const u32 *sb, int c, int lane) {
  const uint2 v = *reinterpret_cast<const uint2 *>(sb + (c * 32 + lane) * 2);
  w[0] = v.x, w[1] = v.y;
}

// Every chunk c < nc of the stage in `sb`: v = A_r·B_c + C_r for each of the R tiles, then
// f(r, e, v[e]) for its four entries (the chunk loop unrolled by UNROLL).
template <int UNROLL, int R, typename F>
__device__ __forceinline__ void pc_tn_chunks(int nc, const u32 *sb, int lane,
                                             const u32 (&a)[R][4], const float (&c)[R][4],
                                             F &&f) {
#pragma unroll UNROLL
  for (int k = 0; k < nc; ++k) {
    u32 w[2];
    pc_tn_lds(w, sb, k, lane);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v[4];
      pc_mma_c<true>(v, a[r], w, c[r]);
#pragma unroll
      for (int e = 0; e < 4; ++e) f(r, e, v[e]);
    }
  }
}

template <int D, int R>
__device__ __forceinline__ void pc_sinkstep_tn_body(const float *__restrict__ out_pts,
                                                    const float *__restrict__ red_pts,
                                                    const float *__restrict__ other,
                                                    const float *__restrict__ lm,
                                                    float *__restrict__ out,
                                                    float *__restrict__ part_m,
                                                    float *__restrict__ part_s, int B, int K,
                                                    int L, float eps, float bal, int kslice) {
  constexpr int KT = PcTn<D>::KT;
  __shared__ __align__(16) u32 sb[KT / 8 * 32 * 2];
  // The next stage's coordinates and column potentials, copied in while this one is summed.
  __shared__ __align__(16) float raw[(D + 1) * KT];
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int b = blockIdx.y, z = blockIdx.z;
  const int kbeg = z * kslice, kend = min(K, kbeg + kslice);
  const float s = float(LOGOT_LOG2E) / eps, ninf = Num<float>::neg_inf();
  const int row0 = blockIdx.x * (PC_BLOCK / 2 * R) + (threadIdx.x >> 5) * 16 * R + g;
  // The scales of q's three parts, and of the own points' coordinates.
  const float qscale[3] = {32768.0f, 16.0f, 0.0078125f}, xscale = 2.0f * s / bal;
  // A fragments: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..).
  u32 a[R][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int l = row0 + 16 * r + 8 * h;
      float xb[D], xs[D];
#pragma unroll
      for (int u = 0; u < D; ++u) {
        const float x = l < L ? out_pts[(long long)u * L + l] * xscale : 0.0f;
        xb[u] = pc_f16_round(x);
        xs[u] = pc_f16_round(x - xb[u]);
      }
      // `opaque` is 0, but the compiler cannot tell: the words that are the same in every
      // row (the 1s and 0s) stay in registers of their own, not one shared value copied
      // into each fragment at every use.
      const u32 opaque = K < 0 ? (u32)l : 0u;
      a[r][h] = pc_tn_pair<D, true>(2 * t, xb, xs, qscale) | opaque;
      a[r][2 + h] = pc_tn_pair<D, true>(2 * t + 8, xb, xs, qscale) | opaque;
    }
  // nm: the C operand, −m of row g (0, 1) and g + 8 (2, 3) of each tile; sums of this lane's
  // columns.
  float nm[R][4], sum[R][2];
  const float zero[R][4] = {};  // the C operand of MMAs without a shift
  // The two C words of a row are equal; `keep` (0, unknown to the compiler) keeps them in
  // registers of their own rather than one value copied into the fragment at every MMA.
  const u32 keep = K < 0 ? (u32)threadIdx.x : 0u;
  auto set_shift = [&](float (&c)[4], int h, float m) {
    c[2 * h] = -m;
    c[2 * h + 1] = __uint_as_float(__float_as_uint(-m) | keep);
  };
#pragma unroll
  for (int r = 0; r < R; ++r) {
    set_shift(nm[r], 0, PC_M0);
    set_shift(nm[r], 1, PC_M0);
    sum[r][0] = sum[r][1] = 0.0f;
  }
  const float *pot = other + (long long)b * K;
  auto fetch = [&](int k0) {
    for (int e = threadIdx.x; e < KT; e += blockDim.x) {
      const int k = k0 + e;
      const bool in = k < kend;
#pragma unroll
      for (int u = 0; u < D; ++u)
        cp_async4(raw + u * KT + e, in ? red_pts + (long long)u * K + k : red_pts, in ? 4 : 0);
      cp_async4(raw + D * KT + e, in ? pot + k : pot, in ? 4 : 0);
    }
    cp_async_commit();
  };
  fetch(kbeg);
  for (int k0 = kbeg; k0 < kend; k0 += KT) {
    cp_async_wait<0>();
    __syncthreads();
    for (int e = threadIdx.x; e < KT; e += blockDim.x) {
      const int k = k0 + e;
      const bool in = k < kend;
      float yb[D], ys[D], q[3], n2 = 0.0f;
#pragma unroll
      for (int u = 0; u < D; ++u) {
        const float y = raw[u * KT + e];
        n2 = fmaf(y, y, n2);
        yb[u] = pc_f16_round(y * bal);
        ys[u] = pc_f16_round(fmaf(y, bal, -yb[u]));
      }
      float qv = in ? s * (raw[D * KT + e] - n2) : ninf;
      if (!(qv > PC_TN_NOMASS)) qv = PC_TN_NOMASS;  // no mass (−inf) or padding
      qv = fminf(qv, PC_TN_QMAX);
      q[0] = pc_f16_round(qv * (1.0f / 32768.0f));
      const float r1 = fmaf(q[0], -32768.0f, qv);
      q[1] = pc_f16_round(r1 * 0.0625f);
      q[2] = pc_f16_round(fmaf(q[1], -16.0f, r1) * 128.0f);
      // Column e of chunk e / 8 is n = e % 8 of its lanes 4n + t: words 2t, 2t+1 and 2t+8,
      // 2t+9 of the point.
      // The point's 8 words are contiguous: two 16-byte stores (eight 4-byte stores put 8
      // lanes on a bank).
      u32 wd[8];
#pragma unroll
      for (int w = 0; w < 8; ++w)
        wd[(w & 3) * 2 + (w >> 2)] = pc_tn_pair<D, false>(2 * w, yb, ys, q);
      uint4 *col = reinterpret_cast<uint4 *>(sb + ((e >> 3) * 32 + (e & 7) * 4) * 2);
      col[0] = make_uint4(wd[0], wd[1], wd[2], wd[3]);
      col[1] = make_uint4(wd[4], wd[5], wd[6], wd[7]);
    }
    __syncthreads();
    if (k0 + KT < kend) fetch(k0 + KT);
    if (k0 == kbeg) {
      // First stage: each row's shift starts at the largest exponent of the first chunk
      // (over the four lanes of the row; PC_TN_M0 when the chunk has no mass). Not by
      // pc_tn_chunks: with it ptxas schedules the chunk loop otherwise, and slower.
      u32 w[2];
      pc_tn_lds(w, sb, 0, lane);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float v[4];
        pc_mma_c<true>(v, a[r], w, zero[r]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float cm = fmaxf(v[2 * h], v[2 * h + 1]);
          cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, 1));
          cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, 2));
          set_shift(nm[r], h, fmaxf(cm, PC_TN_M0));
        }
      }
    }
    // Every chunk against the current shifts, no test; one test for the stage. Chunks past
    // the slice's end (a last stage's padding) are not summed.
    const int nc = min(KT, kend - k0 + 7) / 8;
    float before[R][2];
#pragma unroll
    for (int r = 0; r < R; ++r) before[r][0] = sum[r][0], before[r][1] = sum[r][1];
    pc_tn_chunks<PcTn<D>::UNROLL>(nc, sb, lane, a, nm, [&](int r, int e, float v) {
      sum[r][e >> 1] += 4 * r + e < PC_TN_POLY ? pc_exp2_poly<4>(v) : Num<float>::exp2(v);
    });
    float total = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) total += sum[r][0] + sum[r][1];
    // The MMAs below are warp-wide, so the whole warp takes the branch when any lane must
    // (for the other lanes it changes nothing).
    if (__any_sync(0xffffffffu, !(total <= float(PC_LAZY_MAX)))) {
      // A sum past PC_LAZY_MAX is renormalised exactly; one that overflowed is redone from
      // its value before the stage against the stage's largest exponent.
      bool redo[R][2], any = false;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          redo[r][h] = !Num<float>::is_finite(sum[r][h]);
          any |= redo[r][h];
          if (!redo[r][h] && sum[r][h] > float(PC_LAZY_MAX)) {
            int ex;
            sum[r][h] = frexpf(sum[r][h], &ex);
            set_shift(nm[r], h, float(ex) - nm[r][2 * h]);
          }
        }
      if (__any_sync(0xffffffffu, any)) {
        float cm[R][2];
#pragma unroll
        for (int r = 0; r < R; ++r) cm[r][0] = cm[r][1] = ninf;
        pc_tn_chunks<1>(nc, sb, lane, a, zero, [&](int r, int e, float v) {
          cm[r][e >> 1] = fmaxf(cm[r][e >> 1], v);
        });
        float add[R][2];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            add[r][h] = 0.0f;
            if (redo[r][h]) {
              sum[r][h] = before[r][h];
              const float m = -nm[r][2 * h];
              if (cm[r][h] > m) {
                sum[r][h] *= Num<float>::exp2(m - cm[r][h]);
                set_shift(nm[r], h, cm[r][h]);
              }
            }
          }
        pc_tn_chunks<1>(nc, sb, lane, a, nm, [&](int r, int e, float v) {
          add[r][e >> 1] += Num<float>::exp2(v);
        });
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (redo[r][h]) sum[r][h] += add[r][h];
      }
    }
  }
  // The four lanes of each row merge their (shift, sum) pairs; lane t = 0 writes row g,
  // t = 1 row g + 8.
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m = sum[r][h] > 0.0f ? -nm[r][2 * h] : ninf;
      float M = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, 2));
      float S = m == ninf ? 0.0f : sum[r][h] * Num<float>::exp2(m - M);
      S += __shfl_xor_sync(0xffffffffu, S, 1);
      S += __shfl_xor_sync(0xffffffffu, S, 2);
      const int l = row0 + 16 * r + 8 * h;
      if (t != h || l >= L) continue;
      float n2 = 0.0f;
#pragma unroll
      for (int u = 0; u < D; ++u) {
        const float x = out_pts[(long long)u * L + l];
        n2 = fmaf(x, x, n2);
      }
      pc_tc_put(out, part_m, part_s, lm, (long long)b * L + l, (long long)B * L,
                S > 0.0f ? M - s * n2 : ninf, S, eps);
    }
}

// Entry points pc_sinkstep_tn_d{D}_f32: PC_STEP_ARGS (scale, root unread), PC_BLOCK threads,
// 16·PC_TN_R outputs a warp, two blocks an SM (96 registers at d = 3, 104 at d = 4).
#define PC_STEP_TN(D)                                                                        \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK, 2)                                  \
      pc_sinkstep_tn_d##D##_f32(PC_STEP_ARGS(float)) {                                         \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    pc_sinkstep_tn_body<D, PC_TN_R>(out_pts, red_pts, other, lm, out, part_m, part_s, B, K,  \
                                    L, eps, scale, kslice);                                  \
  }
PC_STEP_TN(3)
PC_STEP_TN(4)
