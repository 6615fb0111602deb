//! The primal network simplex for the transportation problem
//! `min ⟨P, C⟩ s.t. P·1 = a, Pᵀ·1 = b, P ≥ 0` (every `a_i`, `b_j` > 0, equal totals).
//!
//! The bipartite graph (arc `i → j` of cost `C_ij` for every pair) is never stored: an arc
//! is its pair of indices, the costs come from a [`Costs`] source, and only the spanning
//! tree of the current basis lives in memory, as the parent / thread / successor-count
//! representation of Kelly and O'Neill (the layout of LEMON's network simplex, which POT's
//! `emd` runs). Capacities are infinite, so a non-basic arc carries no flow: a pair is
//! either a tree arc or an empty one.
//!
//! Start: an artificial root joined to every source by an arc `i → root` of cost 0 carrying
//! `a_i`, and to every target by `root → j` of cost `A > max C` carrying `b_j`. A pair
//! whose flow passes through the root `i → root → j` costs `A > C_ij`, so at an optimum no
//! artificial arc carries flow. Node potentials `π` make every tree arc tight
//! (`c + π_source − π_target = 0`); the dual of the transport problem is
//! `f_i = −π_i`, `g_j = π_j` (`f_i + g_j ≤ C_ij` exactly when the reduced cost
//! `C_ij + π_i − π_j ≥ 0`).
//!
//! Pivot: block search (LEMON's rule): rows are scanned from where the last search stopped,
//! in blocks of about `√(n·m)` pairs; the most negative reduced cost of the first block
//! that has one enters (negative beyond `10·eps` of the magnitudes involved, LEMON's
//! tolerance). Its cycle in the tree gives the leaving arc by the strongly feasible rule
//! (the last blocking arc met in the cycle's direction from the join node), which keeps
//! zero-flow tree arcs pointing away from the root and rules out cycling on degenerate
//! pivots. Optimal when a full pass finds no entering pair.

use super::costs::{row_of, Costs};
use rayon::prelude::*;
use std::time::Instant;

const NONE: u32 = u32::MAX;

/// Relative tolerance under which a negative reduced cost is rounding (LEMON's `EPSILON`).
const PRICE_TOL: f64 = 10.0 * f64::EPSILON;

/// How a solve ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// No pair has a negative reduced cost: the basis is optimal.
    Optimal,
    /// The iteration limit was reached first.
    IterationLimit,
    /// The time limit was reached first.
    TimeLimit,
    /// A tree arc kept a negative reduced cost after the potentials were recomputed from
    /// the tree (rounding beyond the pricing tolerance): stopped rather than loop.
    Stalled,
}

/// The spanning tree of a basis with its flows and node potentials.
///
/// Nodes: sources `0..n`, targets `n..n+m`, the root `n+m`. The tree arc of a node joins it
/// to its parent: `forward[u]` says it points from `u` to the parent; `flow[u]` and
/// `cost[u]` are its flow and cost.
pub(crate) struct NetworkSimplex {
    n: usize,
    m: usize,
    root: usize,
    parent: Vec<u32>,
    thread: Vec<u32>,
    rev_thread: Vec<u32>,
    succ_num: Vec<u32>,
    last_succ: Vec<u32>,
    forward: Vec<bool>,
    flow: Vec<f64>,
    cost: Vec<f64>,
    pi: Vec<f64>,
    dirty_revs: Vec<u32>,
    /// Pivots made.
    pub(crate) iterations: usize,
    /// Where the next pricing pass starts (a row).
    next_row: usize,
}

/// The entering pair of a pivot.
struct Entering {
    i: usize,
    j: usize,
    cost: f64,
}

impl NetworkSimplex {
    /// The artificial starting basis of sources of mass `a` and targets of mass `b` (all
    /// positive, equal totals) with artificial cost `art` (greater than every cost).
    pub(crate) fn new(a: &[f64], b: &[f64], art: f64) -> Self {
        let (n, m) = (a.len(), b.len());
        let root = n + m;
        let nodes = root + 1;
        let mut s = NetworkSimplex {
            n,
            m,
            root,
            parent: vec![root as u32; nodes],
            thread: (1..=nodes as u32).collect(),
            rev_thread: vec![0; nodes],
            succ_num: vec![1; nodes],
            last_succ: (0..nodes as u32).collect(),
            forward: vec![true; nodes],
            flow: vec![0.0; nodes],
            cost: vec![0.0; nodes],
            pi: vec![0.0; nodes],
            dirty_revs: Vec::new(),
            iterations: 0,
            next_row: 0,
        };
        for u in 1..nodes {
            s.rev_thread[u] = (u - 1) as u32;
        }
        s.parent[root] = NONE;
        s.thread[root] = 0;
        s.rev_thread[0] = root as u32;
        s.succ_num[root] = nodes as u32;
        s.last_succ[root] = (root - 1) as u32;
        for (i, &ai) in a.iter().enumerate() {
            s.flow[i] = ai;
        }
        for (j, &bj) in b.iter().enumerate() {
            let u = n + j;
            s.forward[u] = false;
            s.flow[u] = bj;
            s.cost[u] = art;
            s.pi[u] = art;
        }
        s
    }

