//! .npy input and output with dtype detection: arrays are read in the precision the
//! command runs in, whatever float dtype the file holds.

use logot::{Error, Real, Result};
use ndarray::{ArrayD, ArrayView, Dimension};
use ndarray_npy::{ReadNpyExt, WriteNpyExt};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// Floating-point dtype of a .npy file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
}

pub fn file_err(path: &str, msg: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.into(),
        msg: msg.to_string(),
    }
}

/// What a .npy header says: the float dtype, the shape and where the data starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub fortran_order: bool,
    /// Byte offset of the first data byte (magic, version, length field and header text).
    pub data_offset: usize,
}

impl Header {
    /// Bytes of data the header declares (elements × item size), `None` on overflow.
    pub fn data_bytes(&self) -> Option<usize> {
        let item = match self.dtype {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        };
        self.shape
            .iter()
            .try_fold(item, |acc: usize, &d| acc.checked_mul(d))
    }
}

/// The value of `'key':` in a .npy header dict (the text up to the next top-level comma or
/// closing brace; a parenthesised tuple is kept whole).
fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let rest = header.split(&format!("'{key}':")).nth(1)?.trim_start();
    if rest.starts_with('(') {
        let close = rest.find(')')?;
        Some(&rest[..=close])
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    }
}

/// Parse the header text of a .npy file (the Python dict after the length field).
fn parse_header_text(path: &str, text: &str, data_offset: usize) -> Result<Header> {
    let descr = header_value(text, "descr")
        .and_then(|d| d.strip_prefix('\''))
        .and_then(|d| d.split('\'').next())
        .ok_or_else(|| file_err(path, "the .npy header has no 'descr'"))?;
    let dtype = match descr {
        "<f4" | "=f4" => Dtype::F32,
        "<f8" | "=f8" => Dtype::F64,
        d => {
            return Err(file_err(
                path,
                format!(
                "dtype {d} is not supported; expected little-endian float32 (<f4) or float64 (<f8)"
            ),
            ))
        }
    };
    let fortran_order = match header_value(text, "fortran_order") {
        Some("True") => true,
        Some("False") => false,
        _ => {
            return Err(file_err(
                path,
                "the .npy header has no valid 'fortran_order' (True or False)",
            ))
        }
    };
    let bad_shape = || file_err(path, "the .npy header has no valid 'shape' tuple");
    let tuple = header_value(text, "shape")
        .and_then(|t| t.strip_prefix('('))
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(bad_shape)?;
    let mut parts: Vec<&str> = tuple.split(',').map(str::trim).collect();
    // `()` for 0-D, and the trailing comma of `(5,)`.
    if parts.last() == Some(&"") {
        parts.pop();
    }
    let mut shape = Vec::with_capacity(parts.len());
    for part in parts {
        let d = part.trim_end_matches('L').parse::<usize>().map_err(|_| {
            file_err(
                path,
                format!("the .npy header's 'shape' has a bad dimension {part:?}"),
            )
        })?;
        shape.push(d);
    }
    let h = Header {
        dtype,
        shape,
        fortran_order,
        data_offset,
    };
    if h.data_bytes().is_none() {
        return Err(file_err(
            path,
            format!(
                "the .npy header declares shape {:?}, more elements than fit in memory",
                h.shape
            ),
        ));
    }
    Ok(h)
}

/// Read and parse the header of a .npy stream positioned at its start.
fn read_header(path: &str, r: &mut impl Read) -> Result<Header> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre)
        .map_err(|_| file_err(path, "not a .npy file (missing the \\x93NUMPY magic)"))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(file_err(
            path,
            "not a .npy file (missing the \\x93NUMPY magic)",
        ));
    }
    let truncated = |_| file_err(path, "truncated .npy header");
    let (len, start) = match pre[6] {
        1 => {
            let mut l = [0u8; 2];
            r.read_exact(&mut l).map_err(truncated)?;
            (u16::from_le_bytes(l) as usize, 10)
        }
        2 | 3 => {
            let mut l = [0u8; 4];
            r.read_exact(&mut l).map_err(truncated)?;
            (u32::from_le_bytes(l) as usize, 12)
        }
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
    let mut text = vec![0u8; len];
    r.read_exact(&mut text).map_err(truncated)?;
    let text = String::from_utf8_lossy(&text);
    parse_header_text(path, &text, start + len)
}

/// The header of a .npy stream positioned at its start: the float dtype (`<f4` or `<f8`;
/// anything else is an error), shape and data offset. `path` names the source in messages.
pub fn header_of(path: &str, r: impl Read) -> Result<Header> {
    read_header(path, &mut BufReader::new(r))
}

/// Read a float .npy stream (a file, or bytes in memory) as `T`. The header is checked
/// first (magic, dtype, shape, number of dimensions against `ndims`, and that the stream
/// holds all the data the shape declares), so a corrupt or lying header is an error before
/// anything is allocated. `path` names the source in messages, `arg` the argument.
pub fn read_from<T: Real, R: Read + Seek>(
    mut r: R,
    path: &str,
    arg: &str,
    ndims: &[usize],
) -> Result<ArrayD<T>> {
    let total = r.seek(SeekFrom::End(0)).map_err(|e| file_err(path, e))?;
    r.seek(SeekFrom::Start(0)).map_err(|e| file_err(path, e))?;
    let h = read_header(path, &mut r)?;
    if !ndims.contains(&h.shape.len()) {
        let want: Vec<String> = ndims.iter().map(|d| format!("{d}-D")).collect();
        return Err(Error::Shape {
            arg: arg.into(),
            detail: format!(
                "{path} holds a {}-D array of shape {:?}; expected {}",
                h.shape.len(),
                h.shape,
                want.join(" or ")
            ),
        });
    }
    // `data_bytes` is Some: checked when the header was parsed.
    let need = h.data_bytes().unwrap_or(usize::MAX) as u64;
    let have = total.saturating_sub(h.data_offset as u64);
    if have < need {
        return Err(file_err(
            path,
            format!(
                "truncated .npy data: the header declares shape {:?} ({need} bytes) but the file holds {have}",
                h.shape
            ),
        ));
    }
    r.seek(SeekFrom::Start(0)).map_err(|e| file_err(path, e))?;
    let r = BufReader::new(r);
    let a: ArrayD<T> = match h.dtype {
        Dtype::F32 => read_typed::<f32>(path, r)?.mapv(|v| T::of(v as f64)),
        Dtype::F64 => read_typed::<f64>(path, r)?.mapv(T::of),
    };
    Ok(a)
}

fn read_typed<E: ndarray_npy::ReadableElement>(path: &str, r: impl Read) -> Result<ArrayD<E>> {
    ArrayD::<E>::read_npy(r).map_err(|e| file_err(path, format!("cannot read .npy: {e}")))
}

/// Write an array of `T` as .npy (float32 or float64 following `T`) to `w`; `path` names
/// the destination in messages.
pub fn write_to<T: Real, D: Dimension>(
    path: &str,
    w: impl Write,
    a: ArrayView<'_, T, D>,
) -> Result<()> {
    let w = BufWriter::new(w);
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
