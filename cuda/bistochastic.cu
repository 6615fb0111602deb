// Batched bistochastic projection of small matrices and its implicit backward
// (BistochasticKernels), the same math as src/backend/cpu/bistochastic.rs.
//
// Layout: a group of N lanes (N a power of two, n ≤ N ≤ 32) owns one n×n matrix, 32/N
// matrices per warp. Lane t of a group keeps row t AND column t of the matrix in registers,
// so both the row reductions (Σ_j K_tj v_j) and the column reductions (Σ_i K_it u_i) are
// local to a lane; the only exchange per half-step is the new scaling vector, one value per
// lane written to shared memory and read back by the group (broadcast reads).
//
// Forward, scaling domain: K = exp(X − max X) once (n² exps per copy), then
// v ← 1/(Kᵀu), u ← 1/(K v) with FMAs and one reciprocal per lane and half-step; log R =
// log K + log u ⊕ log v, i.e. the log-domain iterates of the CPU (α = log u, β = log v + max X).
// Safety: when the matrix's spread max X − min X exceeds SPREAD (80 in f32: exp(−80) is still a
// normal f32, so nothing underflows), or X is not finite, or iters = 0, the warp runs the
// log-domain iteration instead (two log-sum-exps per iteration, exactly the CPU algorithm).
// After the first column step every half-step changes the scalings by a factor within
// [1/n, n]; when a scaling leaves [2^-30, 2^30] (f32) the warp absorbs them into K
// (K ← diag(u) K diag(v), u = v = 1), so sums stay far from overflow and underflow.

#define BISTO_THREADS 256
#define BISTO_FULL 0xffffffffu

template <typename T> struct Bs;
template <> struct Bs<float> {
  static __device__ __forceinline__ float spread() { return 80.0f; }
  static __device__ __forceinline__ float big() { return 1073741824.0f; }          // 2^30
  static __device__ __forceinline__ float small() { return 9.313225746154785e-10f; } // 2^-30
  // MUFU.RCP (about 1 ulp); the scalings only need a few digits more than the sums they invert.
  static __device__ __forceinline__ float rcp(float x) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  static __device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }
};
template <> struct Bs<double> {
  static __device__ __forceinline__ double spread() { return 690.0; }
  static __device__ __forceinline__ double big() { return 1.2676506002282294e30; }   // 2^100
  static __device__ __forceinline__ double small() { return 7.888609052210118e-31; } // 2^-100
  static __device__ __forceinline__ double rcp(double x) { return 1.0 / x; }
  static __device__ __forceinline__ double pos_inf() {
    return __longlong_as_double(0x7ff0000000000000ULL);
  }
};

// Reductions over the N lanes of a group (all 32 lanes must call them).
template <int N, typename V> __device__ __forceinline__ V gsum(V v) {
#pragma unroll
  for (int off = N / 2; off > 0; off >>= 1) v += __shfl_xor_sync(BISTO_FULL, v, off);
  return v;
}
// Two sums at once (independent shuffles: the latency of one).
template <int N, typename V> __device__ __forceinline__ void gsum2(V &a, V &b) {
#pragma unroll
  for (int off = N / 2; off > 0; off >>= 1) {
    const V a2 = __shfl_xor_sync(BISTO_FULL, a, off);
    const V b2 = __shfl_xor_sync(BISTO_FULL, b, off);
    a += a2;
    b += b2;
  }
}
template <int N, typename V> __device__ __forceinline__ V gmax(V v) {
#pragma unroll
  for (int off = N / 2; off > 0; off >>= 1) {
    V o = __shfl_xor_sync(BISTO_FULL, v, off);
    v = o > v ? o : v;
  }
  return v;
}
template <int N, typename V> __device__ __forceinline__ V gmin(V v) {
#pragma unroll
  for (int off = N / 2; off > 0; off >>= 1) {
    V o = __shfl_xor_sync(BISTO_FULL, v, off);
    v = o < v ? o : v;
  }
  return v;
}


