// Point-cloud costs computed on the fly (never stored): the half-step, the plan-weighted
// row sums (transport cost, point gradients, P·V) and small plans. common.cuh is prepended
// by the host before NVRTC compiles this file.
//
// Layouts. Clouds are structure-of-arrays: coordinate t of point i at pts[t·len + i].
// A half-step has an output cloud (L points, one potential each) and a reduced cloud
// (K points, summed over): for the g-update the outputs are Y and the reduction runs over
// X, for the f-update the reverse. Potentials are B×K (`other`) and B×L (`out`, `lm`).
//
// Units. As in sinkstep.cu, values are base 2: with s = log2(e)/eps, coordinates are
// scaled on load by `scale` (sqrt(s) for |x−y|², s for |x−y|) so that the distance formed
// in registers is c·s directly (the exact difference form, d subtractions and d FMAs), and
// potentials by s (the half-step's norm form is described at pc_sinkstep_body). A thread
// keeps TJ outputs; the block streams the reduced cloud through shared memory in stages of
// PC_KT points, and each output folds chunks of PC_CH arguments into a running (shift,
// sum) pair (the half-step raises its shift lazily, the row sums at each larger chunk
// maximum). -inf potentials (zero-mass bins) and the padding of the last stage give
// exp2(-inf) = 0 and never NaN. Both clouds are centred on their common mean (pc_centre_soa).

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
// Off by default: the norm-form d = 3 stage loop is 409 instructions and 64 MUFU.EX2 per
// 64 pairs (counted in the sm_90 SASS): MUFU-bound in theory (512 cycles of the 4-lane unit
// against 409 issues per scheduler), and each polynomial costs about 10 issues more than
// one MUFU. The GPU's measurement (LOGOT_CUDA_DEFINES="PC_POLY=N") decides. Overridable as
// an NVRTC definition.
#ifndef PC_POLY
#define PC_POLY 0 /* polynomial exponentials per thread and chunk, of TJ·PC_CH (f32) */
#endif
// The f32 kernels at d = 1 and 2 have issue slots to spare (about 4 and 5 a pair in the norm
// form): PC_POLY_LOW of each thread's chunk by the polynomial. H100, otC10 (norm form,
// session 16): d = 1 21.72–21.80 ms against 22.77–22.84 without, d = 2 23.65–23.74 against
// 24.39–24.43; at d = 8 and 16 the same count was slower (92.9 against 81.3 ms, 165.3–165.7
// against 148.8–148.9), so the other kernels keep PC_POLY.
#ifndef PC_POLY_LOW
#define PC_POLY_LOW 8
#endif

// 2^x by a polynomial on the FMA pipe (FlashAttention-3's trick for the exponential unit's
// throughput): x clamped to [−127, 128], x = j + f with j = rint(x) (the 1.5·2^23 rounding
// constant leaves j in the low mantissa bits), 2^f on [−1/2, 1/2] by a polynomial of degree
// DEG with p(0) = 1 (Lawson minimax of the relative error), and j added to the exponent
// field. Relative error, measured in an f32 emulation over 2·10^7 arguments in [−126, 64]:
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

// ---------------------------------------------------------------------------------------
// Any dimension (the host uses these for d > PC_DMAX, and the row sums also for more than
// PC_DMAX value channels). The clouds were centred (pc_centre_soa: a common mean of x and y
// subtracted, which leaves every cost unchanged) and their squared norms precomputed
// (pc_sqnorms), so c = max(|p|² + |q|² − 2·p·q, 0) (its square root for |p − q|).
//
// Cross term. A block of 16×16 threads owns a tile of PC_DN_TL output points and streams
// tiles of the reduced cloud; for each it accumulates the dot products over d in chunks of
// PC_DN_DC coordinates staged in shared memory (both clouds are structure-of-arrays, so a
// chunk is PC_DN_DC coalesced rows), each thread keeping a TM×TN register tile of exact
// FP32/FP64 FMA products (pc_dot_tile: the place where a tensor-core strategy, TF32 or
// split TF32 MMA fragments, would replace the FMA loop). Threads (ty, tx) own outputs
// ty·TM .. ty·TM+TM−1 and reduced points tx·TN .. tx·TN+TN−1 of the tiles.
#define PC_DN_TL 64  /* output points per block */
#define PC_DN_TK 64  /* reduced points per stage of the half-step */
#define PC_DN_DC 16  /* coordinates per shared-memory chunk of the cross term */
#define PC_DN_RTK 32 /* reduced points per stage of the row sums */
#define PC_DN_CC 64  /* value channels per block of the row sums */

// N consecutive shared values (16-byte aligned when N is a multiple of 4).
template <typename T, int N>
__device__ __forceinline__ void pc_lds(T (&v)[N], const T *__restrict__ p) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int h = 0; h < N; h += 4) {
      T t4[4];
      Vec4<T>::load(t4, p + h);
#pragma unroll
      for (int u = 0; u < 4; ++u) v[h + u] = t4[u];
    }
  } else {
#pragma unroll
    for (int q = 0; q < N; ++q) v[q] = p[q];
  }
}

