// Batched assignment problems min_σ Σ_i C_iσ(i) (n×n, n ≤ AUC_MAX_N) by the auction
// algorithm with ε-scaling (Bertsekas), one thread block per problem, the whole solve in
// one launch.
//
// Min form with column duals v (v = −price): an unassigned row i bids for
// j1 = argmin_j (C_ij − v_j) (value h1; h2 the second smallest) by lowering v_j1 to
// v_j1 − (h2 − h1) − ε, after which C_ij1 − v_j1 = h2 + ε: i is within ε of its best
// column (ε-complementary slackness). All unassigned rows bid at once (Jacobi); each column
// takes the lowest offered v (the highest price; ties to the lowest row) and its owner,
// if any, is displaced. A phase ends when every row is assigned; ε then shrinks by
// AUC_THETA and the rows that break ε-CS for the new ε are freed. With u_i = C_iσ(i) − v_σ(i),
// ε-CS is u_i + v_j − C_ij ≤ ε for every pair, so Σ_i C_iσ(i) exceeds the optimum by at most
// n·ε: the final ε = scale·2^-AUC_FINAL_LOG2 (scale = max|C|) is below the resolution of
// the costs' sums that can separate two permutations in practice, and the certificate
// measured at the end states how far the answer is from optimal whatever happens.
//
// Prices are f64 (costs are read in T and widened), so ε can go below the cost's own
// resolution in f32. The number of bidding rounds is capped (max_rounds): a problem that
// reaches the cap is marked not converged, its free rows take the free columns in order.
//
// Work: a warp prices one row (lanes stride over columns, then a shuffle merge of the
// lanes' two smallest values); when fewer rows are free than the block has warps, teams of
// several warps share a row, down to the whole block for the last free row.
//
// Layout: cost C is B×n×n (cstride = n·n) or one shared n×n (cstride = 0); points x and y
// are B×n×d (squared Euclidean cost, formed in f64 as Σ_t (x_t − y_t)²). Outputs:
// col_of[b·n + i] (σ), the centred potentials f[b·n + i] and g[b·n + j], c_row[b·n + i] =
// C_iσ(i), and per problem stats[b·AUC_STATS + k]: 0 max_ij (f_i + g_j − C_ij), 1 max_ij |C_ij|,
// 2 max_i |C_iσ(i) − f_i − g_σ(i)|, 3 bidding rounds, 4 converged (1 or 0), 5 phases.

#include "common.cuh"

#define AUC_THREADS 1024
#define AUC_MAX_N 4096
#define AUC_STATS 6
// Shared bytes per column/row: v, bid keys and bid values (8 each), owner, column of row,
// bidding row, free list and bid column (4 each).
#define AUC_SMEM_PER_N 44
#define AUC_THETA 8.0
#define AUC_FINAL_LOG2 45

#define AUC_NONE (-1)
#define AUC_NO_ROW 0x7fffffff

// A double as an unsigned key of the same order (for atomicMin / atomicMax).
__device__ __forceinline__ u64 auc_key(double x) {
  u64 b = (u64)__double_as_longlong(x);
  return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);
}
__device__ __forceinline__ double auc_unkey(u64 k) {
  u64 b = (k >> 63) ? (k & 0x7fffffffffffffffULL) : ~k;
  return __longlong_as_double((long long)b);
}

// The two smallest values of a row and the first column of the smallest.
struct Top2 {
  double h1, h2;
  int j1;
};
__device__ __forceinline__ void top2_push(Top2 &t, double h, int j) {
  if (h < t.h1 || (h == t.h1 && j < t.j1)) {
    t.h2 = t.h1;
    t.h1 = h;
    t.j1 = j;
  } else if (h < t.h2) {
    t.h2 = h;
  }
}
__device__ __forceinline__ Top2 top2_merge(Top2 a, Top2 b) {
  Top2 r;
  if (b.h1 < a.h1 || (b.h1 == a.h1 && b.j1 < a.j1)) {
    r.h1 = b.h1;
    r.j1 = b.j1;
    r.h2 = fmin(a.h1, b.h2);
  } else {
    r.h1 = a.h1;
    r.j1 = a.j1;
    r.h2 = fmin(a.h2, b.h1);
  }
  return r;
}
__device__ __forceinline__ Top2 top2_warp(Top2 t) {
  for (int off = 16; off > 0; off >>= 1) {
    Top2 o;
    o.h1 = __shfl_xor_sync(0xffffffffu, t.h1, off);
    o.h2 = __shfl_xor_sync(0xffffffffu, t.h2, off);
    o.j1 = __shfl_xor_sync(0xffffffffu, t.j1, off);
    t = top2_merge(t, o);
  }
  return t;
}

