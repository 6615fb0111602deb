//! The envelope gradients of the regularised objective `OT_ε` (see the parent module's
//! docs): `∂/∂C = P`, `∂/∂μ = f`, `∂/∂ν = g`, and their unbalanced form.

use super::{check_output, EnvelopeGradients};
use crate::backend::{Backend, Side};
use crate::entropic::sinkhorn::{Problem, SinkhornSolver};
use crate::entropic::unbalanced::dual_side;
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView2};

impl<Bk> SinkhornSolver<Bk> {
    /// The regularised objective `OT_ε` and its envelope-theorem gradients (`P`, `f`, `g`):
    /// cheap (no linear solve) but they differentiate `OT_ε`, not the transport cost
    /// `⟨P,C⟩` (use [`SinkhornSolver::wasserstein_gradients`] for that).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// // ∂OT_ε/∂C_01 = P_01, against a central difference of OT_ε.
    /// let (mu, nu) = (array![0.4f64, 0.6], array![0.5, 0.5]);
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1).tol(1e-13));
    /// let value = |c: &logot::ndarray::Array2<f64>| -> logot::Result<f64> {
    ///     Ok(solver.envelope_gradients(&Problem::new(mu.view(), nu.view(), c.view())?)?.value[0])
    /// };
    /// let cost = array![[0.0, 1.0], [0.5, 0.2]];
    /// let env = solver.envelope_gradients(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// let h = 1e-6;
    /// let (mut up, mut down) = (cost.clone(), cost.clone());
    /// up[[0, 1]] += h;
    /// down[[0, 1]] -= h;
    /// let numeric = (value(&up)? - value(&down)?) / (2.0 * h);
    /// assert!((numeric - env.cost[[0, 0, 1]]).abs() < 1e-7);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn envelope_gradients<T: Real>(
        &self,
        problem: &Problem<'_, T>,
    ) -> Result<EnvelopeGradients<T>>
    where
        Bk: Backend<T>,
    {
        if let Some(r) = problem.unbalanced()? {
            return self.envelope_gradients_relaxed(problem, r);
        }
        let cpl = self.coupling(problem)?;
        let eps = self.params().eps;
        let batch = problem.batch_size();
        let mut fs = cpl.result.f.clone();
        let mut gs = cpl.result.g.clone();
        let mut value = Array1::zeros(batch);
        for k in 0..batch {
            let dot = |pot: ndarray::ArrayView1<'_, T>, w: ndarray::ArrayView1<'_, T>| -> f64 {
                pot.iter()
                    .zip(w)
                    .filter(|(_, &w)| w > T::zero())
                    .map(|(p, w)| p.f64() * w.f64())
                    .sum()
            };
            let mass: f64 = cpl
                .plan
                .index_axis(ndarray::Axis(0), k)
                .iter()
                .map(|v| v.f64())
                .sum();
            value[k] = T::of(
                dot(fs.row(k), problem.mu().row(k)) + dot(gs.row(k), problem.nu().row(k))
                    - eps * mass,
            );
            let finite: Vec<f64> = fs
                .row(k)
                .iter()
                .filter(|v| v.is_finite())
                .map(|v| v.f64())
                .collect();
            let shift = T::of(finite.iter().sum::<f64>() / finite.len().max(1) as f64);
            fs.row_mut(k).iter_mut().for_each(|v| *v -= shift);
            gs.row_mut(k).iter_mut().for_each(|v| *v += shift);
        }
        Ok(EnvelopeGradients {
            value,
            cost: cpl.plan,
            mu: fs,
            nu: gs,
            result: cpl.result,
        })
    }
    /// [`SinkhornSolver::envelope_gradients`] of an unbalanced problem: the dual value and its
    /// partial derivatives (see the module docs).
    fn envelope_gradients_relaxed<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        r: crate::Relaxation,
    ) -> Result<EnvelopeGradients<T>>
    where
        Bk: Backend<T>,
    {
        let cpl = self.coupling(problem)?;
        let eps = self.params().eps;
        let (batch, n) = problem.mu().dim();
        let m = problem.nu().ncols();
        let (f, g) = (&cpl.result.f, &cpl.result.g);
        let empty_f = self.empty_bin_potentials(problem, Side::Row, g, r.rho_mu)?;
        let empty_g = self.empty_bin_potentials(problem, Side::Col, f, r.rho_nu)?;
        let mut value = Array1::zeros(batch);
        let mut gmu = Array2::zeros((batch, n));
        let mut gnu = Array2::zeros((batch, m));
        let host = |a: ArrayView2<'_, T>, k: usize| a.row(k).iter().copied().collect::<Vec<T>>();
        for k in 0..batch {
            let p = cpl.plan.index_axis(ndarray::Axis(0), k);
            let rows: Vec<f64> = p
                .outer_iter()
                .map(|r| r.iter().map(|v| v.f64()).sum())
                .collect();
            let mut cols = vec![0.0f64; m];
            for row in p.outer_iter() {
                cols.iter_mut().zip(row).for_each(|(c, v)| *c += v.f64());
            }
            let mass: f64 = rows.iter().sum();
            let (mu, nu) = (host(problem.mu(), k), host(problem.nu(), k));
            let (mu_mass, nu_mass) = (
                mu.iter().map(|v| v.f64()).sum::<f64>(),
                nu.iter().map(|v| v.f64()).sum::<f64>(),
            );
            let (vf, df) = dual_side(
                &mu,
                &host(f.view(), k),
                &rows,
                empty_f.as_ref().map(|e| &e[k * n..(k + 1) * n]),
                nu_mass,
                eps,
                r.rho_mu,
            );
            let (vg, dg) = dual_side(
                &nu,
                &host(g.view(), k),
                &cols,
                empty_g.as_ref().map(|e| &e[k * m..(k + 1) * m]),
                mu_mass,
                eps,
                r.rho_nu,
            );
            value[k] = T::of(vf + vg - eps * (mass - mu_mass * nu_mass));
            gmu.row_mut(k)
                .iter_mut()
                .zip(df)
                .for_each(|(o, v)| *o = T::of(v));
            gnu.row_mut(k)
                .iter_mut()
                .zip(dg)
                .for_each(|(o, v)| *o = T::of(v));
        }
        check_output("mu", gmu.as_slice().unwrap_or(&[]))?;
        check_output("nu", gnu.as_slice().unwrap_or(&[]))?;
        if let Some(k) = value.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "the unbalanced objective of problem {k} is {} (eps = {eps} may be too small for {})",
                value[k],
                T::NAME
            )));
        }
        Ok(EnvelopeGradients {
            value,
            cost: cpl.plan,
            mu: gmu,
            nu: gnu,
            result: cpl.result,
        })
    }
}