// acc[r][c] = Σ_t p_t·q_t (DIFF: Σ_t (p_t − q_t)², the exact form for small d) between the
// output points l0 + ty·TM + r and the reduced points k0 + tx·TN + c (c < cnt counted);
// points past the ends read as 0. As holds PC_DN_DC × 16·TM, Bs PC_DN_DC × 16·TN values.
// Begins with a barrier, so the caller may stage other shared data before calling.
template <typename T, int TM, int TN, bool DIFF>
__device__ __forceinline__ void pc_dot_tile(T (&acc)[TM][TN], const T *__restrict__ out_pts,
                                            int L, int l0, const T *__restrict__ red_pts, int K,
                                            int k0, int cnt, int d, T *__restrict__ As,
                                            T *__restrict__ Bs) {
  constexpr int TL = 16 * TM, TK = 16 * TN;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
#pragma unroll
  for (int r = 0; r < TM; ++r)
#pragma unroll
    for (int c = 0; c < TN; ++c) acc[r][c] = T(0);
  for (int t0 = 0; t0 < d; t0 += PC_DN_DC) {
    __syncthreads();
    for (int e = threadIdx.x; e < PC_DN_DC * TL; e += 256) {
      const int t = t0 + e / TL, i = l0 + e % TL;
      As[e] = (t < d && i < L) ? out_pts[(long long)t * L + i] : T(0);
    }
    for (int e = threadIdx.x; e < PC_DN_DC * TK; e += 256) {
      const int t = t0 + e / TK, j = e % TK;
      Bs[e] = (t < d && j < cnt) ? red_pts[(long long)t * K + k0 + j] : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < PC_DN_DC; ++t) {
      T a[TM], q[TN];
      pc_lds<T, TM>(a, As + t * TL + ty * TM);
      pc_lds<T, TN>(q, Bs + t * TK + tx * TN);
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) {
          if (DIFF) {
            const T w = a[r] - q[c];
            acc[r][c] = fma(w, w, acc[r][c]);
          } else {
            acc[r][c] = fma(a[r], q[c], acc[r][c]);
          }
        }
    }
  }
}

// The cost from a dot product (or, DIFF, the squared distance itself) and the two norms.
template <typename T, bool ROOT, bool DIFF>
__device__ __forceinline__ T pc_dn_cost(T dot, T np, T nq) {
  T c = DIFF ? dot : pc_max(np + nq - T(2) * dot, T(0));
  return ROOT ? sqrt(c) : c;
}

// |p|² per point of `B` structure-of-arrays clouds of `len` points each (cloud b at
// pts + b·len·d): out[b·len + i].
template <typename T>
__device__ __forceinline__ void pc_sqnorms(const T *__restrict__ pts, T *__restrict__ out,
                                           int len, int d, int B) {
  const long long total = (long long)len * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / len, i = e % len;
    const T *p = pts + b * len * d;
    T acc = T(0);
    for (int t = 0; t < d; ++t) {
      const T v = p[(long long)t * len + i];
      acc = fma(v, v, acc);
    }
    out[e] = acc;
  }
}

