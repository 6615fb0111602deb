// Log-domain Sinkhorn kernels: the batched one-pass LSE half-step (tiled like a GEMM),
// a fused whole-loop kernel for small problems, marginal errors, transport costs, plans.
// common.cuh is prepended by the host before NVRTC compiles this file.
//
// Conventions. A half-step reduces over k (length K) for each output l (length L):
//   out[b,l] = eps·lm[b,l] − eps·LSE_k((other[b,k] − R[k,l]) / eps)
// where R is "reduction-major": C (n×m) for the g-update (k = i, l = j) and Cᵀ (m×n) for
// the f-update. In-kernel values are base 2: x = other·s − R·s with s = log2(e)/eps.

#define OVF_LIMIT 18446744073709551616.0 /* 2^64: a part above it triggers the exact path */
#define UNF_LIMIT 8.077935669463161e-28  /* 2^-90: a total below it means the shift was too high */
#define HINT_MARGIN 8.0

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

// ---------------------------------------------------------------------------------------
// Tiled half-step. A block owns BB batch rows × BJ outputs and streams k through shared
// memory in stages of KT (cost tile KT×BJ by cp.async, potential tile KT×BB scaled on
// load), double-buffered. Each warp takes KW rows of a stage (split-K inside the block),
// each thread TB×TJ outputs; the warps' (max, sum) pairs are merged at the end.
//
// Speculative shift: each output's running shift M starts at its previous value
// (log2-LSE recovered from the old contents of `out`, minus a margin), so the hot loop is
// one FMA, one subtract, one exp2 and one add per element, with no running max. After each
// stage a part ≥ 2^64 (or inf/NaN) sends that output through the exact path (stage max,
// rescale); a final sum < 2^-90 (shift too high) makes the block redo its outputs in
// exact mode (shift from -inf). Exact mode is also used when the grid splits K.
// POLY_ROWS of the TB rows in the thread's last column compute exp2 on the FMA pipe
// (exp2_poly) to relieve the MUFU unit.
template <typename T, int TB, int TJ, int WB, int WJ, int WARPS, int KW, int POLY_ROWS>
struct TiledCfg {
  static constexpr int BB = TB * WB, BJ = TJ * WJ, KT = KW * WARPS, NT = 32 * WARPS;
  static constexpr int BBP = (BB % 4 == 0) ? BB + 4 : BB;  // padded potential-tile row
  static constexpr int CS = KT * BJ;
  static constexpr int PS = KT * BBP;
  static constexpr int STAGE = CS + PS;
  static constexpr int MERGE = 2 * WARPS * BB * BJ;
  static constexpr int SMEM = (2 * STAGE > MERGE) ? 2 * STAGE : MERGE;  // elements of T
  static constexpr int PT = (KT * BB + NT - 1) / NT;  // potential elements per thread per stage
};

