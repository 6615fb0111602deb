// Part of the point-cloud module (pointcloud.cu includes its parts in order, and NVRTC
// compiles them as one source): the tensor-core half-step by mma.sync (pc_sinkstep_tc and
// its F16, split and streamed forms).

// Structure-of-arrays coordinates (pts[t·len + i], `B` clouds one after the other) to
// point-major parts padded with zeros to dp words: TF32, big[(b·len + i)·dp + t] =
// tf32(v_t), and with `x3` small[...] = tf32(v_t − big) (v − big is exact in f32); `half`,
// word w of each part holds coordinates 2w (high half) and 2w + 1 of v·scale (a power of
// two) as f16, big = f16(v·scale) and small = f16(v·scale − big).
__device__ __forceinline__ void pc_tc_split(const float *__restrict__ pts, u32 *__restrict__ big,
                                            u32 *__restrict__ small, int len, int d, int dp,
                                            int x3, int B, int half, float scale) {
  const long long total = (long long)len * dp * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long pt = e / dp, b = pt / len, i = pt % len;
    const int w = (int)(e % dp);
    const float *p = pts + b * len * d + i;
    if (half) {
      const int t = 2 * w;
      const float v0 = t < d ? p[(long long)t * len] * scale : 0.0f;
      const float v1 = t + 1 < d ? p[(long long)(t + 1) * len] * scale : 0.0f;
      const u32 hi = pc_f16x2(v0, v1);
      big[e] = hi;
      if (x3) {
        const float2 back = pc_f16x2_back(hi);
        small[e] = pc_f16x2(v0 - back.x, v1 - back.y);
      }
    } else {
      const float v = w < d ? p[(long long)w * len] : 0.0f;
      const float hi = pc_tf32(v);
      big[e] = __float_as_uint(hi);
      if (x3) small[e] = __float_as_uint(pc_tf32(v - hi));
    }
  }
}

// Where 16-byte segment `seg` (0..3) of row (point) p of a [P][16] sub-block lies: the
// segments of each row are permuted by (p >> 1) & 3, so that the eight 16-byte rows an
// ldmatrix reads (8 consecutive points, one segment) fall in distinct bank groups.
__device__ __forceinline__ int pc_tc_seg(int p, int seg) { return (seg ^ ((p >> 1) & 3)) << 2; }