// Half-step at any d, same outputs and split-reduction partials as pc_sinkstep_body:
// thread (ty, tx) folds its TN reduced points of each stage into a running (max, sum) per
// output, and the 16 threads of a row merge their pairs at the end.
template <typename T, bool ROOT>
__device__ __forceinline__ void pc_sinkstep_dn_body(
    const T *__restrict__ out_pts, const T *__restrict__ red_pts, const T *__restrict__ out_nrm,
    const T *__restrict__ red_nrm, const T *__restrict__ other, const T *__restrict__ lm,
    T *__restrict__ out, T *__restrict__ part_m, T *__restrict__ part_s, int B, int K, int L,
    int d, T eps, int kslice) {
  constexpr int TM = PC_DN_TL / 16, TN = PC_DN_TK / 16;
  extern __shared__ __align__(16) unsigned char pc_smem[];
  T *As = reinterpret_cast<T *>(pc_smem);
  T *Bs = As + PC_DN_DC * PC_DN_TL;
  T *sp = Bs + PC_DN_DC * PC_DN_TK;
  T *sn = sp + PC_DN_TK;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int b = blockIdx.y, z = blockIdx.z;
  const int kbeg = z * kslice, kend = min(K, kbeg + kslice);
  const int l0 = blockIdx.x * PC_DN_TL;
  const T s = T(LOGOT_LOG2E) / eps;
  const T ninf = Num<T>::neg_inf();
  T np[TM], m[TM], sum[TM];
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int l = l0 + ty * TM + r;
    np[r] = l < L ? out_nrm[l] : T(0);
    m[r] = ninf;
    sum[r] = T(0);
  }
  const T *pot = other + (long long)b * K;
  for (int k0 = kbeg; k0 < kend; k0 += PC_DN_TK) {
    const int cnt = min(PC_DN_TK, kend - k0);
    __syncthreads();
    for (int e = threadIdx.x; e < PC_DN_TK; e += 256) {
      sp[e] = e < cnt ? pot[k0 + e] * s : ninf;
      sn[e] = e < cnt ? red_nrm[k0 + e] : T(0);
    }
    T dot[TM][TN];
    pc_dot_tile<T, TM, TN, false>(dot, out_pts, L, l0, red_pts, K, k0, cnt, d, As, Bs);
    T pv[TN], nq[TN];
    pc_lds<T, TN>(pv, sp + tx * TN);
    pc_lds<T, TN>(nq, sn + tx * TN);
#pragma unroll
    for (int r = 0; r < TM; ++r) {
      T v[TN];
      T cm = ninf;
#pragma unroll
      for (int c = 0; c < TN; ++c) {
        v[c] = pv[c] - s * pc_dn_cost<T, ROOT, false>(dot[r][c], np[r], nq[c]);
        cm = pc_max(cm, v[c]);
      }
      if (cm > m[r]) {
        sum[r] *= Num<T>::exp2(m[r] - cm);  // m = -inf: sum is 0 and stays 0
        m[r] = cm;
      }
      if (m[r] != ninf) {
#pragma unroll
        for (int c = 0; c < TN; ++c) sum[r] += Num<T>::exp2(v[c] - m[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < TM; ++r) lse_merge_lanes(m[r], sum[r], 16);
  if (tx != 0) return;
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int l = l0 + ty * TM + r;
    if (l >= L) continue;
    const long long o = (long long)b * L + l;
    if (gridDim.z == 1) {
      const T lmv = lm[o];
      out[o] = lmv == ninf ? lmv
                           : eps * lmv - eps * T(LOGOT_LN2) * (m[r] + Num<T>::log2(sum[r]));
    } else {
      const long long total = (long long)B * L;
      part_m[z * total + o] = m[r];
      part_s[z * total + o] = sum[r];
    }
  }
}

// Plan-weighted row sums at any d (or any number of channels), the same outputs as
// pc_rows_body, in two passes: the host first runs a half-step with zero log-marginals,
// h[b,l] = −eps·LSE_k((other[b,k] − c_lk)/eps), so that the weights
// w_lk = exp((other_k − c_lk + h_l)/eps) of each row sum to one and P_lk = exp((own_l −
// h_l)/eps)·w_lk. This kernel then needs no running maximum: each stage's weights go to
// shared memory and a block multiplies them by a tile of PC_DN_CC value channels
// (gridDim.z tiles of channels; the cost is recomputed per tile). A row with no mass
// (own = −inf, or h = +inf when every other potential is −inf) gives zeros.
template <typename T, bool ROOT, int MODE, bool DIFF>
__device__ __forceinline__ void pc_rows_dn_body(
    const T *__restrict__ out_pts, const T *__restrict__ red_pts, const T *__restrict__ out_nrm,
    const T *__restrict__ red_nrm, const T *__restrict__ own, const T *__restrict__ other,
    const T *__restrict__ h, const T *__restrict__ vals, long long vstride, T *__restrict__ mass,
    T *__restrict__ res, int K, int L, int d, int kv, T eps) {
  constexpr int TM = PC_DN_TL / 16, TN = PC_DN_RTK / 16, CQ = PC_DN_CC / 16;
  constexpr int PS = PC_DN_RTK + 1, VS = PC_DN_CC + 1;  // padded row strides
  constexpr int DOT = PC_DN_DC * (PC_DN_TL + PC_DN_RTK), VAL = PC_DN_RTK * VS;
  extern __shared__ __align__(16) unsigned char pc_smem[];
  T *As = reinterpret_cast<T *>(pc_smem);
  T *Bs = As + PC_DN_DC * PC_DN_TL;
  T *Vs = As;  // the values reuse the cross-term chunks
  T *Ps = As + (DOT > VAL ? DOT : VAL);
  T *sp = Ps + PC_DN_TL * PS;
  T *sn = sp + PC_DN_RTK;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int b = blockIdx.y, c0 = blockIdx.z * PC_DN_CC;
  const int l0 = blockIdx.x * PC_DN_TL;
  const int channels = MODE == 1 ? d : kv;
  const T s = T(LOGOT_LOG2E) / eps;
  const T ninf = Num<T>::neg_inf();
  T np[TM], hs[TM], rf[TM], wsum[TM], wc[TM], acc[TM][CQ], pq[MODE == 1 ? TM : 1][CQ];
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int l = l0 + ty * TM + r;
    const long long o = (long long)b * L + l;
    np[r] = (!DIFF && l < L) ? out_nrm[l] : T(0);
    const T hv = l < L ? h[o] * s : T(0);
    const T ov = l < L ? own[o] : ninf;
    const bool live = ov != ninf && Num<T>::is_finite(hv);
    hs[r] = live ? hv : ninf;  // −inf: every weight of the row is 0
    rf[r] = live ? Num<T>::exp2(ov * s - hv) : T(0);
    wsum[r] = T(0);
    wc[r] = T(0);
#pragma unroll
    for (int q = 0; q < CQ; ++q) {
      acc[r][q] = T(0);
      if (MODE == 1) {
        const int ch = c0 + tx + 16 * q;
        pq[r][q] = (l < L && ch < d) ? out_pts[(long long)ch * L + l] : T(0);
      }
    }
  }
  const T *pot = other + (long long)b * K;
  const T *vb = vals + (long long)b * vstride;
  for (int k0 = 0; k0 < K; k0 += PC_DN_RTK) {
    const int cnt = min(PC_DN_RTK, K - k0);
    __syncthreads();
    for (int e = threadIdx.x; e < PC_DN_RTK; e += 256) {
      sp[e] = e < cnt ? pot[k0 + e] * s : ninf;
      sn[e] = (!DIFF && e < cnt) ? red_nrm[k0 + e] : T(0);
    }
    T dot[TM][TN];
    pc_dot_tile<T, TM, TN, DIFF>(dot, out_pts, L, l0, red_pts, K, k0, cnt, d, As, Bs);
#pragma unroll
    for (int r = 0; r < TM; ++r) {
#pragma unroll
      for (int c = 0; c < TN; ++c) {
        const int k = tx * TN + c;
        const T cost = pc_dn_cost<T, ROOT, DIFF>(dot[r][c], np[r], sn[k]);
        // sp = −inf (no mass, padding) or hs = −inf (dead row): exp2(−inf) = 0.
        T w = Num<T>::exp2(sp[k] - s * cost + hs[r]);
        wsum[r] += w;
        if (MODE == 0) wc[r] = fma(w, cost, wc[r]);
        if (MODE == 1 && ROOT) w = cost > T(0) ? w / cost : T(0);  // unit vectors
        if (MODE != 0) Ps[(ty * TM + r) * PS + k] = w;
      }
    }
    if (MODE != 0) {
      __syncthreads();  // every thread is past the cross term: Vs may overwrite As, Bs
      if (MODE == 1) {
        for (int e = threadIdx.x; e < PC_DN_RTK * PC_DN_CC; e += 256) {
          const int cc = e / PC_DN_RTK, k = e % PC_DN_RTK;
          Vs[k * VS + cc] =
              (k < cnt && c0 + cc < d) ? red_pts[(long long)(c0 + cc) * K + k0 + k] : T(0);
        }
      } else {
        for (int e = threadIdx.x; e < PC_DN_RTK * PC_DN_CC; e += 256) {
          const int k = e / PC_DN_CC, cc = e % PC_DN_CC;
          Vs[k * VS + cc] = (k < cnt && c0 + cc < kv) ? vb[(long long)(k0 + k) * kv + c0 + cc]
                                                      : T(0);
        }
      }
      __syncthreads();
#pragma unroll 4
      for (int k = 0; k < PC_DN_RTK; ++k) {
        T pw[TM], vv[CQ];
#pragma unroll
        for (int r = 0; r < TM; ++r) pw[r] = Ps[(ty * TM + r) * PS + k];
#pragma unroll
        for (int q = 0; q < CQ; ++q) vv[q] = Vs[k * VS + tx + 16 * q];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
          for (int q = 0; q < CQ; ++q) {
            if (MODE == 1) {
              acc[r][q] = fma(pw[r], pq[r][q] - vv[q], acc[r][q]);
            } else {
              acc[r][q] = fma(pw[r], vv[q], acc[r][q]);
            }
          }
      }
    }
  }
  // The mass (and, MODE 0, the cost) of each row: a sum over the 16 threads of the row.
#pragma unroll
  for (int r = 0; r < TM; ++r) {
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) {
      wsum[r] += __shfl_xor_sync(0xffffffffu, wsum[r], off);
      if (MODE == 0) wc[r] += __shfl_xor_sync(0xffffffffu, wc[r], off);
    }
  }
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int l = l0 + ty * TM + r;
    if (l >= L) continue;
    const long long o = (long long)b * L + l;
    if (blockIdx.z == 0 && tx == 0) {
      mass[o] = rf[r] * wsum[r];
      if (MODE == 0) res[o] = rf[r] * wc[r];
    }
    if (MODE != 0) {
      // 2(p − q) for |p − q|², unit vectors for |p − q|.
      const T f = MODE == 1 && !ROOT ? T(2) * rf[r] : rf[r];
#pragma unroll
      for (int q = 0; q < CQ; ++q) {
        const int ch = c0 + tx + 16 * q;
        if (ch < channels) res[o * channels + ch] = f * acc[r][q];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Batched clouds: with `pair` = 1, problem b = blockIdx.y has its own pair of clouds, stored
// one after the other (`len` points of `width` values each: coordinates, norms or TF32
// operands); with `pair` = 0 every problem reads the shared pair. Every entry point whose
// grid has the problems along y moves its cloud pointers to its problem's pair with this.
// (The select, rather than pair·offset, lets ptxas keep the registers and occupancy of the
// shared-pair kernels: measured with `cu-check -v`, no kernel spills, the small-d ones are
// unchanged, the any-d and tensor-core ones take ≤ 18 more registers at the same blocks/SM.)
#define PC_PAIR(P, LEN, WIDTH) P += pair ? (long long)blockIdx.y * (long long)(LEN) * (WIDTH) : 0LL

// ---------------------------------------------------------------------------------------
// Entry points: D1 to D4 (exactly that many coordinates) and D16 (at most 16); `root`
// picks |x−y| over |x−y|² (both bodies are compiled, the branch is uniform); `pair` as
// PC_PAIR.
#define PC_STEP_ARGS(T)                                                                 \
  const T *out_pts, const T *red_pts, const T *other, const T *lm, T *out, T *part_m,   \
      T *part_s, int B, int K, int L, int d, T eps, T scale, int kslice, int root, int pair
#define PC_STEP_PASS out_pts, red_pts, other, lm, out, part_m, part_s, B, K, L, d, eps, scale, kslice
#define PC_ROWS_ARGS(T)                                                                 \
  const T *out_pts, const T *red_pts, const T *own, const T *other, const T *vals,      \
      long long vstride, T *mass, T *res, int K, int L, int d, int kv, T eps, T scale,  \
      int root, int mode, const T *own_adj, T alpha, int pair

#define PC_STEP(T, SUF, NAME, DMAX, DARG, TJ, MINB)                                     \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK, MINB)                               \
      NAME##_##SUF(PC_STEP_ARGS(T)) {                                                        \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    if (root)                                                                                \
      pc_sinkstep_body<T, DMAX, TJ, true, false>(out_pts, red_pts, other, lm, out, part_m,   \
                                                 part_s, B, K, L, dd, eps, scale, kslice);   \
    else                                                                                     \
      pc_sinkstep_body<T, DMAX, TJ, false, false>(out_pts, red_pts, other, lm, out, part_m,  \
                                                  part_s, B, K, L, dd, eps, scale, kslice);  \
  }

// The norm form (|x−y|² of centred clouds, f32): `scale` and `root` are not read.
// MINB: blocks per SM the kernel is compiled for (registers ≤ 65536 / (PC_BLOCK · MINB)).
// PC_NF_MINB (d = 3): 4 blocks (at most 64 registers; 80 at the default, 3 blocks resident)
// took otC10 from 27.90–28.02 to 27.19–27.24 ms in one H100 call (the same f), 5 blocks
// 27.47–27.58 (ncu at 3 blocks: 4.3 warps per scheduler, 1.7 eligible, issue slots 65 %
// busy: latency-bound below the MUFU limit). With the stage-tested fold, 3 blocks took
// 28.7 ms against 26.7 ms at 4. The d = 4 and d ≤ 16 ones were not measured.
#ifndef PC_NF_MINB
#define PC_NF_MINB 4
#endif
#define PC_STEP_NORM(NAME, DMAX, DARG, TJ, MINB)                                             \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK, MINB)                               \
      NAME##_f32(PC_STEP_ARGS(float)) {                                                       \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    pc_sinkstep_body<float, DMAX, TJ, false, true>(out_pts, red_pts, other, lm, out, part_m, \
                                                   part_s, B, K, L, dd, eps, scale, kslice); \
  }