// The cost of one problem: a stored matrix or two point clouds.
template <typename T, bool POINTS> struct AucCost {
  const T *c; // the problem's n×n matrix
  const T *x; // the problem's n×d points
  const T *y;
  int n, d;
  __device__ __forceinline__ double at(int i, int j) const {
    if (POINTS) {
      const T *xi = x + (long long)i * d;
      const T *yj = y + (long long)j * d;
      double s = 0.0;
      for (int t = 0; t < d; ++t) {
        double e = (double)xi[t] - (double)yj[t];
        s += e * e;
      }
      return s;
    } else {
      return (double)c[(long long)i * n + j];
    }
  }
};

// Row i's two smallest C_ij − v_j over the columns lane, lane + width, … (a partial result).
template <typename T, bool POINTS>
__device__ __forceinline__ Top2 row_scan(const AucCost<T, POINTS> &C, const double *v, int i,
                                         int lane, int width) {
  Top2 t;
  t.h1 = __longlong_as_double(0x7ff0000000000000LL);
  t.h2 = t.h1;
  t.j1 = 0x7fffffff;
  for (int j = lane; j < C.n; j += width) top2_push(t, C.at(i, j) - v[j], j);
  return t;
}

// Row i's bid from its two smallest reduced costs (at the current ε).
__device__ __forceinline__ void place_bid(Top2 t, int i, double eps, const double *v,
                                          u64 *bid_key, int *bid_col, double *bid_val, int n) {
  double h2 = n > 1 ? t.h2 : t.h1;
  double nv = v[t.j1] - (h2 - t.h1) - eps;
  // A bid always lowers the price, even where ε is below the rounding of a large v.
  if (!(nv < v[t.j1])) nv = nextafter(v[t.j1], Num<double>::neg_inf());
  bid_col[i] = t.j1;
  bid_val[i] = nv;
  atomicMin(&bid_key[t.j1], auc_key(nv));
}

