// Log-domain Sinkhorn kernels: the batched one-pass LSE half-step (tiled like a GEMM),
// a fused whole-loop kernel for small problems, marginal errors, transport costs, plans.
// common.cuh is prepended by the host before NVRTC compiles this file.
//
// Conventions. A half-step reduces over k (length K) for each output l (length L):
//   out[b,l] = eps·lm[b,l] − phi·eps·LSE_k((other[b,k] − R[k,l]) / eps)
// (phi = 1 balanced; phi = ρ/(ρ + eps) for a side relaxed by ρ·KL, unbalanced OT)
// where R is "reduction-major": C (n×m) for the g-update (k = i, l = j) and Cᵀ (m×n) for
// the f-update. In-kernel values are base 2: x = other·s − R·s with s = log2(e)/eps.

#define OVF_LIMIT 1.2379400392853803e27 /* 2^90: a part above it triggers the exact path */
#define UNF_LIMIT 8.077935669463161e-28  /* 2^-90: a total below it means the shift was too high */
#define HINT_MARGIN 8.0
#define TRIGGER_HEADROOM 24.0
#ifndef FIT_SPREAD
#define FIT_SPREAD 40.0 /* largest u_b + v_j fit residual (base 2) of a factored warp */
#endif
#ifndef KW_UNROLL
#define KW_UNROLL 16
#endif

template <typename T, int N> __device__ __forceinline__ void lds_vec(T (&v)[N], const T *p) {
  if constexpr (sizeof(T) == 4 && N % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      float4 t = reinterpret_cast<const float4 *>(p)[q];
      v[4 * q] = t.x;
      v[4 * q + 1] = t.y;
      v[4 * q + 2] = t.z;
      v[4 * q + 3] = t.w;
    }
  } else if constexpr (sizeof(T) == 8 && N % 2 == 0) {
#pragma unroll
    for (int q = 0; q < N / 2; ++q) {
      double2 t = reinterpret_cast<const double2 *>(p)[q];
      v[2 * q] = t.x;
      v[2 * q + 1] = t.y;
    }
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) v[q] = p[q];
  }
}

template <typename T, int N> __device__ __forceinline__ void sts_vec(T *p, const T (&v)[N]) {
  if constexpr (sizeof(T) == 4 && N % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q)
      reinterpret_cast<float4 *>(p)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  } else if constexpr (sizeof(T) == 8 && N % 2 == 0) {
#pragma unroll
    for (int q = 0; q < N / 2; ++q)
      reinterpret_cast<double2 *>(p)[q] = make_double2(v[2 * q], v[2 * q + 1]);
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) p[q] = v[q];
  }
}

// ---------------------------------------------------------------------------------------
// Tiled half-step. A block owns BB batch rows × BJ outputs and streams k through shared
// memory in stages of KT (cost tile KT×BJ and potential tile KT×BB, both raw, by
// cp.async), double-buffered. Each warp takes KW rows of a stage (split-K inside the block),
// each thread TB×TJ outputs; the warps' (max, sum) pairs are merged at the end.
//
// Speculative shift: each output's running shift M starts at its previous value
// (log2-LSE recovered from the old contents of `out`, minus a margin), so the hot loop is
// one FMA, one subtract, one exp2 and one add per element, with no running max. After each
// stage a part ≥ 2^64 (or inf/NaN) sends that output through the exact path (stage max,
// rescale); a final sum < 2^-90 (shift too high) makes the block redo its outputs in
// exact mode (shift from -inf). When the grid splits K, a block's hint is its own slice's
// (max, sum) pair from the previous call, left in part_m / part_s (split_hints = 1; exact
// mode when the host has none).
// MODE 1 ("report") is the same pass over the g side for given (f, g): besides the sums
// it accumulates the cost-weighted sums W = Σ_i 2^y·C_ij, and writes each output's column
// mass (Pᵀ1)_j = 2^(g_j·s + M)·S and transport share Σ_i P_ij C_ij = 2^(g_j·s + M)·W, where
// out = g is read only (it is also the shift hint).
template <typename T, int TB, int TJ, int WB, int WJ, int WARPS, int KW, int MODE>
struct TiledCfg {
  static constexpr int BB = TB * WB, BJ = TJ * WJ, KT = KW * WARPS, NT = 32 * WARPS;
  static constexpr int BBP = (BB % 4 == 0) ? BB + 4 : BB;  // padded potential-tile row
  static constexpr int CS = KT * BJ;
  static constexpr int PS = KT * BBP;
  static constexpr int STAGE = CS + PS;
  static constexpr int MERGE = (MODE == 1 ? 3 : 2) * WARPS * BB * BJ;
  static constexpr int SMEM = (2 * STAGE > MERGE) ? 2 * STAGE : MERGE;  // elements of T
  // FACT: each warp's factored rows (A: KW×BBP, K: KW×BJ), after the two stages.
  static constexpr int FW = KW * (BBP + BJ);
  static constexpr int SMEM_FACT = (2 * STAGE + WARPS * FW > MERGE) ? 2 * STAGE + WARPS * FW : MERGE;
  static constexpr int PT = (KT * BB + NT - 1) / NT;  // potential elements per thread per stage
};

// MAXPASS: exact mode (split reductions, redo after a failed hint) takes its shifts from a
// max pass; without it (kernels whose registers the pass would spill) exact mode starts
// from −∞ and re-shifts through the per-output exact path.
//
// FACT (factored exponentials; MODE 0, non-exact): when the warp's hinted shifts fit
// M_bj ≈ u_b + v_j over its whole BB×BJ outputs (u_b per row, v_j per column, integers,
// u_b + v_j ≤ M_bj ≤ u_b + v_j + FIT_SPREAD), a term factors as
//   2^(p_bk·s − c_kj·s − u_b − v_j) = A_bk · K_kj,
//   A_bk = 2^(q_bk − w_k),  K_kj = 2^(w_k − c_kj·s − v_j),  q_bk = p_bk·s − u_b,  w_k = max_b q_bk.
// Per stage the warp turns its KW rows into A and K (KW·(BB + BJ) exponentials instead of
// KW·BB·BJ, in its own shared-memory area), and the sums are a product, S += A·K. A ≤ 1;
// K_kj is the largest term of column j at row k, ≤ 2^(FIT_SPREAD + HINT_MARGIN) while the
// hints hold, so an A that flushes to 0 belongs to a term below 2^-126 of it. The sums run
// unchecked per stage: one that overflows (stale hints) ends inf or NaN, and the block
// redoes its outputs in exact mode like one whose sum underflowed. A warp whose outputs
// do not fit (or have no hint, or zero mass) keeps one exponential per term.
template <typename T, int TB, int TJ, int WB, int WJ, int WARPS, int KW, int MODE,
          bool MAXPASS = true, bool FACT = false>