#define PC_ROWS_BODY(T, DMAX, CH, ROOT, MODE)                                                \
  pc_rows_body<T, DMAX, CH, ROOT, MODE>(out_pts, red_pts, own, other, vals, vstride, mass,   \
                                        res, K, L, dd, kv, eps, scale, own_adj, alpha)

#define PC_ROWS(T, SUF, NAME, DMAX, DARG, CH)                                                \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK) NAME##_##SUF(PC_ROWS_ARGS(T)) {     \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    if (mode == 0) {                                                                         \
      if (root)                                                                              \
        PC_ROWS_BODY(T, DMAX, 1, true, 0);                                                   \
      else                                                                                   \
        PC_ROWS_BODY(T, DMAX, 1, false, 0);                                                  \
    } else if (mode == 1) {                                                                  \
      if (root)                                                                              \
        PC_ROWS_BODY(T, DMAX, DMAX, true, 1);                                                \
      else                                                                                   \
        PC_ROWS_BODY(T, DMAX, DMAX, false, 1);                                               \
    } else {                                                                                 \
      if (root)                                                                              \
        PC_ROWS_BODY(T, DMAX, CH, true, 2);                                                  \
      else                                                                                   \
        PC_ROWS_BODY(T, DMAX, CH, false, 2);                                                 \
    }                                                                                        \
  }

