// Part of the Sinkhorn module (sinkstep.cu includes its parts in order, and NVRTC
// compiles them as one source): the fused loop of small problems (one block or
// cluster a problem).

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

// Most threads of a fused block (the host sizes blocks up to it), and the consecutive
// outputs a lane group reduces (FL of the entry points).
#define FUSED_MAX_THREADS 1024
#define FUSED_OUTPUTS 4

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
