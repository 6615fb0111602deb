// Part of the point-cloud module (pointcloud.cu includes its parts in order, and NVRTC
// compiles them as one source): the shared constants, and the FMA half-step and plan-weighted row
// sums at d ≤ 16.

#define PC_BLOCK 256
#define PC_KT 128
#define PC_CH 8
#define PC_DMAX 16 /* largest dimension (and plan_apply channels) of the d16 entry points */

template <typename T> struct Vec4;
template <> struct Vec4<float> {
  // Four consecutive shared floats (16-byte aligned) in one load.
  static __device__ __forceinline__ void load(float (&v)[4], const float *p) {
    float4 t = *reinterpret_cast<const float4 *>(p);
    v[0] = t.x;
    v[1] = t.y;
    v[2] = t.z;
    v[3] = t.w;
  }
};
template <> struct Vec4<double> {
  static __device__ __forceinline__ void load(double (&v)[4], const double *p) {
    double2 a = *reinterpret_cast<const double2 *>(p);
    double2 b = *reinterpret_cast<const double2 *>(p + 2);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = b.x;
    v[3] = b.y;
  }
};

// One FMNMX (the arguments are never NaN: inputs are validated and -inf is ordered).
__device__ __forceinline__ float pc_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double pc_max(double a, double b) { return fmax(a, b); }

// Stage PC_KT reduced points (coordinates × scale, potentials × s) into shared memory;
// entries past `cnt` get coordinates 0 and potential -inf.
template <typename T, int DMAX>
__device__ __forceinline__ void pc_load_stage(T *__restrict__ sq, T *__restrict__ sp,
                                              const T *__restrict__ red, const T *__restrict__ pot,
                                              int K, int k0, int cnt, int d, T scale, T s) {
  for (int e = threadIdx.x; e < PC_KT; e += blockDim.x) {
    const bool in = e < cnt;
#pragma unroll
    for (int t = 0; t < DMAX; ++t)
      if (t < d) sq[t * PC_KT + e] = in ? red[(long long)t * K + k0 + e] * scale : T(0);
    sp[e] = in ? pot[k0 + e] * s : Num<T>::neg_inf();
  }
}

// Scaled cost between own point p and the shared points c0 .. c0+PC_CH-1.
template <typename T, int DMAX, bool ROOT>
__device__ __forceinline__ void pc_chunk_cost(T (&c)[PC_CH], const T (&p)[DMAX],
                                              const T *__restrict__ sq, int c0, int d) {
#pragma unroll
  for (int q = 0; q < PC_CH; ++q) c[q] = T(0);
#pragma unroll
  for (int t = 0; t < DMAX; ++t) {
    if (t < d) {
#pragma unroll
      for (int h = 0; h < PC_CH; h += 4) {
        T y[4];
        Vec4<T>::load(y, sq + t * PC_KT + c0 + h);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const T w = p[t] - y[u];
          c[h + u] = fma(w, w, c[h + u]);
        }
      }
    }
  }
  if (ROOT) {
#pragma unroll
    for (int q = 0; q < PC_CH; ++q) c[q] = sqrt(c[q]);
  }
}

