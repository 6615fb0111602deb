//! The inner kernels of the point-cloud half-steps and weighted sums: one block of output
//! points against one tile of reduced points, the arguments `v_j = p_j − c_ij/ε` in the
//! direct form or from the cross term, the running log-sum-exp and the weighted sums (see
//! the parent module's docs).

// Lane loops index several fixed-length arrays in step: that is what vectorises.
#![allow(clippy::needless_range_loop)]

use super::*;

/// What the weighted kernel sums besides the plan's mass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Weights {
    /// `Σ_l P_kl c_kl` (one channel).
    Cost,
    /// `Σ_l P_kl (p_k − q_l)` for `c = |p − q|²`, or `Σ_l P_kl (p_k − q_l)/|p_k − q_l|` for
    /// `c = |p − q|` (`d` channels; `p` the output point, `q` the reduced one).
    Displacement,
    /// `Σ_l P_kl V_lc` for `c < k` (values given per reduced point).
    Values(usize),
    /// [`Weights::Displacement`] with each `P_kl` weighted by `â_k + b̂_l − c_kl/ε`: the
    /// values of a problem are `[b̂ (reduced points); â (output points)]` (`d` channels).
    Adjoint,
}

impl Weights {
    pub(super) fn channels(self, d: usize) -> usize {
        match self {
            Weights::Cost => 1,
            Weights::Displacement | Weights::Adjoint => d,
            Weights::Values(k) => k,
        }
    }

    /// Length of one problem's values.
    pub(super) fn values_per_problem(self, len_out: usize, len_red: usize) -> usize {
        match self {
            Weights::Cost | Weights::Displacement => 0,
            Weights::Values(k) => k * len_red,
            Weights::Adjoint => len_red + len_out,
        }
    }
}

pub(super) struct WeightCtx<'a, T> {
    pub(super) what: Weights,
    pub(super) out_raw: &'a [T],
    pub(super) red_raw: &'a [T],
    pub(super) eps: f64,
}

/// Running state of one output point's log-sum-exp: maximum and lane sums relative to it.
#[derive(Clone, Copy)]
pub(super) struct Running<T> {
    max: T,
    acc: [T; L],
}

impl<T: Real> Running<T> {
    fn new() -> Self {
        Running {
            max: T::neg_infinity(),
            acc: [T::zero(); L],
        }
    }
    /// Raise the maximum to `m` (rescaling the sums); returns the new maximum.
    #[inline(always)]
    fn raise<M: MulAdd>(&mut self, m: T) -> T {
        if m > self.max {
            let s = T::exp_nonpos::<M>(self.max - m);
            for a in self.acc.iter_mut() {
                *a *= s;
            }
            self.max = m;
        }
        self.max
    }
    fn value(&self) -> T {
        if self.max == T::neg_infinity() {
            return self.max;
        }
        self.max + self.acc.iter().fold(T::zero(), |a, &b| a + b).ln()
    }
}

#[inline(always)]
pub(super) fn block_lse_k<T: Real, M: MulAdd>(
    pass: &Pass<'_, T>,
    r0: usize,
    pot: &[T],
    out: &mut [T],
) {
    let rows = out.len();
    let mut state = [Running::<T>::new(); ROWS];
    let mut buf = [T::neg_infinity(); MAX_TILE];
    let mut block = BlockCosts::new(pass);
    let tile = block.tile(pass);
    let mut t0 = 0;
    while t0 < pass.len_red {
        let len = tile.min(pass.len_red - t0);
        let padded = len.div_ceil(L) * L;
        let pt = &pot[t0..t0 + len];
        let buf = &mut buf[..padded];
        block.fill::<M>(pass, r0, rows, t0, len);
        for (r, st) in state.iter_mut().enumerate().take(rows) {
            let chunk_max = block.arguments::<M>(pass, r0, r, t0, pt, buf, None);
            let m = st.raise::<M>(chunk_max);
            if m == T::neg_infinity() {
                continue;
            }
            // Pass 2: exponentials relative to the running maximum (padding is −∞).
            for grp in buf.chunks_exact(L) {
                for l in 0..L {
                    st.acc[l] += T::exp_nonpos::<M>(grp[l] - m);
                }
            }
        }
        t0 += len;
    }
    for (o, st) in out.iter_mut().zip(&state) {
        *o = st.value();
    }
}