    /// Pivot until optimal or a limit is reached. With `candidates > 0` (and fewer than
    /// half the columns) pricing scans candidate lists, grown by full passes
    /// ([`Self::run_candidates`]); otherwise every pair, in blocks.
    pub(crate) fn run<C: Costs>(
        &mut self,
        costs: &C,
        max_iters: usize,
        deadline: Option<Instant>,
        candidates: usize,
    ) -> Stop {
        if candidates > 0 && 2 * candidates < self.m {
            return self.run_candidates(costs, max_iters, deadline, candidates);
        }
        let (n, m) = (self.n, self.m);
        // Rows per pricing block: about √(n·m) pairs, whole rows.
        let block_rows = (((n * m) as f64).sqrt() / m as f64).ceil().max(1.0) as usize;
        let mut scratch = Vec::new();
        let mut refreshed_at = None;
        loop {
            let Some(e) = self.find_entering(costs, block_rows, &mut scratch) else {
                return Stop::Optimal;
            };
            if let Some(stop) = self.step(e, max_iters, deadline, &mut refreshed_at) {
                return stop;
            }
        }
    }

    /// One pivot on `e` unless a limit is reached first (returned), or `e` is a tree arc
    /// (potentials recomputed instead; twice at the same iteration is a stall).
    fn step(
        &mut self,
        e: Entering,
        max_iters: usize,
        deadline: Option<Instant>,
        refreshed_at: &mut Option<usize>,
    ) -> Option<Stop> {
        if self.iterations >= max_iters {
            return Some(Stop::IterationLimit);
        }
        if self.iterations % 1024 == 0 && deadline.is_some_and(|t| Instant::now() >= t) {
            return Some(Stop::TimeLimit);
        }
        if self.is_tree_arc(e.i, e.j) {
            // A tree arc priced negative: the potentials drifted by rounding. Recompute
            // them from the tree, which makes every tree arc tight again.
            if *refreshed_at == Some(self.iterations) {
                return Some(Stop::Stalled);
            }
            *refreshed_at = Some(self.iterations);
            self.refresh_potentials();
            return None;
        }
        self.pivot(e);
        None
    }

    /// Pricing on candidate lists: each row starts with its `k` cheapest columns; block
    /// search runs over the lists (blocks of about √(total candidates) pairs); when no
    /// candidate prices negative, a full pass over every pair (rows in parallel) appends
    /// to each row its `k` most negative reduced costs beyond the tolerance. Optimal when
    /// a full pass finds none: the same test as pricing every pair, so the lists change
    /// the speed, never the result.
    fn run_candidates<C: Costs>(
        &mut self,
        costs: &C,
        max_iters: usize,
        deadline: Option<Instant>,
        k: usize,
    ) -> Stop {
        let (n, m) = (self.n, self.m);
        let mut cand: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
            .into_par_iter()
            .map_init(Vec::new, |buf, i| {
                let row = row_of(costs, i, buf);
                let mut idx: Vec<u32> = (0..m as u32).collect();
                idx.select_nth_unstable_by(k - 1, |&x, &y| {
                    row[x as usize].total_cmp(&row[y as usize])
                });
                idx.truncate(k);
                let c = idx.iter().map(|&j| row[j as usize]).collect();
                (idx, c)
            })
            .collect();
        let mut refreshed_at = None;
        loop {
            let total: usize = cand.iter().map(|c| c.0.len()).sum();
            let block = ((total as f64).sqrt() as usize).max(k);
            while let Some(e) = self.find_entering_in(&cand, block) {
                if let Some(stop) = self.step(e, max_iters, deadline, &mut refreshed_at) {
                    return stop;
                }
            }
            if deadline.is_some_and(|t| Instant::now() >= t) {
                return Stop::TimeLimit;
            }
            // Full pass: the most negative reduced costs of every row.
            let (pi_src, pi_dst) = self.pi.split_at(n);
            let pi_dst = &pi_dst[..m];
            let found: Vec<Vec<(u32, f64, f64)>> = (0..n)
                .into_par_iter()
                .map_init(Vec::new, |buf, i| {
                    let row = row_of(costs, i, buf);
                    let pi = pi_src[i];
                    let mut neg: Vec<(u32, f64, f64)> = Vec::new();
                    for (j, (&c, &h)) in row.iter().zip(pi_dst).enumerate() {
                        let rc = c + pi - h;
                        if rc < -PRICE_TOL * (c.abs() + pi.abs() + h.abs()) {
                            neg.push((j as u32, c, rc));
                        }
                    }
                    if neg.len() > k {
                        neg.select_nth_unstable_by(k - 1, |x, y| x.2.total_cmp(&y.2));
                        neg.truncate(k);
                    }
                    neg
                })
                .collect();
            let mut added = 0;
            for (c, f) in cand.iter_mut().zip(found) {
                added += f.len();
                for (j, cost, _) in f {
                    c.0.push(j);
                    c.1.push(cost);
                }
            }
            if added == 0 {
                return Stop::Optimal;
            }
        }
    }

