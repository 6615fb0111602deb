// Part of the point-cloud module (pointcloud.cu includes its parts in order, and NVRTC
// compiles them as one source): the tensor-core half-step by Hopper's warpgroup MMAs
// (pc_sinkstep_*w), and the operand split's entry point.

// ---------------------------------------------------------------------------------------
// F16, TF32 and F16x2 half-steps by warpgroup MMAs (Hopper, sm_90a: `wgmma.mma_async`),
// |p − q|², resident output tile: what pc_sinkstep_h, _tc and _h2 compute with the lazy
// epilogue, but the products of a stage are one asynchronous MMA per 32 bytes of the point
// (16 f16 or 8 TF32 coordinates) for a warpgroup's 64 rows and the stage's 64 columns, read
// by the tensor cores straight from shared memory (no fragment loads, no per-tile MMA
// instructions: the issue slots go to the epilogue's FMA, exponential and add). A block of
// two warpgroups owns 128 outputs (PC_TC_BL); the output tile is copied once, the reduced
// cloud in stages of PC_WG_BK points through PC_WG_SLOTS slots (copies two stages ahead,
// one barrier a stage). Both tiles are K-major with 128-byte swizzling, the layout the
// MMA's shared-memory descriptors name: row p's 128-byte block kb (32 words: 64 f16 or 32
// TF32 coordinates) at kb·(rows·128) + p·128, its 16-byte segment w at (w ^ (p mod 8))·16
// within it. Each thread then holds rows g and g + 8 of its warp's 16 and columns
// 8·ni + 2t + {0, 1}, as an m16n8 tile of mma.sync: pc_lazy_fold applies. Compiled only for
// sm_90a (the host runs it only there); elsewhere the entry points trap.
#define PC_WG_BK 64   /* reduced points per stage of the warpgroup kernel (the MMA's N) */
#define PC_WG_SLOTS 3 /* stages in flight */
#define PC_WG_KB_MAX 4 /* most 128-byte blocks a point */
// Split products summed from zero over 32 coordinates (two MMA steps) per f32 add, as the
// mma.sync kernel's sub-blocks: about two thirds of the distance error of 64 (4 steps) on
// otC64's clouds (tests/cuda_pointcloud_tc.rs), for a few percent more time.
#define PC_WG2_KS 2 /* MMA steps of 16 coordinates summed from zero per f32 add (2 or 4) */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PC_WGMMA 1
#else
#define PC_WGMMA 0
#endif

// The shared-memory matrix descriptor of a K-major tile with 128-byte swizzling at shared
// address `addr`: address / 16 (bits 0-13), leading offset unused (1), stride offset 1024
// bytes / 16 between groups of 8 rows (bits 32-45), swizzle mode 1 = 128 bytes (bits 62-63).
__device__ __forceinline__ unsigned long long pc_wg_desc(u32 addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) |
         (1ull << 62);
}

// The operand numbers of a warpgroup MMA's accumulators: %0 .. %31 (PC_WG_R0, 64 columns),
// then 32 more each for 256 columns.
#define PC_WG_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define PC_WG_R1 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, " \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define PC_WG_R2 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, " \
  "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define PC_WG_R3 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, " \
  "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, " \
  "%124, %125, %126, %127"
// The accumulators of 8-column tiles i .. i+7 as operands.
#define PC_WG_D4(i) "+f"(d[i][0]), "+f"(d[i][1]), "+f"(d[i][2]), "+f"(d[i][3])
#define PC_WG_D8(i)                                                                          \
  PC_WG_D4(i), PC_WG_D4(i + 1), PC_WG_D4(i + 2), PC_WG_D4(i + 3), PC_WG_D4(i + 4),           \
      PC_WG_D4(i + 5), PC_WG_D4(i + 6), PC_WG_D4(i + 7)
// One MMA: SHAPE_TYPES ("m64n64k16.f32.f16.f16"), the accumulators' numbers REGS, the
// descriptors' and the flag's numbers (AB, P: "%32, %33", "%34"), the immediates after the
// flag (scales; f16: and no transposition), then the accumulators.
#define PC_WG_MMA(SHAPE_TYPES, REGS, AB, P, TAIL, ...)                                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                \
               "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" REGS "}, " AB ", p" TAIL    \
               ";\n}\n"                                                                      \
               : __VA_ARGS__                                                                 \
               : "l"(da), "l"(db), "n"(ACC ? 1 : 0))