// Mode 3 (the adjoint-weighted field) in entry points of its own, so that the other modes
// keep their register budget.
#define PC_ADJ(T, SUF, NAME, DMAX, DARG)                                                     \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK) NAME##_##SUF(PC_ROWS_ARGS(T)) {     \
    const int dd = DARG;                                                                     \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    if (root)                                                                                \
      PC_ROWS_BODY(T, DMAX, DMAX, true, 3);                                                  \
    else                                                                                     \
      PC_ROWS_BODY(T, DMAX, DMAX, false, 3);                                                 \
  }

// MB3, MB4, MB16: blocks per SM the d ≤ 3, d = 4 and d ≤ 16 half-steps are compiled for.
#define PC_ALL(T, SUF, TJ, MB3, MB4, MB16)                                              \
  PC_STEP(T, SUF, pc_sinkstep_d1, 1, 1, TJ, MB3)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d2, 2, 2, TJ, MB3)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d3, 3, 3, TJ, MB3)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d4, 4, 4, TJ, MB4)                                        \
  PC_STEP(T, SUF, pc_sinkstep_d16, PC_DMAX, d, 2, MB16)                                 \
  PC_ROWS(T, SUF, pc_rows_d4, 4, d, PC_DMAX)                                            \
  PC_ROWS(T, SUF, pc_rows_d16, PC_DMAX, d, PC_DMAX)                                     \
  PC_ADJ(T, SUF, pc_adjoint_d4, 4, d)                                                   \
  PC_ADJ(T, SUF, pc_adjoint_d16, PC_DMAX, d)                                            \
  extern "C" __global__ void pc_reduce_##SUF(const T *x, double *out, int L) {               \
    pc_reduce<T>(x, out, L);                                                            \
  }                                                                                          \
  extern "C" __global__ void pc_plan_##SUF(const T *x, const T *y, const T *f, const T *g,   \
                                           T *P, int B, int n, int m, int d, int root,  \
                                           T eps, int pair) {                           \
    pc_plan<T>(x, y, f, g, P, B, n, m, d, root, eps, pair);                             \
  }