// ---------------------------------------------------------------------------------------
// Half-step: out[b,l] = eps·lm[b,l] − eps·LSE_k((other[b,k] − c(p_l, q_k))/eps), the
// reduction optionally split over gridDim.z blocks (partials merged by sinkstep_finish of
// sinkstep.cu, same layout: part[z·B·L + b·L + l], base-2 (max, sum)).
//
// Two forms of the exponent v_lk = s·(other_k − c_lk), s = log2(e)/eps (the host picks one
// per call, CloudForm in src/backend/cuda/runtime/tuning.rs):
// * direct (any metric): the coordinates are scaled by `scale` on load and c·s is formed
//   from the differences (d subtractions, d FMAs, then other − c);
// * norm (NORM, |x−y|² of centred clouds): v_lk = q_k + Σ_t x'_lt·y_kt − s|x_l|² with
//   q_k = s·(other_k − |y_k|²) formed once per stage in shared memory and x' = 2s·x in
//   registers; the row term −s|x_l|² leaves the LSE and is added at the end, so a pair
//   costs d FMAs. Rounding puts an error of about (d+3)·u·s·(|x|+|y|)² on v, which the
//   host bounds before choosing this form.
//
// Lazily raised maximum, tested once per stage: each output keeps a shift m and its sum of
// exp2(v − m). The PC_KT arguments of a stage are exponentiated against the current m with
// no test and no branch (pc_fold_stage); one test per stage then finds the rare sum that
// overflowed (a term above 2^127 of its shift: the stage is redone with m raised to the
// stage maximum) or grew past PC_LAZY_MAX = 2^64 (renormalised exactly by a power of two).
// m starts at its first chunk's maximum (at the finite PC_M0 when that chunk has no mass),
// −inf arguments (zero-mass bins, padding) give exactly 0, and no −inf − −inf NaN can arise.
//
// Exponentials past the MUFU throughput: in f32, PC_POLY of the TJ·PC_CH exponentials of
// each thread's chunk are evaluated by pc_exp2_poly on the FMA pipe instead of MUFU.EX2.
#define PC_LAZY_MAX 1.8446744073709552e19 /* 2^64 */
#define PC_M0 (-1e30)
// None by default: the norm-form d = 3 stage loop is 409 instructions and 64 MUFU.EX2 per
// 64 pairs (counted in the sm_90 SASS): MUFU-bound in theory (512 cycles of the 4-lane unit
// against 409 issues per scheduler), but each polynomial costs about 10 issues more than
// one MUFU, and the kernels that keep PC_POLY are faster without them.
#define PC_POLY 0 /* polynomial exponentials per thread and chunk, of TJ·PC_CH (f32) */
// The f32 kernels at d = 1 and 2 have issue slots to spare (about 4 and 5 a pair in the norm
// form): PC_POLY_LOW of each thread's chunk by the polynomial, which makes them faster; at
// d = 8 and 16 the same count makes the kernels slower, so the other kernels keep PC_POLY.
#define PC_POLY_LOW 8

// 2^x by a polynomial on the FMA pipe (FlashAttention-3's trick for the exponential unit's
// throughput): x clamped to [−127, 128], x = j + f with j = rint(x) (the 1.5·2^23 rounding
// constant leaves j in the low mantissa bits), 2^f on [−1/2, 1/2] by a polynomial of degree
// DEG with p(0) = 1 (Lawson minimax of the relative error), and j added to the exponent
// field. Relative error in an f32 emulation over 2·10^7 arguments in [−126, 64]:
// DEG = 5 1.7e-7 (2.8·2^-24; 9.1e-8 in exact arithmetic), DEG = 4 2.9e-6 (2.8e-6 exact, one
// FMA fewer); tests/cuda_pointcloud_fast.rs checks ≤ 4·2^-24 and ≤ 3.2e-6 on the GPU up to
// 128. Below −126 the result is a denormal or 0 (absolute error < 2^-126), −inf and
// x ≤ −127 give +0; x ≥ 128 gives +inf as MUFU.EX2 does (the clamp makes f = 0 and p = 1,
// and 127 + 128 in the exponent field is the bit pattern of +inf), which the stage test
// reads as an overflow. NaN gives 2^−127 (callers never pass one).
template <int DEG = 5> __device__ __forceinline__ float pc_exp2_poly(float x) {
  static_assert(DEG == 4 || DEG == 5, "degree 4 or 5");
  x = fminf(fmaxf(x, -127.0f), 128.0f);
  const float r = x + 12582912.0f;
  const float f = x - (r - 12582912.0f);
  float p;
  if constexpr (DEG == 5) {
    p = 0.0013264728477224708f;
    p = fmaf(p, f, 0.009671512991189957f);
    p = fmaf(p, f, 0.05550733581185341f);
    p = fmaf(p, f, 0.24022242426872253f);
    p = fmaf(p, f, 0.6931470036506653f);
  } else {
    p = 0.00958283618092537f;
    p = fmaf(p, f, 0.05590641498565674f);
    p = fmaf(p, f, 0.24024099111557007f);
    p = fmaf(p, f, 0.6931241750717163f);
  }
  p = fmaf(p, f, 1.0f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(r) << 23));
}