// d (64 rows × 8·NT columns, f32, the m16n8 fragments of each warp's 16 rows) = a·b (+ d
// with ACC) over 16 f16 coordinates (HALF) or 8 TF32 ones: 32 bytes of each row either way.
template <int NT, bool HALF, bool ACC = true>
__device__ __forceinline__ void pc_wgmma(float (&d)[NT][4], unsigned long long da,
                                         unsigned long long db) {
  static_assert(NT == 8 || NT == 32, "64 or 256 columns");
#if PC_WGMMA
  if constexpr (NT == 8 && HALF)
    PC_WG_MMA("m64n64k16.f32.f16.f16", PC_WG_R0, "%32, %33", "%34", ", 1, 1, 0, 0",
              PC_WG_D8(0));
  else if constexpr (NT == 8)
    PC_WG_MMA("m64n64k8.f32.tf32.tf32", PC_WG_R0, "%32, %33", "%34", ", 1, 1", PC_WG_D8(0));
  else if constexpr (HALF)
    PC_WG_MMA("m64n256k16.f32.f16.f16", PC_WG_R0 ", " PC_WG_R1 ", " PC_WG_R2 ", " PC_WG_R3,
              "%128, %129", "%130", ", 1, 1, 0, 0",
              PC_WG_D8(0), PC_WG_D8(8), PC_WG_D8(16), PC_WG_D8(24));
  else
    PC_WG_MMA("m64n256k8.f32.tf32.tf32", PC_WG_R0 ", " PC_WG_R1 ", " PC_WG_R2 ", " PC_WG_R3,
              "%128, %129", "%130", ", 1, 1",
              PC_WG_D8(0), PC_WG_D8(8), PC_WG_D8(16), PC_WG_D8(24));
#endif
}

// The accumulators as operands of nothing: the compiler keeps their reads and writes on
// their side of the asynchronous MMAs (CUTLASS's warpgroup_fence_operand).
template <int NT> __device__ __forceinline__ void pc_wg_pin(float (&d)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(d[i][q])::"memory");
}