// Four 8×8 b16 matrices from shared memory (lanes 8i .. 8i+7 give the rows of matrix i):
// lane (g, t) receives word t of row g of each, in r[0..3].
__device__ __forceinline__ void pc_ldsm4(u32 (&r)[4], const float *p) {
  const u32 a = (u32)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// Chunk `c` (PC_TC_DC words) of points p0 .. p0+P−1 of a point-major part into
// shared memory as two [P][16] sub-blocks (segments placed by pc_tc_seg); points at or past
// `len` are zero-filled.
template <int P>
__device__ __forceinline__ void pc_tc_stage(float *__restrict__ dst, const float *__restrict__ src,
                                            int len, int p0, int c, int dp) {
  constexpr int QUADS = P * (PC_TC_DC / 4);
  static_assert(QUADS % 256 == 0 && (P & (P - 1)) == 0, "whole passes of 256 threads");
#pragma unroll
  for (int j = 0; j < QUADS / 256; ++j) {
    // Eight consecutive lanes: one sub-block, two points, four quads each (conflict-free).
    const int e = threadIdx.x + 256 * j;
    const int w = e & 3, p = (e >> 2) % P, sub = (e >> 2) / P;
    const int i = p0 + p;
    const bool in = i < len;
    const float *g = in ? src + (long long)i * dp + c * PC_TC_DC + sub * 16 + w * 4 : src;
    cp_async16(dst + (sub * P + p) * 16 + pc_tc_seg(p, w), g, in ? 16 : 0);
  }
}

// Column terms s·other_k − s·|q_k|² (−inf past kend) of a stage of BK reduced points for
// the lazy epilogues: thread e < BK loads other_k and |q_k|² of the stage's column e into
// registers a stage ahead (`fetch`), while the copies of the stage before are in flight, and
// stores its term in the stage's slot before the barrier that opens the stage (`put`).
template <int BK> struct PcColumnTerms {
  float p = 0.0f, n = 0.0f;
  __device__ __forceinline__ void fetch(const float *pot, const float *nrm, int k0, int kend) {
    const int k = k0 + threadIdx.x;
    if (threadIdx.x < BK && k < kend) {
      p = pot[k];
      n = nrm[k];
    }
  }
  __device__ __forceinline__ void put(float *dst, int k0, int kend, float s) const {
    const int k = k0 + threadIdx.x;
    if (threadIdx.x < BK) {
      const float ps = p * s;
      dst[threadIdx.x] = k < kend ? ps - s * n : Num<float>::neg_inf();
    }
  }
};

// A stage's column terms in shared memory as pc_lazy_fold's pv: pv[ni][e] at p[8·ni + e]
// (p the thread's column 2t).
struct PcSharedTerms {
  const float *p;
  __device__ __forceinline__ const float *operator[](int ni) const { return p + 8 * ni; }
};

// The lazy epilogue of one stage of a single-product tensor-core half-step: each thread's
// rows (mi, h) hold the stage's products acc[mi][ni][2h + e], started from −mb/s2 (mb the
// row's shift m as the stage started, 0 before it has one; m moves only here), against
// columns with terms pv[ni][e] = s·other_k − s·|q_k|² (−inf past the slice), so that
// fma(s2, acc, pv) is v − mb. Shifts raised lazily as pc_fold_stage: every term 2^(v − mb)
// is summed with no maximum and no test (an FMA, an exponential and an add a pair); one test
// a stage then finds the rare row that started without a shift or whose sum overflowed or
// grew past PC_LAZY_MAX, and fixes it from the accumulators. The terms pv[ni][e] are an
// array in registers, or PcSharedTerms, read from shared memory where they are used.
template <int MI, int NI, typename PV>
__device__ __forceinline__ void pc_lazy_fold(float (&m)[MI][2], float (&sum)[MI][2],
                                             const float (&acc)[MI][NI][4], const PV &pv,
                                             float s2) {
  const float ninf = Num<float>::neg_inf();
  float before[MI][2], all = 0.0f;
  bool shifted = true;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      before[mi][h] = sum[mi][h];
      float a = sum[mi][h];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          a += Num<float>::exp2(fmaf(s2, acc[mi][ni][2 * h + e], pv[ni][e]));
      sum[mi][h] = a;
      all += a;
      shifted &= m[mi][h] != ninf;
    }
  if (shifted && all <= float(PC_LAZY_MAX)) return;  // inf and NaN fail the test
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (m[mi][h] != ninf && sum[mi][h] <= float(PC_LAZY_MAX)) continue;
      if (m[mi][h] != ninf && Num<float>::is_finite(sum[mi][h])) {
        int ex;  // a finite sum past PC_LAZY_MAX: renormalised exactly
        sum[mi][h] = frexpf(sum[mi][h], &ex);
        m[mi][h] += float(ex);
        continue;
      }
      // Redo the row's stage from its sum before it, against max(m, the stage maximum).
      const float mb = m[mi][h] == ninf ? 0.0f : m[mi][h];
      float cm = ninf;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e) cm = fmaxf(cm, fmaf(s2, acc[mi][ni][2 * h + e], pv[ni][e]));
      cm += mb;
      float a = before[mi][h];
      if (cm > m[mi][h]) {
        a *= Num<float>::exp2(m[mi][h] - cm);  // m = −inf: a is 0
        m[mi][h] = cm;
      }
      if (m[mi][h] != ninf) {
        const float off = m[mi][h] - mb;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            a += Num<float>::exp2(fmaf(s2, acc[mi][ni][2 * h + e], pv[ni][e]) - off);
      }
      sum[mi][h] = a;
    }
}