// Σ_i k[i]·s[i] for N values s in shared memory (16-byte aligned): vector loads (one LDS.128
// per 4 floats / 2 doubles) and four independent FMA chains.
template <typename T, int N>
__device__ __forceinline__ T dotv(const T (&k)[N], const T *s) {
  T a0 = T(0), a1 = T(0), a2 = T(0), a3 = T(0);
  if constexpr (sizeof(T) == 4 && N >= 4) {
    const float4 *s4 = reinterpret_cast<const float4 *>(s);
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const float4 v = s4[q];
      a0 = fma(k[4 * q], v.x, a0);
      a1 = fma(k[4 * q + 1], v.y, a1);
      a2 = fma(k[4 * q + 2], v.z, a2);
      a3 = fma(k[4 * q + 3], v.w, a3);
    }
  } else if constexpr (sizeof(T) == 8 && N >= 2) {
    const double2 *s2 = reinterpret_cast<const double2 *>(s);
#pragma unroll
    for (int q = 0; q < N / 2; ++q) {
      const double2 v = s2[q];
      if (q & 1) {
        a2 = fma(k[2 * q], v.x, a2);
        a3 = fma(k[2 * q + 1], v.y, a3);
      } else {
        a0 = fma(k[2 * q], v.x, a0);
        a1 = fma(k[2 * q + 1], v.y, a1);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) a0 = fma(k[i], s[i], a0);
  }
  return (a0 + a1) + (a2 + a3);
}

// The group's matrix is held column-wise (lane t: column t, c[i] = M[i][t]); return it
// row-wise (r[j] = M[t][j]) through a shared tile of N×(N+1) per matrix (conflict-free), or,
// when the tile would not fit in static shared memory (f64, N = 32), by reading `src` (the
// matrix in global memory, n×n row-major) again.
template <typename T, int N> struct Tile {
  static constexpr bool ON = sizeof(T) * BISTO_THREADS * (N + 1) <= 40960;
  static constexpr int LEN = ON ? BISTO_THREADS * (N + 1) : 1;
};
template <typename T, int N>
__device__ __forceinline__ void to_rows(const T (&c)[N], T (&r)[N], T *tile, int tid, int t,
                                        bool own, int n, const T *src) {
  if constexpr (Tile<T, N>::ON) {
    T *m = tile + (tid - t) * (N + 1); // this group's N×(N+1) block
    __syncwarp();
#pragma unroll
    for (int i = 0; i < N; ++i) m[i * (N + 1) + t] = c[i];
    __syncwarp();
#pragma unroll
    for (int j = 0; j < N; ++j) r[j] = m[t * (N + 1) + j];
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) r[j] = (own && j < n) ? src[t * n + j] : T(0);
  }
}