    /// Block search over the candidate lists from `next_row`: the most negative reduced
    /// cost of the first block (about `block` pairs) that has one beyond the tolerance.
    fn find_entering_in(
        &mut self,
        cand: &[(Vec<u32>, Vec<f64>)],
        block: usize,
    ) -> Option<Entering> {
        let n = self.n;
        let (pi_src, pi_dst) = self.pi.split_at(n);
        let mut best = (0.0f64, 0usize, 0usize, 0.0f64);
        let mut in_block = 0;
        for k in 0..n {
            let i = (self.next_row + k) % n;
            let (cols, cs) = &cand[i];
            let pi = pi_src[i];
            for (&j, &c) in cols.iter().zip(cs) {
                let rc = c + pi - pi_dst[j as usize];
                if rc < best.0 {
                    best = (rc, i, j as usize, c);
                }
            }
            in_block += cols.len();
            if in_block >= block || k + 1 == n {
                in_block = 0;
                let (rc, bi, bj, c) = best;
                if rc < 0.0 {
                    let scale = c.abs().max(pi_src[bi].abs()).max(pi_dst[bj].abs());
                    if rc < -PRICE_TOL * scale {
                        self.next_row = (i + 1) % n;
                        return Some(Entering {
                            i: bi,
                            j: bj,
                            cost: c,
                        });
                    }
                }
            }
        }
        None
    }

    /// Block search from `next_row`: the most negative reduced cost of the first block
    /// that has one beyond the tolerance, or `None` after a full pass without one.
    fn find_entering<C: Costs>(
        &mut self,
        costs: &C,
        block_rows: usize,
        scratch: &mut Vec<f64>,
    ) -> Option<Entering> {
        let n = self.n;
        let (pi_src, pi_dst) = self.pi.split_at(n);
        let pi_dst = &pi_dst[..self.m];
        let mut best = (0.0f64, 0usize, 0usize);
        let mut in_block = 0;
        for k in 0..n {
            let i = (self.next_row + k) % n;
            let (v, j) = costs.row_min(i, pi_dst, scratch);
            let rc = v + pi_src[i];
            if rc < best.0 {
                best = (rc, i, j);
            }
            in_block += 1;
            if in_block == block_rows || k + 1 == n {
                in_block = 0;
                if best.0 < 0.0 {
                    let (rc, bi, bj) = best;
                    let c = costs.at(bi, bj);
                    let scale = c.abs().max(pi_src[bi].abs()).max(pi_dst[bj].abs());
                    if rc < -PRICE_TOL * scale {
                        self.next_row = (i + 1) % n;
                        return Some(Entering {
                            i: bi,
                            j: bj,
                            cost: c,
                        });
                    }
                }
            }
        }
        None
    }

    fn is_tree_arc(&self, i: usize, j: usize) -> bool {
        let t = (self.n + j) as u32;
        self.parent[i] == t || self.parent[t as usize] == i as u32
    }

