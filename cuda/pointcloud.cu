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
// potentials by s. A thread keeps TJ outputs; the block streams the reduced cloud through
// shared memory in stages of PC_KT points, and each output folds chunks of PC_CH
// arguments into a running (max, sum) pair: the chunk maximum first, a rescale only when
// it grows, then one exp2 per argument. -inf potentials (zero-mass bins) and the padding
// of the last stage give exp2(-inf) = 0 and never NaN.

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
template <typename T, int DMAX, int TJ, bool ROOT>
__device__ __forceinline__ void pc_sinkstep_body(const T *__restrict__ out_pts,
                                                 const T *__restrict__ red_pts,
                                                 const T *__restrict__ other,
                                                 const T *__restrict__ lm, T *__restrict__ out,
                                                 T *__restrict__ part_m, T *__restrict__ part_s,
                                                 int B, int K, int L, int d, T eps, T scale,
                                                 int kslice) {
  extern __shared__ __align__(16) unsigned char pc_smem[];
  T *sq = reinterpret_cast<T *>(pc_smem);
  T *sp = sq + DMAX * PC_KT;
  const int b = blockIdx.y, z = blockIdx.z;
  const int kbeg = z * kslice, kend = min(K, kbeg + kslice);
  const T s = T(LOGOT_LOG2E) / eps;
  T p[TJ][DMAX], m[TJ], sum[TJ];
#pragma unroll
  for (int j = 0; j < TJ; ++j) {
    const int l = blockIdx.x * (PC_BLOCK * TJ) + j * PC_BLOCK + threadIdx.x;
#pragma unroll
    for (int t = 0; t < DMAX; ++t)
      p[j][t] = (t < d && l < L) ? out_pts[(long long)t * L + l] * scale : T(0);
    m[j] = Num<T>::neg_inf();
    sum[j] = T(0);
  }
  const T *pot = other + (long long)b * K;
  for (int k0 = kbeg; k0 < kend; k0 += PC_KT) {
    __syncthreads();
    pc_load_stage<T, DMAX>(sq, sp, red_pts, pot, K, k0, min(PC_KT, kend - k0), d, scale, s);
    __syncthreads();
    for (int c0 = 0; c0 < PC_KT; c0 += PC_CH) {
      T pv[PC_CH];
#pragma unroll
      for (int h = 0; h < PC_CH; h += 4) {
        T t4[4];
        Vec4<T>::load(t4, sp + c0 + h);
#pragma unroll
        for (int u = 0; u < 4; ++u) pv[h + u] = t4[u];
      }
      // Low dimensions: the chunk's coordinates once into registers for all TJ outputs.
      constexpr bool PRE = DMAX <= 4;
      T qv[PRE ? DMAX : 1][PC_CH];
      if constexpr (PRE) {
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
#pragma unroll
      for (int j = 0; j < TJ; ++j) {
        T v[PC_CH];
        if constexpr (PRE) {
#pragma unroll
          for (int q = 0; q < PC_CH; ++q) {
            T c = T(0);
#pragma unroll
            for (int t = 0; t < DMAX; ++t) {
              if (t < d) {
                const T w = p[j][t] - qv[t][q];
                c = fma(w, w, c);
              }
            }
            v[q] = ROOT ? sqrt(c) : c;
          }
        } else {
          pc_chunk_cost<T, DMAX, ROOT>(v, p[j], sq, c0, d);
        }
        T cm = Num<T>::neg_inf();
#pragma unroll
        for (int q = 0; q < PC_CH; ++q) {
          v[q] = pv[q] - v[q];
          cm = pc_max(cm, v[q]);
        }
        if (cm > m[j]) {
          sum[j] *= Num<T>::exp2(m[j] - cm);  // m = -inf: sum is 0 and stays 0
          m[j] = cm;
        }
        if (m[j] != Num<T>::neg_inf()) {
#pragma unroll
          for (int q = 0; q < PC_CH; ++q) sum[j] += Num<T>::exp2(v[q] - m[j]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < TJ; ++j) {
    const int l = blockIdx.x * (PC_BLOCK * TJ) + j * PC_BLOCK + threadIdx.x;
    if (l >= L) continue;
    const long long o = (long long)b * L + l;
    if (gridDim.z == 1) {
      const T lmv = lm[o];
      out[o] = lmv == Num<T>::neg_inf()
                   ? lmv
                   : eps * lmv - eps * T(LOGOT_LN2) * (m[j] + Num<T>::log2(sum[j]));
    } else {
      const long long total = (long long)B * L;
      part_m[z * total + o] = m[j];
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

// P[b,i,j] = exp((f_i + g_j − c(x_i, y_j))/eps) from the raw structure-of-arrays clouds.
template <typename T>
__device__ __forceinline__ void pc_plan(const T *__restrict__ x, const T *__restrict__ y,
                                        const T *__restrict__ f, const T *__restrict__ g,
                                        T *__restrict__ P, int B, int n, int m, int d, int root,
                                        T eps) {
  const long long per = (long long)n * m, total = per * B;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long b = e / per, r = e % per;
    const int i = (int)(r / m), j = (int)(r % m);
    T c = T(0);
    for (int t = 0; t < d; ++t) {
      const T w = x[(long long)t * n + i] - y[(long long)t * m + j];
      c = fma(w, w, c);
    }
    if (root) c = sqrt(c);
    P[e] = Num<T>::exp((f[b * n + i] + g[b * m + j] - c) / eps);
  }
}

// ---------------------------------------------------------------------------------------
// Entry points: D3 (exactly 3 coordinates), D4 (at most 4) and D16 (at most 16); `root`
// picks |x−y| over |x−y|² (both bodies are compiled, the branch is uniform).
#define PC_STEP_ARGS(T)                                                                 \
  const T *out_pts, const T *red_pts, const T *other, const T *lm, T *out, T *part_m,   \
      T *part_s, int B, int K, int L, int d, T eps, T scale, int kslice, int root
#define PC_STEP_PASS out_pts, red_pts, other, lm, out, part_m, part_s, B, K, L, d, eps, scale, kslice
#define PC_ROWS_ARGS(T)                                                                 \
  const T *out_pts, const T *red_pts, const T *own, const T *other, const T *vals,      \
      long long vstride, T *mass, T *res, int K, int L, int d, int kv, T eps, T scale,  \
      int root, int mode, const T *own_adj, T alpha

#define PC_STEP(T, SUF, NAME, DMAX, DARG, TJ)                                           \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK) NAME##_##SUF(PC_STEP_ARGS(T)) {     \
    const int dd = DARG;                                                                     \
    if (root)                                                                                \
      pc_sinkstep_body<T, DMAX, TJ, true>(out_pts, red_pts, other, lm, out, part_m, part_s,  \
                                          B, K, L, dd, eps, scale, kslice);             \
    else                                                                                     \
      pc_sinkstep_body<T, DMAX, TJ, false>(out_pts, red_pts, other, lm, out, part_m, part_s, \
                                           B, K, L, dd, eps, scale, kslice);            \
  }

#define PC_ROWS_BODY(T, DMAX, CH, ROOT, MODE)                                                \
  pc_rows_body<T, DMAX, CH, ROOT, MODE>(out_pts, red_pts, own, other, vals, vstride, mass,   \
                                        res, K, L, dd, kv, eps, scale, own_adj, alpha)

#define PC_ROWS(T, SUF, NAME, DMAX, DARG, CH)                                                \
  extern "C" __global__ void __launch_bounds__(PC_BLOCK) NAME##_##SUF(PC_ROWS_ARGS(T)) {     \
    const int dd = DARG;                                                                     \
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
    if (root)                                                                                \
      PC_ROWS_BODY(T, DMAX, DMAX, true, 3);                                                  \
    else                                                                                     \
      PC_ROWS_BODY(T, DMAX, DMAX, false, 3);                                                 \
  }

#define PC_ALL(T, SUF, TJ)                                                              \
  PC_STEP(T, SUF, pc_sinkstep_d3, 3, 3, TJ)                                             \
  PC_STEP(T, SUF, pc_sinkstep_d4, 4, d, TJ)                                             \
  PC_STEP(T, SUF, pc_sinkstep_d16, PC_DMAX, d, 2)                                       \
  PC_ROWS(T, SUF, pc_rows_d4, 4, d, PC_DMAX)                                            \
  PC_ROWS(T, SUF, pc_rows_d16, PC_DMAX, d, PC_DMAX)                                     \
  PC_ADJ(T, SUF, pc_adjoint_d4, 4, d)                                                   \
  PC_ADJ(T, SUF, pc_adjoint_d16, PC_DMAX, d)                                            \
  extern "C" __global__ void pc_reduce_##SUF(const T *x, double *out, int L) {               \
    pc_reduce<T>(x, out, L);                                                            \
  }                                                                                          \
  extern "C" __global__ void pc_plan_##SUF(const T *x, const T *y, const T *f, const T *g,   \
                                           T *P, int B, int n, int m, int d, int root,  \
                                           T eps) {                                     \
    pc_plan<T>(x, y, f, g, P, B, n, m, d, root, eps);                                   \
  }
// Outputs per thread for d ≤ 4: 4 in f32 (76 registers for d = 3), 2 in f64.
PC_ALL(float, f32, 4)
PC_ALL(double, f64, 2)