__device__ __forceinline__ void sinkstep_tiled(const T *__restrict__ R, long long cost_stride,
                                               const T *__restrict__ other,
                                               const T *__restrict__ lm, T *__restrict__ out,
                                               T *__restrict__ part_m, T *__restrict__ part_s,
                                               int B, int K, int L, T eps, int kslice,
                                               int split_hints, T phi) {
  using C = TiledCfg<T, TB, TJ, WB, WJ, WARPS, KW, MODE>;
  constexpr bool REPORT = MODE == 1;
  constexpr int BB = C::BB, BJ = C::BJ, KT = C::KT, NT = C::NT, BBP = C::BBP;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *smem = reinterpret_cast<T *>(smem_raw);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tb = lane / WJ, tj = lane % WJ;
  const int b0 = blockIdx.x * BB, j0 = blockIdx.y * BJ;
  const int kbeg = blockIdx.z * kslice;
  const int kend = min(K, kbeg + kslice);
  const int nst = kend > kbeg ? (kend - kbeg + KT - 1) / KT : 0;
  const bool split = gridDim.z > 1;
  const T s = T(LOGOT_LOG2E) / eps;
  const T iphi = T(1) / phi;  // the hints divide by φ (1 balanced)
  const T ninf = Num<T>::neg_inf();
  // With a per-problem cost the block has one batch row (BB == 1).
  const T *Rb = R + (cost_stride != 0 ? (long long)b0 * cost_stride : 0LL);
  constexpr int VEC = 16 / sizeof(T);
  const bool vec_ok = (L % VEC) == 0;

  auto load_cost = [&](int st, int buf) {
    T *cs = smem + buf * C::STAGE;
    const int kb = kbeg + st * KT;
    if (vec_ok) {
      constexpr int CH = BJ / VEC;  // 16-byte chunks per row
      for (int c = tid; c < KT * CH; c += NT) {
        const int r = c / CH, q = (c % CH) * VEC;
        const int k = kb + r, j = j0 + q;
        int bytes = 0;
        const T *src = R;
        if (k < kend && j < L) {
          bytes = min(VEC, L - j) * (int)sizeof(T);
          src = Rb + (long long)k * L + j;
        }
        cp_async16(cs + r * BJ + q, src, bytes);
      }
    } else {
      for (int c = tid; c < KT * BJ; c += NT) {
        const int r = c / BJ, q = c % BJ;
        const int k = kb + r, j = j0 + q;
        const bool ok = k < kend && j < L;
        const T *src = ok ? Rb + (long long)k * L + j : R;
        if constexpr (sizeof(T) == 4)
          cp_async4(cs + r * BJ + q, src, ok ? 4 : 0);
        else
          cp_async8(cs + r * BJ + q, src, ok ? 8 : 0);
      }
    }
  };
  auto pot_index = [&](int idx, int &bi, int &ki) {
    if constexpr (BB % 4 == 0) {
      const int chunk = idx >> 5, l = idx & 31;
      constexpr int NBC = BB / 4;
      bi = (chunk % NBC) * 4 + (l >> 3);
      ki = (chunk / NBC) * 8 + (l & 7);
    } else {
      bi = idx % BB;
      ki = idx / BB;
    }
  };
  // Potentials go to shared memory as they are (raw, transposed to [k][b]) by cp.async;
  // entries past the batch or the slice get -inf by a plain store.
  auto load_pot = [&](int st, int buf) {
    T *ps = smem + buf * C::STAGE + C::CS;
    const int kb = kbeg + st * KT;
#pragma unroll
    for (int r = 0; r < C::PT; ++r) {
      const int idx = tid + r * NT;
      if (idx < KT * BB) {
        int bi, ki;
        pot_index(idx, bi, ki);
        const int b = b0 + bi, k = kb + ki;
        T *dst = ps + ki * BBP + bi;
        if (b < B && k < kend) {
          if constexpr (sizeof(T) == 4)
            cp_async4(dst, other + (long long)b * K + k, 4);
          else
            cp_async8(dst, other + (long long)b * K + k, 8);
        } else {
          *dst = ninf;
        }
      }
    }
  };
  // Fast path for whole stages (every row, column and problem in range, 16-byte rows):
  // unconditional copies with addresses that step by a constant per stage.
  const bool full_tile = vec_ok && b0 + BB <= B && j0 + BJ <= L;
  constexpr int CH = BJ / VEC;  // 16-byte chunks per cost row
  static_assert(NT % CH == 0 && (KT * CH) % NT == 0, "cost chunks must divide among the threads");
  // Per-thread bases (one cost chunk column, one potential column); later chunks and
  // potential entries sit at constant strides from them.
  const int c_row0 = tid / CH, c_col = (tid % CH) * VEC;
  int p_b0, p_k0;
  pot_index(tid, p_b0, p_k0);
  constexpr int P_KSTEP = (BB % 4 == 0) ? (NT / 32 / (BB / 4)) * 8 : NT / BB;
  auto load_cost_full = [&](int st, int buf) {
    T *cs = smem + buf * C::STAGE;
    const int kb = kbeg + st * KT;
    const T *csrc = Rb + (long long)(kb + c_row0) * L + j0 + c_col;
    T *cdst = cs + c_row0 * BJ + c_col;
#pragma unroll
    for (int i = 0; i < KT * CH / NT; ++i)
      cp_async16(cdst + i * (NT / CH) * BJ, csrc + (long long)i * (NT / CH) * L, 16);
  };
  auto load_pot_full = [&](int st, int buf) {
    T *ps = smem + buf * C::STAGE + C::CS;
    const int kb = kbeg + st * KT;
    const T *psrc = other + (long long)(b0 + p_b0) * K + kb + p_k0;
    T *pdst = ps + p_k0 * BBP + p_b0;
#pragma unroll
    for (int r = 0; r < C::PT; ++r) {
      if (C::PT * NT == KT * BB || tid + r * NT < KT * BB) {
        if constexpr (sizeof(T) == 4)
          cp_async4(pdst + r * P_KSTEP * BBP, psrc + r * P_KSTEP, 4);
        else
          cp_async8(pdst + r * P_KSTEP * BBP, psrc + r * P_KSTEP, 8);
      }
    }
  };
  auto load_stage = [&](int st, int buf) {
    if (full_tile && kbeg + (st + 1) * KT <= kend) {
      load_cost_full(st, buf);
      load_pot_full(st, buf);
    } else {
      load_cost(st, buf);
      load_pot(st, buf);
    }
    cp_async_commit();
  };
  // Issue stage st + 1's copies (if any), then wait for stage st's; returns its buffer.
  auto stage_ready = [&](int st) {
    const int buf = st & 1;
    if (st + 1 < nst) {
      load_stage(st + 1, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    return buf;
  };

  // Programmatic dependent launch (sm_90): nothing written by the previous kernel is read
  // before griddepcontrol.wait; then the next kernel may start launching (its blocks take
  // SMs as this kernel's blocks retire, and wait in the same way).
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool exact = attempt > 0 || (split && !split_hints);
    // The first stage's copies are in flight while the shift hints load.
    if (nst > 0) load_stage(0, 0);
    T M[TB][TJ], S[TB][TJ];
    T W[REPORT ? TB : 1][REPORT ? TJ : 1];  // cost-weighted sums (report mode)
#pragma unroll
    for (int ib = 0; ib < TB; ++ib)
#pragma unroll
      for (int jj = 0; jj < TJ; ++jj) {
        const int b = b0 + tb * TB + ib, j = j0 + tj * TJ + jj;
        T m0 = ninf;
        if (b >= B) {
          m0 = T(0);  // every x is -inf there: exp2(-inf - 0) = 0, no NaN
        } else if (!exact && j < L) {
          const long long o = (long long)b * L + j;
          const T lmv = lm[o];
          // The previous log2-LSE: from the old output, or (K split) from this slice's
          // own (max, sum) pair of the previous call, still in part_m / part_s.
          T h;
          if (split) {
            const long long pi = (long long)blockIdx.z * B * L + o;
            h = part_m[pi] + Num<T>::log2(part_s[pi]);
          } else {
            h = (lmv * T(LOGOT_LOG2E) - out[o] * s) * iphi;
          }
          if (lmv == ninf)
            m0 = -ninf;  // zero mass: not computed, every term 0
          else if (Num<T>::is_finite(h))
            m0 = h - T(HINT_MARGIN);
        }
        M[ib][jj] = m0;
      }

    // FACT: fit M_bj ≈ u_b + v_j over the warp's outputs in range: u_b = ⌊row max⌋, v_j =
    // ⌊column min of M − u⌋, so u_b + v_j ≤ M_bj (sums start ≥ 2^HINT_MARGIN). Columns past
    // L get v = 1e30 (their terms are 0); rows past the batch have −∞ potentials.
    bool factored = false;
    T fu[FACT ? TB : 1], fv[FACT ? TJ : 1];
    if constexpr (FACT && !REPORT) {
      if (!exact) {
        bool fits = true;
#pragma unroll
        for (int ib = 0; ib < TB; ++ib) {
          const bool row_in = b0 + tb * TB + ib < B;
          T mx = ninf;
#pragma unroll
          for (int jj = 0; jj < TJ; ++jj) {
            if (row_in && j0 + tj * TJ + jj < L) {
              fits &= Num<T>::is_finite(M[ib][jj]);  // no hint, or zero mass
              mx = fmax(mx, M[ib][jj]);
            }
          }
          for (int d = 1; d < WJ; d <<= 1)  // the lanes of the same rows (bits of tj)
            mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, d));
          fu[ib] = Num<T>::is_finite(mx) ? floor(mx) : T(0);
        }
#pragma unroll
        for (int jj = 0; jj < TJ; ++jj) {
          T mn = -ninf;
#pragma unroll
          for (int ib = 0; ib < TB; ++ib)
            if (b0 + tb * TB + ib < B && j0 + tj * TJ + jj < L) mn = fmin(mn, M[ib][jj] - fu[ib]);
          for (int d = WJ; d < 32; d <<= 1)  // the lanes of the same columns (bits of tb)
            mn = fmin(mn, __shfl_xor_sync(0xffffffffu, mn, d));
          fv[jj] = Num<T>::is_finite(mn) ? floor(mn) : T(1e30);
        }
#pragma unroll
        for (int ib = 0; ib < TB; ++ib)
#pragma unroll
          for (int jj = 0; jj < TJ; ++jj)
            if (b0 + tb * TB + ib < B && j0 + tj * TJ + jj < L)
              fits &= M[ib][jj] - (fu[ib] + fv[jj]) <= T(FIT_SPREAD);
        factored = __all_sync(0xffffffffu, fits);
        if (factored) {
#pragma unroll
          for (int ib = 0; ib < TB; ++ib)
#pragma unroll
            for (int jj = 0; jj < TJ; ++jj)
              if (b0 + tb * TB + ib < B && j0 + tj * TJ + jj < L) M[ib][jj] = fu[ib] + fv[jj];
        }
      }
    }

    if (MAXPASS && exact && nst > 0) {
      // Exact shifts without a hint: a first pass over the stages takes each warp's own
      // maximum of p − c over its k (no exponentials, a fraction of the sum pass's time),
      // so the sum pass below can neither overflow nor underflow. M itself accumulates
      // the maximum (rows past the batch keep their 0: their potentials are −∞).
      for (int st = 0; st < nst; ++st) {
        const T *cs = smem + stage_ready(st) * C::STAGE;
        const T *ps = cs + C::CS;
#pragma unroll KW_UNROLL
        for (int kk = 0; kk < KW; ++kk) {
          const int k = warp * KW + kk;
          T pv[TB], cv[TJ];
          lds_vec<T, TB>(pv, ps + k * BBP + tb * TB);
          lds_vec<T, TJ>(cv, cs + k * BJ + tj * TJ);
#pragma unroll
          for (int ib = 0; ib < TB; ++ib)
#pragma unroll
            for (int jj = 0; jj < TJ; ++jj) M[ib][jj] = fmax(M[ib][jj], pv[ib] - cv[jj]);
        }
        __syncthreads();
      }
#pragma unroll
      for (int ib = 0; ib < TB; ++ib)
#pragma unroll
        for (int jj = 0; jj < TJ; ++jj) M[ib][jj] *= s;  // −∞ and 0 stay as they are
      load_stage(0, 0);  // the sum pass starts over
    }
#pragma unroll
    for (int ib = 0; ib < TB; ++ib)
#pragma unroll
      for (int jj = 0; jj < TJ; ++jj) {
        S[ib][jj] = T(0);
        if constexpr (REPORT) W[ib][jj] = T(0);
      }

    constexpr int PW = REPORT ? TB : 1, PWJ = REPORT ? TJ : 1;
    // End of a plain stage: overflow check, the exact path for the outputs that need it,
    // accumulation.
    auto end_stage = [&](const T *cs, const T *ps, T(&part)[TB][TJ], T(&partw)[PW][PWJ]) {
      bool bad = false;
#pragma unroll
      for (int ib = 0; ib < TB; ++ib)
#pragma unroll
        for (int jj = 0; jj < TJ; ++jj) bad |= !(part[ib][jj] < T(OVF_LIMIT));
      if (__any_sync(0xffffffffu, bad)) {
#pragma unroll
        for (int ib = 0; ib < TB; ++ib)
#pragma unroll
          for (int jj = 0; jj < TJ; ++jj) {
            if (part[ib][jj] < T(OVF_LIMIT)) {
              S[ib][jj] += part[ib][jj];
              if constexpr (REPORT) W[ib][jj] += partw[ib][jj];
              continue;
            }
            // Exact path for this output and stage: stage max, rescale, re-sum.
            T tmax = ninf;
            for (int kk = 0; kk < KW; ++kk) {
              const int k = warp * KW + kk;
              const T x = (ps[k * BBP + tb * TB + ib] - cs[k * BJ + tj * TJ + jj]) * s;
              tmax = x > tmax ? x : tmax;
            }
            const T mo = M[ib][jj];
            // Headroom above the stage max: later values may rise this much more
            // before the next trigger; the sum stays ≥ 2^-HEADROOM.
            const T mt = tmax + T(TRIGGER_HEADROOM);
            const T mn = mo > mt ? mo : mt;
            if (mn == ninf) continue;  // nothing finite yet
            const T scale = Num<T>::exp2(mo - mn);
            T acc = S[ib][jj] * scale;
            T accw = REPORT ? W[ib][jj] * scale : T(0);
            for (int kk = 0; kk < KW; ++kk) {
              const int k = warp * KW + kk;
              const T c = cs[k * BJ + tj * TJ + jj];
              const T e = Num<T>::exp2((ps[k * BBP + tb * TB + ib] - c) * s - mn);
              acc += e;
              if constexpr (REPORT) accw = fma(e, c, accw);
            }
            S[ib][jj] = acc;
            if constexpr (REPORT) W[ib][jj] = accw;
            M[ib][jj] = mn;
          }
        return;
      }
#pragma unroll
      for (int ib = 0; ib < TB; ++ib)
#pragma unroll
        for (int jj = 0; jj < TJ; ++jj) {
          S[ib][jj] += part[ib][jj];
          if constexpr (REPORT) W[ib][jj] += partw[ib][jj];
        }
    };
    int st = 0;
    if (FACT && factored) {
      for (; st < nst; ++st) {
        const T *cs = smem + stage_ready(st) * C::STAGE;
        const T *ps = cs + C::CS;
        // This warp's rows of the stage, factored into its own area: lane (tb, tj) makes
        // A for rows tj, tj+8 × its TB problems and K for rows tb, tb+4, … × its TJ
        // outputs (rows and banks chosen so that the 16-byte stores do not conflict).
        static_assert(!FACT || (TB == 4 && TJ == 4 && WJ == 8 && WB == 4 && KW == 16),
                      "the shared factors are laid out for 4×4 threads, 4×8 lanes, 16 rows");
        T *fa = smem + 2 * C::STAGE + warp * C::FW;
        T *fk = fa + KW * BBP;
        T qa[2][TB], wk[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int kk = tj + 8 * r;
          T pv[TB];
          lds_vec<T, TB>(pv, ps + (warp * KW + kk) * BBP + tb * TB);
          T mx = T(-1e30);  // finite, so rows of −∞ give 0 and not NaN
#pragma unroll
          for (int ib = 0; ib < TB; ++ib) {
            qa[r][ib] = fma(pv[ib], s, -fu[FACT ? ib : 0]);
            mx = fmax(mx, qa[r][ib]);
          }
          mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
          wk[r] = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          T av[TB];
#pragma unroll
          for (int ib = 0; ib < TB; ++ib) av[ib] = Num<T>::exp2(qa[r][ib] - wk[r]);
          sts_vec<T, TB>(fa + (tj + 8 * r) * BBP + tb * TB, av);
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int kk = tb + 4 * r;
          // w of row kk sits in lane kk % 8 (tb 0), slot kk / 8 = r / 2.
          const T w = __shfl_sync(0xffffffffu, wk[r >> 1], kk & 7);
          T cv[TJ], kv[TJ];
          lds_vec<T, TJ>(cv, cs + (warp * KW + kk) * BJ + tj * TJ);
#pragma unroll
          for (int jj = 0; jj < TJ; ++jj)
            kv[jj] = Num<T>::exp2(fma(-cv[jj], s, w - fv[FACT ? jj : 0]));
          sts_vec<T, TJ>(fk + kk * BJ + tj * TJ, kv);
        }
        __syncwarp();
        // Straight into S: while the hints hold every sum stays below 2^(FIT_SPREAD +
        // HINT_MARGIN + log2 K); when they do not, a sum that overflows (inf or NaN) sends
        // the block through the exact redo.
#pragma unroll KW_UNROLL
        for (int kk = 0; kk < KW; ++kk) {
          T av[TB], kv[TJ];
          lds_vec<T, TB>(av, fa + kk * BBP + tb * TB);
          lds_vec<T, TJ>(kv, fk + kk * BJ + tj * TJ);
#pragma unroll
          for (int ib = 0; ib < TB; ++ib)
#pragma unroll
            for (int jj = 0; jj < TJ; ++jj) S[ib][jj] = fma(av[ib], kv[jj], S[ib][jj]);
        }
        __syncthreads();
      }
    }
    for (; st < nst; ++st) {
      const T *cs = smem + stage_ready(st) * C::STAGE;
      const T *ps = cs + C::CS;
      T part[TB][TJ];
      T partw[REPORT ? TB : 1][REPORT ? TJ : 1];
#pragma unroll
      for (int ib = 0; ib < TB; ++ib)
#pragma unroll
        for (int jj = 0; jj < TJ; ++jj) {
          part[ib][jj] = T(0);
          if constexpr (REPORT) partw[ib][jj] = T(0);
        }
#pragma unroll KW_UNROLL
      for (int kk = 0; kk < KW; ++kk) {
        const int k = warp * KW + kk;
        T pv[TB], cv[TJ];
        lds_vec<T, TB>(pv, ps + k * BBP + tb * TB);
        lds_vec<T, TJ>(cv, cs + k * BJ + tj * TJ);
#pragma unroll
        for (int ib = 0; ib < TB; ++ib)
#pragma unroll
          for (int jj = 0; jj < TJ; ++jj) {
            // y = (p − c)·s − M: the potential and the cost are raw in shared memory.
            const T y = fma(pv[ib] - cv[jj], s, -M[ib][jj]);
            const T e = Num<T>::exp2(y);
            part[ib][jj] += e;
            if constexpr (REPORT) partw[ib][jj] = fma(e, cv[jj], partw[ib][jj]);
          }
      }
      end_stage(cs, ps, part, partw);
      __syncthreads();
    }

    // Merge the warps' partial (max, sum) pairs through shared memory.
    T *mM = smem;
    T *mS = smem + WARPS * BB * BJ;
    T *mW = smem + 2 * WARPS * BB * BJ;  // report mode only
#pragma unroll
    for (int ib = 0; ib < TB; ++ib)
#pragma unroll
      for (int jj = 0; jj < TJ; ++jj) {
        const int o = (tb * TB + ib) * BJ + tj * TJ + jj;
        mM[warp * BB * BJ + o] = M[ib][jj];
        mS[warp * BB * BJ + o] = S[ib][jj];
        if constexpr (REPORT) mW[warp * BB * BJ + o] = W[ib][jj];
      }
    __syncthreads();
    int redo = 0;
    for (int o = tid; o < BB * BJ; o += NT) {
      T mt = mM[o], st = mS[o], wt = REPORT ? mW[o] : T(0);
      for (int w = 1; w < WARPS; ++w) {
        const T m2 = mM[w * BB * BJ + o], s2 = mS[w * BB * BJ + o];
        if constexpr (REPORT) {
          // The same rescaling for S and W.
          const T mx = mt > m2 ? mt : m2;
          if (mx != ninf) {
            const T a = Num<T>::exp2(mt - mx), c = Num<T>::exp2(m2 - mx);
            st = st * a + s2 * c;
            wt = wt * a + mW[w * BB * BJ + o] * c;
          }
          mt = mx;
        } else {
          lse_merge(mt, st, m2, s2);
        }
      }
      const int b = b0 + o / BJ, j = j0 + o % BJ;
      if (b >= B || j >= L) continue;
      const long long oi = (long long)b * L + j;
      if constexpr (REPORT) {
        // part_m ← column mass, part_s ← transport share of output j of problem b.
        const T lmv = lm[oi], gv = out[oi];
        if (lmv == ninf || gv == ninf) {
          part_m[oi] = T(0);
          part_s[oi] = T(0);
          continue;
        }
        if (!exact && !(st >= T(UNF_LIMIT))) redo = 1;
        const T t = gv * s + mt;
        part_m[oi] = Num<T>::exp2(t + Num<T>::log2(st));
        part_s[oi] = Num<T>::exp2(t + Num<T>::log2(wt));
        continue;
      }
      if (split) {
        // A slice's sum far below its hint: the hint was too high (the potentials moved a
        // lot), so its terms may have underflowed; redo exactly (zero-mass outputs aside).
        if (!exact && !(st >= T(UNF_LIMIT) && st < -ninf) && lm[oi] != ninf) redo = 1;
        const long long pi = (long long)blockIdx.z * B * L + oi;
        part_m[pi] = mt;
        part_s[pi] = st;
        continue;
      }
      const T lmv = lm[oi];
      if (lmv == ninf) {
        out[oi] = ninf;
        continue;
      }
      // A sum that underflowed (the shift was too high) or overflowed (factored sums run
      // unchecked) is redone exactly.
      if (!exact && !(st >= T(UNF_LIMIT) && st < -ninf)) redo = 1;
      out[oi] = eps * lmv - phi * eps * T(LOGOT_LN2) * (mt + Num<T>::log2(st));
    }
    // Also a barrier: the merge buffer aliases the stage buffers of a redo.
    if (!__syncthreads_or(redo)) break;
  }
}

