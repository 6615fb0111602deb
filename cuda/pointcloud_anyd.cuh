// Part of the point-cloud module (pointcloud.cu includes its parts in order, and NVRTC
// compiles them as one source): any dimension, the cross term by register-blocked dot
// products (pc_sinkstep_dn, pc_rows_dn).

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
