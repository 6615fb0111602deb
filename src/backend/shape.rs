//! The shape checks every backend runs before its kernels, written once over buffer
//! lengths: a batch of `B` problems stores potentials and marginals as `B×n` / `B×m`, plans
//! as `B×n×m`, and a cost holds one matrix shared by the batch or one per problem.
//!
//! Each check returns [`Error::Shape`] naming the argument at fault, with the same message
//! on every backend.

use super::{CostDims, Side};
use crate::{Error, Result};

/// Batch size implied by a buffer length and a per-problem length (`len = B·per`, `B ≥ 1`).
pub(crate) fn batch_of(len: usize, per: usize, what: &str) -> Result<usize> {
    if per == 0 || len % per != 0 || len == 0 {
        return Err(Error::shape(
            what,
            format!("buffer length {len} is not a positive multiple of the problem size {per}"),
        ));
    }
    Ok(len / per)
}

/// Check that a per-problem cost matches the batch size.
pub(crate) fn check_cost_batch(dims: &CostDims, batch: usize) -> Result<()> {
    match dims.batch {
        Some(bc) if bc != batch => Err(Error::shape(
            "cost",
            format!("holds {bc} cost matrices but the batch has {batch} problems"),
        )),
        _ => Ok(()),
    }
}

pub(crate) use crate::validate::check_len;

/// A weight holding `batch` matrices of `per` entries or one shared: the offset between
/// consecutive problems' matrices (`per`, or 0 when shared).
pub(crate) fn weight_stride(len: usize, batch: usize, per: usize) -> Result<usize> {
    if len == batch * per {
        Ok(per)
    } else if len == per {
        Ok(0)
    } else {
        Err(Error::shape(
            "weight",
            format!("has length {len}; expected {batch}×{per} or one shared matrix of {per}"),
        ))
    }
}

/// Elements per problem of a buffer of `len` split into `batch` equal problems.
pub(crate) fn per_problem(len: usize, batch: usize, what: &str) -> Result<usize> {
    if batch == 0 || len % batch != 0 {
        return Err(Error::shape(
            what,
            format!("length {len} does not split into {batch} problems"),
        ));
    }
    Ok(len / batch)
}

/// Potentials `f` (`B×n`) and `g` (`B×m`) of one batch on a cost: the batch size.
pub(crate) fn check_fg(dims: &CostDims, f_len: usize, g_len: usize) -> Result<usize> {
    let batch = batch_of(f_len, dims.n, "f")?;
    if g_len != batch * dims.m {
        return Err(Error::shape(
            "g",
            format!(
                "length {g_len} does not fit {batch} problems of {} target points",
                dims.m
            ),
        ));
    }
    check_cost_batch(dims, batch)?;
    Ok(batch)
}

/// The buffers of a [`Backend::sinkstep`](super::Backend::sinkstep) on `side`: the output
/// (`B×len(side)`), the other potential and the log-marginal. Returns the batch size.
pub(crate) fn check_sinkstep(
    dims: &CostDims,
    side: Side,
    other_len: usize,
    log_marginal_len: usize,
    out_len: usize,
) -> Result<usize> {
    let reduced = match side {
        Side::Row => dims.m,
        Side::Col => dims.n,
    };
    let batch = batch_of(out_len, dims.len(side), "sinkstep output")?;
    check_cost_batch(dims, batch)?;
    if other_len != batch * reduced || log_marginal_len != out_len {
        return Err(Error::shape(
            "sinkstep",
            format!(
                "potential of length {other_len} and marginal of length {log_marginal_len} do not fit {batch} problems of size {}×{}",
                dims.n, dims.m
            ),
        ));
    }
    Ok(batch)
}

/// The buffers of a [`Backend::marginal_error`](super::Backend::marginal_error): equal
/// lengths that split into `batch` problems. Returns the length per problem.
pub(crate) fn check_marginal_error(
    batch: usize,
    marginal_len: usize,
    old_len: usize,
    new_len: usize,
) -> Result<usize> {
    if old_len != marginal_len || new_len != marginal_len {
        return Err(Error::shape(
            "marginal_error",
            format!("lengths {marginal_len}, {old_len}, {new_len} differ"),
        ));
    }
    if batch == 0 || marginal_len % batch != 0 || marginal_len == 0 {
        return Err(Error::shape(
            "marginal_error",
            format!("length {marginal_len} does not split into {batch} problems"),
        ));
    }
    Ok(marginal_len / batch)
}