// Merge the K-split partials of the tiled kernel and finish the half-step.
template <typename T>
__device__ __forceinline__ void sinkstep_finish(const T *__restrict__ part_m,
                                                const T *__restrict__ part_s,
                                                const T *__restrict__ lm, T *__restrict__ out,
                                                int B, int L, int splits, T eps, T phi) {
  const long long total = (long long)B * L;
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < total;
       o += (long long)gridDim.x * blockDim.x) {
    T mt = part_m[o], st = part_s[o];
    for (int z = 1; z < splits; ++z) lse_merge(mt, st, part_m[z * total + o], part_s[z * total + o]);
    const T lmv = lm[o];
    out[o] = lmv == Num<T>::neg_inf() ? lmv
                                      : eps * lmv - phi * eps * T(LOGOT_LN2) * (mt + Num<T>::log2(st));
  }
}

// ---------------------------------------------------------------------------------------
// Fused Sinkhorn for small problems: one block (or one thread-block cluster, when few
// problems would leave most SMs idle) per problem runs `iters` full iterations (g then f)
// with both orientations of the cost and both potentials in shared memory, one launch in
// all; a cluster's CTAs share out the output groups and exchange results through
// distributed shared memory. A group of G lanes (power of two) reduces FL consecutive
// outputs: lane s takes k = s, s+G, …; every output starts from the speculative shift of
// the tiled kernel (its previous value, still in shared memory), with the same overflow
// trigger, and the G lanes' sums are added by shuffles (a full (max, sum) merge if any lane
// re-shifted). A total below 2^-90 makes the warp redo its groups from a -inf shift.

