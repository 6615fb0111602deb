//! The optimality certificate of an exact result, measured on the plan and potentials
//! handed back (never on the solver's internal state).
//!
//! For a plan `P ≥ 0` and potentials `(f, g)`, weak duality gives
//! `⟨P, C⟩ − (⟨a, f⟩ + ⟨b, g⟩) = Σ_ij P_ij (C_ij − f_i − g_j) + ⟨P·1 − a, f⟩ + ⟨Pᵀ·1 − b, g⟩`:
//! a plan meeting its marginals, potentials with `f_i + g_j ≤ C_ij` for every pair and a
//! zero gap prove each other optimal. The certificate reports the size of each term.

use super::costs::Costs;
use rayon::prelude::*;

/// How far a returned plan and its potentials are from proving each other optimal.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Certificate {
    /// `⟨P, C⟩` of the returned plan.
    pub primal: f64,
    /// `⟨a, f⟩ + ⟨b, g⟩` of the returned potentials.
    pub dual: f64,
    /// `|primal − dual|`.
    pub duality_gap: f64,
    /// `max(0, max_ij f_i + g_j − C_ij)` over every pair: the largest violation of the
    /// dual constraints.
    pub max_violation: f64,
    /// `max |C_ij − f_i − g_j|` over the pairs the plan uses (complementary slackness).
    pub max_slack_on_support: f64,
    /// `Σ_i |(P·1)_i − a_i| / Σ_i a_i`.
    pub marginal_error_a: f64,
    /// `Σ_j |(Pᵀ·1)_j − b_j| / Σ_j b_j` (with `b` scaled to the mass of `a`, as solved).
    pub marginal_error_b: f64,
    /// `Σ_i a_i`, the mass transported.
    pub mass: f64,
    /// `max_ij |C_ij|`.
    pub max_abs_cost: f64,
}

impl Certificate {
    /// Whether every measure is within `tol`: the gap relative to `mass · max|C|`, the
    /// violation and the slack relative to `max|C|`, the marginal errors as they are
    /// (already relative). A zero cost matrix has scale 1.
    pub fn holds(&self, tol: f64) -> bool {
        let c = if self.max_abs_cost > 0.0 {
            self.max_abs_cost
        } else {
            1.0
        };
        self.duality_gap <= tol * c * self.mass
            && self.max_violation <= tol * c
            && self.max_slack_on_support <= tol * c
            && self.marginal_error_a <= tol
            && self.marginal_error_b <= tol
    }

    /// The duality gap relative to `|primal|` (`0` when both are 0; `∞` when only the
    /// primal is 0).
    pub fn relative_gap(&self) -> f64 {
        if self.duality_gap == 0.0 {
            0.0
        } else {
            self.duality_gap / self.primal.abs()
        }
    }
}

/// Measure the certificate of `plan` (`(i, j, mass)` triples) and `(f, g)` for the problem
/// `(a, b, costs)` (all in the same numbering; every pair is visited once, in parallel
/// over rows).
pub(crate) fn measure<C: Costs>(
    costs: &C,
    a: &[f64],
    b: &[f64],
    f: &[f64],
    g: &[f64],
    plan: &[(usize, usize, f64)],
) -> Certificate {
    let (n, m) = (a.len(), b.len());
    let mut row_sum = vec![0.0f64; n];
    let mut col_sum = vec![0.0f64; m];
    let mut primal = 0.0;
    let mut slack = 0.0f64;
    for &(i, j, p) in plan {
        let c = costs.at(i, j);
        primal += p * c;
        row_sum[i] += p;
        col_sum[j] += p;
        slack = slack.max((c - f[i] - g[j]).abs());
    }
    let dual = a.iter().zip(f).map(|(x, y)| x * y).sum::<f64>()
        + b.iter().zip(g).map(|(x, y)| x * y).sum::<f64>();
    let mass_a: f64 = a.iter().sum();
    let mass_b: f64 = b.iter().sum();
    let err = |s: &[f64], w: &[f64], mass: f64| {
        s.iter().zip(w).map(|(x, y)| (x - y).abs()).sum::<f64>() / mass
    };
    // Every dual constraint and the largest |cost|, row by row.
    let (violation, max_abs) = (0..n)
        .into_par_iter()
        .fold(
            || (Vec::new(), 0.0f64, 0.0f64),
            |(mut buf, v, c), i| {
                buf.resize(m, 0.0);
                costs.row(i, &mut buf);
                let fi = f[i];
                let mut vi = v;
                let mut ci = c;
                for (cij, gj) in buf.iter().zip(g) {
                    vi = vi.max(fi + gj - cij);
                    ci = ci.max(cij.abs());
                }
                (buf, vi, ci)
            },
        )
        .map(|(_, v, c)| (v, c))
        .reduce(|| (0.0, 0.0), |x, y| (x.0.max(y.0), x.1.max(y.1)));
    Certificate {
        primal,
        dual,
        duality_gap: (primal - dual).abs(),
        max_violation: violation.max(0.0),
        max_slack_on_support: slack,
        marginal_error_a: err(&row_sum, a, mass_a),
        marginal_error_b: err(&col_sum, b, mass_b),
        mass: mass_a,
        max_abs_cost: max_abs,
    }
}