/// The costs `c/ε` of a block of output points against a tile, by the cross-term kernel
/// (`ROWS × CROSS_TILE`, row-major), when the pass uses it; empty otherwise.
pub(super) struct BlockCosts<T> {
    costs: Vec<T>,
}

impl<T: Real> BlockCosts<T> {
    fn new(pass: &Pass<'_, T>) -> Self {
        let len = if pass.cross.is_some() {
            ROWS * CROSS_TILE
        } else {
            0
        };
        BlockCosts {
            costs: vec![T::zero(); len],
        }
    }

    /// Tile length of the pass.
    fn tile(&self, pass: &Pass<'_, T>) -> usize {
        if pass.cross.is_some() {
            CROSS_TILE
        } else {
            tile_len::<T>(pass.d)
        }
    }

    /// Costs of the output points `r0..r0 + rows` against the reduced points `t0..t0 + len`
    /// (nothing in the direct form, which computes them row by row in [`arguments`]).
    #[inline(always)]
    fn fill<M: MulAdd>(
        &mut self,
        pass: &Pass<'_, T>,
        r0: usize,
        rows: usize,
        t0: usize,
        len: usize,
    ) {
        let Some(cp) = &pass.cross else { return };
        debug_assert!(rows <= ROWS && ROWS % MR == 0 && padded_cols::<T>(len) <= CROSS_TILE);
        cross_block::<T, M>(
            cp.out,
            r0,
            rows,
            cp.red,
            t0,
            len,
            &mut self.costs,
            CROSS_TILE,
        );
        for (r, row) in self
            .costs
            .chunks_exact_mut(CROSS_TILE)
            .take(rows)
            .enumerate()
        {
            finish_costs(
                cp.out,
                r0 + r,
                cp.red,
                t0,
                pass.root,
                cp.inv_eps,
                &mut row[..len],
            );
        }
    }

    /// Pass 1 for output point `r0 + r` of the block (see [`arguments`]).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn arguments<M: MulAdd>(
        &self,
        pass: &Pass<'_, T>,
        r0: usize,
        r: usize,
        t0: usize,
        pot: &[T],
        buf: &mut [T],
        costs: Option<&mut [T]>,
    ) -> T {
        if pass.cross.is_none() {
            return arguments::<T, M>(pass, r0 + r, t0, pot, buf, costs);
        }
        let len = pot.len();
        let c = &self.costs[r * CROSS_TILE..r * CROSS_TILE + len];
        if let Some(cb) = costs {
            cb[..len].copy_from_slice(c);
        }
        let mut mx = [T::neg_infinity(); L];
        let (head, tail) = buf.split_at_mut(len / L * L);
        for ((bg, pg), cg) in head
            .chunks_exact_mut(L)
            .zip(pot.chunks_exact(L))
            .zip(c.chunks_exact(L))
        {
            for l in 0..L {
                let v = pg[l] - cg[l];
                bg[l] = v;
                mx[l] = if v > mx[l] { v } else { mx[l] };
            }
        }
        let rest = len % L;
        for (l, b) in tail.iter_mut().enumerate() {
            *b = if l < rest {
                let v = pot[len - rest + l] - c[len - rest + l];
                mx[l] = if v > mx[l] { v } else { mx[l] };
                v
            } else {
                T::neg_infinity()
            };
        }
        fold_max(&mx)
    }
}