template <typename T, bool POINTS>
__device__ void auction(const AucCost<T, POINTS> C, long long max_rounds, int *col_of_out,
                        double *f_out, double *g_out, double *c_row_out, double *stats) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int n = C.n;
  double *v = (double *)smem_raw;
  u64 *bid_key = (u64 *)(v + n);
  double *bid_val = (double *)(bid_key + n);
  int *owner = (int *)(bid_val + n);
  int *col_of = owner + n;
  int *bid_row = col_of + n;
  int *list = bid_row + n;
  int *bid_col = list + n;
  __shared__ Top2 team_part[AUC_THREADS / 32];
  __shared__ double team_h[AUC_THREADS / 32];
  __shared__ double shift;
  __shared__ u64 red[3];
  __shared__ int count;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nwarps = blockDim.x >> 5;

  for (int j = tid; j < n; j += blockDim.x) {
    v[j] = 0.0;
    owner[j] = AUC_NONE;
    col_of[j] = AUC_NONE;
    bid_key[j] = ~0ULL;
    bid_row[j] = AUC_NO_ROW;
  }
  if (tid == 0) {
    red[0] = auc_key(0.0);
    count = 0;
  }
  __syncthreads();

  // The cost's scale, max |C_ij|.
  {
    double m = 0.0;
    for (int i = warp; i < n; i += nwarps)
      for (int j = lane; j < n; j += 32) m = fmax(m, fabs(C.at(i, j)));
    for (int off = 16; off > 0; off >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) atomicMax(&red[0], auc_key(m));
  }
  __syncthreads();
  const double max_abs = auc_unkey(red[0]);
  const double scale = max_abs > 0.0 ? max_abs : 1.0;
  const double eps_final = ldexp(scale, -AUC_FINAL_LOG2);
  double eps = scale / AUC_THETA;
  long long rounds = 0;
  int phases = 0;
  bool capped = false;

  while (true) {
    ++phases;
    // Free the rows that break ε-CS for this ε.
    for (int i = warp; i < n; i += nwarps) {
      int j = col_of[i];
      if (j == AUC_NONE) continue;
      Top2 t = top2_warp(row_scan(C, v, i, lane, 32));
      if (lane == 0 && C.at(i, j) - v[j] > t.h1 + eps) {
        col_of[i] = AUC_NONE;
        owner[j] = AUC_NONE;
      }
    }
    __syncthreads();
    while (true) {
      // The free rows.
      if (tid == 0) count = 0;
      __syncthreads();
      for (int i = tid; i < n; i += blockDim.x)
        if (col_of[i] == AUC_NONE) list[atomicAdd(&count, 1)] = i;
      __syncthreads();
      const int free_rows = count;
      if (free_rows == 0) break;
      if (rounds >= max_rounds) {
        capped = true;
        break;
      }
      ++rounds;
      // Bids.
      if (free_rows >= nwarps) {
        for (int k = warp; k < free_rows; k += nwarps) {
          int i = list[k];
          Top2 t = top2_warp(row_scan(C, v, i, lane, 32));
          if (lane == 0) place_bid(t, i, eps, v, bid_key, bid_col, bid_val, n);
        }
      } else {
        // Teams of w warps, one row each (w a power of two, free_rows·w ≤ nwarps).
        int w = 1;
        while (free_rows * w * 2 <= nwarps) w *= 2;
        const int team = warp / w, rank = warp % w;
        Top2 t;
        t.h1 = __longlong_as_double(0x7ff0000000000000LL);
        t.h2 = t.h1;
        t.j1 = 0x7fffffff;
        if (team < free_rows) t = top2_warp(row_scan(C, v, list[team], rank * 32 + lane, w * 32));
        if (lane == 0) team_part[warp] = t;
        __syncthreads();
        if (team < free_rows && rank == 0 && lane == 0) {
          for (int r = 1; r < w; ++r) t = top2_merge(t, team_part[warp + r]);
          place_bid(t, list[team], eps, v, bid_key, bid_col, bid_val, n);
        }
      }
      __syncthreads();
      // Ties between equal offers go to the lowest row.
      for (int k = tid; k < free_rows; k += blockDim.x) {
        int i = list[k], j = bid_col[i];
        if (bid_key[j] == auc_key(bid_val[i])) atomicMin(&bid_row[j], i);
      }
      __syncthreads();
      // Each column's winner takes it at its offer; the previous owner is freed.
      for (int k = tid; k < free_rows; k += blockDim.x) {
        int i = list[k], j = bid_col[i];
        if (bid_row[j] == i) {
          int o = owner[j];
          if (o != AUC_NONE) col_of[o] = AUC_NONE;
          owner[j] = i;
          col_of[i] = j;
          v[j] = bid_val[i];
        }
      }
      __syncthreads();
      for (int k = tid; k < free_rows; k += blockDim.x) {
        int j = bid_col[list[k]];
        bid_key[j] = ~0ULL;
        bid_row[j] = AUC_NO_ROW;
      }
      __syncthreads();
    }
    if (capped || eps <= eps_final) break;
    eps = fmax(eps / AUC_THETA, eps_final);
  }

  // A capped solve: the free rows take the free columns in order (a permutation still).
  if (capped && tid == 0) {
    int j = 0;
    for (int i = 0; i < n; ++i) {
      if (col_of[i] != AUC_NONE) continue;
      while (owner[j] != AUC_NONE) ++j;
      owner[j] = i;
      col_of[i] = j;
    }
  }
  __syncthreads();
  // The potentials handed back: u_i = C_iσ(i) − v_σ(i) in f64, then both centred as the
  // CPU solvers centre them (equal weights: f = u + c, g = v − c, c = (Σv − Σu)/(2n)).
  double *f = bid_val;
  double su = 0.0, sv = 0.0;
  for (int i = tid; i < n; i += blockDim.x) {
    const int j = col_of[i];
    const double ci = C.at(i, j);
    f[i] = ci - v[j];
    c_row_out[i] = ci;
    col_of_out[i] = j;
    su += f[i];
    sv += v[i];
  }
  __syncthreads();
  su = block_sum(su, team_h);
  __syncthreads();
  sv = block_sum(sv, team_h);
  if (tid == 0) {
    shift = (sv - su) / (2.0 * n);
    red[0] = auc_key(-__longlong_as_double(0x7ff0000000000000LL));
    red[1] = auc_key(0.0);
    red[2] = auc_key(0.0);
  }
  __syncthreads();
  const double c = shift;
  for (int i = tid; i < n; i += blockDim.x) {
    f[i] += c;
    v[i] -= c;
    f_out[i] = f[i];
    g_out[i] = v[i];
  }
  __syncthreads();

  // The certificate of what is handed back: the largest f_i + g_j − C_ij over every pair,
  // max |C| and the slack |C_iσ(i) − f_i − g_σ(i)| on the assignment.
  double viol = -__longlong_as_double(0x7ff0000000000000LL), slack = 0.0, m = 0.0;
  for (int i = warp; i < n; i += nwarps) {
    const double fi = f[i];
    for (int k = lane; k < n; k += 32) {
      const double ck = C.at(i, k);
      viol = fmax(viol, fi + v[k] - ck);
      m = fmax(m, fabs(ck));
    }
    if (lane == 0) slack = fmax(slack, fabs(c_row_out[i] - fi - v[col_of[i]]));
  }
  for (int off = 16; off > 0; off >>= 1) {
    viol = fmax(viol, __shfl_xor_sync(0xffffffffu, viol, off));
    m = fmax(m, __shfl_xor_sync(0xffffffffu, m, off));
    slack = fmax(slack, __shfl_xor_sync(0xffffffffu, slack, off));
  }
  if (lane == 0) {
    atomicMax(&red[0], auc_key(viol));
    atomicMax(&red[1], auc_key(m));
    atomicMax(&red[2], auc_key(slack));
  }
  __syncthreads();
  if (tid == 0) {
    stats[0] = auc_unkey(red[0]);
    stats[1] = auc_unkey(red[1]);
    stats[2] = auc_unkey(red[2]);
    stats[3] = (double)rounds;
    stats[4] = capped ? 0.0 : 1.0;
    stats[5] = (double)phases;
  }
}

