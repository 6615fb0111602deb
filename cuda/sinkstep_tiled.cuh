// Part of the Sinkhorn module (sinkstep.cu includes its parts in order, and NVRTC
// compiles them as one source): the tiled half-step (batched, split over blocks,
// factored exponentials).

#define OVF_LIMIT 1.2379400392853803e27 /* 2^90: a part above it triggers the exact path */
#define UNF_LIMIT 8.077935669463161e-28  /* 2^-90: a total below it means the shift was too high */
#define HINT_MARGIN 8.0
#define TRIGGER_HEADROOM 24.0
#define FIT_SPREAD 40.0 /* largest u_b + v_j fit residual (base 2) of a factored warp */
#define KW_UNROLL 16

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