template <typename T, int TB, int TJ, int WB, int WJ, int WARPS, int KW, int POLY_ROWS>
__device__ __forceinline__ void sinkstep_tiled(const T *__restrict__ R, long long cost_stride,
                                               const T *__restrict__ other,
                                               const T *__restrict__ lm, T *__restrict__ out,
                                               T *__restrict__ part_m, T *__restrict__ part_s,
                                               int B, int K, int L, T eps, int kslice) {
  using C = TiledCfg<T, TB, TJ, WB, WJ, WARPS, KW, POLY_ROWS>;
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
    cp_async_commit();
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
  auto load_pot = [&](int st, T (&reg)[C::PT]) {
    const int kb = kbeg + st * KT;
#pragma unroll
    for (int r = 0; r < C::PT; ++r) {
      const int idx = tid + r * NT;
      T v = ninf;
      if (idx < KT * BB) {
        int bi, ki;
        pot_index(idx, bi, ki);
        const int b = b0 + bi, k = kb + ki;
        if (b < B && k < kend) v = other[(long long)b * K + k] * s;
      }
      reg[r] = v;
    }
  };
  auto store_pot = [&](int buf, const T (&reg)[C::PT]) {
    T *ps = smem + buf * C::STAGE + C::CS;
#pragma unroll
    for (int r = 0; r < C::PT; ++r) {
      const int idx = tid + r * NT;
      if (idx < KT * BB) {
        int bi, ki;
        pot_index(idx, bi, ki);
        ps[ki * BBP + bi] = reg[r];
      }
    }
  };

  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool exact = split || attempt > 0;
    T M[TB][TJ], S[TB][TJ];
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
          const T h = lm[o] * T(LOGOT_LOG2E) - out[o] * s;
          if (Num<T>::is_finite(h)) m0 = h - T(HINT_MARGIN);
        }
        M[ib][jj] = m0;
        S[ib][jj] = T(0);
      }

    if (nst > 0) {
      T preg[C::PT];
      load_cost(0, 0);
      load_pot(0, preg);
      store_pot(0, preg);
      for (int st = 0; st < nst; ++st) {
        const int buf = st & 1;
        const bool more = st + 1 < nst;
        if (more) {
          load_cost(st + 1, buf ^ 1);
          load_pot(st + 1, preg);
          cp_async_wait<1>();
        } else {
          cp_async_wait<0>();
        }
        __syncthreads();
        const T *cs = smem + buf * C::STAGE;
        const T *ps = cs + C::CS;
        T part[TB][TJ];
#pragma unroll
        for (int kk = 0; kk < KW; ++kk) {
          const int k = warp * KW + kk;
          T pv[TB], cv[TJ];
          lds_vec<T, TB>(pv, ps + k * BBP + tb * TB);
          lds_vec<T, TJ>(cv, cs + k * BJ + tj * TJ);
#pragma unroll
          for (int ib = 0; ib < TB; ++ib)
#pragma unroll
            for (int jj = 0; jj < TJ; ++jj) {
              const T x = fma(cv[jj], -s, pv[ib]);
              const T y = x - M[ib][jj];
              T e;
              if constexpr (sizeof(T) == 4 && POLY_ROWS > 0) {
                if (jj == TJ - 1 && ib < POLY_ROWS)
                  e = exp2_poly(y);
                else
                  e = Num<T>::exp2(y);
              } else {
                e = Num<T>::exp2(y);
              }
              part[ib][jj] = kk == 0 ? e : part[ib][jj] + e;
            }
        }
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
                continue;
              }
              // Exact path for this output and stage: stage max, rescale, re-sum.
              T tmax = ninf;
              for (int kk = 0; kk < KW; ++kk) {
                const int k = warp * KW + kk;
                const T x = fma(cs[k * BJ + tj * TJ + jj], -s, ps[k * BBP + tb * TB + ib]);
                tmax = x > tmax ? x : tmax;
              }
              const T mo = M[ib][jj];
              const T mn = mo > tmax ? mo : tmax;
              if (mn == ninf) continue;  // nothing finite yet
              T acc = S[ib][jj] * Num<T>::exp2(mo - mn);
              for (int kk = 0; kk < KW; ++kk) {
                const int k = warp * KW + kk;
                const T x = fma(cs[k * BJ + tj * TJ + jj], -s, ps[k * BBP + tb * TB + ib]);
                acc += Num<T>::exp2(x - mn);
              }
              S[ib][jj] = acc;
              M[ib][jj] = mn;
            }
        } else {
#pragma unroll
          for (int ib = 0; ib < TB; ++ib)
#pragma unroll
            for (int jj = 0; jj < TJ; ++jj) S[ib][jj] += part[ib][jj];
        }
        if (more) store_pot(buf ^ 1, preg);
        __syncthreads();
      }
    }

    // Merge the warps' partial (max, sum) pairs through shared memory.
    T *mM = smem;
    T *mS = smem + WARPS * BB * BJ;
#pragma unroll
    for (int ib = 0; ib < TB; ++ib)
#pragma unroll
      for (int jj = 0; jj < TJ; ++jj) {
        const int o = (tb * TB + ib) * BJ + tj * TJ + jj;
        mM[warp * BB * BJ + o] = M[ib][jj];
        mS[warp * BB * BJ + o] = S[ib][jj];
      }
    __syncthreads();
    int redo = 0;
    for (int o = tid; o < BB * BJ; o += NT) {
      T mt = mM[o], st = mS[o];
      for (int w = 1; w < WARPS; ++w) lse_merge(mt, st, mM[w * BB * BJ + o], mS[w * BB * BJ + o]);
      const int b = b0 + o / BJ, j = j0 + o % BJ;
      if (b >= B || j >= L) continue;
      const long long oi = (long long)b * L + j;
      if (split) {
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
      if (!exact && !(st >= T(UNF_LIMIT))) redo = 1;
      out[oi] = eps * lmv - eps * T(LOGOT_LN2) * (mt + Num<T>::log2(st));
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
                                                int B, int L, int splits, T eps) {
  const long long total = (long long)B * L;
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < total;
       o += (long long)gridDim.x * blockDim.x) {
    T mt = part_m[o], st = part_s[o];
    for (int z = 1; z < splits; ++z) lse_merge(mt, st, part_m[z * total + o], part_s[z * total + o]);
    const T lmv = lm[o];
    out[o] = lmv == Num<T>::neg_inf() ? lmv
                                      : eps * lmv - eps * T(LOGOT_LN2) * (mt + Num<T>::log2(st));
  }
}