/// Pass 1 for output point `i` and the tile starting at `t0`:
/// `buf[l] = pot[l] − c(i, t0 + l)/ε` (padding set to −∞); returns the maximum.
#[inline(always)]
pub(super) fn arguments<T: Real, M: MulAdd>(
    pass: &Pass<'_, T>,
    i: usize,
    t0: usize,
    pot: &[T],
    buf: &mut [T],
    costs: Option<&mut [T]>,
) -> T {
    let len = pot.len();
    let (lo, lr) = (pass.len_out, pass.len_red);
    let p = |k: usize| pass.out_pts[k * lo + i];
    let q = |k: usize| &pass.red_pts[k * lr + t0..k * lr + t0 + len];
    let max = match (pass.d, pass.root) {
        (1, false) => args_fixed::<T, M, 1, false>([p(0)], [q(0)], pot, buf, costs),
        (2, false) => args_fixed::<T, M, 2, false>([p(0), p(1)], [q(0), q(1)], pot, buf, costs),
        (3, false) => {
            let (pp, qq) = ([p(0), p(1), p(2)], [q(0), q(1), q(2)]);
            args_fixed::<T, M, 3, false>(pp, qq, pot, buf, costs)
        }
        (1, true) => args_fixed::<T, M, 1, true>([p(0)], [q(0)], pot, buf, costs),
        (2, true) => args_fixed::<T, M, 2, true>([p(0), p(1)], [q(0), q(1)], pot, buf, costs),
        (3, true) => {
            let (pp, qq) = ([p(0), p(1), p(2)], [q(0), q(1), q(2)]);
            args_fixed::<T, M, 3, true>(pp, qq, pot, buf, costs)
        }
        (d, root) => args_any::<T, M>(d, root, &p, &q, pot, buf, costs),
    };
    for slot in buf.iter_mut().skip(len) {
        *slot = T::neg_infinity();
    }
    max
}

/// Lane-wise maximum folded to one value.
#[inline(always)]
pub(super) fn fold_max<T: Real>(mx: &[T; L]) -> T {
    mx.iter()
        .fold(T::neg_infinity(), |a, &b| if b > a { b } else { a })
}

/// [`arguments`] for a fixed dimension `D ≤ 3`: the cost stays in registers. Groups of
/// [`L`] pairs with fixed-length slices, so the lane loops carry no bounds checks.
#[inline(always)]
pub(super) fn args_fixed<T: Real, M: MulAdd, const D: usize, const ROOT: bool>(
    p: [T; D],
    q: [&[T]; D],
    pot: &[T],
    buf: &mut [T],
    mut costs: Option<&mut [T]>,
) -> T {
    let len = pot.len();
    let full = len / L * L;
    let mut mx = [T::neg_infinity(); L];
    for o in (0..full).step_by(L) {
        let mut c = [T::zero(); L];
        dist_group::<T, M, D, ROOT>(&p, q.map(|s| &s[o..o + L]), &mut c);
        if let Some(cb) = costs.as_deref_mut() {
            cb[o..o + L].copy_from_slice(&c);
        }
        let pv = &pot[o..o + L];
        let bv = &mut buf[o..o + L];
        for l in 0..L {
            let v = pv[l] - c[l];
            bv[l] = v;
            mx[l] = if v > mx[l] { v } else { mx[l] };
        }
    }
    if full < len {
        // The tail, padded with copies of the last point (their values are overwritten).
        let rest = len - full;
        let mut qt = [[T::zero(); L]; D];
        for k in 0..D {
            for l in 0..L {
                qt[k][l] = q[k][full + l.min(rest - 1)];
            }
        }
        let mut c = [T::zero(); L];
        dist_group::<T, M, D, ROOT>(&p, std::array::from_fn(|k| &qt[k][..]), &mut c);
        if let Some(cb) = costs {
            cb[full..len].copy_from_slice(&c[..rest]);
        }
        for l in 0..rest {
            let v = pot[full + l] - c[l];
            buf[full + l] = v;
            mx[l] = if v > mx[l] { v } else { mx[l] };
        }
    }
    fold_max(&mx)
}

/// `c[l] = c(p, q_l)/ε` for a group of [`L`] points (scaled coordinates).
#[inline(always)]
pub(super) fn dist_group<T: Real, M: MulAdd, const D: usize, const ROOT: bool>(
    p: &[T; D],
    qs: [&[T]; D],
    c: &mut [T; L],
) {
    for k in 0..D {
        let qk = &qs[k][..L];
        for l in 0..L {
            let t = p[k] - qk[l];
            c[l] = M::mul_add(t, t, c[l]);
        }
    }
    if ROOT {
        for v in c.iter_mut() {
            *v = v.sqrt();
        }
    }
}