template <bool ROOT, bool X3, bool RES, bool HALF>
__device__ __forceinline__ void pc_sinkstep_tc_body(
    const float *__restrict__ ob, const float *__restrict__ os, const float *__restrict__ rb,
    const float *__restrict__ rs, const float *__restrict__ out_nrm,
    const float *__restrict__ red_nrm, const float *__restrict__ other,
    const float *__restrict__ lm, float *__restrict__ out, float *__restrict__ part_m,
    float *__restrict__ part_s, int B, int K, int L, int dp, float eps, float dot_scale,
    int kslice) {
  constexpr int BL = PC_TC_BL, DC = PC_TC_DC;
  constexpr int BK = RES ? PC_TC_BK : X3 ? PC_TC_BKS : PC_TC_BKS1;
  constexpr int NP = X3 ? 2 : 1;       // parts per operand
  // LAZY (|p − q|², resident tile, single products: where the epilogue weighs most): the
  // column terms come finished, each stage's products start from the row shifts, and the
  // epilogue raises the shifts lazily (see the epilogue), which pays there; it makes the
  // split and streamed kernels slower.
  constexpr bool LAZY = RES && !X3 && !ROOT;
  constexpr int MI = RES ? 2 : 4;                  // 16-row tiles per warp
  constexpr int WR = BL / (16 * MI), WC = 8 / WR;  // row and column warps
  constexpr int NI = BK / (8 * WC);                // 8-column tiles per warp
  static_assert(WR * WC == 8 && WC * NI * 8 == BK, "8 warps tile BL × BK");
  constexpr int ACH = BL * DC, BCH = BK * DC;  // floats of one chunk of one part
  extern __shared__ __align__(16) unsigned char pc_smem[];
  const int nch = dp / DC;
  // Slots of reduced chunks (and of stages' column terms): single products on a resident
  // tile take three, so that a step's copies go to the slot read two steps before, which
  // every warp left before the barrier of the step before, and a step needs one barrier;
  // the others two and a second barrier a step (three slots of the streamed kernels' larger
  // chunks are slower, and would leave one split resident block per SM).
  constexpr int NS = RES && !X3 ? PC_TC_RSLOTS : 2;
  // A: RES, every chunk of both parts ([part][chunk]); else two slots ([slot][part]).
  float *sA = reinterpret_cast<float *>(pc_smem);
  float *sB = sA + NP * ACH * (RES ? nch : 2);  // [slot][part]
  float *sP = sB + NS * NP * BCH;               // [stage slot][BK] potentials (LAZY: terms)
  float *sN = sP + NS * BK;                     // [stage slot][BK] |q|²
  auto slot_of = [](int i) { return NS == 2 ? i & 1 : i % NS; };
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wr = (warp % WR) * 16 * MI, wc = (warp / WR) * NI * 8;
  // ldmatrix rows of this lane (matrix i = lane >> 3, row lane & 7): A matrices (rows 0-7,
  // segment 2j), (rows 8-15, 2j), (rows 0-7, 2j+1), (rows 8-15, 2j+1) give a0..a3 of step j;
  // B matrices (tile 2q, 2j), (2q, 2j+1), (2q+1, 2j), (2q+1, 2j+1) give b0, b1 of two tiles.
  const int a_row = wr + (lane & 7) + ((lane >> 3) & 1) * 8;
  const int b_row = wc + (lane & 7) + (lane >> 4) * 8;
  const int a_half = lane >> 4, b_half = (lane >> 3) & 1;  // segment 2j or 2j + 1
  const int a_seg[2] = {pc_tc_seg(a_row, a_half), pc_tc_seg(a_row, 2 + a_half)};
  const int b_seg[2] = {pc_tc_seg(b_row, b_half), pc_tc_seg(b_row, 2 + b_half)};
  const int b = blockIdx.y, z = blockIdx.z;
  const int kbeg = z * kslice, kend = min(K, kbeg + kslice);
  const int l0 = blockIdx.x * BL;
  const float s = float(LOGOT_LOG2E) / eps;
  const float ninf = Num<float>::neg_inf();
  const float *pot = other + (long long)b * K;
  const int stages = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
  const int total = stages * nch;

  // Row data: |p|² of the 8 rows of this thread (ROOT; else added at the end).
  float np[MI][2], m[MI][2], sum[MI][2];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int l = l0 + wr + mi * 16 + g + 8 * h;
      np[mi][h] = (ROOT && l < L) ? out_nrm[l] : 0.0f;
      m[mi][h] = ninf;
      sum[mi][h] = 0.0f;
    }

  // Issue the copies of pipeline step `it` (stage st, chunk c) into slot it mod NS.
  auto issue = [&](int it, int st, int c) {
    const int slot = slot_of(it);
    const int k0 = kbeg + st * BK;
    pc_tc_stage<BK>(sB + (slot * NP) * BCH, rb, kend, k0, c, dp);
    if (X3) pc_tc_stage<BK>(sB + (slot * NP + 1) * BCH, rs, kend, k0, c, dp);
    if (!RES) {
      pc_tc_stage<BL>(sA + (slot * NP) * ACH, ob, L, l0, c, dp);
      if (X3) pc_tc_stage<BL>(sA + (slot * NP + 1) * ACH, os, L, l0, c, dp);
    }
    // The stage's potentials (copies 0 .. BK−1) and |q|² (BK .. 2BK−1), copied as they are
    // (zeros past kend, masked in the epilogue): one per thread, or two (BK = 256).
    auto column_copy = [&](unsigned q) {
      const int e = q % BK, k = k0 + e;
      const bool nrm = q >= BK;
      float *dst = (nrm ? sN : sP) + slot_of(st) * BK + e;
      const float *src = nrm ? red_nrm : pot;
      cp_async4(dst, k < kend ? src + k : src, k < kend ? 4 : 0);
    };
    if constexpr (2 * BK <= 256) {
      if (!LAZY && c == 0 && threadIdx.x < 2 * BK) column_copy(threadIdx.x);
    } else {
      static_assert(2 * BK == 512, "two copies per thread");
      if (!LAZY && c == 0) {
        column_copy(threadIdx.x);
        column_copy(threadIdx.x + 256);
      }
    }
    cp_async_commit();
  };
  // LAZY: a stage's column terms, fetched during the last step of the stage before and put
  // in the stage's slot of sP before the barrier that opens the stage.
  PcColumnTerms<BK> cols;
  auto fetch = [&](int st) { cols.fetch(pot, red_nrm, kbeg + st * BK, kend); };
  auto put = [&](int st) { cols.put(sP + slot_of(st) * BK, kbeg + st * BK, kend, s); };
  if (total > 0) {
    if (RES) {
      for (int c = 0; c < nch; ++c) {
        pc_tc_stage<BL>(sA + c * ACH, ob, L, l0, c, dp);
        if (X3) pc_tc_stage<BL>(sA + (nch + c) * ACH, os, L, l0, c, dp);
      }
    }
    issue(0, 0, 0);  // commits the resident tile with the first step
    if (LAZY) fetch(0);
  }

  // LAZY: the row shifts start the accumulators, a stage's products from −mb/s2 (the first
  // MMA's C operand), mb = shift(m) being the row's shift m as the stage starts (0 before it
  // has one), so that the epilogue's fma(s2, acc, pv) is v − mb; m moves only in the
  // epilogue, so it gives mb there.
  const float nis2 = -1.0f / (s * (2.0f * dot_scale));
  auto shift = [&](float mv) { return mv == ninf ? 0.0f : mv; };
  float acc[MI][NI][4];
  // The MMAs of pipeline step `it` (chunk c of its stage) into acc. The first chunk of a
  // stage starts from the row shifts (LAZY: a copy of the code for chunk 0, FIRST) or 0.
  auto products = [&](auto first, int it, int c) {
    constexpr bool FIRST = decltype(first)::value;
    float bias[MI][2];
    if (FIRST) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) bias[mi][h] = shift(m[mi][h]) * nis2;
    } else if (c == 0) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.0f;
    }
    const int slot = slot_of(it);
    const float *Ab = RES ? sA + c * ACH : sA + slot * NP * ACH;
    const float *As = Ab + (RES ? nch * ACH : ACH);  // the small part (X3)
    const float *Bb = sB + slot * NP * BCH;
    const float *Bs = Bb + BCH;
