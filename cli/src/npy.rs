//! .npy input and output with dtype detection: arrays are read in the precision the
//! command runs in, whatever float dtype the file holds.

use logot::{Error, Real, Result};
use ndarray::{ArrayD, ArrayView, Dimension, ShapeBuilder};
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
    read_stream(BufReader::new(r), total, path, arg, ndims)
}

/// [`read_from`] on a stream of `total` bytes read once from its start (a `.npz` member
/// with its declared size): nothing is buffered but the array itself.
pub fn read_stream<T: Real>(
    mut r: impl Read,
    total: u64,
    path: &str,
    arg: &str,
    ndims: &[usize],
) -> Result<ArrayD<T>> {
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
    read_data(r, &h, path, arg)
}

/// The data of a .npy file whose header `h` is read, converted to `T` as it streams in: the
/// one allocation is the array itself, made fallibly, so a file too large for the memory
/// left is an [`Error::OutOfMemory`] naming the flag, the file and the bytes (not an abort).
fn read_data<T: Real>(mut r: impl Read, h: &Header, path: &str, arg: &str) -> Result<ArrayD<T>> {
    let item = match h.dtype {
        Dtype::F32 => 4,
        Dtype::F64 => 8,
    };
    let len: usize = h.shape.iter().product();
    let mut values: Vec<T> = Vec::new();
    values.try_reserve_exact(len).map_err(|_| {
        let bytes = len as u128 * std::mem::size_of::<T>() as u128;
        Error::OutOfMemory {
            what: format!("{arg} ({path})"),
            detail: format!(
                "its array of shape {:?} needs {bytes} bytes as {}, which cannot be allocated",
                h.shape,
                T::NAME
            ),
        }
    })?;
    let truncated = |e: std::io::Error| file_err(path, format!("truncated .npy data: {e}"));
    let mut chunk = vec![0u8; item * 8192];
    let mut left = len;
    while left > 0 {
        let k = left.min(8192);
        let bytes = &mut chunk[..k * item];
        r.read_exact(bytes).map_err(truncated)?;
        match h.dtype {
            Dtype::F32 => values.extend(bytes.chunks_exact(4).map(|b| {
                let mut le = [0u8; 4];
                le.copy_from_slice(b);
                T::of(f32::from_le_bytes(le) as f64)
            })),
            Dtype::F64 => values.extend(bytes.chunks_exact(8).map(|b| {
                let mut le = [0u8; 8];
                le.copy_from_slice(b);
                T::of(f64::from_le_bytes(le))
            })),
        }
        left -= k;
    }
    let shape = ndarray::IxDyn(&h.shape);
    let a = if h.fortran_order {
        ArrayD::from_shape_vec(shape.f(), values)
    } else {
        ArrayD::from_shape_vec(shape, values)
    };
    a.map_err(|e| file_err(path, format!("cannot shape the .npy data: {e}")))
}

/// Write an array of `T` as .npy (float32 or float64 following `T`, C order) to `w`,
/// element by element through a buffer: no copy of the array is made, so writing a plan
/// needs no memory beyond the plan. `path` names the destination in messages.
pub fn write_to<T: Real, D: Dimension>(
    path: &str,
    w: impl Write,
    a: ArrayView<'_, T, D>,
) -> Result<()> {
    let err = |e: std::io::Error| file_err(path, format!("cannot write .npy: {e}"));
    let mut w = BufWriter::new(w);
    w.write_all(&npy_header(T::NAME == "float32", a.shape()))
        .map_err(err)?;
    if T::NAME == "float32" {
        for v in a.iter() {
            w.write_all(&(v.f64() as f32).to_le_bytes()).map_err(err)?;
        }
    } else {
        for v in a.iter() {
            w.write_all(&v.f64().to_le_bytes()).map_err(err)?;
        }
    }
    w.flush().map_err(err)
}

/// The bytes of a .npy header (format 1.0, or 2.0 when the text needs more than 65535
/// bytes): magic, version, length, and the dict padded with spaces and a newline so that
/// the data starts at a multiple of 64 bytes.
pub fn npy_header(f32: bool, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let descr = if f32 { "<f4" } else { "<f8" };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    let (version, len_bytes) = if dict.len() + 1 + 10 <= 65535 {
        (1u8, 2)
    } else {
        (2, 4)
    };
    let prefix = 6 + 2 + len_bytes;
    let text_len = (prefix + dict.len() + 1).div_ceil(64) * 64 - prefix;
    let mut out = Vec::with_capacity(prefix + text_len);
    out.extend_from_slice(b"\x93NUMPY");
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(text_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(text_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(prefix + text_len - 1, b' ');
    out.push(b'\n');
    out
}

/// Reshape helper: a dynamic array into a fixed dimension known to be right.
pub fn fixed<T: Clone, D: Dimension>(a: ArrayD<T>, arg: &str) -> Result<ndarray::Array<T, D>> {
    a.into_dimensionality::<D>().map_err(|e| Error::Shape {
        arg: arg.into(),
        detail: e.to_string(),
    })
}
