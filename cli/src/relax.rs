//! `--reg-m`, `--reg-m-mu`, `--reg-m-nu`: unbalanced OT (KL-relaxed marginals) from the
//! command line, and the report of a relaxed solve (its objective and transported mass).

use logot::{Backend, Error, Problem, Real, Relaxation, Result, Side, SinkhornResult};

/// The marginal penalties of unbalanced OT (POT's `reg_m`).
#[derive(clap::Args, Debug, Default, Clone)]
pub struct RelaxArgs {
    /// Unbalanced OT: relax both marginals to the penalty ρ·KL(P·1 ‖ μ) + ρ·KL(Pᵀ·1 ‖ ν)
    /// (POT's scalar reg_m, > 0; `inf` keeps them exact). Unequal masses are then
    /// allowed; the JSON adds "objective" (⟨P,C⟩ + ε·KL(P ‖ μ⊗ν) + the penalties, with the
    /// generalized KL Σ x log(x/y) − x + y) and "mass" (Σ P).
    #[arg(
        long,
        value_name = "RHO",
        allow_hyphen_values = true,
        conflicts_with_all = ["reg_m_mu", "reg_m_nu"]
    )]
    pub reg_m: Option<f64>,
    /// Unbalanced OT, source side only: ρ_μ of ρ_μ·KL(P·1 ‖ μ) (> 0, `inf` = exact). A side
    /// without a flag stays exact (semi-unbalanced).
    #[arg(long, value_name = "RHO", allow_hyphen_values = true)]
    pub reg_m_mu: Option<f64>,
    /// Unbalanced OT, target side only: ρ_ν of ρ_ν·KL(Pᵀ·1 ‖ ν) (> 0, `inf` = exact).
    #[arg(long, value_name = "RHO", allow_hyphen_values = true)]
    pub reg_m_nu: Option<f64>,
}

impl RelaxArgs {
    /// The flags given, with their values.
    fn given(&self) -> Vec<(&'static str, f64)> {
        [
            ("--reg-m", self.reg_m),
            ("--reg-m-mu", self.reg_m_mu),
            ("--reg-m-nu", self.reg_m_nu),
        ]
        .into_iter()
        .filter_map(|(flag, v)| v.map(|v| (flag, v)))
        .collect()
    }

    /// The flags given, as one name for messages (`--reg-m`, `--reg-m-mu/--reg-m-nu`).
    fn flags(&self) -> String {
        let names: Vec<&str> = self.given().iter().map(|(f, _)| *f).collect();
        names.join("/")
    }

    /// Whether any of the flags is given.
    pub fn is_set(&self) -> bool {
        !self.given().is_empty()
    }

    /// The relaxation the flags ask for (`None`: none given, the balanced problem); for
    /// ρ ≤ 0 or NaN the library's refusal ([`Relaxation::validate`]) naming the flag.
    /// `--reg-m R` relaxes both sides; with `--reg-m-mu`/`--reg-m-nu` a side without a
    /// flag stays exact.
    pub fn relaxation(&self) -> Result<Option<Relaxation>> {
        let relaxation = match (self.reg_m, self.reg_m_mu, self.reg_m_nu) {
            (None, None, None) => return Ok(None),
            (Some(r), _, _) => Relaxation::kl(r),
            (None, mu, nu) => {
                Relaxation::kl_each(mu.unwrap_or(f64::INFINITY), nu.unwrap_or(f64::INFINITY))
            }
        };
        relaxation.validate().map_err(|e| self.cli_error(e, ""))?;
        Ok(Some(relaxation))
    }

    /// The flag that sets the library's `relaxation.rho_mu` or `relaxation.rho_nu`.
    fn flag_of(&self, arg: &str) -> Option<&'static str> {
        let side = match arg {
            "relaxation.rho_mu" => "--reg-m-mu",
            "relaxation.rho_nu" => "--reg-m-nu",
            _ => return None,
        };
        Some(if self.reg_m.is_some() {
            "--reg-m"
        } else {
            side
        })
    }

    /// A refusal of the flags given (their names and values), for `reason`.
    pub fn refusal(&self, reason: impl Into<String>) -> Error {
        let value: Vec<String> = self
            .given()
            .iter()
            .map(|(_, v)| crate::flags::number(*v))
            .collect();
        Error::Parameter {
            arg: self.flags(),
            value: value.join("/"),
            reason: reason.into(),
        }
    }

    /// The command-line form of a library error: a refused ρ names its flag; a refused
    /// `relaxation` names the flags given (with `context`, what the flags cannot be
    /// combined with); unequal masses in a balanced solve say how to relax a marginal.
    pub fn cli_error(&self, e: Error, context: &str) -> Error {
        match e {
            Error::Parameter { arg, value, reason } => match self.flag_of(&arg) {
                Some(flag) => Error::Parameter {
                    arg: flag.to_string(),
                    value,
                    reason,
                },
                None if arg == "relaxation" && self.is_set() => {
                    self.refusal(format!("{reason}{context}"))
                }
                None => Error::Parameter { arg, value, reason },
            },
            Error::UnequalMass {
                detail,
                mu,
                nu,
                rel,
                tol,
            } => Error::UnequalMass {
                detail: format!(
                    "{detail} (balanced OT needs equal masses; relax a marginal with \
                     --reg-m RHO, --reg-m-mu RHO or --reg-m-nu RHO for unbalanced OT)"
                ),
                mu,
                nu,
                rel,
                tol,
            },
            other => other,
        }
    }
}

/// The mass `Σ_ij P_ij` of each plan `P = exp((f ⊕ g − C)/ε)` of a solve, from one row
/// half-step on the backend (`h_i = −ε LSE_j((g_j − C_ij)/ε)`, so that
/// `Σ_j P_ij = exp((f_i − h_i)/ε)`), summed in f64; zero-mass bins (`f = −∞`) add nothing.
pub fn transported_mass<T: Real, B: Backend<T>>(
    backend: &B,
    problem: &Problem<'_, T>,
    r: &SinkhornResult<T>,
) -> Result<Vec<f64>> {
    let cost = backend.prepare_cost(problem.cost())?;
    let (batch, n) = r.f.dim();
    let g: Vec<T> = r.g.iter().copied().collect();
    let g = backend.upload(&g)?;
    let zeros = backend.filled(batch * n, T::zero())?;
    let mut half = backend.filled(batch * n, T::zero())?;
    backend.sinkstep(&cost, Side::Row, T::of(r.eps), &g, &zeros, &mut half)?;
    let half = backend.download(&half)?;
    Ok(r.f
        .rows()
        .into_iter()
        .zip(half.chunks(n))
        .map(|(f, h)| {
            f.iter()
                .zip(h)
                .filter(|(f, _)| f.f64() > f64::NEG_INFINITY)
                .map(|(f, h)| ((f.f64() - h.f64()) / r.eps).exp())
                .sum()
        })
        .collect())
}