// exp2 of pair `E` of a thread's chunk: the polynomial for the first POLY (f32).
template <typename T, int E, int POLY> __device__ __forceinline__ T pc_exp2_pair(T x) {
  if constexpr (sizeof(T) == 4 && E < POLY) {
    return pc_exp2_poly(x);
  } else {
    return Num<T>::exp2(x);
  }
}

// Stage PC_KT reduced points for the norm form: raw coordinates, and
// q = s·(other − |y|²) (−inf where other is −inf and past `cnt`).
template <typename T, int DMAX>
__device__ __forceinline__ void pc_load_stage_norm(T *__restrict__ sq, T *__restrict__ sp,
                                                   const T *__restrict__ red,
                                                   const T *__restrict__ pot, int K, int k0,
                                                   int cnt, int d, T s) {
  for (int e = threadIdx.x; e < PC_KT; e += blockDim.x) {
    const bool in = e < cnt;
    T n2 = T(0);
#pragma unroll
    for (int t = 0; t < DMAX; ++t) {
      if (t < d) {
        const T y = in ? red[(long long)t * K + k0 + e] : T(0);
        sq[t * PC_KT + e] = y;
        n2 = fma(y, y, n2);
      }
    }
    sp[e] = in ? s * (pot[k0 + e] - n2) : Num<T>::neg_inf();
  }
}

// The chunk's exponents less `shift`: v[q] = pv[q] − shift + x'·y (NORM) or
// pv[q] − shift − c·s (direct) for own point p and chunk columns c0 .. c0+PC_CH−1 (with
// PRE, their coordinates already in qv).
template <typename T, int DMAX, bool ROOT, bool NORM, bool PRE>
__device__ __forceinline__ void pc_chunk_args(T (&v)[PC_CH], const T (&pv)[PC_CH],
                                              const T (&qv)[PRE ? DMAX : 1][PC_CH],
                                              const T (&p)[DMAX], const T *__restrict__ sq,
                                              int c0, int d, T shift) {
  if constexpr (NORM) {
#pragma unroll
    for (int q = 0; q < PC_CH; ++q) v[q] = pv[q] - shift;
    if constexpr (PRE) {
#pragma unroll
      for (int t = 0; t < DMAX; ++t)
        if (t < d) {
#pragma unroll
          for (int q = 0; q < PC_CH; ++q) v[q] = fma(p[t], qv[t][q], v[q]);
        }
    } else {
#pragma unroll
      for (int t = 0; t < DMAX; ++t) {
        if (t < d) {
#pragma unroll
          for (int h = 0; h < PC_CH; h += 4) {
            T y[4];
            Vec4<T>::load(y, sq + t * PC_KT + c0 + h);
#pragma unroll
            for (int u = 0; u < 4; ++u) v[h + u] = fma(p[t], y[u], v[h + u]);
          }
        }
      }
    }
  } else {
    T c[PC_CH];
    if constexpr (PRE) {
#pragma unroll
      for (int q = 0; q < PC_CH; ++q) {
        T acc = T(0);
#pragma unroll
        for (int t = 0; t < DMAX; ++t) {
          if (t < d) {
            const T w = p[t] - qv[t][q];
            acc = fma(w, w, acc);
          }
        }
        c[q] = ROOT ? sqrt(acc) : acc;
      }
    } else {
      pc_chunk_cost<T, DMAX, ROOT>(c, p, sq, c0, d);
    }
#pragma unroll
    for (int q = 0; q < PC_CH; ++q) v[q] = (pv[q] - shift) - c[q];
  }
}