__device__ __forceinline__ void pc_wg_arrive() {
#if PC_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pc_wg_commit() {
#if PC_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Every committed group of this warpgroup's MMAs but the last N complete.
template <int N> __device__ __forceinline__ void pc_wg_wait() {
#if PC_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// This thread's generic-proxy writes of shared memory (cp.async), visible to the MMAs'
// asynchronous proxy.
__device__ __forceinline__ void pc_fence_async_shared() {
#if PC_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Chunk c (128 bytes: 32 words) of points p0 .. p0+P−1 of a point-major part of dp words
// (zeros at or past `len`) into one block of the swizzled K-major layout above: thread e
// copies segment e mod 8 of points e/8 + 32j, so that the addresses advance by constants.
template <int P>
__device__ __forceinline__ void pc_wg_chunk(unsigned char *__restrict__ dst,
                                            const float *__restrict__ src, int len, int p0,
                                            int c, int dp) {
  static_assert(P % 32 == 0, "whole passes of 256 threads");
  const int w = threadIdx.x & 7, p = threadIdx.x >> 3;
  const float *g = src + (long long)(p0 + p) * dp + c * PC_TC_DC + w * 4;
  unsigned char *d = dst + p * 128 + ((w ^ (p & 7)) << 4);
  const long long pass = 32ll * dp;
#pragma unroll
  for (int j = 0; j < P / 32; ++j) {
    const bool in = p0 + p + 32 * j < len;
    cp_async16(d + j * 32 * 128, in ? g + j * pass : src, in ? 16 : 0);
  }
}

// Points p0 .. p0+P−1 (zeros at or past `len`), all nkb chunks of a point-major part of dp
// words, into the swizzled K-major layout above (chunk kb at dst + kb·P·128). Unrolled
// chunk by chunk, rather than a loop over the block's threads, which spends a division and a
// remainder an iteration.
template <int P>
__device__ __forceinline__ void pc_wg_stage(unsigned char *__restrict__ dst,
                                            const float *__restrict__ src, int len, int p0,
                                            int nkb, int dp) {
#pragma unroll
  for (int kb = 0; kb < nkb; ++kb) pc_wg_chunk<P>(dst + kb * (P * 128), src, len, p0, kb, dp);
}

// A block of a warpgroup kernel (two warpgroups, PC_TC_BL outputs): this thread's
// warpgroup, warp and place (g, t) in the m16n8 fragments of its warp's 16 rows, the pair b,
// the split's reduced points [kbeg, kend), the first output l0 and s = log2(e)/ε.
struct PcWgBlock {
  int wg, warp, g, t, b, kbeg, kend, l0;
  float s;
  __device__ __forceinline__ PcWgBlock(int K, int kslice, float eps) {
    const int lane = threadIdx.x & 31, z = blockIdx.z;
    wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
    b = blockIdx.y;
    kbeg = z * kslice, kend = min(K, kbeg + kslice);
    l0 = blockIdx.x * PC_TC_BL;
    s = float(LOGOT_LOG2E) / eps;
  }
  // −mb/s2 for this thread's rows g and g + 8 (nis2 = −1/s2), mb the row's shift m (0
  // before it has one): started from it, or added to, a stage's products make the lazy
  // fold's fma(s2, acc, pv) v − mb.
  static __device__ __forceinline__ void row_bias(float (&bias)[2], const float (&m)[1][2],
                                                  float nis2) {
    const float ninf = Num<float>::neg_inf();
#pragma unroll
    for (int h = 0; h < 2; ++h) bias[h] = (m[0][h] == ninf ? 0.0f : m[0][h]) * nis2;
  }
  // The outputs of this thread's rows g and g + 8 from their sums sum·2^m (m without the
  // −s·|p|² shift), merged over the 4 lanes of a group (a warp holds all of its rows'
  // columns): pc_tc_put.
  __device__ __forceinline__ void finish(float (&m)[1][2], float (&sum)[1][2],
                                         const float *__restrict__ out_nrm,
                                         const float *__restrict__ lm, float *__restrict__ out,
                                         float *__restrict__ part_m, float *__restrict__ part_s,
                                         int B, int L, float eps) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      lse_merge_lanes(m[0][h], sum[0][h], 4);
      const int l = l0 + wg * 64 + warp * 16 + g + 8 * h;
      if (t != 0 || l >= L) continue;
      pc_tc_put(out, part_m, part_s, lm, (long long)b * L + l, (long long)B * L,
                m[0][h] - s * out_nrm[l], sum[0][h], eps);  // −inf stays −inf
    }
  }
};

template <int NKB, bool X3, bool HALF>
__device__ __forceinline__ void pc_sinkstep_wg_body(
    const float *__restrict__ ob, const float *__restrict__ os, const float *__restrict__ rb,
    const float *__restrict__ rs,
    const float *__restrict__ out_nrm, const float *__restrict__ red_nrm,
    const float *__restrict__ other, const float *__restrict__ lm, float *__restrict__ out,
    float *__restrict__ part_m, float *__restrict__ part_s, int B, int K, int L, int dp,
    float eps, float dot_scale, int kslice) {
  constexpr int BL = PC_TC_BL, BK = PC_WG_BK, NS = PC_WG_SLOTS, NI = BK / 8;
  static_assert(BL == 128 && BK == 64, "two warpgroups of m64n64 products");
  extern __shared__ __align__(1024) unsigned char pc_smem[];
  // The swizzle repeats every 1024 bytes of the shared address: the tiles start on such a
  // boundary (the host adds 1024 bytes of room).
  const u32 raw = (u32)__cvta_generic_to_shared(pc_smem);
  constexpr int nkb = NKB;  // 128-byte blocks a point (dp / PC_TC_DC), known at compile time
  constexpr int NP = X3 ? 2 : 1;         // parts per operand (X3: f16 big and small)
  constexpr int AP = nkb * BL * 128;     // bytes of one part of the output tile
  constexpr int BP = nkb * BK * 128;     // bytes of one part of a stage
  unsigned char *sA = pc_smem + (((raw + 1023u) & ~1023u) - raw);  // [part][kb][BL][128 B]
  unsigned char *sB = sA + NP * AP;                                  // [slot][part][kb][BK][128 B]
  float *sP = reinterpret_cast<float *>(sB + NS * NP * BP);          // [slot][BK] terms
  const PcWgBlock blk(K, kslice, eps);
  const int wg = blk.wg, t = blk.t, kbeg = blk.kbeg, kend = blk.kend, l0 = blk.l0;
  const float s = blk.s, ninf = Num<float>::neg_inf();
  const float *pot = other + (long long)blk.b * K;
  const int stages = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
  float m[1][2] = {{ninf, ninf}}, sum[1][2] = {{0.0f, 0.0f}};

  // Stage st's reduced points into its slot (an empty group past the last stage, so that
  // every step waits for the same count).
  auto issue = [&](int st) {
    if (st < stages) {
      unsigned char *dst = sB + (st % NS) * NP * BP;
      pc_wg_stage<BK>(dst, rb, kend, kbeg + st * BK, nkb, dp);
      if (X3) pc_wg_stage<BK>(dst + BP, rs, kend, kbeg + st * BK, nkb, dp);
    }
    cp_async_commit();
  };
  // Column terms, fetched a stage ahead and put in the stage's slot before its barrier.
  PcColumnTerms<BK> cols;
  auto fetch = [&](int st) { cols.fetch(pot, red_nrm, kbeg + st * BK, kend); };
  auto put = [&](int st) { cols.put(sP + (st % NS) * BK, kbeg + st * BK, kend, s); };
  if (stages > 0) {
    pc_wg_stage<BL>(sA, ob, L, l0, nkb, dp);  // committed with stage 0
    if (X3) pc_wg_stage<BL>(sA + AP, os, L, l0, nkb, dp);
    issue(0);
    issue(1);
    fetch(0);
  }
  const float s2 = s * (2.0f * dot_scale), nis2 = -1.0f / s2;
  const u32 a_base = (u32)__cvta_generic_to_shared(sA) + wg * 64 * 128;
  for (int st = 0; st < stages; ++st) {
    const int slot = st % NS;
    cp_async_wait<1>();  // stage st (and the output tile) landed; st + 1 may be in flight
    put(st);
    fetch(st + 1);
    pc_fence_async_shared();  // this thread's copies, visible to the MMAs' async proxy
    __syncthreads();          // everyone's; and every warp is past stage st − 1
    issue(st + 2);            // into the slot of stage st − 1
    // The products start from −mb/s2, mb the row's shift (0 before it has one).
    float acc[1][NI][4], bias[2];
    PcWgBlock::row_bias(bias, m, nis2);
    const u32 b_base = (u32)__cvta_generic_to_shared(sB) + slot * NP * BP;
    auto da = [&](int part, int kb, int ks) {
      return pc_wg_desc(a_base + part * AP + kb * BL * 128 + ks * 32);
    };
    auto db = [&](int part, int kb, int ks) {
      return pc_wg_desc(b_base + part * BP + kb * BK * 128 + ks * 32);
    };
    // Unrolled: a loop would carry the accumulators through moves that the asynchronous
    // MMAs forbid (ptxas would serialise them).
    if constexpr (!X3) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) acc[0][ni][2 * h] = acc[0][ni][2 * h + 1] = bias[h];
      pc_wg_pin(acc[0]);
      pc_wg_arrive();
#pragma unroll
      for (int kb = 0; kb < nkb; ++kb)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) pc_wgmma<NI, HALF>(acc[0], da(0, kb, ks), db(0, kb, ks));
      pc_wg_commit();
      pc_wg_wait<0>();
      pc_wg_pin(acc[0]);
    } else {
      // Split products, as pc_sinkstep_h2: the three products of each PC_WG2_KS steps
      // (small parts first) from zero, then one f32 add, since the MMA's own sums truncate
      // and the bias −mb/s2 would make each truncation as large as its magnitude.
      float part[1][NI][4];
      constexpr int KS = PC_WG2_KS;  // MMA steps (16 coordinates each) a group
#pragma unroll
      for (int grp = 0; grp < nkb * 4 / KS; ++grp) {
        const int kb = grp * KS / 4, k0 = grp * KS % 4;
        pc_wg_arrive();
#pragma unroll
        for (int ks = k0; ks < k0 + KS; ++ks) {
          if (ks == k0)
            pc_wgmma<NI, true, false>(part[0], da(0, kb, ks), db(1, kb, ks));
          else
            pc_wgmma<NI, true>(part[0], da(0, kb, ks), db(1, kb, ks));
          pc_wgmma<NI, true>(part[0], da(1, kb, ks), db(0, kb, ks));
        }
#pragma unroll
        for (int ks = k0; ks < k0 + KS; ++ks)
          pc_wgmma<NI, true>(part[0], da(0, kb, ks), db(0, kb, ks));
        pc_wg_commit();
        pc_wg_wait<0>();
        pc_wg_pin(part[0]);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int q = 0; q < 4; ++q)
            acc[0][ni][q] = (grp == 0 ? bias[q >> 1] : acc[0][ni][q]) + part[0][ni][q];
      }
    }
    float pv[NI][2];
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const float2 p2 = *reinterpret_cast<const float2 *>(sP + slot * BK + ni * 8 + 2 * t);
      pv[ni][0] = p2.x, pv[ni][1] = p2.y;
    }
    pc_lazy_fold<1, NI>(m, sum, acc, pv, s2);
  }
  blk.finish(m, sum, out_nrm, lm, out, part_m, part_s, B, L, eps);
}