/// `ν` and `log ν` of a column report: the length of `g`.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn check_nu(nu_len: usize, log_nu_len: usize, g_len: usize) -> Result<()> {
    if nu_len != g_len || log_nu_len != g_len {
        return Err(Error::shape(
            "nu",
            format!("length {nu_len} does not fit g of length {g_len}"),
        ));
    }
    Ok(())
}

/// The buffers of a half-step on a grid of `n` points: equal lengths holding whole images.
/// Returns the batch size.
pub(crate) fn check_grid_sinkstep(
    n: usize,
    other_len: usize,
    log_marginal_len: usize,
    out_len: usize,
) -> Result<usize> {
    if other_len != out_len || log_marginal_len != out_len || out_len == 0 || out_len % n != 0 {
        return Err(Error::shape(
            "sinkstep",
            format!(
                "buffers of lengths {other_len}, {log_marginal_len}, {out_len} do not hold whole images of {n} grid points"
            ),
        ));
    }
    Ok(out_len / n)
}

/// Potentials `f`, `g` on a grid of `n` points: equal lengths holding whole grids. Returns
/// the batch size.
pub(crate) fn check_grid_fg(n: usize, f_len: usize, g_len: usize) -> Result<usize> {
    if f_len != g_len || f_len == 0 || f_len % n != 0 {
        return Err(Error::shape(
            "f, g",
            format!("lengths {f_len} and {g_len} do not hold whole grids of {n} points"),
        ));
    }
    Ok(f_len / n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(n: usize, m: usize, batch: Option<usize>) -> CostDims {
        CostDims { n, m, batch }
    }

    #[test]
    fn half_steps_take_the_batch_from_the_output() {
        let d = dims(3, 4, None);
        assert_eq!(check_sinkstep(&d, Side::Col, 6, 8, 8).unwrap(), 2);
        assert_eq!(check_sinkstep(&d, Side::Row, 8, 6, 6).unwrap(), 2);
        let e = check_sinkstep(&d, Side::Col, 5, 8, 8).unwrap_err();
        assert!(
            e.to_string().starts_with("sinkstep: potential of length 5"),
            "{e}"
        );
        let e = check_sinkstep(&d, Side::Col, 6, 8, 7).unwrap_err();
        assert!(e.to_string().starts_with("sinkstep output:"), "{e}");
        let per_problem = dims(3, 4, Some(3));
        let e = check_sinkstep(&per_problem, Side::Col, 6, 8, 8).unwrap_err();
        assert!(e.to_string().starts_with("cost: holds 3"), "{e}");
    }

    #[test]
    fn potentials_and_marginals_must_fit() {
        let d = dims(3, 4, None);
        assert_eq!(check_fg(&d, 6, 8).unwrap(), 2);
        assert!(check_fg(&d, 6, 4)
            .unwrap_err()
            .to_string()
            .starts_with("g:"));
        assert!(check_fg(&d, 0, 0)
            .unwrap_err()
            .to_string()
            .starts_with("f:"));
        assert_eq!(check_marginal_error(2, 8, 8, 8).unwrap(), 4);
        assert!(check_marginal_error(2, 8, 8, 6).is_err());
        assert!(check_marginal_error(3, 8, 8, 8).is_err());
        assert!(check_marginal_error(0, 0, 0, 0).is_err());
        assert!(check_nu(8, 8, 8).is_ok());
        assert!(check_nu(8, 7, 8)
            .unwrap_err()
            .to_string()
            .starts_with("nu:"));
    }

    #[test]
    fn weights_are_shared_or_per_problem() {
        assert_eq!(weight_stride(12, 2, 6).unwrap(), 6);
        assert_eq!(weight_stride(6, 2, 6).unwrap(), 0);
        assert!(weight_stride(7, 2, 6).is_err());
        assert_eq!(per_problem(12, 3, "x").unwrap(), 4);
        assert!(per_problem(12, 5, "x").is_err());
        assert!(per_problem(12, 0, "x").is_err());
        assert!(check_len("y", 3, 4).is_err() && check_len("y", 4, 4).is_ok());
    }

    #[test]
    fn grid_buffers_hold_whole_images() {
        assert_eq!(check_grid_sinkstep(4, 8, 8, 8).unwrap(), 2);
        assert!(check_grid_sinkstep(4, 8, 8, 6).is_err());
        assert!(check_grid_sinkstep(4, 0, 0, 0).is_err());
        assert_eq!(check_grid_fg(4, 8, 8).unwrap(), 2);
        assert!(check_grid_fg(4, 8, 4).is_err());
    }
}