// acc + Σ_q exp2(v[q]) of output J's chunk (the first POLY pairs of the thread's chunk by
// the polynomial).
template <typename T, int J, int POLY>
__device__ __forceinline__ T pc_chunk_sum(const T (&v)[PC_CH], T acc) {
  T cs = acc;
  if constexpr (J * PC_CH < POLY) {
    // Unrolled by pair index so that each one's exponential is chosen at compile time.
    cs += pc_exp2_pair<T, J * PC_CH + 0, POLY>(v[0]);
    cs += pc_exp2_pair<T, J * PC_CH + 1, POLY>(v[1]);
    cs += pc_exp2_pair<T, J * PC_CH + 2, POLY>(v[2]);
    cs += pc_exp2_pair<T, J * PC_CH + 3, POLY>(v[3]);
    cs += pc_exp2_pair<T, J * PC_CH + 4, POLY>(v[4]);
    cs += pc_exp2_pair<T, J * PC_CH + 5, POLY>(v[5]);
    cs += pc_exp2_pair<T, J * PC_CH + 6, POLY>(v[6]);
    cs += pc_exp2_pair<T, J * PC_CH + 7, POLY>(v[7]);
  } else {
#pragma unroll
    for (int q = 0; q < PC_CH; ++q) cs += Num<T>::exp2(v[q]);
  }
  return cs;
}

// The chunk at column c0 of the stage: its potential terms pv (q_k in the norm form) and, for
// d ≤ 4, its coordinates qv (once into registers for all TJ outputs).
template <typename T, int DMAX>
__device__ __forceinline__ void pc_chunk_load(T (&pv)[PC_CH],
                                              T (&qv)[DMAX <= 4 ? DMAX : 1][PC_CH],
                                              const T *__restrict__ sp, const T *__restrict__ sq,
                                              int c0, int d) {
#pragma unroll
  for (int h = 0; h < PC_CH; h += 4) {
    T t4[4];
    Vec4<T>::load(t4, sp + c0 + h);
#pragma unroll
    for (int u = 0; u < 4; ++u) pv[h + u] = t4[u];
  }
  if constexpr (DMAX <= 4) {
#pragma unroll
    for (int t = 0; t < DMAX; ++t) {
      if (t < d) {
#pragma unroll
        for (int h = 0; h < PC_CH; h += 4) {
          T t4[4];
          Vec4<T>::load(t4, sq + t * PC_KT + c0 + h);
#pragma unroll
          for (int u = 0; u < 4; ++u) qv[t][h + u] = t4[u];
        }
      }
    }
  }
}

// sum[J] += Σ_q exp2(v_Jq − m_J) over the chunk, for the TJ outputs against their current
// shifts (no test).
template <typename T, int DMAX, int TJ, bool ROOT, bool NORM, int J = 0>
__device__ __forceinline__ void pc_chunk_add(T (&sum)[TJ], const T (&m)[TJ], const T (&pv)[PC_CH],
                                             const T (&qv)[DMAX <= 4 ? DMAX : 1][PC_CH],
                                             const T (&p)[TJ][DMAX], const T *__restrict__ sq,
                                             int c0, int d) {
  if constexpr (J < TJ) {
    T v[PC_CH];
    pc_chunk_args<T, DMAX, ROOT, NORM, (DMAX <= 4)>(v, pv, qv, p[J], sq, c0, d, m[J]);
    constexpr int POLY = DMAX <= 2 ? PC_POLY_LOW : PC_POLY;
    sum[J] = pc_chunk_sum<T, J, POLY>(v, sum[J]);
    pc_chunk_add<T, DMAX, TJ, ROOT, NORM, J + 1>(sum, m, pv, qv, p, sq, c0, d);
  }
}

// cm[j] = the largest exponent of own point j over columns [c0, c1) of the stage (−inf
// where none has mass), for the TJ outputs.
template <typename T, int DMAX, int TJ, bool ROOT, bool NORM>
__device__ __forceinline__ void pc_columns_max(T (&cm)[TJ], const T (&p)[TJ][DMAX],
                                               const T *__restrict__ sp,
                                               const T *__restrict__ sq, int c0, int c1,
                                               int d) {
  constexpr bool PRE = DMAX <= 4;
#pragma unroll
  for (int j = 0; j < TJ; ++j) cm[j] = Num<T>::neg_inf();
#pragma unroll 1
  for (int c = c0; c < c1; c += PC_CH) {
    T pv[PC_CH], qv[PRE ? DMAX : 1][PC_CH];
    pc_chunk_load<T, DMAX>(pv, qv, sp, sq, c, d);
#pragma unroll
    for (int j = 0; j < TJ; ++j) {
      T v[PC_CH];
      pc_chunk_args<T, DMAX, ROOT, NORM, PRE>(v, pv, qv, p[j], sq, c, d, T(0));
#pragma unroll
      for (int q = 0; q < PC_CH; ++q) cm[j] = pc_max(cm[j], v[q]);
    }
  }
}