// Entry points, F16 (`_hw`) and TF32 (`_tcw`): PC_TC_ARGS (os, rs unread: single products;
// root must be 0). Three blocks per SM (at most 80 registers, no spills), faster than two
// (115 registers) except where the shared tiles leave room for two blocks only (d = 128).
#define PC_WG_MINB 3 /* blocks per SM the warpgroup kernel is compiled for */
// One width (N blocks of 128 bytes a point) of a warpgroup entry point's switch.
#define PC_WG_CASE(N, X3, HALF)                                                              \
  case N:                                                                                    \
    pc_sinkstep_wg_body<N, X3, HALF>(ob, os, rb, rs, out_nrm, red_nrm, other, lm, out,       \
                                     part_m, part_s, B, K, L, dp, eps, dot_scale, kslice);   \
    break;
#if PC_WGMMA
// The 128-byte blocks a point: 1 to PC_WG_KB_MAX (the host's resident tiles).
#define PC_WG_ENTRY(NAME, HALF)                                                              \
  extern "C" __global__ void __launch_bounds__(256, PC_WG_MINB) NAME(PC_TC_ARGS) {           \
    PC_PAIR(ob, L, dp);                                                                      \
    PC_PAIR(rb, K, dp);                                                                      \
    PC_PAIR(out_nrm, L, 1);                                                                  \
    PC_PAIR(red_nrm, K, 1);                                                                  \
    switch (dp / PC_TC_DC) {                                                                 \
      PC_WG_CASE(1, false, HALF)                                                             \
      PC_WG_CASE(2, false, HALF)                                                             \
      PC_WG_CASE(3, false, HALF)                                                             \
      PC_WG_CASE(4, false, HALF)                                                             \
    default:                                                                                 \
      __trap();                                                                              \
    }                                                                                        \
  }