/// [`arguments`] for any dimension: the squared distances accumulate in `buf`, one
/// coordinate at a time.
#[inline(always)]
pub(super) fn args_any<'q, T: Real + 'q, M: MulAdd>(
    d: usize,
    root: bool,
    p: &impl Fn(usize) -> T,
    q: &impl Fn(usize) -> &'q [T],
    pot: &[T],
    buf: &mut [T],
    costs: Option<&mut [T]>,
) -> T {
    let len = pot.len();
    let buf = &mut buf[..len];
    buf.fill(T::zero());
    for k in 0..d {
        let (pk, qk) = (p(k), &q(k)[..len]);
        for (b, &y) in buf.iter_mut().zip(qk) {
            let t = pk - y;
            *b = M::mul_add(t, t, *b);
        }
    }
    if root {
        for b in buf.iter_mut() {
            *b = b.sqrt();
        }
    }
    if let Some(cb) = costs {
        cb[..len].copy_from_slice(buf);
    }
    let mut mx = [T::neg_infinity(); L];
    let mut groups = buf.chunks_exact_mut(L);
    let mut pots = pot.chunks_exact(L);
    for (bg, pg) in (&mut groups).zip(&mut pots) {
        for l in 0..L {
            let v = pg[l] - bg[l];
            bg[l] = v;
            mx[l] = if v > mx[l] { v } else { mx[l] };
        }
    }
    for (b, &pv) in groups.into_remainder().iter_mut().zip(pots.remainder()) {
        let v = pv - *b;
        *b = v;
        mx[0] = if v > mx[0] { v } else { mx[0] };
    }
    fold_max(&mx)
}

