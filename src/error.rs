//! The crate's error type: every invalid input and every failure is an [`Error`] whose
//! message names the argument or the resource at fault.

use std::fmt;

/// Result alias used throughout logot.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in logot. Messages name the argument at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
// The variants' fields are the parts of their messages (`arg`: the argument at fault).
#[allow(missing_docs)]
pub enum Error {
    /// An array has the wrong number of dimensions or a size that does not match another.
    #[error("{arg}: {detail}")]
    Shape { arg: String, detail: String },
    /// An array has no elements.
    #[error("{arg}: empty input ({detail})")]
    Empty { arg: String, detail: String },
    /// An array holds NaN or ±inf.
    #[error("{arg}: non-finite value {value} at index {index}")]
    NonFinite {
        arg: String,
        index: String,
        value: String,
    },
    /// A histogram holds a negative entry.
    #[error("{arg}: negative mass {value} at index {index}")]
    NegativeMass {
        arg: String,
        index: String,
        value: String,
    },
    /// A histogram sums to zero.
    #[error("{arg}: total mass is zero{detail}")]
    ZeroMass { arg: String, detail: String },
    /// Two histograms that must carry the same mass do not.
    #[error("unequal total masses{detail}: mu sums to {}, nu sums to {} (relative difference {rel:.3e} > {tol:.1e})", short(.mu), short(.nu))]
    UnequalMass {
        detail: String,
        mu: f64,
        nu: f64,
        rel: f64,
        tol: f64,
    },
    /// A scalar parameter is out of its domain (eps ≤ 0, NaN, zero iterations, …).
    #[error("{arg} = {value}: {reason}")]
    Parameter {
        arg: String,
        value: String,
        reason: String,
    },
    /// The computation produced a non-finite result (reported, never returned silently).
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// A file could not be read or written.
    #[error("{path}: {msg}")]
    File { path: String, msg: String },
    /// The requested feature or backend is not available in this build or on this machine.
    #[error("{0}")]
    Unavailable(String),
    /// A host allocation that cannot be made (an impossible size asked for by the input,
    /// e.g. the plan of two huge point clouds): reported instead of aborting.
    #[error("{what}: out of memory: {detail}")]
    OutOfMemory { what: String, detail: String },
    /// A CUDA driver, compiler or kernel failure.
    #[error("CUDA: {0}")]
    Cuda(String),
}

/// A number as `{}` prints it when that is short, else in scientific notation (a mass of
/// 1e-300 would otherwise print 300 digits).
fn short(x: &f64) -> String {
    let a = x.abs();
    if a == 0.0 || (1e-4..1e15).contains(&a) || !a.is_finite() {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

impl Error {
    /// The same error with its argument name passed through `rename` (for front ends whose
    /// names differ from the library's, e.g. a command line's `--x` for `x`); errors that
    /// name no argument are returned as they are.
    pub fn rename_arg(self, rename: impl FnOnce(String) -> String) -> Self {
        match self {
            Error::Shape { arg, detail } => Error::Shape {
                arg: rename(arg),
                detail,
            },
            Error::Empty { arg, detail } => Error::Empty {
                arg: rename(arg),
                detail,
            },
            Error::NonFinite { arg, index, value } => Error::NonFinite {
                arg: rename(arg),
                index,
                value,
            },
            Error::NegativeMass { arg, index, value } => Error::NegativeMass {
                arg: rename(arg),
                index,
                value,
            },
            Error::ZeroMass { arg, detail } => Error::ZeroMass {
                arg: rename(arg),
                detail,
            },
            Error::Parameter { arg, value, reason } => Error::Parameter {
                arg: rename(arg),
                value,
                reason,
            },
            other => other,
        }
    }

    /// A [`Error::Shape`] for `arg`.
    pub fn shape(arg: impl Into<String>, detail: impl fmt::Display) -> Self {
        Error::Shape {
            arg: arg.into(),
            detail: detail.to_string(),
        }
    }
    /// A [`Error::Parameter`] for `arg`. A number `value` whose `{}` form is long (`1e308`
    /// prints 309 digits) is written in scientific notation.
    pub fn parameter(arg: &str, value: impl fmt::Display, reason: impl Into<String>) -> Self {
        let value = value.to_string();
        let value = match value.parse::<f64>() {
            Ok(x) if value.len() > 24 => short(&x),
            _ => value,
        };
        Error::Parameter {
            arg: arg.into(),
            value,
            reason: reason.into(),
        }
    }
}