#else
#define PC_WG_ENTRY(NAME, HALF)                                                              \
  extern "C" __global__ void NAME(PC_TC_ARGS) { __trap(); }
#endif
PC_WG_ENTRY(pc_sinkstep_hw_f32, true)
PC_WG_ENTRY(pc_sinkstep_tcw_f32, false)

// F16x2 (split products) by warpgroup MMAs: PC_TC_ARGS, root must be 0; the output tile of
// both parts resident (1 or PC_WG_KB_MAX / 2 blocks a point).
#define PC_WG2_MINB 2 /* blocks per SM of the split warpgroup kernel */
extern "C" __global__ void __launch_bounds__(256, PC_WG2_MINB) pc_sinkstep_h2w_f32(PC_TC_ARGS) {
#if PC_WGMMA
  PC_PAIR(ob, L, dp);
  PC_PAIR(os, L, dp);
  PC_PAIR(rb, K, dp);
  PC_PAIR(rs, K, dp);
  PC_PAIR(out_nrm, L, 1);
  PC_PAIR(red_nrm, K, 1);
  switch (dp / PC_TC_DC) {
    PC_WG_CASE(1, true, true)
    PC_WG_CASE(2, true, true)
  default:
    __trap();
  }
#else
  __trap();
#endif
}
#undef PC_WG_CASE
// ---------------------------------------------------------------------------------------
// F16 and TF32 half-steps by warpgroup MMAs with the output tile streamed (|p − q|², single
// products, points wider than the resident tiles): stages of PC_WGS_BK reduced points, one
// m64n256 MMA per 32 bytes of the point for each warpgroup's 64 rows. Both tiles come a
// chunk of 128 bytes a point at a time (one block of the swizzled K-major layout above)
// through PC_WGS_SLOTS slots, copied two chunks ahead; a chunk's MMAs stay in flight over
// the next chunk's barrier, so that the tensor cores need not wait for it, and the copies
// are issued after the MMAs, at addresses that advance by constants (pc_wg_chunk): issued
// before them, by a loop over the block's threads, they would hold every warp ~3000 cycles a
// chunk and the tensor cores at a third of their rate. A stage's products are summed from
// zero, then shifted by the rows' shifts in f32, and pc_lazy_fold ends it, as
// pc_sinkstep_wg_body. One block per SM (251 registers), faster than 128×128 tiles at two
// blocks per SM.
#define PC_WGS_BK 256  /* reduced points per stage of the streamed warpgroup kernel (MMA's N) */
#define PC_WGS_SLOTS 4 /* chunk slots: copies two chunks ahead, one chunk's MMAs in flight */