#[inline(always)]
pub(super) fn block_weighted_k<T: Real, M: MulAdd>(
    pass: &Pass<'_, T>,
    w: &WeightCtx<'_, T>,
    r0: usize,
    own: &[T],
    pot: &[T],
    vals: &[T],
    res: &mut [f64],
) {
    let rows = own.len();
    let ch = w.what.channels(pass.d);
    let (lo, lr) = (pass.len_out, pass.len_red);
    // Per row: the running maximum and (1 + ch) lane sums.
    let mut max = [T::neg_infinity(); ROWS];
    let mut acc = vec![[T::zero(); L]; ROWS * (1 + ch)];
    let mut cost_buf = [T::zero(); MAX_TILE];
    let mut args = [T::neg_infinity(); MAX_TILE];
    let mut ex = [T::zero(); MAX_TILE];
    let mut prod = [T::zero(); MAX_TILE];
    let mut factor = [T::zero(); MAX_TILE];
    let eps = T::of(w.eps);
    let mut block = BlockCosts::new(pass);
    let tile = block.tile(pass);
    let mut t0 = 0;
    while t0 < lr {
        let len = tile.min(lr - t0);
        let padded = len.div_ceil(L) * L;
        let pt = &pot[t0..t0 + len];
        block.fill::<M>(pass, r0, rows, t0, len);
        for r in 0..rows {
            let i = r0 + r;
            if own[r] == T::neg_infinity() {
                continue;
            }
            // The arguments pot − c/ε (padding −∞) and c/ε itself (padding 0).
            let nc = &mut cost_buf[..padded];
            let args = &mut args[..padded];
            let mx = block.arguments::<M>(pass, r0, r, t0, pt, args, Some(&mut nc[..len]));
            for c in nc.iter_mut().skip(len) {
                *c = T::zero();
            }
            let a_row = &mut acc[r * (1 + ch)..(r + 1) * (1 + ch)];
            if mx > max[r] {
                let s = T::exp_nonpos::<M>(max[r] - mx);
                for lanes in a_row.iter_mut() {
                    for a in lanes.iter_mut() {
                        *a *= s;
                    }
                }
                max[r] = mx;
            }
            let m = max[r];
            if m == T::neg_infinity() {
                continue;
            }
            if w.what == Weights::Cost {
                // One fused pass: Σ e and Σ e·c/ε (padding: e tiny, c = 0).
                let (mut mass, mut cost) = (a_row[0], a_row[1]);
                for (ag, cg) in args.chunks_exact(L).zip(nc.chunks_exact(L)) {
                    for l in 0..L {
                        let e = T::exp_nonpos::<M>(ag[l] - m);
                        mass[l] += e;
                        cost[l] = M::mul_add(e, cg[l], cost[l]);
                    }
                }
                a_row[0] = mass;
                a_row[1] = cost;
                continue;
            }
            let ex = &mut ex[..padded];
            for (e, &a) in ex.iter_mut().zip(args.iter()) {
                *e = T::exp_nonpos::<M>(a - m);
            }
            for e in ex.iter_mut().skip(len) {
                *e = T::zero();
            }
            lane_sum(&mut a_row[0], ex);
            let prod = &mut prod[..padded];
            match w.what {
                // Handled by the fused pass above.
                Weights::Cost => {}
                Weights::Values(k) => {
                    for c in 0..k {
                        let vc = &vals[c * lr + t0..c * lr + t0 + len];
                        for ((pv, &e), &v) in prod.iter_mut().zip(ex.iter()).zip(vc) {
                            *pv = e * v;
                        }
                        for pv in prod.iter_mut().skip(len) {
                            *pv = T::zero();
                        }
                        lane_sum(&mut a_row[1 + c], prod);
                    }
                }
                Weights::Displacement | Weights::Adjoint => {
                    // Weights e (squared Euclidean), or e/|p − q| = e/(ε·c/ε) for the
                    // Euclidean cost (the unit vector; 0 where p = q); for the adjoint,
                    // e·(â_i + b̂_l − c/ε) (padding: e = 0).
                    let fac = &mut factor[..padded];
                    if w.what == Weights::Adjoint {
                        let (bh, ai) = (&vals[t0..t0 + len], vals[lr + i]);
                        for (((wv, &e), &c), &bl) in
                            prod.iter_mut().zip(ex.iter()).zip(nc.iter()).zip(bh)
                        {
                            *wv = e * (ai + bl - c);
                        }
                        for wv in prod.iter_mut().skip(len) {
                            *wv = T::zero();
                        }
                    }
                    let wts: &[T] = if w.what == Weights::Adjoint { prod } else { ex };
                    for ((fv, &e), &c) in fac.iter_mut().zip(wts).zip(nc.iter()) {
                        *fv = if !pass.root {
                            e
                        } else if c > T::zero() && e != T::zero() {
                            e / (c * eps)
                        } else {
                            T::zero()
                        };
                    }
                    for k in 0..pass.d {
                        let pk = w.out_raw[k * lo + i];
                        let qk = &w.red_raw[k * lr + t0..k * lr + t0 + len];
                        for ((pv, &fv), &q) in prod.iter_mut().zip(fac.iter()).zip(qk) {
                            *pv = fv * (pk - q);
                        }
                        for pv in prod.iter_mut().skip(len) {
                            *pv = T::zero();
                        }
                        lane_sum(&mut a_row[1 + k], prod);
                    }
                }
            }
        }
        t0 += len;
    }
    for r in 0..rows {
        let out = &mut res[r * (1 + ch)..(r + 1) * (1 + ch)];
        if own[r] == T::neg_infinity() || max[r] == T::neg_infinity() {
            out.fill(0.0);
            continue;
        }
        let scale = (own[r].f64() / w.eps + max[r].f64()).exp();
        for (c, o) in out.iter_mut().enumerate() {
            let s: f64 = acc[r * (1 + ch) + c].iter().map(|v| v.f64()).sum();
            *o = scale * s;
        }
        if w.what == Weights::Cost {
            out[1] *= w.eps;
        }
    }
}

/// `acc[l] += Σ_g v[g·L + l]` (`v.len()` a multiple of [`L`]).
#[inline(always)]
pub(super) fn lane_sum<T: Real>(acc: &mut [T; L], v: &[T]) {
    for grp in v.chunks_exact(L) {
        for l in 0..L {
            acc[l] += grp[l];
        }
    }
}