// Most threads of a fused block (the host sizes blocks up to it).
#define FUSED_MAX_THREADS 1024

// Padded row length ≥ L rounded up to 8, ≡ 4 (mod 32): 8 lanes at consecutive k read
// 16-byte vectors from 8 distinct bank quads.
__device__ __forceinline__ int fused_pad(int L) {
  int p = (L + 7) & ~7;
  return p + ((4 - p) % 32 + 32) % 32;
}

// Lanes per output group for a reduction of length K: 8 to 16 terms per lane, ≤ 32.
// (Mirrored by `fused_lanes` on the host, which sizes the block.)
__device__ __forceinline__ int fused_lanes(int K) {
  int G = 1;
  while (G < 32 && G * 16 < K) G *= 2;
  return G;
}

struct FusedSide {
  int K, Lp, G, gshift, nog;
};

template <int FL>
__device__ __forceinline__ FusedSide fused_side(int L, int K, int G) {
  FusedSide sd;
  sd.K = K;
  sd.Lp = fused_pad(L);
  sd.G = G > 0 ? G : fused_lanes(K);
  sd.gshift = __ffs(sd.G) - 1;
  sd.nog = (L + FL - 1) / FL;
  return sd;
}

// Write the FL outputs of the group at l0 into O: in every CTA of the cluster (each holds
// the whole vector; CL = 1 is this CTA alone).
template <typename T, int FL>
__device__ __forceinline__ void fused_store(T *O, int l0, const T (&v)[FL], int CL) {
  if (CL == 1) {
    if constexpr (sizeof(T) == 4 && FL % 4 == 0) {
#pragma unroll
      for (int q = 0; q < FL; q += 4)
        *reinterpret_cast<float4 *>(O + l0 + q) = make_float4(v[q], v[q + 1], v[q + 2], v[q + 3]);
    } else {
#pragma unroll
      for (int q = 0; q < FL; ++q) O[l0 + q] = v[q];
    }
    return;
  }
  for (int r = 0; r < CL; ++r) {
    const u32 a = cluster_addr(O + l0, (u32)r);
    if constexpr (sizeof(T) == 4 && FL % 4 == 0) {
#pragma unroll
      for (int q = 0; q < FL; q += 4) st_cluster4(a + 4 * q, v[q], v[q + 1], v[q + 2], v[q + 3]);
    } else {
#pragma unroll
      for (int q = 0; q < FL; ++q) st_cluster(a + (u32)sizeof(T) * q, v[q]);
    }
  }
}