// Stats: [max iterations, max column error (f64 bits), unconverged count].
template <typename T, int N>
__device__ __forceinline__ void bisto_forward(const T *__restrict__ x, T *__restrict__ r,
                                              long long batch, int n, int iters, double tol_d,
                                              u64 *stats) {
  __shared__ __align__(16) T su[BISTO_THREADS];
  __shared__ __align__(16) T sv[BISTO_THREADS];
  __shared__ u64 red[3][BISTO_THREADS / 32];
  __shared__ __align__(16) T tile[Tile<T, N>::LEN];
  const int tid = threadIdx.x, lane = tid & 31, t = lane & (N - 1), base = tid - t;
  const long long mat = ((long long)blockIdx.x * BISTO_THREADS + tid) / N;
  const bool valid = mat < batch;
  const bool own = valid && t < n;
  const long long nn = (long long)n * n;
  const long long off = valid ? mat * nn : 0;
  const T *xm = x + off;
  const T tol = (T)tol_d;
  T kr[N], kc[N];
  T mx = -Bs<T>::pos_inf(), mn = Bs<T>::pos_inf();
  bool nonfinite = false;
  // Column t, coalesced across the group's lanes.
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const bool in = own && i < n;
    kc[i] = in ? xm[i * n + t] : T(0);
    if (in) {
      mx = kc[i] > mx ? kc[i] : mx;
      mn = kc[i] < mn ? kc[i] : mn;
      nonfinite |= !(kc[i] - kc[i] == T(0));
    }
  }
  mx = gmax<N>(mx);
  mn = gmin<N>(mn);
  const bool slow =
      __any_sync(BISTO_FULL, own && (nonfinite || !(mx - mn <= Bs<T>::spread()))) || iters <= 0;
  int done = 0;
  bool active = valid, met = false;
  double err = 0.0;
  T *rm = r + off;
  if (!slow) {
    T u = own ? T(1) : T(0), v = u;
#pragma unroll
    for (int i = 0; i < N; ++i) kc[i] = (own && i < n) ? Num<T>::exp(kc[i] - mx) : T(0);
    to_rows<T, N>(kc, kr, tile, tid, t, own, n, xm);
    if constexpr (!Tile<T, N>::ON) { // rows re-read from X: exponentiate them too
#pragma unroll
      for (int j = 0; j < N; ++j) kr[j] = (own && j < n) ? Num<T>::exp(kr[j] - mx) : T(0);
    }
    su[tid] = u;
    sv[tid] = v;
    __syncwarp();
    for (int it = 0; it < iters; ++it) {
      if (!__any_sync(BISTO_FULL, active)) break;
      // Column half-step: v_t = 1 / Σ_i K_it u_i. The column sums of the current R are v·s.
      T s = dotv<T, N>(kc, su + base);
      const T vn = own ? Bs<T>::rcp(s) : T(0);
      if (tol > T(0) && it > 0) {
        T e = own ? fabs(v * s - T(1)) : T(0);
        e = gsum<N>(e);
        if (active && e <= tol) {
          active = false;
          met = true;
        }
      }
      if (active) v = vn;
      sv[tid] = v;
      __syncwarp();
      // Row half-step: u_t = 1 / Σ_j K_tj v_j.
      s = dotv<T, N>(kr, sv + base);
      const T un = own ? Bs<T>::rcp(s) : T(0);
      if (active) {
        u = un;
        ++done;
      }
      su[tid] = u;
      __syncwarp();
      const bool far = own && !(u >= Bs<T>::small() && u <= Bs<T>::big() &&
                                v >= Bs<T>::small() && v <= Bs<T>::big());
      if (__any_sync(BISTO_FULL, far)) {
        // Absorb: K ← diag(u) K diag(v) (K·v first: K·v ≤ 1 and u ≤ n·e^SPREAD stay finite).
#pragma unroll
        for (int j = 0; j < N; ++j) kr[j] = (kr[j] * sv[base + j]) * u;
#pragma unroll
        for (int i = 0; i < N; ++i) kc[i] = (kc[i] * v) * su[base + i];
        u = own ? T(1) : T(0);
        v = u;
        __syncwarp();
        su[tid] = u;
        sv[tid] = v;
        __syncwarp();
      }
    }
    // R_it = K_it v_t u_i, written column-wise (coalesced across the group's lanes).
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const T val = (kc[i] * v) * su[base + i];
      if (own && i < n) {
        rm[i * n + t] = val;
        err += (double)val;
      }
    }
  } else {
    // Log domain in base 2: a = α·log2(e), b = β·log2(e), exactly the CPU's iteration.
    const T l2e = (T)LOGOT_LOG2E;
    to_rows<T, N>(kc, kr, tile, tid, t, own, n, xm);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      kr[j] *= l2e;
      kc[j] *= l2e;
    }
    T a = T(0), b = T(0);
    su[tid] = a;
    sv[tid] = b;
    __syncwarp();
    for (int it = 0; it < iters; ++it) {
      if (!__any_sync(BISTO_FULL, active)) break;
      T m = Num<T>::neg_inf();
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i < n) {
          const T z = kc[i] + su[base + i];
          m = z > m ? z : m;
        }
      T s = T(0);
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i < n) s += Num<T>::exp2(kc[i] + su[base + i] - m);
      const T bn = own ? -(m + Num<T>::log2(s)) : T(0);
      if (tol > T(0) && it > 0) {
        T e = own ? fabs(Num<T>::exp2(b - bn) - T(1)) : T(0);
        e = gsum<N>(e);
        if (active && e <= tol) {
          active = false;
          met = true;
        }
      }
      if (active) b = bn;
      sv[tid] = b;
      __syncwarp();
      m = Num<T>::neg_inf();
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (j < n) {
          const T z = kr[j] + sv[base + j];
          m = z > m ? z : m;
        }
      s = T(0);
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (j < n) s += Num<T>::exp2(kr[j] + sv[base + j] - m);
      const T an = own ? -(m + Num<T>::log2(s)) : T(0);
      if (active) {
        a = an;
        ++done;
      }
      su[tid] = a;
      __syncwarp();
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (own && i < n) {
        const T val = Num<T>::exp2(kc[i] + su[base + i] + b);
        rm[i * n + t] = val;
        err += (double)val;
      }
    }
  }
  // Column error Σ_t |Σ_i R_it − 1| of the matrix, then the block's stats, then one atomic each.
  err = own ? fabs(err - 1.0) : 0.0;
  err = gsum<N>(err);
  u64 e_bits = valid ? (u64)__double_as_longlong(err) : 0ULL;
  u64 its = valid ? (u64)done : 0ULL;
  u64 unc = (valid && !met && t == 0) ? 1ULL : 0ULL;
  e_bits = gmax<32>(e_bits);
  its = gmax<32>(its);
  unc = gsum<32>(unc);
  const int warp = tid >> 5;
  if (lane == 0) {
    red[0][warp] = its;
    red[1][warp] = e_bits;
    red[2][warp] = unc;
  }
  __syncthreads();
  if (tid == 0) {
    u64 a0 = 0, a1 = 0, a2 = 0;
    for (int w = 0; w < BISTO_THREADS / 32; ++w) {
      a0 = red[0][w] > a0 ? red[0][w] : a0;
      a1 = red[1][w] > a1 ? red[1][w] : a1;
      a2 += red[2][w];
    }
    if (a0) atomicMax(&stats[0], a0);
    if (a1) atomicMax(&stats[1], a1);
    if (a2) atomicAdd(&stats[2], a2);
  }
}