template <bool HALF>
__device__ __forceinline__ void pc_sinkstep_wgs_body(
    const float *__restrict__ ob, const float *__restrict__ rb,
    const float *__restrict__ out_nrm, const float *__restrict__ red_nrm,
    const float *__restrict__ other, const float *__restrict__ lm, float *__restrict__ out,
    float *__restrict__ part_m, float *__restrict__ part_s, int B, int K, int L, int dp,
    float eps, float dot_scale, int kslice) {
  constexpr int BL = PC_TC_BL, BK = PC_WGS_BK, NS = PC_WGS_SLOTS, NI = BK / 8;
  constexpr int AHEAD = NS - 2;  // steps copied ahead (one more slot: MMAs in flight)
  static_assert(BL == 128 && AHEAD >= 1, "two warpgroups; copies ahead");
  constexpr int AC = BL * 128, SLOT = (BL + BK) * 128;  // bytes: output chunk, slot
  extern __shared__ __align__(1024) unsigned char pc_smem[];
  const u32 raw = (u32)__cvta_generic_to_shared(pc_smem);
  unsigned char *sA = pc_smem + (((raw + 1023u) & ~1023u) - raw);  // [slot][A chunk, B chunk]
  float *sP = reinterpret_cast<float *>(sA + NS * SLOT);            // [stage parity][BK] terms
  const PcWgBlock blk(K, kslice, eps);
  const int wg = blk.wg, t = blk.t, kbeg = blk.kbeg, kend = blk.kend, l0 = blk.l0;
  const float s = blk.s, ninf = Num<float>::neg_inf();
  const float *pot = other + (long long)blk.b * K;
  const int nch = dp / PC_TC_DC;
  const int stages = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
  const int total = stages * nch;
  float m[1][2] = {{ninf, ninf}}, sum[1][2] = {{0.0f, 0.0f}};

  // The next step to copy (chunk ic of stage ist, number is): both tiles' chunks into slot
  // is mod NS (an empty group past the last step, so that every step waits for the same
  // count).
  int is = 0, ist = 0, ic = 0;
  auto issue = [&]() {
    if (is < total) {
      unsigned char *dst = sA + (is % NS) * SLOT;
      pc_wg_chunk<BL>(dst, ob, L, l0, ic, dp);
      pc_wg_chunk<BK>(dst + AC, rb, kend, kbeg + ist * BK, ic, dp);
      if (++ic == nch) ic = 0, ++ist;
    }
    ++is;
    cp_async_commit();
  };
  // Column terms, fetched a stage ahead and put in the stage's half of sP before its first
  // barrier (every thread left the stage two before it behind that of the stage before).
  PcColumnTerms<BK> cols;
  auto fetch = [&](int st) { cols.fetch(pot, red_nrm, kbeg + st * BK, kend); };
  auto put = [&](int st) { cols.put(sP + (st & 1) * BK, kbeg + st * BK, kend, s); };
  if (total > 0) {
    for (int i = 0; i < AHEAD; ++i) issue();
    fetch(0);
  }
  const float s2 = s * (2.0f * dot_scale), nis2 = -1.0f / s2;
  const u32 base = (u32)__cvta_generic_to_shared(sA);
  float acc[1][NI][4];
  for (int st = 0, it = 0; st < stages; ++st) {
    // The stage's products from zero (the first MMA ignores the accumulators): the MMAs'
    // own sums truncate, and over a long point a start at the row shift's −mb/s2 (as the
    // resident kernels take) would make each truncation as large as that bias (otC1024's
    // first potential moved by 2.7e-3 with F16 and 5.7e-3 with TF32 against mma.sync,
    // which sums from zero, as F16x2 gives it).
    auto step = [&](auto first) {
      constexpr bool FIRST = decltype(first)::value;
      cp_async_wait<AHEAD - 1>();  // step it landed; later ones may be in flight
      if (FIRST) {
        put(st);
        fetch(st + 1);
      }
      pc_fence_async_shared();  // this thread's copies, visible to the MMAs' async proxy
      __syncthreads();  // everyone's; and both warpgroups' MMAs of step it − 2 are done
      const u32 a = base + (it % NS) * SLOT + wg * 64 * 128, bt = base + (it % NS) * SLOT + AC;
      pc_wg_pin(acc[0]);
      pc_wg_arrive();
      pc_wgmma<NI, HALF, !FIRST>(acc[0], pc_wg_desc(a), pc_wg_desc(bt));
#pragma unroll
      for (int ks = 1; ks < 4; ++ks)
        pc_wgmma<NI, HALF>(acc[0], pc_wg_desc(a + ks * 32), pc_wg_desc(bt + ks * 32));
      pc_wg_commit();
      issue();  // step it + AHEAD, into the slot of step it − 2, while the MMAs run
      pc_wg_wait<1>();  // step it − 1's MMAs done: the next barrier frees its slot
      pc_wg_pin(acc[0]);
    };
    step(PcFlag<true>{});  // chunk 0
    for (int c = 1; c < nch; ++c) {
      ++it;
      step(PcFlag<false>{});
    }
    ++it;
    pc_wg_wait<0>();
    pc_wg_pin(acc[0]);
    // Then −mb/s2 in one rounded f32 add, mb the row's shift (0 before it has one), so that
    // the fold's fma(s2, acc, pv) is v − mb.
    float bias[2];
    PcWgBlock::row_bias(bias, m, nis2);
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[0][ni][q] += bias[q >> 1];
    pc_lazy_fold<1, NI>(m, sum, acc, PcSharedTerms{sP + (st & 1) * BK + 2 * t}, s2);
  }
  blk.finish(m, sum, out_nrm, lm, out, part_m, part_s, B, L, eps);
}