// Cold path of a fused half-step: the group's outputs from scratch (lane max, lane sum,
// merge across the G lanes). Called by whole warps.
template <typename T, int FL>
__device__ __noinline__ void fused_exact_group(T *O, const T *P, const T *LM, const T *cs,
                                               int Lp, int K, int G, int sub, int l0, bool act,
                                               int CL, T phi) {
  const T ninf = Num<T>::neg_inf();
  T M[FL], S[FL];
#pragma unroll
  for (int q = 0; q < FL; ++q) {
    M[q] = ninf;
    S[q] = T(0);
  }
  if (act) {
    for (int k = sub; k < K; k += G) {
      const T p = P[k];
      T c[FL];
      lds_vec<T, FL>(c, cs + k * Lp + l0);
#pragma unroll
      for (int q = 0; q < FL; ++q) M[q] = fmax(M[q], p + c[q]);
    }
    for (int k = sub; k < K; k += G) {
      const T p = P[k];
      T c[FL];
      lds_vec<T, FL>(c, cs + k * Lp + l0);
#pragma unroll
      for (int q = 0; q < FL; ++q)
        if (M[q] != ninf) S[q] += Num<T>::exp2(p + c[q] - M[q]);
    }
  }
#pragma unroll
  for (int q = 0; q < FL; ++q) lse_merge_lanes(M[q], S[q], G);
  __syncwarp();  // every lane's reads of O precede lane 0's writes
  if (act && sub == 0) {
    T v[FL];
#pragma unroll
    for (int q = 0; q < FL; ++q) {
      const T lmv = LM[l0 + q];
      v[q] = lmv == ninf ? ninf : lmv - phi * (M[q] + Num<T>::log2(S[q]));
    }
    fused_store<T, FL>(O, l0, v, CL);
  }
}