// S·p = c ⊙ p − Rᵀ diag(1/r) R p for the group's matrix (p, result: one entry per lane).
template <typename T, int N>
__device__ __forceinline__ T schur_apply(const T (&rr)[N], const T (&rc)[N], T inv_row, T cols,
                                         bool own, T p, T *sa, T *sb, int tid, int base) {
  __syncwarp();
  sa[tid] = p;
  __syncwarp();
  sb[tid] = inv_row * dotv<T, N>(rr, sa + base);
  __syncwarp();
  const T z = dotv<T, N>(rc, sb + base);
  return own ? cols * p - z : T(0);
}

// Remove the component along the support indicator w (⟨w, w⟩ = ww).
template <int N, typename T> __device__ __forceinline__ T project_off(T v, T w, T ww) {
  const T c = gsum<N>(v * w);
  return v - (ww > T(0) ? c / ww : T(0)) * w;
}

// One u64 per matrix: iterations | converged << 31 | non-finite right-hand side << 30 |
// needs f64 << 29 in the low word, the relative residual as f32 bits in the high word.
// CG runs in the compute precision C. With C = float (f32 data) a matrix whose CG did not
// converge, whose true residual exceeds 10·tol, or whose curvature estimates (Rayleigh
// quotients pᵀSp/pᵀp) span more than 10³ (ill-conditioned: f32 would lose the digits) is
// marked "needs f64"; the FIX variant (C = double) then redoes only the marked matrices, so
// the hard cases get the CPU's f64 CG and the common ones stay in f32.
#define BISTO_NEEDS_F64 0x20000000u
// Matrices marked "needs f64" are appended to `list` (count in list_len) for the redo.
template <typename T, typename C, int N>
__device__ __forceinline__ void bisto_backward(const T *__restrict__ r, const T *__restrict__ g,
                                               T *__restrict__ dx, long long mat, bool valid,
                                               int n, double tol_d, int max_iters, u64 *out,
                                               u32 *list, u32 *list_len, C *sa, C *sb,
                                               T *tile) {
  const int tid = threadIdx.x, lane = tid & 31, t = lane & (N - 1), base = tid - t;
  (void)lane;
  const bool own = valid && t < n;
  const long long nn = (long long)n * n;
  const long long off = valid ? mat * nn : 0;
  const T *rm = r + off;
  const T *gm = g + off;
  const C tol = (C)tol_d;
  C rr[N], rc[N];
  C rows = C(0), cols = C(0), sr = C(0), sc = C(0);
  // Column t of G stays in registers when the compute type is T (f32 CG); with f64 compute
  // on f32 data it is read again at the end (registers are scarcer there).
  constexpr bool KEEP_G = sizeof(C) == sizeof(T);
  T gk[KEEP_G ? N : 1];
  {
    T ct[N], rt[N], gc[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const bool in = own && i < n;
      ct[i] = in ? rm[i * n + t] : T(0);
      gc[i] = in ? gm[i * n + t] : T(0);
      rc[i] = (C)ct[i];
      cols += rc[i];
      sc += (C)gc[i] * rc[i];
      if constexpr (KEEP_G) gk[i] = gc[i];
    }
    to_rows<T, N>(ct, rt, tile, tid, t, own, n, rm);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      rr[j] = (C)rt[j];
      rows += rr[j];
    }
    to_rows<T, N>(gc, ct, tile, tid, t, own, n, gm); // row t of G
#pragma unroll
    for (int j = 0; j < N; ++j) sr += (C)ct[j] * rr[j];
  }
  const C inv_row = rows > C(0) ? C(1) / rows : C(0);
  const C w = (own && cols > C(0)) ? C(1) : C(0);
  const C ww = gsum<N>(w);
  // rhs = s_c − Rᵀ diag(1/r) s_r
  sa[tid] = inv_row * sr;
  __syncwarp();
  const C z = dotv<C, N>(rc, sa + base);
  const C rhs = own ? sc - z : C(0);
  C res = project_off<N>(rhs, w, ww);
  C rs = gsum<N>(res * res);
  const bool rhs_bad = valid && !(rs - rs == C(0));
  const C bnorm = sqrt(rs);
  bool active = valid && !rhs_bad && rs > C(0) && tol < C(1);
  bool conv = !active;
  int its = 0;
  C xv = C(0), p = res;
  C cmin = Bs<C>::pos_inf(), cmax = C(0);
  for (int k = 0; k < max_iters; ++k) {
    if (!__any_sync(BISTO_FULL, active)) break;
    const C q = schur_apply<C, N>(rr, rc, inv_row, cols, own, p, sa, sb, tid, base);
    C pq = p * q;
    if constexpr (sizeof(C) == 4) {
      C pp = p * p;
      gsum2<N>(pq, pp);
      if (active && pp > C(0)) {
        const C ray = pq / pp;
        cmin = ray < cmin ? ray : cmin;
        cmax = ray > cmax ? ray : cmax;
      }
    } else {
      pq = gsum<N>(pq);
    }
    C alpha = C(0);
    if (active) {
      if (pq > C(0) && pq - pq == C(0))
        alpha = rs / pq;
      else
        active = false; // no positive curvature left along p
    }
    xv = fma(alpha, p, xv);
    res = fma(-alpha, q, res);
    // Project off w and take ‖res‖² in one reduction: ‖r − (c/ww)w‖² = ‖r‖² − c²/ww.
    C cw = res * w, rsn = res * res;
    gsum2<N>(cw, rsn);
    const C coef = ww > C(0) ? cw / ww : C(0);
    res -= coef * w;
    rsn = rsn - coef * cw;
    rsn = rsn > C(0) ? rsn : C(0);
    C beta = C(0);
    if (active && alpha != C(0)) {
      ++its;
      if (sqrt(rsn) <= tol * bnorm) {
        active = false;
        conv = true;
      } else {
        beta = rsn / rs;
      }
      rs = rsn;
    }
    p = fma(beta, p, res);
  }
  xv = project_off<N>(xv, w, ww);
  // True residual of the returned solution, projected like the right-hand side.
  C q = schur_apply<C, N>(rr, rc, inv_row, cols, own, xv, sa, sb, tid, base);
  q = own ? rhs - q : C(0);
  q = project_off<N>(q, w, ww);
  const C qq = gsum<N>(q * q);
  const C rel = bnorm > C(0) ? sqrt(qq) / bnorm : C(0);
  bool needs_f64 = false;
  if constexpr (sizeof(C) == 4) {
    needs_f64 = valid && !rhs_bad &&
                (!conv || !(rel <= C(10) * tol) || (cmax > C(0) && cmin < C(1e-3) * cmax));
  }
  // a = diag(1/r)(s_r − R b), then ∂L/∂X_it = (G_it − a_i − b_t)·R_it.
  __syncwarp();
  sa[tid] = xv;
  __syncwarp();
  sb[tid] = inv_row * (sr - dotv<C, N>(rr, sa + base));
  __syncwarp();
  T *dm = dx + off;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (own && i < n) {
      C gv;
      if constexpr (KEEP_G)
        gv = (C)gk[i];
      else
        gv = (C)gm[i * n + t];
      dm[i * n + t] = (T)((gv - sb[base + i] - xv) * rc[i]);
    }
  if (valid && t == 0) {
    const u32 word = (u32)its | (conv ? 0x80000000u : 0u) | (rhs_bad ? 0x40000000u : 0u) |
                     (needs_f64 ? BISTO_NEEDS_F64 : 0u);
    out[mat] = (u64)word | ((u64)__float_as_uint((float)rel) << 32);
    if (needs_f64) list[atomicAdd(list_len, 1u)] = (u32)mat;
  }
}

