//! Host allocations that can fail: the standard collections abort the process when memory
//! runs out, so every allocation whose size the input decides (costs, plans, batches of
//! potentials) goes through these, which return [`Error::OutOfMemory`] naming what was asked
//! for and its size in bytes instead.

use crate::{Error, Result};

/// The [`Error::OutOfMemory`] of an array of `dims` values of `T` for `what`:
/// `what: out of memory: B×n×m values need … bytes (… GiB), which cannot be allocated`.
pub(crate) fn out_of_memory<T>(what: &str, dims: &[usize]) -> Error {
    let shape = dims
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("×");
    let size = std::mem::size_of::<T>().max(1);
    let detail = match bytes_of::<T>(dims) {
        Some(bytes) => format!(
            "{shape} values need {bytes} bytes ({:.2} GiB), which cannot be allocated",
            bytes as f64 / (1u64 << 30) as f64
        ),
        None => format!("{shape} values of {size} bytes overflow the address space"),
    };
    Error::OutOfMemory {
        what: what.into(),
        detail,
    }
}

/// The bytes an array of `dims` values of `T` takes, when that is a valid allocation size
/// (the product does not overflow and is at most `isize::MAX`).
pub(crate) fn bytes_of<T>(dims: &[usize]) -> Option<usize> {
    dims.iter()
        .try_fold(std::mem::size_of::<T>().max(1), |a, &d| a.checked_mul(d))
        .filter(|&b| b <= isize::MAX as usize)
}

/// Whether an array of `dims` values of `T` can be allocated now, together with `alongside`
/// more bytes that will be held with it: the total is a valid size and the allocator grants
/// it (reserved as one block and released untouched), else [`Error::OutOfMemory`] naming
/// the array, its bytes and the total. A check before long work whose result needs the
/// array, made before anything it counts is allocated.
pub(crate) fn probe<T>(what: &str, dims: &[usize], alongside: usize) -> Result<()> {
    let total = bytes_of::<T>(dims)
        .and_then(|b| b.checked_add(alongside))
        .filter(|&b| b <= isize::MAX as usize);
    let mut v: Vec<u8> = Vec::new();
    match total {
        Some(total) if v.try_reserve_exact(total).is_ok() => Ok(()),
        _ => {
            let mut e = out_of_memory::<T>(what, dims);
            if let (Error::OutOfMemory { detail, .. }, true) = (&mut e, alongside > 0) {
                let array = bytes_of::<T>(dims).unwrap_or(usize::MAX);
                *detail = format!(
                    "{detail} with the {alongside} bytes held alongside ({} bytes in all)",
                    array.saturating_add(alongside)
                );
            }
            Err(e)
        }
    }
}

/// An empty vector with room for `len` values, or [`Error::OutOfMemory`].
pub(crate) fn with_capacity<T>(what: &str, len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    if bytes_of::<T>(&[len]).is_none() || v.try_reserve_exact(len).is_err() {
        return Err(out_of_memory::<T>(what, &[len]));
    }
    Ok(v)
}

/// An empty vector with room for an array of `dims` values (named by its shape in the
/// error), or [`Error::OutOfMemory`].
pub(crate) fn with_shape<T>(what: &str, dims: &[usize]) -> Result<Vec<T>> {
    let len = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let mut v = Vec::new();
    match (len, bytes_of::<T>(dims)) {
        (Some(len), Some(_)) if v.try_reserve_exact(len).is_ok() => Ok(v),
        _ => Err(out_of_memory::<T>(what, dims)),
    }
}

/// `len` copies of `value`, or [`Error::OutOfMemory`].
pub(crate) fn filled<T: Clone>(what: &str, len: usize, value: T) -> Result<Vec<T>> {
    let mut v = with_capacity(what, len)?;
    v.resize(len, value);
    Ok(v)
}

/// A copy of `data`, or [`Error::OutOfMemory`].
pub(crate) fn copied<T: Copy>(what: &str, data: &[T]) -> Result<Vec<T>> {
    let mut v = with_capacity(what, data.len())?;
    v.extend_from_slice(data);
    Ok(v)
}

/// The values of `it` (at most `len` of them) in a vector allocated once, or
/// [`Error::OutOfMemory`].
pub(crate) fn collected<T>(what: &str, len: usize, it: impl Iterator<Item = T>) -> Result<Vec<T>> {
    let mut v = with_capacity(what, len)?;
    v.extend(it.take(len));
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_failures_name_the_bytes() {
        assert_eq!(bytes_of::<f64>(&[3]), Some(24));
        assert_eq!(bytes_of::<f32>(&[2, 3, 5]), Some(120));
        assert_eq!(bytes_of::<f32>(&[0, usize::MAX]), Some(0));
        assert_eq!(bytes_of::<f64>(&[usize::MAX / 4]), None);
        assert_eq!(bytes_of::<f64>(&[1 << 32, 1 << 32]), None);
        assert_eq!(
            bytes_of::<u8>(&[isize::MAX as usize]),
            Some(isize::MAX as usize)
        );
        assert_eq!(bytes_of::<u8>(&[isize::MAX as usize + 1]), None);
        // More than the address space holds: an error, never an abort.
        let len = (isize::MAX as usize) / 16;
        let err = filled::<f64>("plan", len, 0.0).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{msg}");
        assert!(
            msg.starts_with(&format!(
                "plan: out of memory: {len} values need {} bytes",
                len * 8
            )),
            "{msg}"
        );
        // 1 PiB: beyond the 128 TiB of a 47-bit address space, whatever the overcommit policy.
        let err = probe::<f32>("plan", &[1, 1 << 24, 1 << 24], 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "plan: out of memory: 1×16777216×16777216 values need 1125899906842624 bytes \
                 (1048576.00 GiB)"
            ),
            "{err}"
        );
        // The bytes held alongside count: 2^46 + 2^46 + 2^46 bytes exceed 128 TiB.
        let err = probe::<f64>("plan", &[1 << 43], 1 << 47)
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with(&format!(
                "with the {} bytes held alongside ({} bytes in all)",
                1u64 << 47,
                (1u64 << 46) + (1u64 << 47)
            )),
            "{err}"
        );
        assert!(probe::<f64>("plan", &[1 << 10], 1 << 20).is_ok());
        let err = probe::<f64>("plan", &[8], usize::MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("({} bytes in all)", usize::MAX)),
            "{err}"
        );
        assert_eq!(copied::<u64>("x", &[1, 2]).unwrap(), vec![1, 2]);
        assert!(with_shape::<f32>("cost", &[3, 5]).unwrap().capacity() >= 15);
        let err = with_shape::<f32>("cost", &[1 << 30, 1 << 30])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "cost: out of memory: 1073741824×1073741824 values need 4611686018427387904 bytes"
            ),
            "{err}"
        );
        assert_eq!(collected("x", 3, 0..10).unwrap(), vec![0, 1, 2]);
        let huge = with_capacity::<f64>("cost", usize::MAX / 4).unwrap_err();
        assert!(
            huge.to_string().ends_with(&format!(
                "{} values of 8 bytes overflow the address space",
                usize::MAX / 4
            )),
            "{huge}"
        );
    }
}