#pragma unroll
    for (int sub = 0; sub < 2; ++sub) {
      // Fragments of MMA steps j = 0, 1 (words 8j .. 8j+7 of the sub-block, segments 2j and
      // 2j + 1): b[j][ni] for each 8-column tile, big and small parts.
      u32 bb[2][NI][2], bs[2][NI][2];
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int q = 0; q < NI / 2; ++q) {
          const int o = (sub * BK + b_row + q * 16) * 16 + b_seg[j];
          u32 r[4];
          pc_ldsm4(r, Bb + o);
          bb[j][2 * q][0] = r[0], bb[j][2 * q][1] = r[1];
          bb[j][2 * q + 1][0] = r[2], bb[j][2 * q + 1][1] = r[3];
          if (X3) {
            pc_ldsm4(r, Bs + o);
            bs[j][2 * q][0] = r[0], bs[j][2 * q][1] = r[1];
            bs[j][2 * q + 1][0] = r[2], bs[j][2 * q + 1][1] = r[3];
          }
        }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
        u32 ab[2][4], as[2][4];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int o = (sub * BL + a_row + mi * 16) * 16 + a_seg[j];
          pc_ldsm4(ab[j], Ab + o);
          if (X3) pc_ldsm4(as[j], As + o);
        }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          if (X3) {
            // The sub-block's 16 words from zero (small parts first), then one f32
            // add: the MMA's internal sums truncate (round toward zero), a bias that grows
            // with the accumulator and the number of steps; summed over the whole d it was
            // TF32x3's largest error (1.2e-5 of the distance at d = 64, 2.4e-5 at d = 1024,
            // against 1.9e-6 and 3e-7 so). TF32's operand rounding dominates its own error.
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              pc_mma<HALF>(part, ab[j], bs[j][ni]);
              pc_mma<HALF>(part, as[j], bb[j][ni]);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) pc_mma<HALF>(part, ab[j], bb[j][ni]);
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[mi][ni][q] += part[q];
          } else {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              if (FIRST && sub == 0 && j == 0) {
                const float b4[4] = {bias[mi][0], bias[mi][0], bias[mi][1], bias[mi][1]};
                pc_mma_c<HALF>(acc[mi][ni], ab[j], bb[j][ni], b4);
              } else {
                pc_mma<HALF>(acc[mi][ni], ab[j], bb[j][ni]);
              }
            }
          }
        }
      }
    }
  };

  // LAZY epilogue of stage st (columns wc + ni·8 + 2t + e, rows wr + mi·16 + g + 8h).
  auto lazy_epilogue = [&](int st) {
    float pv[NI][2];
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int col = wc + ni * 8 + 2 * t;
      const float2 p2 = *reinterpret_cast<const float2 *>(sP + slot_of(st) * BK + col);
      pv[ni][0] = p2.x, pv[ni][1] = p2.y;
    }
    pc_lazy_fold<MI, NI>(m, sum, acc, pv, s * (2.0f * dot_scale));
  };

  // Step it computes chunk c of stage st and issues step it + 1 (chunk nc of stage ns).
  for (int it = 0, st = 0, c = 0; it < total; ++it) {
    const int nc = c + 1 == nch ? 0 : c + 1, ns = nc == 0 ? st + 1 : st;
    if (it + 1 < total) {
      issue(it + 1, ns, nc);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (LAZY) {
      if (c == 0) put(st);
      if (c == nch - 1 && st + 1 < stages) fetch(st + 1);
    }
    __syncthreads();
    if (LAZY && c == 0)
      products(PcFlag<true>{}, it, c);
    else
      products(PcFlag<false>{}, it, c);
    if (LAZY) {
      if (c == nch - 1) lazy_epilogue(st);
    } else if (c == nch - 1) {
      // Epilogue of stage st: columns wc + ni·8 + 2t + e, rows wr + mi·16 + g + 8h.
      // Column terms: s·other_k (ROOT) or s·other_k − s·|q_k|², −inf past kend.
      const float *pp = sP + slot_of(st) * BK, *pn = sN + slot_of(st) * BK;
      const int k0 = kbeg + st * BK;
      float pv[NI][2], nq[ROOT ? NI : 1][2];
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int col = wc + ni * 8 + 2 * t;
        const float2 p2 = *reinterpret_cast<const float2 *>(pp + col);
        const float2 n2 = *reinterpret_cast<const float2 *>(pn + col);
        const float pk[2] = {p2.x, p2.y}, nk[2] = {n2.x, n2.y};
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = pk[e] * s;
          pv[ni][e] = k0 + col + e < kend ? (ROOT ? p : p - s * nk[e]) : ninf;  // −inf stays
          if (ROOT) nq[ni][e] = nk[e];
        }
      }
      const float two = 2.0f * dot_scale, s2 = s * two;  // the operands' scales undone
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v[NI][2];
          float cm = ninf;
#pragma unroll
          for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float dot = acc[mi][ni][2 * h + e];
              if (ROOT) {
                const float cst = fmaxf(np[mi][h] + nq[ni][e] - two * dot, 0.0f);
                v[ni][e] = pv[ni][e] - s * sqrtf(cst);
              } else {
                v[ni][e] = fmaf(s2, dot, pv[ni][e]);
              }
              cm = fmaxf(cm, v[ni][e]);
            }
          if (cm > m[mi][h]) {
            sum[mi][h] *= Num<float>::exp2(m[mi][h] - cm);  // m = −inf: sum is 0
            m[mi][h] = cm;
          }
          if (m[mi][h] != ninf) {
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
              for (int e = 0; e < 2; ++e) sum[mi][h] += Num<float>::exp2(v[ni][e] - m[mi][h]);
          }
        }
      }
    }
    if (NS == 2) __syncthreads();  // the slots of this step may be refilled by the next issue
    st = ns;
    c = nc;
  }
  if (NS > 2) __syncthreads();  // every warp is past its last step's reads
  // The 4 lanes of a group hold the same rows: merge by shuffles, then the WC column warps
  // through shared memory (free: every copy has landed and every thread is past the loop).
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) lse_merge_lanes(m[mi][h], sum[mi][h], 4);
  float *xm = reinterpret_cast<float *>(pc_smem);  // [WC column warps][BL]
  float *xs = xm + WC * BL;
  if (t == 0) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wr + mi * 16 + g + 8 * h;
        xm[(warp / WR) * BL + r] = m[mi][h];
        xs[(warp / WR) * BL + r] = sum[mi][h];
      }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < BL; r += 256) {
    const int l = l0 + r;
    if (l >= L) continue;
    float M = xm[r], S = xs[r];
#pragma unroll
    for (int q = 1; q < WC; ++q) lse_merge(M, S, xm[q * BL + r], xs[q * BL + r]);
    if (!ROOT) M -= s * out_nrm[l];  // −inf stays −inf
    pc_tc_put(out, part_m, part_s, lm, (long long)b * L + l, (long long)B * L, M, S, eps);
  }
}