// One half-step: O[l] = LM[l] − log2-LSE_k(P[k] + cs[k][l]). O and LM are padded to a
// multiple of FL (LM = -inf on the padding), so groups read and write whole vectors.
// Hot path: shift = previous value (minus a margin), plain sums, a shuffle-add across the
// G lanes; any overflow, invalid hint or too-small total sends the warp to the exact path.
template <typename T, int FL>
__device__ __forceinline__ void half_fused(T *O, const T *P, const T *LM, const T *cs,
                                           const FusedSide &sd, int rank, int CL, T phi,
                                           T iphi) {
  const int tid = threadIdx.x;
  const int sub = tid & (sd.G - 1), grp = tid >> sd.gshift, ngrp = blockDim.x >> sd.gshift;
  const int K = sd.K, G = sd.G, Lp = sd.Lp;
  const T ninf = Num<T>::neg_inf();
  // This CTA's groups: og = rank + CL·i (interleaved over the cluster).
  const int mine = (sd.nog - rank + CL - 1) / CL;
  for (int base = 0; base < mine; base += ngrp) {
    const int og = rank + CL * (base + grp);
    const bool act = base + grp < mine;
    const int l0 = act ? og * FL : 0;
    T lmv[FL], H[FL], part[FL];
    {
      // Idle lanes read nothing: other groups' lane 0 writes O in this half-step.
      T o[FL];
      if (act) {
        lds_vec<T, FL>(lmv, LM + l0);
        lds_vec<T, FL>(o, O + l0);
      }
#pragma unroll
      for (int q = 0; q < FL; ++q) {
        if (!act) lmv[q] = o[q] = ninf;
        // Not computed (padding, zero mass, idle lanes): shift +inf, every term 0. An
        // invalid hint (-inf) makes the first term +inf, which the check below catches.
        H[q] = lmv[q] == ninf ? -ninf : (lmv[q] - o[q]) * iphi - T(HINT_MARGIN);
        part[q] = T(0);
      }
    }
    if (act && sub < K) {
      // Software-pipelined: the next term's loads are in flight during this one's math.
      T p = P[sub], c[FL];
      lds_vec<T, FL>(c, cs + sub * Lp + l0);
      for (int k = sub + G; k < K; k += G) {
        const T pn = P[k];
        T cn[FL];
        lds_vec<T, FL>(cn, cs + k * Lp + l0);
#pragma unroll
        for (int q = 0; q < FL; ++q) {
          part[q] += Num<T>::exp2(p + c[q] - H[q]);
          c[q] = cn[q];
        }
        p = pn;
      }
#pragma unroll
      for (int q = 0; q < FL; ++q) part[q] += Num<T>::exp2(p + c[q] - H[q]);
    }
    bool bad = false;
#pragma unroll
    for (int q = 0; q < FL; ++q) bad |= !(part[q] < T(OVF_LIMIT));
    if (!__any_sync(0xffffffffu, bad)) {
      for (int off = G >> 1; off > 0; off >>= 1)
#pragma unroll
        for (int q = 0; q < FL; ++q) part[q] += __shfl_xor_sync(0xffffffffu, part[q], off);
#pragma unroll
      for (int q = 0; q < FL; ++q) bad |= lmv[q] != ninf && !(part[q] >= T(UNF_LIMIT));
      if (!__any_sync(0xffffffffu, bad)) {
        __syncwarp();  // every lane's reads of O precede lane 0's writes
        if (act && sub == 0) {
          T v[FL];
#pragma unroll
          for (int q = 0; q < FL; ++q)
            v[q] = lmv[q] == ninf ? ninf : lmv[q] - phi * (H[q] + Num<T>::log2(part[q]));
          fused_store<T, FL>(O, l0, v, CL);
        }
        continue;
      }
    }
    fused_exact_group<T, FL>(O, P, LM, cs, Lp, K, G, sub, l0, act, CL, phi);
  }
}