// Any dimension: the half-step, the row sums (`diff` picks the exact difference form, for
// many channels at d ≤ PC_DMAX on uncentred clouds) and the squared norms.
#define PC_DN_PASS out_pts, red_pts, out_nrm, red_nrm, own, other, h, vals, vstride, mass, res, K, L, d, kv, eps
#define PC_DN_ROWS(T, ROOT)                                                                  \
  if (mode == 0)                                                                             \
    pc_rows_dn_body<T, ROOT, 0, false>(PC_DN_PASS);                                          \
  else if (mode == 1)                                                                        \
    pc_rows_dn_body<T, ROOT, 1, false>(PC_DN_PASS);                                          \
  else if (diff)                                                                             \
    pc_rows_dn_body<T, ROOT, 2, true>(PC_DN_PASS);                                           \
  else                                                                                       \
    pc_rows_dn_body<T, ROOT, 2, false>(PC_DN_PASS);
#define PC_DN(T, SUF)                                                                        \
  extern "C" __global__ void __launch_bounds__(256, 1)                                       \
      pc_sinkstep_dn_##SUF(const T *out_pts, const T *red_pts, const T *out_nrm,             \
                           const T *red_nrm, const T *other, const T *lm, T *out, T *part_m, \
                           T *part_s, int B, int K, int L, int d, T eps, int kslice,         \
                           int root, int pair) {                                             \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    PC_PAIR(out_nrm, L, 1);                                                                  \
    PC_PAIR(red_nrm, K, 1);                                                                  \
    if (root)                                                                                \
      pc_sinkstep_dn_body<T, true>(out_pts, red_pts, out_nrm, red_nrm, other, lm, out,       \
                                   part_m, part_s, B, K, L, d, eps, kslice);                 \
    else                                                                                     \
      pc_sinkstep_dn_body<T, false>(out_pts, red_pts, out_nrm, red_nrm, other, lm, out,      \
                                    part_m, part_s, B, K, L, d, eps, kslice);                \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(256, 1)                                       \
      pc_rows_dn_##SUF(const T *out_pts, const T *red_pts, const T *out_nrm,                 \
                       const T *red_nrm, const T *own, const T *other, const T *h,           \
                       const T *vals, long long vstride, T *mass, T *res, int K, int L,      \
                       int d, int kv, T eps, int root, int mode, int diff, int pair) {       \
    PC_PAIR(out_pts, L, d);                                                                  \
    PC_PAIR(red_pts, K, d);                                                                  \
    PC_PAIR(out_nrm, L, diff ? d : 1);                                                       \
    PC_PAIR(red_nrm, K, diff ? d : 1);                                                       \
    if (root) {                                                                              \
      PC_DN_ROWS(T, true)                                                                    \
    } else {                                                                                 \
      PC_DN_ROWS(T, false)                                                                   \
    }                                                                                        \
  }                                                                                          \
  extern "C" __global__ void pc_sqnorms_##SUF(const T *pts, T *out, int len, int d, int B) { \
    pc_sqnorms<T>(pts, out, len, d, B);                                                      \
  }
// Outputs per thread for d ≤ 4: 4 in f32 (79 registers for d = 3), 2 in f64 (the norm-form
// entry points below take their own).
PC_ALL(float, f32, 4, 3, 2, 3)
PC_ALL(double, f64, 2, 1, 1, 1)
// pc_exp2_poly of degree `deg` (4, else 5) on n arguments (for the tests of the polynomial).
extern "C" __global__ void pc_exp2_poly_f32(const float *x, float *y, int n, int deg) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = deg == 4 ? pc_exp2_poly<4>(x[i]) : pc_exp2_poly<5>(x[i]);
}
// d ≤ 2: 8 outputs per thread at 2 blocks per SM (128 registers) halve the shared loads per
// pair: otC10 at d = 1 took 22.98 ms against 23.77 ms with 4 outputs at 4 blocks, at d = 2
// 24.69 against 25.12 ms; at d = 3 it was slower (26.93 against 26.78 ms; H100, one call).
PC_STEP_NORM(pc_sinkstep_nf_d1, 1, 1, 8, 2)
PC_STEP_NORM(pc_sinkstep_nf_d2, 2, 2, 8, 2)
PC_STEP_NORM(pc_sinkstep_nf_d3, 3, 3, 4, PC_NF_MINB)
PC_STEP_NORM(pc_sinkstep_nf_d4, 4, 4, 4, 1)
PC_STEP_NORM(pc_sinkstep_nf_d16, PC_DMAX, d, 2, 1)
PC_DN(float, f32)
PC_DN(double, f64)

// ---------------------------------------------------------------------------------------
// Preparing clouds on the device (from row-major points, the caller's memory or an
// upload): per-coordinate numbers, the centring with the structure-of-arrays transpose, and
// the largest squared norms, so that a cloud from host arrays and one from device buffers
// go through the same steps.