// Fold one stage (PC_KT columns in shared memory) into the TJ (shift m, sum) pairs. Every
// chunk is summed against the current shifts with no test; one test per stage follows. A
// sum that stayed finite has full f32 (f64) accuracy whatever its size (every term and
// partial sum was a normal float), and above PC_LAZY_MAX it is renormalised to [1/2, 1) by
// a power of two, exactly (its exponent moves into m). A sum that overflowed (a term above 2^127 of its shift) is
// redone from its value before the stage, with m raised to the stage's largest exponent.
// So m never exceeds the running log-sum-exp by more than 1 and no term that counts
// underflows. The redo handles the TJ outputs together (one copy of the chunk code, so the
// fast loop keeps its registers) and keeps the sums of those that need it.
template <typename T, int DMAX, int TJ, bool ROOT, bool NORM>
__device__ __forceinline__ void pc_fold_stage(T (&m)[TJ], T (&sum)[TJ], const T (&p)[TJ][DMAX],
                                              const T *__restrict__ sp,
                                              const T *__restrict__ sq, int d) {
  constexpr bool PRE = DMAX <= 4;
  T before[TJ];
#pragma unroll
  for (int j = 0; j < TJ; ++j) before[j] = sum[j];
  // Two chunks at a time where registers allow (d ≤ 3 in f32; the wider kernels would lose
  // occupancy or spill).
  constexpr int UNROLL = (DMAX <= 3 && sizeof(T) == 4) ? 2 : 1;
#pragma unroll UNROLL
  for (int c0 = 0; c0 < PC_KT; c0 += PC_CH) {
    T pv[PC_CH], qv[PRE ? DMAX : 1][PC_CH];
    pc_chunk_load<T, DMAX>(pv, qv, sp, sq, c0, d);
    pc_chunk_add<T, DMAX, TJ, ROOT, NORM>(sum, m, pv, qv, p, sq, c0, d);
  }
  // The sums are ≥ 0, so their total is ≤ PC_LAZY_MAX only when each one is (inf and NaN
  // propagate).
  T total = sum[0];
#pragma unroll
  for (int j = 1; j < TJ; ++j) total += sum[j];
  if (!(total <= T(PC_LAZY_MAX))) {
    bool redo[TJ], any = false;
#pragma unroll
    for (int j = 0; j < TJ; ++j) {
      redo[j] = !(sum[j] <= T(PC_LAZY_MAX)) && !Num<T>::is_finite(sum[j]);
      any |= redo[j];
      if (sum[j] > T(PC_LAZY_MAX) && !redo[j]) {
        int e;
        sum[j] = frexp(sum[j], &e);
        m[j] += T(e);
      }
    }
    if (any) {
      T cm[TJ], add[TJ];
      pc_columns_max<T, DMAX, TJ, ROOT, NORM>(cm, p, sp, sq, 0, PC_KT, d);
#pragma unroll
      for (int j = 0; j < TJ; ++j) {
        add[j] = T(0);
        if (redo[j]) {
          sum[j] = before[j];
          if (cm[j] > m[j]) {
            sum[j] *= Num<T>::exp2(m[j] - cm[j]);
            m[j] = cm[j];
          }
        }
      }
#pragma unroll 1
      for (int c0 = 0; c0 < PC_KT; c0 += PC_CH) {
        T pv[PC_CH], qv[PRE ? DMAX : 1][PC_CH];
        pc_chunk_load<T, DMAX>(pv, qv, sp, sq, c0, d);
        pc_chunk_add<T, DMAX, TJ, ROOT, NORM>(add, m, pv, qv, p, sq, c0, d);
      }
#pragma unroll
      for (int j = 0; j < TJ; ++j)
        if (redo[j]) sum[j] += add[j];
    }
  }
}

