// Batched bistochastic projection of small matrices and its implicit backward
// (BistochasticKernels), the same math as src/backend/cpu/bistochastic.rs.
//
// Layout: a group of N lanes (N a power of two, n ≤ N ≤ 32) owns one n×n matrix, 32/N
// matrices per warp. Lane t of a group keeps row t AND column t of the matrix in registers,
// so both the row reductions (Σ_j K_tj v_j) and the column reductions (Σ_i K_it u_i) are
// local to a lane; the only exchange per half-step is the new scaling vector, one value per
// lane written to shared memory and read back by the group (broadcast reads).
//
// Forward, scaling domain: K = exp(X − max X) once (n² MUFU.EX2 per copy), then
// v ← 1/(Kᵀu), u ← 1/(K v) with FMAs and one reciprocal per lane and half-step; log R =
// log K + log u ⊕ log v, i.e. the log-domain iterates of the CPU (α = log u, β = log v + max X).
// Safety: when the matrix's spread max X − min X exceeds SPREAD (80 in f32: K ≥ e^-80 ≈ 2^-115.4
// is still a normal f32, so nothing underflows), or X is not finite, or iters = 0, the warp runs
// the log-domain iteration instead (two log-sum-exps per iteration, exactly the CPU algorithm).
// Bounds on the scalings u, v (f32; f64 alike with 2^±100 and SPREAD = 690):
//  * The first column step gives v ≤ e^SPREAD/n, the first row step u ≤ n·e^SPREAD: finite.
//  * From then on each half-step multiplies every scaling by a factor in [1/n, n]: after a
//    row step R = diag(u) K diag(v) has unit row sums, so its column sums c_j lie in
//    [1/r_max, n], r_max ≤ n being the largest row sum of the previous (column-stochastic)
//    iterate, and v_j changes by 1/c_j; rows likewise. Every entry of R stays ≤ 1.
//  * The warp checks its scalings after the first iteration and then every BISTO_CHECK = 4
//    iterations; when one lies outside [2^-30, 2^30] it absorbs them into K (K ← diag(u) K
//    diag(v), entries ≤ 1; u = v = 1). Between checks at most 8 half-steps run, so the scalings,
//    and the sums whose reciprocals they are, stay within 2^±(30 + 8·log2 n) ⊆ 2^±70: far from
//    overflow and from the flush-to-zero range of MUFU.RCP. (Up to 3 more iterations follow
//    the last check: 2^±60, then R = K·v·u is formed, K·v first.)
// The scaling loop is specialised for tol = 0 (no per-matrix stop: 4 iterations per check,
// unrolled), and lanes that own no column run with sums of 1 instead of being masked.

#include "common.cuh"

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
  // Smallest normal and largest finite value.
  static __device__ __forceinline__ float tiny() { return 1.17549435e-38f; }
  static __device__ __forceinline__ float huge() { return 3.40282347e38f; }
  // a/b through MUFU.RCP (about 2 ulp) for b in [tiny, huge]: CG's step sizes.
  static __device__ __forceinline__ float div(float a, float b) { return a * rcp(b); }
  // e^d for −SPREAD ≤ d ≤ 0 as MUFU.EX2 of d·log2(e) (relative error below 1e-6 here; the
  // result stays far above the flush-to-zero range).
  static __device__ __forceinline__ float exp_nonpos(float d) {
    return Num<float>::exp2(d * 1.4426950408889634f);
  }
};
template <> struct Bs<double> {
  static __device__ __forceinline__ double spread() { return 690.0; }
  static __device__ __forceinline__ double big() { return 1.2676506002282294e30; }   // 2^100
  static __device__ __forceinline__ double small() { return 7.888609052210118e-31; } // 2^-100
  static __device__ __forceinline__ double rcp(double x) { return 1.0 / x; }
  static __device__ __forceinline__ double pos_inf() {
    return __longlong_as_double(0x7ff0000000000000ULL);
  }
  static __device__ __forceinline__ double exp_nonpos(double d) { return ::exp(d); }
  static __device__ __forceinline__ double tiny() { return 2.2250738585072014e-308; }
  static __device__ __forceinline__ double huge() { return 1.7976931348623157e308; }
  static __device__ __forceinline__ double div(double a, double b) { return a / b; }
};