// Entry points, F16 (`_hw_stream`) and TF32 (`_tcw_stream`): PC_TC_ARGS (os, rs unread;
// root must be 0); one block per SM.
#if PC_WGMMA
#define PC_WGS_ENTRY(NAME, HALF)                                                             \
  extern "C" __global__ void __launch_bounds__(256, 1) NAME(PC_TC_ARGS) {                    \
    PC_PAIR(ob, L, dp);                                                                      \
    PC_PAIR(rb, K, dp);                                                                      \
    PC_PAIR(out_nrm, L, 1);                                                                  \
    PC_PAIR(red_nrm, K, 1);                                                                  \
    pc_sinkstep_wgs_body<HALF>(ob, rb, out_nrm, red_nrm, other, lm, out, part_m, part_s, B,  \
                               K, L, dp, eps, dot_scale, kslice);                            \
  }
#else
#define PC_WGS_ENTRY(NAME, HALF)                                                             \
  extern "C" __global__ void NAME(PC_TC_ARGS) { __trap(); }
#endif
PC_WGS_ENTRY(pc_sinkstep_hw_stream_f32, true)
PC_WGS_ENTRY(pc_sinkstep_tcw_stream_f32, false)

extern "C" __global__ void pc_tc_split_f32(const float *pts, u32 *big, u32 *small, int len,
                                           int d, int dp, int x3, int B, int half,
                                           float scale) {
  pc_tc_split(pts, big, small, len, d, dp, x3, B, half, scale);
}