    /// One pivot on the entering pair `i → j`.
    fn pivot(&mut self, e: Entering) {
        let s = e.i;
        let t = self.n + e.j;
        // Join node: the first common ancestor.
        let (mut u, mut v) = (s, t);
        while u != v {
            if self.succ_num[u] < self.succ_num[v] {
                u = self.parent[u] as usize;
            } else {
                v = self.parent[v] as usize;
            }
        }
        let join = u;
        // Leaving arc: the cycle runs s → t along the entering arc, then t → join → s in
        // the tree. Arcs against that direction block it; the last blocking arc met from
        // the join node (ties go to the t side) keeps the tree strongly feasible.
        let mut delta = f64::INFINITY;
        let mut u_out = NONE as usize;
        let mut on_second = false;
        let mut u = s;
        while u != join {
            if self.forward[u] && self.flow[u] < delta {
                delta = self.flow[u];
                u_out = u;
            }
            u = self.parent[u] as usize;
        }
        let mut u = t;
        while u != join {
            if !self.forward[u] && self.flow[u] <= delta {
                delta = self.flow[u];
                u_out = u;
                on_second = true;
            }
            u = self.parent[u] as usize;
        }
        debug_assert!(
            u_out != NONE as usize,
            "a transport cycle always has a blocking arc"
        );
        let (u_in, v_in) = if on_second { (t, s) } else { (s, t) };
        // Push delta around the cycle.
        if delta > 0.0 {
            let mut u = s;
            while u != join {
                self.flow[u] += if self.forward[u] { -delta } else { delta };
                u = self.parent[u] as usize;
            }
            let mut u = t;
            while u != join {
                self.flow[u] += if self.forward[u] { delta } else { -delta };
                u = self.parent[u] as usize;
            }
        }
        self.update_tree(u_in, v_in, u_out, join, s, delta, e.cost);
        // Potentials of the subtree that moved under v_in.
        let sigma = if self.forward[u_in] {
            self.pi[v_in] - self.pi[u_in] - self.cost[u_in]
        } else {
            self.pi[v_in] - self.pi[u_in] + self.cost[u_in]
        };
        let end = self.thread[self.last_succ[u_in] as usize];
        let mut u = u_in as u32;
        while u != end {
            self.pi[u as usize] += sigma;
            u = self.thread[u as usize];
        }
        self.iterations += 1;
    }

    /// Replace the tree arc of `u_out` by the entering arc `u_in – v_in` (source `s`, flow
    /// `delta`, cost `c_in`): the stem from `u_in` up to `u_out` is re-hung under `v_in`
    /// and the thread, successor counts and last successors are patched.
    #[allow(clippy::too_many_arguments)]
    fn update_tree(
        &mut self,
        u_in: usize,
        v_in: usize,
        u_out: usize,
        join: usize,
        s: usize,
        delta: f64,
        c_in: f64,
    ) {
        let old_rev_thread = self.rev_thread[u_out];
        let old_succ_num = self.succ_num[u_out];
        let old_last_succ = self.last_succ[u_out];
        let v_out = self.parent[u_out];

        let mut u = self.last_succ[u_in];
        let mut right = self.thread[u as usize];
        let last = if old_rev_thread == v_in as u32 {
            self.thread[self.last_succ[u_out] as usize]
        } else {
            self.thread[v_in]
        };

        // Walk the stem from u_in to u_out: splice each stem node's subtree into the thread
        // after the previous one and reverse the parent links.
        self.thread[v_in] = u_in as u32;
        let mut stem = u_in as u32;
        self.dirty_revs.clear();
        self.dirty_revs.push(v_in as u32);
        let mut par_stem = v_in as u32;
        while stem != u_out as u32 {
            let new_stem = self.parent[stem as usize];
            self.thread[u as usize] = new_stem;
            self.dirty_revs.push(u);
            let w = self.rev_thread[stem as usize];
            self.thread[w as usize] = right;
            self.rev_thread[right as usize] = w;
            self.parent[stem as usize] = par_stem;
            par_stem = stem;
            stem = new_stem;
            u = if self.last_succ[stem as usize] == self.last_succ[par_stem as usize] {
                self.rev_thread[par_stem as usize]
            } else {
                self.last_succ[stem as usize]
            };
            right = self.thread[u as usize];
        }
        self.parent[u_out] = par_stem;
        self.thread[u as usize] = last;
        self.rev_thread[last as usize] = u;
        self.last_succ[u_out] = u;
        if old_rev_thread != v_in as u32 {
            self.thread[old_rev_thread as usize] = right;
            self.rev_thread[right as usize] = old_rev_thread;
        }
        for k in 0..self.dirty_revs.len() {
            let u = self.dirty_revs[k];
            self.rev_thread[self.thread[u as usize] as usize] = u;
        }

        // Tree arcs, directions and successor counts along the reversed stem: the arc of a
        // stem node moves to its old parent's place.
        let mut tmp_sc: i64 = 0;
        let tmp_ls = self.last_succ[u_out];
        let mut u = u_out;
        while u != u_in {
            let w = self.parent[u] as usize;
            self.flow[u] = self.flow[w];
            self.cost[u] = self.cost[w];
            self.forward[u] = !self.forward[w];
            tmp_sc += self.succ_num[u] as i64 - self.succ_num[w] as i64;
            self.succ_num[u] = tmp_sc as u32;
            self.last_succ[w] = tmp_ls;
            u = w;
        }
        self.flow[u_in] = delta;
        self.cost[u_in] = c_in;
        self.forward[u_in] = u_in == s;
        self.succ_num[u_in] = old_succ_num;

        // Last successors from v_in and v_out up towards the root.
        let (up_limit_in, up_limit_out) = if self.last_succ[join] == v_in as u32 {
            (NONE, join as u32)
        } else {
            (join as u32, NONE)
        };
        let mut u = v_in as u32;
        while u != up_limit_in && self.last_succ[u as usize] == v_in as u32 {
            self.last_succ[u as usize] = self.last_succ[u_out];
            u = self.parent[u as usize];
        }
        let replace = if join as u32 != old_rev_thread && v_in as u32 != old_rev_thread {
            old_rev_thread
        } else {
            self.last_succ[u_out]
        };
        let mut u = v_out;
        while u != up_limit_out && self.last_succ[u as usize] == old_last_succ {
            self.last_succ[u as usize] = replace;
            u = self.parent[u as usize];
        }

        // Successor counts from v_in and v_out up to the join node.
        let mut u = v_in as u32;
        while u != join as u32 {
            self.succ_num[u as usize] += old_succ_num;
            u = self.parent[u as usize];
        }
        let mut u = v_out;
        while u != join as u32 {
            self.succ_num[u as usize] -= old_succ_num;
            u = self.parent[u as usize];
        }
    }