// Reductions over the N lanes of a group (all 32 lanes must call them).
template <int N, typename V> __device__ __forceinline__ V gsum(V v) {
#pragma unroll
  for (int off = N / 2; off > 0; off >>= 1) v += __shfl_xor_sync(BISTO_FULL, v, off);
  return v;
}
// Two sums at once: the lower half of the group reduces a and the upper half b (one shuffle
// sends each half the other's operand), each half sums its own, then the halves swap their
// results: log2(N) + 1 shuffles for both instead of 2·log2(N). Every lane of the group ends
// with the same bits (the butterfly's additions are commutative).
template <int N, typename V> __device__ __forceinline__ void gsum2(V &a, V &b) {
  if constexpr (N >= 2) {
    const bool hi = (threadIdx.x & (N / 2)) != 0;
    V keep = hi ? b : a;
    const V send = hi ? a : b;
    keep += __shfl_xor_sync(BISTO_FULL, send, N / 2);
#pragma unroll
    for (int off = N / 4; off > 0; off >>= 1) keep += __shfl_xor_sync(BISTO_FULL, keep, off);
    const V other = __shfl_xor_sync(BISTO_FULL, keep, N / 2);
    a = hi ? other : keep;
    b = hi ? keep : other;
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


// init + Σ_i k[i]·s[i] for N values s in shared memory (16-byte aligned): vector loads (one
// LDS.128 per 4 floats / 2 doubles) and two independent FMA chains (one FADD to join them).
template <typename T, int N>
__device__ __forceinline__ T dotv(const T (&k)[N], const T *s, T init = T(0)) {
  T a0 = init, a1 = T(0);
  if constexpr (sizeof(T) == 4 && N >= 4) {
    const float4 *s4 = reinterpret_cast<const float4 *>(s);
#pragma unroll
    for (int q = 0; q < N / 4; ++q) {
      const float4 v = s4[q];
      a0 = fma(k[4 * q], v.x, a0);
      a1 = fma(k[4 * q + 1], v.y, a1);
      a0 = fma(k[4 * q + 2], v.z, a0);
      a1 = fma(k[4 * q + 3], v.w, a1);
    }
  } else if constexpr (sizeof(T) == 8 && N >= 2) {
    const double2 *s2 = reinterpret_cast<const double2 *>(s);
#pragma unroll
    for (int q = 0; q < N / 2; ++q) {
      const double2 v = s2[q];
      a0 = fma(k[2 * q], v.x, a0);
      a1 = fma(k[2 * q + 1], v.y, a1);
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) a0 = fma(k[i], s[i], a0);
  }
  return a0 + a1;
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

// The scaling loop checks its scalings after the first iteration and then every BISTO_CHECK
// iterations (see the header for the bound between checks).
#define BISTO_CHECK 4

// One iteration of the scaling loop: v ← 1/(Kᵀu), then u ← 1/(K v). TOL: matrices stop one
// by one once their column error Σ_t |v_t (Kᵀu)_t − 1| is ≤ tol (checked when `check`).
template <typename T, int N, bool TOL>
__device__ __forceinline__ void sk_iter(const T (&kc)[N], const T (&kr)[N], T &u, T &v, T *su,
                                        T *sv, int tid, int base, T pad, T tol, bool check,
                                        bool &active, bool &met, int &done) {
  T s = dotv<T, N>(kc, su + base, pad);
  const T vn = Bs<T>::rcp(s);
  if constexpr (TOL) {
    if (check) {
      T e = fabs(v * s - T(1)); // 0 on padding lanes (v = s = 1)
      e = gsum<N>(e);
      if (active && e <= tol) {
        active = false;
        met = true;
      }
    }
    if (active) v = vn;
  } else {
    v = vn;
  }
  sv[tid] = v;
  __syncwarp();
  s = dotv<T, N>(kr, sv + base, pad);
  const T un = Bs<T>::rcp(s);
  if constexpr (TOL) {
    if (active) {
      u = un;
      ++done;
    }
  } else {
    u = un;
  }
  su[tid] = u;
  __syncwarp();
}

// When a scaling of the warp lies outside [small, big], absorb them into K:
// K ← diag(u) K diag(v), u = v = 1 (K·v first: K·v ≤ 1 and u ≤ n·e^SPREAD stay finite).
template <typename T, int N>
__device__ __forceinline__ void sk_absorb_if_far(T (&kc)[N], T (&kr)[N], T &u, T &v, T *su,
                                                 T *sv, int tid, int base) {
  const bool far =
      !(u >= Bs<T>::small() && u <= Bs<T>::big() && v >= Bs<T>::small() && v <= Bs<T>::big());
  if (__any_sync(BISTO_FULL, far)) {
#pragma unroll
    for (int j = 0; j < N; ++j) kr[j] = (kr[j] * sv[base + j]) * u;
#pragma unroll
    for (int i = 0; i < N; ++i) kc[i] = (kc[i] * v) * su[base + i];
    u = T(1);
    v = T(1);
    __syncwarp();
    su[tid] = u;
    sv[tid] = v;
    __syncwarp();
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
  // Column t, coalesced across the group's lanes. Rows past n repeat row n − 1 and lanes
  // past n read column n − 1 (past the batch: matrix 0), so every load is in bounds and the
  // max, min and finiteness below need no masks; those copies are zeroed or ignored later.
  {
    const T *xc = x + off + (t < n ? t : n - 1);
    if (n == N) { // constant offsets
#pragma unroll
      for (int i = 0; i < N; ++i) kc[i] = __ldg(xc + i * N);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) kc[i] = __ldg(xc + (i < n ? i : n - 1) * n);
    }
  }
  T mx = kc[0], mn = kc[0], nan_if_not_finite = T(0);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    mx = fmax(mx, kc[i]);
    mn = fmin(mn, kc[i]);
    nan_if_not_finite = fma(kc[i], T(0), nan_if_not_finite); // ±inf·0 and NaN·0 are NaN
  }
  mx = gmax<N>(mx);
  mn = gmin<N>(mn);
  const bool slow =
      __any_sync(BISTO_FULL, own && !(nan_if_not_finite == T(0) && mx - mn <= Bs<T>::spread())) ||
      iters <= 0;
  int done = 0;
  bool active = valid, met = false;
  double err = 0.0;
  T *rm = r + off;
  if (!slow) {
    // Lanes that own no column (t ≥ n, or past the batch) hold K = 0 and add `pad` = 1 to
    // their sums: their scalings stay 1, nothing ever inverts 0, and no select is needed.
    const T pad = own ? T(0) : T(1);
    T u = T(1), v = T(1);
#pragma unroll
    for (int i = 0; i < N; ++i) kc[i] = Bs<T>::exp_nonpos(kc[i] - mx);
    if (!own || n < N) { // zero the copies: K = 0 outside the matrix
#pragma unroll
      for (int i = 0; i < N; ++i) kc[i] = (own && i < n) ? kc[i] : T(0);
    }
    to_rows<T, N>(kc, kr, tile, tid, t, own, n, xm);
    if constexpr (!Tile<T, N>::ON) { // rows re-read from X: exponentiate them too
#pragma unroll
      for (int j = 0; j < N; ++j) kr[j] = (own && j < n) ? Bs<T>::exp_nonpos(kr[j] - mx) : T(0);
    }
    su[tid] = u;
    sv[tid] = v;
    __syncwarp();
    if (tol > T(0)) {
      for (int it = 0; it < iters; ++it) {
        if (!__any_sync(BISTO_FULL, active)) break;
        sk_iter<T, N, true>(kc, kr, u, v, su, sv, tid, base, pad, tol, it > 0, active, met, done);
        if ((it & (BISTO_CHECK - 1)) == 0) sk_absorb_if_far<T, N>(kc, kr, u, v, su, sv, tid, base);
      }
    } else {
      // iters ≥ 1 here. The first iteration, a check, then checks every BISTO_CHECK.
      sk_iter<T, N, false>(kc, kr, u, v, su, sv, tid, base, pad, tol, false, active, met, done);
      sk_absorb_if_far<T, N>(kc, kr, u, v, su, sv, tid, base);
      int it = 1;
      for (; it + BISTO_CHECK <= iters; it += BISTO_CHECK) {
#pragma unroll
        for (int k = 0; k < BISTO_CHECK; ++k)
          sk_iter<T, N, false>(kc, kr, u, v, su, sv, tid, base, pad, tol, false, active, met,
                               done);
        sk_absorb_if_far<T, N>(kc, kr, u, v, su, sv, tid, base);
      }
      for (; it < iters; ++it)
        sk_iter<T, N, false>(kc, kr, u, v, su, sv, tid, base, pad, tol, false, active, met, done);
      done = iters;
    }
    // R_it = K_it v_t u_i, written column-wise (coalesced across the group's lanes).
    if (own) {
      T *rc = rm + t;
      if (n == N) { // constant offsets
#pragma unroll
        for (int i = 0; i < N; ++i) {
          const T val = (kc[i] * v) * su[base + i];
          rc[i * N] = val;
          err += (double)val;
        }
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i) {
          if (i < n) {
            const T val = (kc[i] * v) * su[base + i];
            rc[i * n] = val;
            err += (double)val;
          }
        }
      }
    }
  } else {
    // Log domain in base 2: a = α·log2(e), b = β·log2(e), exactly the CPU's iteration, on
    // X − max X (R does not change; the potentials do not carry the offset, so X + α keeps
    // X's variation; 0 for logits already centred, as the host-array entry points pass them).
    const T l2e = (T)LOGOT_LOG2E;
    to_rows<T, N>(kc, kr, tile, tid, t, own, n, xm);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      kr[j] = (kr[j] - mx) * l2e;
      kc[j] = (kc[j] - mx) * l2e;
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
  // The warp's largest iteration count, largest error (the bits of a non-negative double
  // order like the values) and unconverged count: 32-bit warp reductions (REDUX).
  const u64 e_bits = valid ? (u64)__double_as_longlong(err) : 0ULL;
  const u32 e_hi = __reduce_max_sync(BISTO_FULL, (u32)(e_bits >> 32));
  const u32 e_lo = __reduce_max_sync(BISTO_FULL, (u32)(e_bits >> 32) == e_hi ? (u32)e_bits : 0u);
  const u32 its = __reduce_max_sync(BISTO_FULL, valid ? (u32)done : 0u);
  const u32 unc = __reduce_add_sync(BISTO_FULL, (valid && !met && t == 0) ? 1u : 0u);
  const int warp = tid >> 5;
  if (lane == 0) {
    red[0][warp] = its;
    red[1][warp] = ((u64)e_hi << 32) | e_lo;
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

// S·p = c ⊙ p − Rᵀ diag(1/r) R p for the group's matrix (p, result: one entry per lane; 0 on
// lanes that own no column, whose rows and columns of R are 0). The caller separates the
// last reads of `sa` from this write with a __syncwarp (every use below does).
template <typename T, int N>
__device__ __forceinline__ T schur_apply(const T (&rr)[N], const T (&rc)[N], T inv_row, T cols,
                                         T p, T *sa, T *sb, int tid, int base) {
  sa[tid] = p;
  __syncwarp();
  sb[tid] = inv_row * dotv<T, N>(rr, sa + base);
  __syncwarp();
  return fma(cols, p, -dotv<T, N>(rc, sb + base));
}

// Remove the component along the support indicator w (1/⟨w, w⟩ = inv_ww).
template <int N, typename T> __device__ __forceinline__ T project_off(T v, T w, T inv_ww) {
  return fma(-gsum<N>(v * w) * inv_ww, w, v);
}

// The CG summary of a launch: u64 words, zeroed before the first launch, reduced with atomics.
#define CG_REDO 0        // matrices listed for the f64 redo (the list's length)
#define CG_ITERS 1       // largest iteration count
#define CG_RESIDUAL 2    // largest relative residual (f32 bits: non-negative floats order as integers)
#define CG_UNCONVERGED 3 // matrices whose CG did not converge
#define CG_FIRST_UNCONV 4  // ~index of the first of them (0: none)
#define CG_FIRST_BAD_RHS 5 // ~index of the first matrix with a non-finite right-hand side
#define CG_FIRST_NAN 6     // ~index of the first matrix with a NaN residual
#define CG_WORDS 7

__device__ __forceinline__ void max_if_above(u64 *w, u64 v) {
  if (v > *(volatile u64 *)w) atomicMax(w, v); // most warps see a larger value and skip the atomic
}

// The warp's contribution to the summary: lanes with `mine` report one matrix each. The
// first-offender indices take a warp-wide minimum (rare: only when some flag is set).
__device__ __forceinline__ void cg_report(u64 *sum, bool mine, u32 its, float rel, bool conv,
                                          bool rhs_bad, long long mat) {
  const bool nan = mine && rel != rel;
  const u32 it_max = __reduce_max_sync(BISTO_FULL, mine ? its : 0u);
  const u32 res_max = __reduce_max_sync(BISTO_FULL, (mine && !nan) ? __float_as_uint(rel) : 0u);
  const u32 unconv = __ballot_sync(BISTO_FULL, mine && !conv);
  const u32 bad = __ballot_sync(BISTO_FULL, mine && rhs_bad);
  const u32 nans = __ballot_sync(BISTO_FULL, nan);
  const bool lead = (threadIdx.x & 31) == 0;
  if (lead) {
    max_if_above(&sum[CG_ITERS], it_max);
    max_if_above(&sum[CG_RESIDUAL], res_max);
    if (unconv) atomicAdd(&sum[CG_UNCONVERGED], (u64)__popc(unconv));
  }
  const u32 flags[3] = {unconv, bad, nans};
  const bool mine_flag[3] = {mine && !conv, mine && rhs_bad, nan};
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    if (flags[k]) {
      u64 m = mine_flag[k] ? (u64)mat : ~0ULL;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const u64 o = __shfl_xor_sync(BISTO_FULL, m, off);
        m = o < m ? o : m;
      }
      if (lead) max_if_above(&sum[CG_FIRST_UNCONV + k], ~m);
    }
  }
}

// One u64 per matrix (only when the caller asks, `out` non-null): iterations | converged << 31
// | non-finite right-hand side << 30 | needs f64 << 29 in the low word, the relative residual as
// f32 bits in the high word.
//
// CG runs in the compute precision C. With C = float (f32 data) a matrix whose CG did not
// converge, whose true residual exceeds 10·tol, or whose curvature estimates (Rayleigh
// quotients pᵀSp/pᵀp) span more than 10³ (ill-conditioned: f32 would lose the digits) is
// marked "needs f64"; the FIX variant (C = double) then redoes only the marked matrices, so
// the hard cases get the CPU's f64 CG and the common ones stay in f32. Each matrix enters the
// summary once, from the launch that produced its final outcome.
//
// The step sizes α = ρ/pᵀSp and β = ρ'/ρ use the approximate f32 reciprocal (MUFU.RCP, about
// 1 ulp; a step size off by an ulp leaves CG's recurrences consistent), exact division in f64;
// the stopping test ‖res‖ ≤ tol·‖rhs‖ is evaluated squared, ‖res‖² ≤ (tol·‖rhs‖)².
#define BISTO_NEEDS_F64 0x20000000u
// Matrices marked "needs f64" are appended to `list` (count in sum[CG_REDO]) for the redo.
template <typename T, typename C, int N>
__device__ __forceinline__ void bisto_backward(const T *__restrict__ r, const T *__restrict__ g,
                                               T *__restrict__ dx, long long mat, bool valid,
                                               int n, double tol_d, int max_iters, u64 *out,
                                               u64 *list, u64 *sum, C *sa, C *sb, T *tile) {
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
    // Columns t of R and G, coalesced; rows past n repeat row n − 1 and lanes past n read
    // column n − 1 (every load in bounds), zeroed below.
    T ct[N], rt[N], gc[N];
    const long long cofs = t < n ? t : n - 1;
    if (n == N) { // constant offsets
#pragma unroll
      for (int i = 0; i < N; ++i) {
        ct[i] = __ldg(rm + cofs + i * N);
        gc[i] = __ldg(gm + cofs + i * N);
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const int k = (i < n ? i : n - 1) * n;
        ct[i] = __ldg(rm + cofs + k);
        gc[i] = __ldg(gm + cofs + k);
      }
    }
    if (!own || n < N) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        ct[i] = (own && i < n) ? ct[i] : T(0);
        gc[i] = (own && i < n) ? gc[i] : T(0);
      }
    }
#pragma unroll
    for (int i = 0; i < N; ++i) {
      rc[i] = (C)ct[i];
      cols += rc[i];
      sc = fma((C)gc[i], rc[i], sc);
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
    for (int j = 0; j < N; ++j) sr = fma((C)ct[j], rr[j], sr);
  }
  const C inv_row = rows > C(0) ? C(1) / rows : C(0);
  const C w = (own && cols > C(0)) ? C(1) : C(0);
  const C ww = gsum<N>(w);
  const C inv_ww = ww > C(0) ? C(1) / ww : C(0);
  // rhs = s_c − Rᵀ diag(1/r) s_r
  sa[tid] = inv_row * sr;
  __syncwarp();
  const C rhs = sc - dotv<C, N>(rc, sa + base);
  __syncwarp();
  C res = project_off<N>(rhs, w, inv_ww);
  C rs = gsum<N>(res * res);
  const bool rhs_bad = valid && !(rs - rs == C(0));
  const C bnorm = sqrt(rs);
  const C stop = tol * bnorm, stop2 = stop * stop; // ‖res‖ ≤ tol·‖rhs‖, squared
  bool active = valid && !rhs_bad && rs > C(0) && tol < C(1);
  bool conv = !active;
  int its = 0;
  C xv = C(0), p = res;
  C cmin = Bs<C>::pos_inf(), cmax = C(0);
  for (int k = 0; k < max_iters; ++k) {
    if (!__any_sync(BISTO_FULL, active)) break;
    const C q = schur_apply<C, N>(rr, rc, inv_row, cols, p, sa, sb, tid, base);
    C pq = p * q;
    if constexpr (sizeof(C) == 4) {
      C pp = p * p;
      gsum2<N>(pq, pp);
      if (active && pp >= Bs<C>::tiny()) {
        const C ray = pq * Bs<C>::rcp(pp);
        cmin = fmin(ray, cmin);
        cmax = fmax(ray, cmax);
      }
    } else {
      pq = gsum<N>(pq);
    }
    C alpha = C(0);
    if (active) {
      if (pq >= Bs<C>::tiny() && pq <= Bs<C>::huge())
        alpha = Bs<C>::div(rs, pq);
      else
        active = false; // no positive curvature left along p
    }
    xv = fma(alpha, p, xv);
    res = fma(-alpha, q, res);
    // Project off w and take ‖res‖² in one reduction: ‖r − (c/ww)w‖² = ‖r‖² − c²/ww.
    C cw = res * w, rsn = res * res;
    gsum2<N>(cw, rsn);
    const C coef = cw * inv_ww;
    res = fma(-coef, w, res);
    rsn = fma(-coef, cw, rsn);
    rsn = rsn > C(0) ? rsn : C(0);
    C beta = C(0);
    if (active && alpha != C(0)) {
      ++its;
      if (rsn <= stop2) {
        active = false;
        conv = true;
      } else {
        beta = Bs<C>::div(rsn, rs);
      }
      rs = rsn;
    }
    p = fma(beta, p, res);
  }
  xv = project_off<N>(xv, w, inv_ww);
  // True residual of the returned solution, projected like the right-hand side.
  __syncwarp();
  C q = schur_apply<C, N>(rr, rc, inv_row, cols, xv, sa, sb, tid, base);
  q = project_off<N>(rhs - q, w, inv_ww);
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
  if (own) {
    T *dm = dx + off + t;
    const T *gcol = gm + t;
    if (n == N) { // constant offsets
#pragma unroll
      for (int i = 0; i < N; ++i) {
        C gv;
        if constexpr (KEEP_G)
          gv = (C)gk[i];
        else
          gv = (C)gcol[i * N];
        dm[i * N] = (T)((gv - sb[base + i] - xv) * rc[i]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i < n) {
          C gv;
          if constexpr (KEEP_G)
            gv = (C)gk[i];
          else
            gv = (C)gcol[i * n];
          dm[i * n] = (T)((gv - sb[base + i] - xv) * rc[i]);
        }
    }
  }
  const bool lead = valid && t == 0;
  if (lead) {
    if (out) {
      const u32 word = (u32)its | (conv ? 0x80000000u : 0u) | (rhs_bad ? 0x40000000u : 0u) |
                       (needs_f64 ? BISTO_NEEDS_F64 : 0u);
      out[mat] = (u64)word | ((u64)__float_as_uint((float)rel) << 32);
    }
    if (needs_f64) list[atomicAdd(&sum[CG_REDO], 1ULL)] = (u64)mat;
  }
  cg_report(sum, lead && !needs_f64, (u32)its, (float)rel, conv, rhs_bad, mat);
}

template <typename T, typename C, int N>
__device__ __forceinline__ void bisto_backward_all(const T *r, const T *g, T *dx, long long batch,
                                                   int n, double tol, int max_iters, u64 *out,
                                                   u64 *list, u64 *sum) {
  __shared__ __align__(16) C sa[BISTO_THREADS];
  __shared__ __align__(16) C sb[BISTO_THREADS];
  __shared__ __align__(16) T tile[Tile<T, N>::LEN];
  const long long mat = ((long long)blockIdx.x * BISTO_THREADS + threadIdx.x) / N;
  bisto_backward<T, C, N>(r, g, dx, mat, mat < batch, n, tol, max_iters, out, list, sum, sa, sb,
                          tile);
}

// The f64 redo: groups walk the list of marked matrices (grid-stride, warp-uniform loop).
template <int N>
__device__ __forceinline__ void bisto_backward_fix(const float *r, const float *g, float *dx,
                                                   int n, double tol, int max_iters, u64 *out,
                                                   const u64 *list, u64 *sum) {
  __shared__ __align__(16) double sa[BISTO_THREADS];
  __shared__ __align__(16) double sb[BISTO_THREADS];
  __shared__ __align__(16) float tile[Tile<float, N>::LEN];
  const long long count = (long long)sum[CG_REDO];
  const long long per_warp = 32 / N;
  const long long warp = ((long long)blockIdx.x * BISTO_THREADS + threadIdx.x) >> 5;
  const long long warps = ((long long)gridDim.x * BISTO_THREADS) >> 5;
  const int grp = (threadIdx.x & 31) / N;
  for (long long e0 = warp * per_warp; e0 < count; e0 += warps * per_warp) {
    const long long e = e0 + grp;
    const bool valid = e < count;
    const long long mat = valid ? (long long)list[e] : 0;
    bisto_backward<float, double, N>(r, g, dx, mat, valid, n, tol, max_iters, out, nullptr, sum,
                                     sa, sb, tile);
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
                             double tol, int max_iters, u64 *out, u64 *list, u64 *sum) {      \
    bisto_backward_all<T, T, N>(r, g, dx, batch, n, tol, max_iters, out, list, sum);          \
  }
// The f64 redo of the f32 matrices marked "needs f64".
#define BISTO_FIX(N)                                                                           \
  extern "C" __global__ void __launch_bounds__(BISTO_THREADS)                                 \
      bisto_fix_n##N##_f32(const float *r, const float *g, float *dx, int n, double tol,      \
                           int max_iters, u64 *out, const u64 *list, u64 *sum) {              \
    bisto_backward_fix<N>(r, g, dx, n, tol, max_iters, out, list, sum);                       \
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