template <typename T, int FL>
__device__ __forceinline__ void sinkhorn_fused(const T *__restrict__ Cm, long long cost_stride,
                                               T *__restrict__ f, T *__restrict__ g,
                                               const T *__restrict__ lmu,
                                               const T *__restrict__ lnu, int n, int m, T eps,
                                               int iters, int g_col, int g_row, T phi_mu,
                                               T phi_nu) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int mp = fused_pad(m), np = fused_pad(n);
  const int n4 = (n + 7) & ~7, m4 = (m + 7) & ~7;  // vectors padded to a multiple of 8
  T *cs_col = reinterpret_cast<T *>(smem_raw);  // [i][j]: g-update reduces over i
  T *cs_row = cs_col + (long long)n * mp;        // [j][i]: f-update reduces over j
  T *F = cs_row + (long long)m * np;             // each vector padded to a multiple of 4
  T *G = F + n4;
  T *LMU = G + m4;
  T *LNU = LMU + n4;
  // One cluster of CL CTAs per problem (CL = 1 without a cluster launch): every CTA holds
  // the whole problem in shared memory, computes the outputs of its groups and writes them
  // into every CTA's copy; a cluster barrier ends each half-step.
  const int CL = (int)cluster_size(), rank = (int)cluster_rank();
  const int b = blockIdx.x / CL, tid = threadIdx.x, NT = blockDim.x;
  const T s = T(LOGOT_LOG2E) / eps;
  const T ninf = Num<T>::neg_inf();
  const T *Cb = Cm + (long long)b * cost_stride;
  for (int e = tid; e < n * mp; e += NT) {
    const int i = e / mp, j = e % mp;
    cs_col[e] = j < m ? -Cb[(long long)i * m + j] * s : ninf;
  }
  for (int e = tid; e < m * np; e += NT) {
    const int j = e / np, i = e % np;
    cs_row[e] = i < n ? -Cb[(long long)i * m + j] * s : ninf;
  }
  for (int i = tid; i < n4; i += NT) {
    F[i] = i < n ? f[(long long)b * n + i] * s : ninf;
    LMU[i] = i < n ? lmu[(long long)b * n + i] * T(LOGOT_LOG2E) : ninf;
  }
  for (int j = tid; j < m4; j += NT) {
    G[j] = j < m ? g[(long long)b * m + j] * s : ninf;
    LNU[j] = j < m ? lnu[(long long)b * m + j] * T(LOGOT_LOG2E) : ninf;
  }
  const FusedSide col = fused_side<FL>(m, n, g_col), row = fused_side<FL>(n, m, g_row);
  // Also orders every CTA's set-up before the first write into it.
  auto sync = [&]() {
    if (CL > 1)
      cluster_barrier();
    else
      __syncthreads();
  };
  sync();
  // The hints divide by φ: once here, not per output (1/1 = 1: balanced bits unchanged).
  const T iphi_mu = T(1) / phi_mu, iphi_nu = T(1) / phi_nu;
  for (int it = 0; it < iters; ++it) {
    half_fused<T, FL>(G, F, LNU, cs_col, col, rank, CL, phi_nu, iphi_nu);  // g_j: over rows i
    sync();
    half_fused<T, FL>(F, G, LMU, cs_row, row, rank, CL, phi_mu, iphi_mu);  // f_i: over columns j
    sync();
  }
  if (rank != 0) return;
  const T back = eps * T(LOGOT_LN2);
  for (int i = tid; i < n; i += NT) f[(long long)b * n + i] = F[i] * back;
  for (int j = tid; j < m; j += NT) g[(long long)b * m + j] = G[j] * back;
}

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

// ---------------------------------------------------------------------------------------
// Entry points (one per precision and configuration). Names are looked up by the host.
#define TILED_ARGS(T)                                                                        \
  const T *R, long long cost_stride, const T *other, const T *lm, T *out, T *part_m,         \
      T *part_s, int B, int K, int L, T eps, int kslice, int split_hints, T phi
#define TILED_PASS \
  R, cost_stride, other, lm, out, part_m, part_s, B, K, L, eps, kslice, split_hints, phi

// The input checks' numbers of each row (one block per row of `per` entries), in f64:
// out[5r..] = (Σ x, min x, max x, #non-finite, #negative); NaN takes no part in min/max.
template <typename T>
__device__ __forceinline__ void row_stats(const T *__restrict__ x, double *__restrict__ out,
                                          long long per) {
  __shared__ double scratch[32];
  __shared__ double lo_s[32], hi_s[32];
  const double inf = -(double)Num<double>::neg_inf();
  const T *r = x + (long long)blockIdx.x * per;
  double sum = 0.0, lo = inf, hi = -inf, bad = 0.0, neg = 0.0;
  for (long long k = threadIdx.x; k < per; k += blockDim.x) {
    const double v = (double)r[k];
    sum += v;
    lo = fmin(lo, v);
    hi = fmax(hi, v);
    bad += isfinite(v) ? 0.0 : 1.0;
    neg += v < 0.0 ? 1.0 : 0.0;
  }
  block_min_max(lo, hi, lo_s, hi_s);
  sum = block_sum(sum, scratch);
  __syncthreads();
  bad = block_sum(bad, scratch);
  __syncthreads();
  neg = block_sum(neg, scratch);
  if (threadIdx.x == 0) {
    double *o = out + 5 * (long long)blockIdx.x;
    o[0] = sum;
    o[1] = lo;
    o[2] = hi;
    o[3] = bad;
    o[4] = neg;
  }
}

// y = ln x (−∞ for x = 0).
template <typename T>
__device__ __forceinline__ void elem_log(const T *__restrict__ x, T *__restrict__ y,
                                         long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    y[e] = log(x[e]);
}

// The start potential of a marginal: 0 where a > 0, −∞ elsewhere (zero-mass bins).
template <typename T>
__device__ __forceinline__ void start_potential(const T *__restrict__ a, T *__restrict__ out,
                                                long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    out[e] = a[e] > T(0) ? T(0) : Num<T>::neg_inf();
}

// dst[e] = T(src[e] + delta[e / per]) with the sum in f64 (a zero delta copies).
template <typename T>
__device__ __forceinline__ void offset_rows(const T *__restrict__ src, T *__restrict__ dst,
                                            const double *__restrict__ delta, long long per,
                                            long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x) {
    const double d = delta[e / per];
    dst[e] = d == 0.0 ? src[e] : (T)((double)src[e] + d);
  }
}

// dst[e] = src[e] where a[e] = 0 (a marginal's zero-mass bins), unchanged elsewhere.
template <typename T>
__device__ __forceinline__ void where_empty(const T *__restrict__ a, const T *__restrict__ src,
                                            T *__restrict__ dst, long long len) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < len;
       e += (long long)gridDim.x * blockDim.x)
    if (a[e] == T(0)) dst[e] = src[e];
}

// The tiles of the entry points below: TB, TJ, WB, WJ, WARPS, KW of TiledCfg (8 warps,
// 256 threads, in each). The host reads these lines (src/backend/cuda/ops/tiled.rs) for the
// launch shapes and the shared memory.
#define TILE_S16 4, 4, 4, 8, 8, 16
#define TILE_R16 4, 2, 4, 8, 8, 16
#define TILE_S4 4, 4, 1, 32, 8, 8
#define TILE_B1 1, 4, 1, 32, 8, 8

// Shared cost, 16 batch rows × 32 outputs per block, 8 warps × 16 k per stage; the
// factored variant (FACT) needs each warp's area for A and K besides the stages.
#define SHARED16(T, SUF, MINB)                                                               \
  extern "C" __global__ void __launch_bounds__(256, MINB) sinkstep_s16_##SUF(TILED_ARGS(T)) { \
    sinkstep_tiled<T, TILE_S16, 0, false>(TILED_PASS);                                       \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                    \
      sinkstep_s16_factored_##SUF(TILED_ARGS(T)) {                                           \
    sinkstep_tiled<T, TILE_S16, 0, false, true>(TILED_PASS);                                 \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256, MINB) report_s16_##SUF(TILED_ARGS(T)) {  \
    sinkstep_tiled<T, TILE_R16, 1, false>(TILED_PASS);                                       \
  }
SHARED16(float, f32, 2)
SHARED16(double, f64, 1)

