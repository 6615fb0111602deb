//! .npy input and output with dtype detection: arrays are read in the precision the
//! command runs in, whatever float dtype the file holds.

use logot::{Error, Real, Result};
use ndarray::{ArrayD, ArrayView, Dimension};
use ndarray_npy::{ReadNpyExt, WriteNpyExt};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read};

/// Floating-point dtype of a .npy file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
}

fn file_err(path: &str, msg: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.into(),
        msg: msg.to_string(),
    }
}

/// The float dtype recorded in a .npy header (`<f4` or `<f8`); anything else is an error.
pub fn dtype_of(path: &str) -> Result<Dtype> {
    let mut f = File::open(path).map_err(|e| file_err(path, e))?;
    let mut head = [0u8; 12];
    let got = f.read(&mut head).map_err(|e| file_err(path, e))?;
    if got < 10 || &head[..6] != b"\x93NUMPY" {
        return Err(file_err(
            path,
            "not a .npy file (missing the \\x93NUMPY magic)",
        ));
    }
    let (len, start) = match head[6] {
        1 => (u16::from_le_bytes([head[8], head[9]]) as usize, 10),
        2 | 3 if got == 12 => (
            u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize,
            12,
        ),
        v => {
            return Err(file_err(
                path,
                format!("unsupported .npy format version {v}"),
            ))
        }
    };
    if len > 1 << 20 {
        return Err(file_err(
            path,
            format!("implausible .npy header length {len}"),
        ));
    }
    let mut header = vec![0u8; start + len];
    let mut f = File::open(path).map_err(|e| file_err(path, e))?;
    f.read_exact(&mut header)
        .map_err(|_| file_err(path, "truncated .npy header"))?;
    let header = String::from_utf8_lossy(&header[start..]);
    let descr = header
        .split("'descr':")
        .nth(1)
        .and_then(|rest| rest.split('\'').nth(1))
        .ok_or_else(|| file_err(path, "the .npy header has no 'descr'"))?;
    match descr {
        "<f4" | "=f4" => Ok(Dtype::F32),
        "<f8" | "=f8" => Ok(Dtype::F64),
        d => Err(file_err(
            path,
            format!(
                "dtype {d} is not supported; expected little-endian float32 (<f4) or float64 (<f8)"
            ),
        )),
    }
}

fn read_typed<E: ndarray_npy::ReadableElement>(path: &str) -> Result<ArrayD<E>> {
    let f = File::open(path).map_err(|e| file_err(path, e))?;
    ArrayD::<E>::read_npy(BufReader::new(f))
        .map_err(|e| file_err(path, format!("cannot read .npy: {e}")))
}

/// Read a float .npy file as `T`, checking its number of dimensions against `ndims`.
pub fn read<T: Real>(path: &str, arg: &str, ndims: &[usize]) -> Result<ArrayD<T>> {
    let a: ArrayD<T> = match dtype_of(path)? {
        Dtype::F32 => read_typed::<f32>(path)?.mapv(|v| T::of(v as f64)),
        Dtype::F64 => read_typed::<f64>(path)?.mapv(T::of),
    };
    if !ndims.contains(&a.ndim()) {
        let want: Vec<String> = ndims.iter().map(|d| format!("{d}-D")).collect();
        return Err(Error::Shape {
            arg: arg.into(),
            detail: format!(
                "{path} holds a {}-D array of shape {:?}; expected {}",
                a.ndim(),
                a.shape(),
                want.join(" or ")
            ),
        });
    }
    Ok(a)
}

/// Write an array of `T` (as float32 or float64 following `T`).
pub fn write<T: Real, D: Dimension>(path: &str, a: ArrayView<'_, T, D>) -> Result<()> {
    let f = File::create(path).map_err(|e| file_err(path, e))?;
    let w = BufWriter::new(f);
    let res = if T::NAME == "float32" {
        a.mapv(|v| v.f64() as f32).write_npy(w)
    } else {
        a.mapv(|v| v.f64()).write_npy(w)
    };
    res.map_err(|e| file_err(path, format!("cannot write .npy: {e}")))
}

/// Reshape helper: a dynamic array into a fixed dimension known to be right.
pub fn fixed<T: Clone, D: Dimension>(a: ArrayD<T>, arg: &str) -> Result<ndarray::Array<T, D>> {
    a.into_dimensionality::<D>().map_err(|e| Error::Shape {
        arg: arg.into(),
        detail: e.to_string(),
    })
}