    /// Potentials recomputed from the tree in thread order (parents first), root at 0:
    /// every tree arc exactly tight up to one rounding.
    fn refresh_potentials(&mut self) {
        self.pi[self.root] = 0.0;
        let mut u = self.thread[self.root];
        while u as usize != self.root {
            let p = self.parent[u as usize] as usize;
            let c = self.cost[u as usize];
            self.pi[u as usize] = if self.forward[u as usize] {
                self.pi[p] - c
            } else {
                self.pi[p] + c
            };
            u = self.thread[u as usize];
        }
    }

    /// The dual `(f, g)` of the basis (`f_i = −π_i`, `g_j = π_j`, potentials recomputed
    /// from the tree).
    pub(crate) fn duals(&mut self) -> (Vec<f64>, Vec<f64>) {
        self.refresh_potentials();
        let f = self.pi[..self.n].iter().map(|p| -p).collect();
        let g = self.pi[self.n..self.n + self.m].to_vec();
        (f, g)
    }

    /// The plan of the basis as `(i, j, flow)` entries, feasible whenever the solve
    /// stopped: the tree arcs between a source and a target with positive flow, and the
    /// mass still routed `i → root → j` (none at an optimum) paired up source by source in
    /// order (the north-west corner rule on the artificial flows, which balance at the
    /// root); and the largest flow left on an artificial arc.
    pub(crate) fn flows(&self) -> (Vec<(usize, usize, f64)>, f64) {
        let n = self.n;
        let mut out = Vec::with_capacity(self.n + self.m);
        let mut artificial = 0.0f64;
        let (mut from, mut to) = (Vec::new(), Vec::new());
        for u in 0..self.root {
            let p = self.parent[u] as usize;
            let f = self.flow[u];
            if p == self.root {
                artificial = artificial.max(f.abs());
                if f > 0.0 {
                    if u < n {
                        from.push((u, f));
                    } else {
                        to.push((u - n, f));
                    }
                }
            } else if f > 0.0 {
                let (i, j) = if u < n { (u, p - n) } else { (p, u - n) };
                out.push((i, j, f));
            }
        }
        let (mut s, mut t) = (0, 0);
        while s < from.len() && t < to.len() {
            let q = from[s].1.min(to[t].1);
            if q > 0.0 {
                out.push((from[s].0, to[t].0, q));
            }
            from[s].1 -= q;
            to[t].1 -= q;
            // The smaller side is used up; rounding leaves the last pair's residue on one.
            if from[s].1 <= to[t].1 {
                s += 1;
            } else {
                t += 1;
            }
        }
        out.sort_unstable_by_key(|&(i, j, _)| (i, j));
        (out, artificial)
    }
}