// Shared cost, few problems (2 to 7): 4 batch rows × 128 outputs per block, 16 outputs a
// thread. There are few blocks, so the host splits the reduction across blocks.
#define SHARED4(T, SUF, MINB)                                                                \
  extern "C" __global__ void __launch_bounds__(256, MINB) sinkstep_s4_##SUF(TILED_ARGS(T)) { \
    sinkstep_tiled<T, TILE_S4, 0>(TILED_PASS);                                               \
  }
SHARED4(float, f32, 2)
SHARED4(double, f64, 1)

// One batch row × 128 outputs per block (per-problem costs, or few problems).
#define ROW1(T, SUF)                                                                         \
  extern "C" __global__ void __launch_bounds__(256) sinkstep_b1_##SUF(TILED_ARGS(T)) {       \
    sinkstep_tiled<T, TILE_B1, 0>(TILED_PASS);                                               \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256) report_b1_##SUF(TILED_ARGS(T)) {         \
    sinkstep_tiled<T, TILE_B1, 1>(TILED_PASS);                                               \
  }
ROW1(float, f32)
ROW1(double, f64)

// Per problem: Σ_j |ν_bj − mass_bj| and Σ_j share_bj (one block per problem).
template <typename T>
__device__ __forceinline__ void report_sum(const T *__restrict__ nu, const T *__restrict__ mass,
                                           const T *__restrict__ share, double *__restrict__ out,
                                           int per) {
  __shared__ double scratch[32];
  const long long base = (long long)blockIdx.x * per;
  double e = 0.0, c = 0.0;
  for (int k = threadIdx.x; k < per; k += blockDim.x) {
    e += fabs((double)nu[base + k] - (double)mass[base + k]);
    c += (double)share[base + k];
  }
  e = block_sum(e, scratch);
  __syncthreads();
  c = block_sum(c, scratch);
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = e;
    out[2 * blockIdx.x + 1] = c;
  }
}

#define OTHERS(T, SUF)                                                                       \
  extern "C" __global__ void sinkstep_finish_##SUF(const T *part_m, const T *part_s,         \
                                                   const T *lm, T *out, int B, int L,        \
                                                   int splits, T eps, T phi) {               \
    sinkstep_finish<T>(part_m, part_s, lm, out, B, L, splits, eps, phi);                     \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(FUSED_MAX_THREADS)                            \
      sinkhorn_fused_##SUF(const T *C, long long cost_stride, T *f, T *g, const T *lmu,      \
                           const T *lnu, int n, int m, T eps, int iters, int g_col,          \
                           int g_row, T phi_mu, T phi_nu) {                                  \
    sinkhorn_fused<T, 4>(C, cost_stride, f, g, lmu, lnu, n, m, eps, iters, g_col, g_row,     \
                         phi_mu, phi_nu);                                                    \
  }                                                                                          \
  extern "C" __global__ void marginal_error_##SUF(const T *a, const T *old, const T *nw,     \
                                                  T *err, int per, T eps) {                  \
    marginal_error<T>(a, old, nw, err, per, eps);                                            \
  }                                                                                          \
  extern "C" __global__ void transport_cost_##SUF(const T *C, long long cost_stride,         \
                                                  const T *f, const T *g, double *partial,   \
                                                  int n, int m, int rows, T eps) {           \
    transport_cost<T>(C, cost_stride, f, g, partial, n, m, rows, eps);                       \
  }                                                                                          \
  extern "C" __global__ void plan_##SUF(const T *C, long long cost_stride, const T *f,       \
                                        const T *g, T *P, int B, int n, int m, T eps) {      \
    plan<T>(C, cost_stride, f, g, P, B, n, m, eps);                                          \
  }                                                                                          \
  extern "C" __global__ void fill_##SUF(T *out, long long len, T v) { fill<T>(out, len, v); } \
  extern "C" __global__ void relax_##SUF(T *out, const T *lm, long long len, T eps, T phi) {   \
    relax<T>(out, lm, len, eps, phi);                                                        \
  }                                                                                          \
  extern "C" __global__ void copy_block_##SUF(const T *src, long long src_pitch, T *dst,       \
                                             long long dst_pitch, long long rows,            \
                                             long long width) {                              \
    copy_block<T>(src, src_pitch, dst, dst_pitch, rows, width);                              \
  }                                                                                          \
  extern "C" __global__ void shard_softmin_##SUF(const T *parts, T *out, long long len,        \
                                                 int shards, T eps) {                        \
    shard_softmin<T>(parts, out, len, shards, eps);                                          \
  }                                                                                          \
  extern "C" __global__ void shard_sum_##SUF(const T *parts, T *out, long long len,            \
                                             int shards) {                                   \
    shard_sum<T>(parts, out, len, shards);                                                   \
  }                                                                                          \
  extern "C" __global__ void relaxed_side_##SUF(const T *a, const T *pot, const T *half,      \
                                                 double *out, int per, double eps, double rho, \
                                                 int exact) {                                \
    relaxed_side<T>(a, pot, half, out, per, eps, rho, exact);                                \
  }                                                                                          \
  extern "C" __global__ void report_sum_##SUF(const T *nu, const T *mass, const T *share,    \
                                              double *out, int per) {                        \
    report_sum<T>(nu, mass, share, out, per);                                                \
  }                                                                                          \
  extern "C" __global__ void transpose_##SUF(const T *in, T *out, int n, int m) {            \
    transpose<T>(in, out, n, m);                                                             \
  }                                                                                          \
  extern "C" __global__ void row_stats_##SUF(const T *x, double *out, long long per) {       \
    row_stats<T>(x, out, per);                                                               \
  }                                                                                          \
  extern "C" __global__ void elem_log_##SUF(const T *x, T *y, long long len) {               \
    elem_log<T>(x, y, len);                                                                  \
  }                                                                                          \
  extern "C" __global__ void start_potential_##SUF(const T *a, T *out, long long len) {      \
    start_potential<T>(a, out, len);                                                         \
  }                                                                                          \
  extern "C" __global__ void offset_rows_##SUF(const T *src, T *dst, const double *delta,    \
                                               long long per, long long len) {               \
    offset_rows<T>(src, dst, delta, per, len);                                               \
  }                                                                                          \
  extern "C" __global__ void where_empty_##SUF(const T *a, const T *src, T *dst,             \
                                               long long len) {                              \
    where_empty<T>(a, src, dst, len);                                                        \
  }
OTHERS(float, f32)
OTHERS(double, f64)

// Eight outputs per lane (f32 only).
extern "C" __global__ void __launch_bounds__(FUSED_MAX_THREADS)
    sinkhorn_fused8_f32(const float *C, long long cost_stride, float *f, float *g,
                        const float *lmu, const float *lnu, int n, int m, float eps, int iters,
                        int g_col, int g_row, float phi_mu, float phi_nu) {
  sinkhorn_fused<float, 8>(C, cost_stride, f, g, lmu, lnu, n, m, eps, iters, g_col, g_row, phi_mu,
                           phi_nu);
}