// Per pair b and coordinate t of B row-major pairs x (B×n×d), y (B×m×d), over the n + m
// points (one block per (t, b), blockIdx.x = t, blockIdx.y = b), in f64:
// out[4·(b·d + t)..] = (Σ, min, max, #non-finite), mean[b·d + t] = Σ/(n + m); NaN takes
// no part in min/max.
template <typename T>
__device__ __forceinline__ void pc_coord_stats(const T *__restrict__ x, const T *__restrict__ y,
                                               double *__restrict__ out,
                                               double *__restrict__ mean, int n, int m, int d) {
  __shared__ double scratch[32];
  __shared__ double lo_s[32], hi_s[32];
  const double inf = -(double)Num<double>::neg_inf();
  const int t = blockIdx.x;
  const long long b = blockIdx.y;
  const T *xb = x + b * n * (long long)d, *yb = y + b * m * (long long)d;
  double sum = 0.0, lo = inf, hi = -inf, bad = 0.0;
  for (long long k = threadIdx.x; k < (long long)n + m; k += blockDim.x) {
    const double v = (double)(k < n ? xb[k * d + t] : yb[(k - n) * d + t]);
    sum += v;
    lo = fmin(lo, v);
    hi = fmax(hi, v);
    bad += isfinite(v) ? 0.0 : 1.0;
  }
  block_min_max(lo, hi, lo_s, hi_s);
  sum = block_sum(sum, scratch);
  __syncthreads();
  bad = block_sum(bad, scratch);
  if (threadIdx.x == 0) {
    double *o = out + 4 * (b * d + t);
    o[0] = sum;
    o[1] = lo;
    o[2] = hi;
    o[3] = bad;
    mean[b * d + t] = sum / (double)((long long)n + m);
  }
}

// B row-major clouds of len points (pts, B×len×d) less the per-pair means (mean[b·d + t],
// f64), written structure-of-arrays: out[b·len·d + t·len + i] = T(pts[b,i,t] − mean[b,t])
// (the difference in f64, rounded once).
template <typename T>
__device__ __forceinline__ void pc_centre_soa(const T *__restrict__ pts,
                                              const double *__restrict__ mean,
                                              T *__restrict__ out, int len, int d, int B) {
  const long long per = (long long)len * d, total = per * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / per, r = e % per, t = r / len, i = r % len;
    out[e] = (T)__dsub_rn((double)pts[b * per + i * d + t], mean[b * d + t]);
  }
}

// The largest |p|² (f64, summed over t in order, unfused as on the host) and the largest
// |p_t| (the scale of the F16 tensor-core operands) of the len points of structure-of-arrays
// cloud blockIdx.x of `pts` (B clouds one after the other): out[0] and out[1].
template <typename T>
__device__ __forceinline__ void pc_cloud_radii(const T *__restrict__ pts, double *__restrict__ out,
                                               int len, int d) {
  __shared__ double hi_s[2][32];
  const T *p = pts + (long long)blockIdx.x * len * d;
  double sq = 0.0, ab = 0.0;
  for (int i = threadIdx.x; i < len; i += blockDim.x) {
    double acc = 0.0, big = 0.0;
    for (int t = 0; t < d; ++t) {
      const double v = (double)p[(long long)t * len + i];
      acc = __dadd_rn(acc, __dmul_rn(v, v));
      big = fmax(big, fabs(v));
    }
    sq = fmax(sq, acc);
    ab = fmax(ab, big);
  }
  for (int off = 16; off > 0; off >>= 1) {
    sq = fmax(sq, __shfl_xor_sync(0xffffffffu, sq, off));
    ab = fmax(ab, __shfl_xor_sync(0xffffffffu, ab, off));
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  if (lane == 0) hi_s[0][warp] = sq, hi_s[1][warp] = ab;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < nw; ++w) sq = fmax(sq, hi_s[0][w]), ab = fmax(ab, hi_s[1][w]);
    out[0] = sq;
    out[1] = ab;
  }
}

#define PC_PREP(T, SUF)                                                                      \
  extern "C" __global__ void pc_coord_stats_##SUF(const T *x, const T *y, double *out,       \
                                                  double *mean, int n, int m, int d) {       \
    pc_coord_stats<T>(x, y, out, mean, n, m, d);                                             \
  }                                                                                          \
  extern "C" __global__ void pc_centre_soa_##SUF(const T *pts, const double *mean, T *out,   \
                                                 int len, int d, int B) {                    \
    pc_centre_soa<T>(pts, mean, out, len, d, B);                                             \
  }                                                                                          \
  /* block (b, c): pair b's x (c = 0, n points) or y (m), out[2·(c·B + b) .. + 2) */          \
  extern "C" __global__ void pc_cloud_radii_##SUF(const T *x, const T *y, double *out, int n, \
                                                  int m, int d) {                            \
    const bool ys = blockIdx.y == 1;                                                         \
    pc_cloud_radii<T>(ys ? y : x, out + 2 * (blockIdx.y * gridDim.x + blockIdx.x), ys ? m : n, \
                      d);                                                                    \
  }