template <typename T, typename C, int N>
__device__ __forceinline__ void bisto_backward_all(const T *r, const T *g, T *dx, long long batch,
                                                   int n, double tol, int max_iters, u64 *out,
                                                   u32 *list, u32 *list_len) {
  __shared__ __align__(16) C sa[BISTO_THREADS];
  __shared__ __align__(16) C sb[BISTO_THREADS];
  __shared__ __align__(16) T tile[Tile<T, N>::LEN];
  const long long mat = ((long long)blockIdx.x * BISTO_THREADS + threadIdx.x) / N;
  bisto_backward<T, C, N>(r, g, dx, mat, mat < batch, n, tol, max_iters, out, list, list_len,
                          sa, sb, tile);
}

// The f64 redo: groups walk the list of marked matrices (grid-stride, warp-uniform loop).
template <int N>
__device__ __forceinline__ void bisto_backward_fix(const float *r, const float *g, float *dx,
                                                   int n, double tol, int max_iters, u64 *out,
                                                   const u32 *list, const u32 *list_len) {
  __shared__ __align__(16) double sa[BISTO_THREADS];
  __shared__ __align__(16) double sb[BISTO_THREADS];
  __shared__ __align__(16) float tile[Tile<float, N>::LEN];
  const long long count = *list_len;
  const long long per_warp = 32 / N;
  const long long warp = ((long long)blockIdx.x * BISTO_THREADS + threadIdx.x) >> 5;
  const long long warps = ((long long)gridDim.x * BISTO_THREADS) >> 5;
  const int grp = (threadIdx.x & 31) / N;
  for (long long e0 = warp * per_warp; e0 < count; e0 += warps * per_warp) {
    const long long e = e0 + grp;
    const bool valid = e < count;
    const long long mat = valid ? (long long)list[e] : 0;
    bisto_backward<float, double, N>(r, g, dx, mat, valid, n, tol, max_iters, out, nullptr,
                                     nullptr, sa, sb, tile);
    __syncwarp();
  }
}