// Entry points: TF32, TF32x3, F16 and F16x2, each with the output tile resident (two
// blocks per SM) and streamed (`_stream`, one); `root` picks |x − y| over |x − y|²;
// `dot_scale` undoes the operands' scales (1 for TF32).
#define PC_TC_ARGS                                                                           \
  const float *ob, const float *os, const float *rb, const float *rs, const float *out_nrm,  \
      const float *red_nrm, const float *other, const float *lm, float *out, float *part_m,  \
      float *part_s, int B, int K, int L, int dp, float eps, float dot_scale, int kslice,     \
      int root, int pair
#define PC_TC_BODY(R, X, S, H)                                                                \
  pc_sinkstep_tc_body<R, X, S, H>(ob, os, rb, rs, out_nrm, red_nrm, other, lm, out, part_m,  \
                                  part_s, B, K, L, dp, eps, dot_scale, kslice)
#define PC_TC_ENTRY(NAME, X, H, S, MINB)                                                     \
  extern "C" __global__ void __launch_bounds__(256, MINB) NAME(PC_TC_ARGS) {                 \
    PC_PAIR(ob, L, dp);                                                                      \
    PC_PAIR(os, L, dp);                                                                      \
    PC_PAIR(rb, K, dp);                                                                      \
    PC_PAIR(rs, K, dp);                                                                      \
    PC_PAIR(out_nrm, L, 1);                                                                  \
    PC_PAIR(red_nrm, K, 1);                                                                  \
    if (root)                                                                                \
      PC_TC_BODY(true, X, S, H);                                                             \
    else                                                                                     \
      PC_TC_BODY(false, X, S, H);                                                            \
  }
PC_TC_ENTRY(pc_sinkstep_tc_f32, false, false, true, 2)
PC_TC_ENTRY(pc_sinkstep_tc3_f32, true, false, true, 2)
PC_TC_ENTRY(pc_sinkstep_h_f32, false, true, true, 2)
PC_TC_ENTRY(pc_sinkstep_h2_f32, true, true, true, 2)
PC_TC_ENTRY(pc_sinkstep_tc_stream_f32, false, false, false, 1)
PC_TC_ENTRY(pc_sinkstep_tc3_stream_f32, true, false, false, 1)
PC_TC_ENTRY(pc_sinkstep_h_stream_f32, false, true, false, 1)
PC_TC_ENTRY(pc_sinkstep_h2_stream_f32, true, true, false, 1)