// ---------------------------------------------------------------------------------------
// Fused Sinkhorn for small problems: one block per problem runs `iters` full iterations
// (g then f) with the cost and both potentials in shared memory, one launch in all.
// Each output is reduced by a group of G lanes (power of two) that merge by shuffles.
template <typename T>
__device__ __forceinline__ void half_fused(T *O, const T *P, const T *LM, const T *cs, int L,
                                           int K, int sk, int sl) {
  const int NT = blockDim.x, tid = threadIdx.x;
  int G = 1;
  while (G < 32 && 2 * G * L <= NT) G *= 2;
  const int groups = NT / G;
  const int sub = tid % G;
  const T ninf = Num<T>::neg_inf();
  for (int base = 0; base < L; base += groups) {
    const int l = base + tid / G;
    const bool act = l < L && tid < groups * G;
    T M = ninf, S = T(0);
    if (act && LM[l] != ninf) {
      for (int k0 = sub; k0 < K; k0 += 8 * G) {
        T x[8];
        T cm = ninf;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const int k = k0 + q * G;
          x[q] = k < K ? P[k] + cs[k * sk + l * sl] : ninf;
          cm = x[q] > cm ? x[q] : cm;
        }
        const T mn = M > cm ? M : cm;
        if (mn != ninf) {
          T acc = S * Num<T>::exp2(M - mn);
#pragma unroll
          for (int q = 0; q < 8; ++q) acc += Num<T>::exp2(x[q] - mn);
          S = acc;
          M = mn;
        }
      }
    }
    lse_merge_lanes(M, S, G);
    if (act && sub == 0) O[l] = LM[l] == ninf ? ninf : LM[l] - (M + Num<T>::log2(S));
  }
}

template <typename T>
__device__ __forceinline__ void sinkhorn_fused(const T *__restrict__ Cm, long long cost_stride,
                                               T *__restrict__ f, T *__restrict__ g,
                                               const T *__restrict__ lmu,
                                               const T *__restrict__ lnu, int n, int m, T eps,
                                               int iters) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *cs = reinterpret_cast<T *>(smem_raw);
  const int mp = m + 1;  // odd row stride: row and column walks avoid bank conflicts
  T *F = cs + (long long)n * mp;
  T *G = F + n;
  T *LMU = G + m;
  T *LNU = LMU + n;
  const int b = blockIdx.x, tid = threadIdx.x, NT = blockDim.x;
  const T s = T(LOGOT_LOG2E) / eps;
  const T *Cb = Cm + (long long)b * cost_stride;
  for (int e = tid; e < n * m; e += NT) cs[(e / m) * mp + e % m] = -Cb[e] * s;
  for (int i = tid; i < n; i += NT) {
    F[i] = f[(long long)b * n + i] * s;
    LMU[i] = lmu[(long long)b * n + i] * T(LOGOT_LOG2E);
  }
  for (int j = tid; j < m; j += NT) {
    G[j] = g[(long long)b * m + j] * s;
    LNU[j] = lnu[(long long)b * m + j] * T(LOGOT_LOG2E);
  }
  __syncthreads();
  for (int it = 0; it < iters; ++it) {
    half_fused<T>(G, F, LNU, cs, m, n, mp, 1);  // g_j from f: reduce over rows i
    __syncthreads();
    half_fused<T>(F, G, LMU, cs, n, m, 1, mp);  // f_i from g: reduce over columns j
    __syncthreads();
  }
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
      T *part_s, int B, int K, int L, T eps, int kslice
#define TILED_PASS R, cost_stride, other, lm, out, part_m, part_s, B, K, L, eps, kslice

// Shared cost, 16 batch rows × 32 outputs per block, 8 warps × 16 k per stage.
#define SHARED16(T, SUF, P, MINB)                                                            \
  extern "C" __global__ void __launch_bounds__(256, MINB)                                    \
      sinkstep_s16_p##P##_##SUF(TILED_ARGS(T)) {                                             \
    sinkstep_tiled<T, 4, 4, 4, 8, 8, 16, P>(TILED_PASS);                                     \
  }
SHARED16(float, f32, 0, 2)
SHARED16(float, f32, 1, 2)
SHARED16(float, f32, 2, 2)
SHARED16(float, f32, 3, 2)
SHARED16(float, f32, 4, 2)
SHARED16(double, f64, 0, 1)

// One batch row × 128 outputs per block (per-problem costs, or few problems).
#define ROW1(T, SUF)                                                                         \
  extern "C" __global__ void __launch_bounds__(256) sinkstep_b1_##SUF(TILED_ARGS(T)) {       \
    sinkstep_tiled<T, 1, 4, 1, 32, 8, 8, 0>(TILED_PASS);                                     \
  }
ROW1(float, f32)
ROW1(double, f64)

#define OTHERS(T, SUF)                                                                       \
  extern "C" __global__ void sinkstep_finish_##SUF(const T *part_m, const T *part_s,         \
                                                   const T *lm, T *out, int B, int L,        \
                                                   int splits, T eps) {                      \
    sinkstep_finish<T>(part_m, part_s, lm, out, B, L, splits, eps);                          \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(1024)                                         \
      sinkhorn_fused_##SUF(const T *C, long long cost_stride, T *f, T *g, const T *lmu,      \
                           const T *lnu, int n, int m, T eps, int iters) {                   \
    sinkhorn_fused<T>(C, cost_stride, f, g, lmu, lnu, n, m, eps, iters);                     \
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
  extern "C" __global__ void transpose_##SUF(const T *in, T *out, int n, int m) {            \
    transpose<T>(in, out, n, m);                                                             \
  }
OTHERS(float, f32)
OTHERS(double, f64)