PC_PREP(float, f32)
PC_PREP(double, f64)

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
// bytes per product set the pace: 256 columns load 3/4 of 128's (otC1024 F16 on an H200:
// 164 ms against 198). Shared
// chunks of PC_TC_DC words are stored as two sub-blocks of 16 words, each [point][16] with
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
// The kernel is bound by the exponential unit: ncu on an H200 (otC10) reads MUFU.EX2 at
// 81 % of its peak and issue at 70 %, and the warps' first stall is the MIO queue, which
// MUFU goes through. A kernel that executes MMAs runs at 1.80 GHz on the H200, not 1.98
// (benches/probes/sm_clock.cu); the MMA-free FMA kernel keeps 1.98 GHz but spends 6.3
// issues a pair against 4.8 here (otC10 27.7 ms against 21.5). Each choice here was
// measured against its alternatives in one call (benches/README.md, the point-cloud
// sections of sessions 15–20):
// - split f16 on one m16n8k16 against split TF32 on two m16n8k8: 1.15× at otC10 and otCbig;
// - 4 polynomials of 16 against 0, 2, 3, 5 and 6; degree 4 against 3 and 5;
// - 4 tiles a warp against 2 and 3 (also at 4 and 3 blocks an SM); blocks of 256 threads
//   against 128, 96 and 64;
// - stages of 1024 points at d = 3; the chunk loop unrolled by 2; the cp.async copy.
// d = 1 and 2 run faster on their FMA kernels. Also slower: software-pipelined MMAs,
// exponentials added a chunk late, f16 row sums on tensor cores, one f16 product, packed
// f16 exponentials (two MUFU each on sm_90a), and warps given only MUFU or only polynomial
// exponentials (two MUFU warps a scheduler kept the unit 69 % busy).
#define PC_TN_NOMASS (-2146435072.0f) /* −65504·2^15: the column term without mass */
#define PC_TN_QMAX 1073741824.0f      /* 2^30: the largest |q| of a column with mass */
#define PC_TN_M0 (-1073741824.0f)    /* −2^30: a first shift, above every massless term */
#define PC_TN_R 4 /* m16 row tiles per warp of pc_sinkstep_tn */
#ifndef PC_TN_UNROLL
#define PC_TN_UNROLL 2 /* the chunk loop's unroll at d = 3 */
#endif
#ifndef PC_TN_UNROLL4
#define PC_TN_UNROLL4 2 /* and at d = 4 */
#endif
// Reduced points per stage of pc_sinkstep_tn at d = 4, and at d = 3 (its 48 KiB of static
// shared memory; at d = 4 the same 1024 would take 52 KiB).
#ifndef PC_TN_KT
#define PC_TN_KT 512
#endif
#ifndef PC_TN_KT3
#define PC_TN_KT3 1024
#endif
#ifndef PC_TN_POLY
#define PC_TN_POLY 4 /* of a thread's 4·R exponentials a chunk, by pc_exp2_poly<4> */
#endif

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
      // The point's 8 words are contiguous: two 16-byte stores. Eight 4-byte stores, 8
      // lanes to a bank, were 1.2–1.9 % slower (H200, one call: otC10 21.75–21.77 ms
      // against 21.49–21.50, d = 4 22.60–22.65 against 22.22–22.23, otCbig 5276.1 against
      // 5214.8).
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
      // pc_tn_chunks: with it ptxas schedules the chunk loop otherwise, 0.4–0.7 % slower
      // (otC10 21.85–21.93 ms against 21.76–21.82, otCbig 5313.1 against 5276.4; H200).
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
  // epilogue raises the shifts lazily (see the epilogue). Measured on an H100 (otC64, F16):
  // 9 % faster; the same epilogue made the split and streamed kernels 2–6 % slower.
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
  // chunks were slower, and would leave one split resident block per SM).
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
// mma.sync kernel's sub-blocks: on an H100, otC64's distance error (tests/cuda_pointcloud_tc.rs,
// 1000×1031 points, three seeds) 2.5e-6 to 2.7e-6 against 3.7e-6 to 4.0e-6 over 64 (4),
// for 44.9–46.1 ms against 44.0–44.2.
#ifndef PC_WG2_KS
#define PC_WG2_KS 2 /* MMA steps of 16 coordinates summed from zero per f32 add (2 or 4) */
#endif
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
// chunk by chunk: as a loop over the block's threads (a division and a remainder an
// iteration) otC64 took 27.2 ms with F16, 40.6–40.9 with TF32 and 46–46.8 with F16x2, against
// 25.0, 34.4–34.5 and 39.8–41.0 now (one H100 call).
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
// root must be 0). Three blocks per SM (at most 80 registers, no spills): on an H100, otC64
// F16 27.3 ms against 28.5 with two (115 registers), d = 17 27.0 against 27.3, d = 256 86.5
// against 89.4; d = 128 40.7 against 38.8 (its shared tiles leave room for two blocks only).
// TF32 (the same setting): otC64 40.3–40.8 ms against 56.4–57.3 for pc_sinkstep_tc. All
// measured with the earlier loop copier (see pc_wg_stage for the times since).
#ifndef PC_WG_MINB
#define PC_WG_MINB 3 /* blocks per SM the warpgroup kernel is compiled for */
#endif
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
#ifndef PC_WG2_MINB
#define PC_WG2_MINB 2 /* blocks per SM of the split warpgroup kernel */
#endif
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
// before them, by a loop over the block's threads, they held every warp ~3000 cycles a
// chunk and the tensor cores at a third of their rate (otC1024 F16 on an H100: 138 ms,
// against 87.6–87.8 after; the mma.sync kernel 159). A stage's products are summed from
// zero, then shifted by the rows' shifts in f32, and pc_lazy_fold ends it, as
// pc_sinkstep_wg_body. One block per SM (251 registers); 128×128 tiles at two blocks per
// SM were slower (164 ms against 138, both with the loop copies).
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