template <typename T, int DMAX, int TJ, bool ROOT, bool NORM>
__device__ __forceinline__ void pc_sinkstep_body(const T *__restrict__ out_pts,
                                                 const T *__restrict__ red_pts,
                                                 const T *__restrict__ other,
                                                 const T *__restrict__ lm, T *__restrict__ out,
                                                 T *__restrict__ part_m, T *__restrict__ part_s,
                                                 int B, int K, int L, int d, T eps, T scale,
                                                 int kslice) {
  static_assert(PC_CH == 8, "pc_chunk_sum unrolls 8 pairs");
  extern __shared__ __align__(16) unsigned char pc_smem[];
  T *sq = reinterpret_cast<T *>(pc_smem);
  T *sp = sq + DMAX * PC_KT;
  const int b = blockIdx.y, z = blockIdx.z;
  const int kbeg = z * kslice, kend = min(K, kbeg + kslice);
  const T s = T(LOGOT_LOG2E) / eps;
  // Own points: scale·x (direct) or 2s·x (norm) and the row term s·|x|² (norm).
  const T own_scale = NORM ? T(2) * s : scale;
  T p[TJ][DMAX], m[TJ], sum[TJ], rn[TJ];
#pragma unroll
  for (int j = 0; j < TJ; ++j) {
    const int l = blockIdx.x * (PC_BLOCK * TJ) + j * PC_BLOCK + threadIdx.x;
    T n2 = T(0);
#pragma unroll
    for (int t = 0; t < DMAX; ++t) {
      const T x = (t < d && l < L) ? out_pts[(long long)t * L + l] : T(0);
      n2 = fma(x, x, n2);
      p[j][t] = x * own_scale;
    }
    rn[j] = NORM ? s * n2 : T(0);
    m[j] = T(PC_M0);
    sum[j] = T(0);
  }
  const T *pot = other + (long long)b * K;
  for (int k0 = kbeg; k0 < kend; k0 += PC_KT) {
    __syncthreads();
    if constexpr (NORM) {
      pc_load_stage_norm<T, DMAX>(sq, sp, red_pts, pot, K, k0, min(PC_KT, kend - k0), d, s);
    } else {
      pc_load_stage<T, DMAX>(sq, sp, red_pts, pot, K, k0, min(PC_KT, kend - k0), d, scale, s);
    }
    __syncthreads();
    if (k0 == kbeg) {
      // First stage: each shift starts at its first chunk's largest exponent (kept at PC_M0
      // when the chunk has no mass), so that the stage test rarely finds an overflow.
      T cm[TJ];
      pc_columns_max<T, DMAX, TJ, ROOT, NORM>(cm, p, sp, sq, 0, PC_CH, d);
#pragma unroll
      for (int j = 0; j < TJ; ++j)
        if (cm[j] > m[j]) m[j] = cm[j];
    }
    pc_fold_stage<T, DMAX, TJ, ROOT, NORM>(m, sum, p, sp, sq, d);
  }
#pragma unroll
  for (int j = 0; j < TJ; ++j) {
    const int l = blockIdx.x * (PC_BLOCK * TJ) + j * PC_BLOCK + threadIdx.x;
    if (l >= L) continue;
    const long long o = (long long)b * L + l;
    // No mass at all: the (max, sum) pair of an empty reduction.
    const T mj = sum[j] > T(0) ? m[j] - rn[j] : Num<T>::neg_inf();
    if (gridDim.z == 1) {
      const T lmv = lm[o];
      out[o] = lmv == Num<T>::neg_inf()
                   ? lmv
                   : eps * lmv - eps * T(LOGOT_LN2) * (mj + Num<T>::log2(sum[j]));
    } else {
      const long long total = (long long)B * L;
      part_m[z * total + o] = mj;
      part_s[z * total + o] = sum[j];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Plan-weighted row sums, one output point per thread, the whole reduction per block:
// with P_lk = exp((own_l + other_k − c_lk)/eps),
//   mass[b,l] = Σ_k P_lk and, by MODE,
//   0: res[b,l]       = Σ_k P_lk c_lk                                (transport cost)
//   1: res[b,l,t]     = Σ_k P_lk ∇_p c(p_l, q_k)_t, i.e. 2 Σ P (p − q) for |p−q|², or
//                       Σ P (p − q)/|p − q| for |p−q| (0 where p = q)    (point gradients)
//   2: res[b,l,c]     = Σ_k P_lk V[b,k,c], V row-major B×K×kv (vstride = K·kv, or 0 when
//                       shared by the batch), kv ≤ CH                        (P·V, Pᵀ·V)
//   3: res[b,l,t]     = Σ_k P_lk (alpha + (oa_l + V_k − c_lk)/eps) ∇_p c(p_l, q_k)_t, the
//                       mode-1 field reweighted by an adjoint: oa = own_adj[b,l], V the
//                       reduced side's adjoint (kv = 1, vstride = K)   (exact ⟨P,C⟩ gradients)
template <typename T, int DMAX, int CH, bool ROOT, int MODE>
__device__ __forceinline__ void pc_rows_body(const T *__restrict__ out_pts,
                                             const T *__restrict__ red_pts,
                                             const T *__restrict__ own,
                                             const T *__restrict__ other,
                                             const T *__restrict__ vals, long long vstride,
                                             T *__restrict__ mass, T *__restrict__ res, int K,
                                             int L, int d, int kv, T eps, T scale,
                                             const T *__restrict__ own_adj, T alpha) {
  extern __shared__ __align__(16) unsigned char pc_smem[];
  T *sq = reinterpret_cast<T *>(pc_smem);
  T *sp = sq + DMAX * PC_KT;
  T *sv = sp + PC_KT;  // MODE 2: PC_KT × kv values, row-major
  const int b = blockIdx.y;
  const int l = blockIdx.x * PC_BLOCK + threadIdx.x;
  const T s = T(LOGOT_LOG2E) / eps;
  const T ninf = Num<T>::neg_inf();
  const T own_l = l < L ? own[(long long)b * L + l] : ninf;
  const bool live = own_l != ninf;
  // Mode 3: the own factor (alpha + oa_l/eps)·log2(e), base 2 like the costs c·s.
  const T oa = (MODE == 3 && live) ? T(LOGOT_LOG2E) * alpha + own_adj[(long long)b * L + l] * s
                                   : T(0);
  T p[DMAX];
#pragma unroll
  for (int t = 0; t < DMAX; ++t) p[t] = (t < d && l < L) ? out_pts[(long long)t * L + l] * scale : T(0);
  T m = ninf, acc[1 + CH];
#pragma unroll
  for (int c = 0; c <= CH; ++c) acc[c] = T(0);
  const T *pot = other + (long long)b * K;
  const T *vb = vals + (long long)b * vstride;
  for (int k0 = 0; k0 < K; k0 += PC_KT) {
    const int cnt = min(PC_KT, K - k0);
    __syncthreads();
    pc_load_stage<T, DMAX>(sq, sp, red_pts, pot, K, k0, cnt, d, scale, s);
    if (MODE == 2 || MODE == 3) {
      // Mode 3: the reduced adjoint in base 2 (× s).
      const T vs = MODE == 3 ? s : T(1);
      for (int e = threadIdx.x; e < PC_KT * kv; e += blockDim.x)
        sv[e] = e < cnt * kv ? vb[(long long)k0 * kv + e] * vs : T(0);
    }
    __syncthreads();
    if (!live) continue;
    for (int c0 = 0; c0 < PC_KT; c0 += PC_CH) {
      T cost[PC_CH], v[PC_CH];
      pc_chunk_cost<T, DMAX, ROOT>(cost, p, sq, c0, d);
      T cm = ninf;
#pragma unroll
      for (int q = 0; q < PC_CH; ++q) {
        v[q] = sp[c0 + q] - cost[q];
        cm = pc_max(cm, v[q]);
      }
      if (cm > m) {
        const T r = Num<T>::exp2(m - cm);
#pragma unroll
        for (int c = 0; c <= CH; ++c) acc[c] *= r;
        m = cm;
      }
      if (m == ninf) continue;
#pragma unroll
      for (int q = 0; q < PC_CH; ++q) {
        const T e = Num<T>::exp2(v[q] - m);
        acc[0] += e;
        if (MODE == 0) {
          acc[1] = fma(e, cost[q], acc[1]);
        } else if (MODE == 1) {
          // Unit vector for |p − q|: the scaled distance is cost[q] (0 where p = q).
          const T w = ROOT ? (cost[q] > T(0) ? e / cost[q] : T(0)) : e;
#pragma unroll
          for (int t = 0; t < DMAX; ++t)
            if (t < d) acc[1 + t] = fma(w, p[t] - sq[t * PC_KT + c0 + q], acc[1 + t]);
        } else if (MODE == 2) {
#pragma unroll
          for (int c = 0; c < CH; ++c)
            if (c < kv) acc[1 + c] = fma(e, sv[(c0 + q) * kv + c], acc[1 + c]);
        } else {
          // (alpha + (oa + b − c)/eps)·log2(e) = oa' + b' − c·s; padding has e = 0.
          const T fac = e * (oa + sv[c0 + q] - cost[q]);
          const T w = ROOT ? (cost[q] > T(0) ? fac / cost[q] : T(0)) : fac;
#pragma unroll
          for (int t = 0; t < DMAX; ++t)
            if (t < d) acc[1 + t] = fma(w, p[t] - sq[t * PC_KT + c0 + q], acc[1 + t]);
        }
      }
    }
  }
  if (l >= L) return;
  const long long o = (long long)b * L + l;
  const T r = (live && m != ninf) ? Num<T>::exp2(own_l * s + m) : T(0);
  mass[o] = r * acc[0];
  if (MODE == 0) {
    res[o] = r * acc[1] / s;  // the distances were c·s
  } else if (MODE == 1 || MODE == 3) {
    // Scaled differences are scale·(p − q): 2(p − q) = (2/scale)·(p' − q'); unit vectors
    // are scale-free. Mode 3's factors were in base 2: × ln 2.
    const T f = (ROOT ? T(1) : T(2) / scale) * (MODE == 3 ? T(LOGOT_LN2) : T(1));
#pragma unroll
    for (int t = 0; t < DMAX; ++t)
      if (t < d) res[o * d + t] = f * r * acc[1 + t];
  } else {
#pragma unroll
    for (int c = 0; c < CH; ++c)
      if (c < kv) res[o * kv + c] = r * acc[1 + c];
  }
}

// Per problem: out[b] = Σ_l x[b,l] in double (one block per problem).
template <typename T>
__device__ __forceinline__ void pc_reduce(const T *__restrict__ x, double *__restrict__ out,
                                          int L) {
  __shared__ double scratch[32];
  const long long base = (long long)blockIdx.x * L;
  double acc = 0.0;
  for (int l = threadIdx.x; l < L; l += blockDim.x) acc += (double)x[base + l];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// P[b,i,j] = exp((f_i + g_j − c(x_i, y_j))/eps) from the raw structure-of-arrays clouds
// (problem b's pair at x + pair·b·n·d, y + pair·b·m·d: `pair` = 1 for batched clouds).
template <typename T>
__device__ __forceinline__ void pc_plan(const T *__restrict__ x, const T *__restrict__ y,
                                        const T *__restrict__ f, const T *__restrict__ g,
                                        T *__restrict__ P, int B, int n, int m, int d, int root,
                                        T eps, int pair) {
  const long long per = (long long)n * m, total = per * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / per, r = e % per;
    const int i = (int)(r / m), j = (int)(r % m);
    const T *xb = x + pair * b * n * d, *yb = y + pair * b * m * d;
    T c = T(0);
    for (int t = 0; t < d; ++t) {
      const T w = xb[(long long)t * n + i] - yb[(long long)t * m + j];
      c = fma(w, w, c);
    }
    if (root) c = sqrt(c);
    P[e] = Num<T>::exp((f[b * n + i] + g[b * m + j] - c) / eps);
  }
}