// FB, BB: minimum resident blocks per SM asked of the compiler (register caps) for the
// forward and the backward.
#define BISTO_KERNELS(T, SUF, N, FB, BB)                                                       \
  extern "C" __global__ void __launch_bounds__(BISTO_THREADS, FB)                             \
      bisto_fwd_n##N##_##SUF(const T *x, T *r, long long batch, int n, int iters, double tol, \
                             u64 *stats) {                                                    \
    bisto_forward<T, N>(x, r, batch, n, iters, tol, stats);                                   \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(BISTO_THREADS, BB)                             \
      bisto_bwd_n##N##_##SUF(const T *r, const T *g, T *dx, long long batch, int n,           \
                             double tol, int max_iters, u64 *out, u32 *list, u32 *list_len) { \
    bisto_backward_all<T, T, N>(r, g, dx, batch, n, tol, max_iters, out, list, list_len);     \
  }
// The f64 redo of the f32 matrices marked "needs f64".
#define BISTO_FIX(N)                                                                           \
  extern "C" __global__ void __launch_bounds__(BISTO_THREADS)                                 \
      bisto_fix_n##N##_f32(const float *r, const float *g, float *dx, int n, double tol,      \
                           int max_iters, u64 *out, const u32 *list, const u32 *list_len) {   \
    bisto_backward_fix<N>(r, g, dx, n, tol, max_iters, out, list, list_len);                  \
  }

BISTO_KERNELS(float, f32, 2, 4, 3)
BISTO_KERNELS(float, f32, 4, 4, 3)
BISTO_KERNELS(float, f32, 8, 3, 3)
BISTO_KERNELS(float, f32, 16, 4, 3)
BISTO_KERNELS(float, f32, 32, 1, 1)
BISTO_KERNELS(double, f64, 2, 3, 2)
BISTO_KERNELS(double, f64, 4, 3, 2)
BISTO_KERNELS(double, f64, 8, 2, 1)
BISTO_KERNELS(double, f64, 16, 1, 1)
BISTO_KERNELS(double, f64, 32, 1, 1)
BISTO_FIX(2)
BISTO_FIX(4)
BISTO_FIX(8)
BISTO_FIX(16)
BISTO_FIX(32)