// One block per problem: C is B×n×n (cstride = n·n) or shared (cstride = 0).
#define AUCTION_DENSE(T, SUF)                                                                 \
  extern "C" __global__ void __launch_bounds__(AUC_THREADS, 1)                                \
      auction_dense_##SUF(const T *c, long long cstride, int n, long long max_rounds,         \
                          int *col_of, double *f, double *g, double *c_row, double *stats) {  \
    const long long b = blockIdx.x;                                                          \
    AucCost<T, false> C{c + b * cstride, nullptr, nullptr, n, 0};                            \
    auction<T, false>(C, max_rounds, col_of + b * n, f + b * n, g + b * n, c_row + b * n,    \
                      stats + b * AUC_STATS);                                                 \
  }
AUCTION_DENSE(float, f32)
AUCTION_DENSE(double, f64)

// One block per problem: x and y are B×n×d point clouds, C_ij = |x_i − y_j|².
#define AUCTION_POINTS(T, SUF)                                                                \
  extern "C" __global__ void __launch_bounds__(AUC_THREADS, 1)                                \
      auction_points_##SUF(const T *x, const T *y, int n, int d, long long max_rounds,        \
                           int *col_of, double *f, double *g, double *c_row, double *stats) { \
    const long long b = blockIdx.x;                                                          \
    const long long off = b * (long long)n * d;                                              \
    AucCost<T, true> C{nullptr, x + off, y + off, n, d};                                     \
    auction<T, true>(C, max_rounds, col_of + b * n, f + b * n, g + b * n, c_row + b * n,     \
                     stats + b * AUC_STATS);                                                  \
  }
AUCTION_POINTS(float, f32)
AUCTION_POINTS(double, f64)
