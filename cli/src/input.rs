//! Input arrays named on the command line: a `.npy` file, or one member of a `.npz` archive
//! (numpy's `savez` / `savez_compressed`) as `FILE.npz:NAME`. A `.npz` given without a name
//! is read when it holds exactly one array. Every member goes through the same checks as a
//! `.npy` file (header, dtype, declared size against the bytes present).

use crate::npy::{self, file_err, Dtype};
use logot::{Error, Real, Result};
use ndarray::ArrayD;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Where an input's bytes live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The file on disk (the archive for a `.npz` member).
    pub file: PathBuf,
    /// The member of a `.npz` archive (`None`: a `.npy` file, or a one-array `.npz`).
    pub member: Option<String>,
}

/// The first bytes of every zip archive (a local file header).
const ZIP_MAGIC: &[u8; 4] = b"PK\x03\x04";

/// Split `spec` into the file and an optional `.npz` member: `FILE.npz:NAME` names a member
/// unless a file of that whole name exists.
pub fn source(spec: &str) -> Source {
    if let Some((file, member)) = spec.rsplit_once(':') {
        if file.to_ascii_lowercase().ends_with(".npz") && !Path::new(spec).exists() {
            return Source {
                file: file.into(),
                member: Some(member.to_string()),
            };
        }
    }
    Source {
        file: spec.into(),
        member: None,
    }
}

/// Run `body` on the bytes of the array `spec` names: a `.npy` file, or a `.npz` member
/// (streamed from the archive, with its declared uncompressed size). `arg` is the flag in
/// messages.
fn with_array<R>(spec: &str, arg: &str, body: impl FnOnce(Array<'_>) -> Result<R>) -> Result<R> {
    array_of(spec, arg, body).map_err(|e| match e {
        // Every file error names the flag, as the outputs' do (`PATH: --FLAG: what`).
        Error::File { path, msg } if !msg.starts_with(arg) => Error::File {
            path,
            msg: format!("{arg}: {msg}"),
        },
        e => e,
    })
}

fn array_of<R>(spec: &str, arg: &str, body: impl FnOnce(Array<'_>) -> Result<R>) -> Result<R> {
    let src = source(spec);
    let mut f = File::open(&src.file).map_err(|e| file_err(&src.file.to_string_lossy(), e))?;
    let is_zip = src.member.is_some() || {
        let mut magic = [0u8; 4];
        let zip = f.read_exact(&mut magic).is_ok() && &magic == ZIP_MAGIC;
        f.seek(SeekFrom::Start(0)).map_err(|e| file_err(spec, e))?;
        zip
    };
    if !is_zip {
        return body(Array::File(f));
    }
    let archive_name = src.file.to_string_lossy().into_owned();
    let mut zip = zip::ZipArchive::new(f).map_err(|e| {
        file_err(
            &archive_name,
            format!("not a readable .npz (zip) archive: {e}"),
        )
    })?;
    // numpy stores array `a` as member `a.npy`.
    let arrays: Vec<String> = zip
        .file_names()
        .map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string())
        .collect();
    let listing = || {
        let mut names = arrays.clone();
        names.sort();
        if names.is_empty() {
            "it holds no array".to_string()
        } else {
            format!("it holds {}", names.join(", "))
        }
    };
    let member = match &src.member {
        Some(m) => m.strip_suffix(".npy").unwrap_or(m).to_string(),
        None if arrays.len() == 1 => arrays[0].clone(),
        None => {
            return Err(file_err(
                &archive_name,
                format!(
                    "{arg}: a .npz archive of several arrays needs a member name, as {archive_name}:NAME ({})",
                    listing()
                ),
            ))
        }
    };
    let index = zip
        .index_for_name(&format!("{member}.npy"))
        .or_else(|| zip.index_for_name(&member))
        .ok_or_else(|| {
            file_err(
                &archive_name,
                format!(
                    "{arg}: no array {member:?} in this .npz archive ({})",
                    listing()
                ),
            )
        })?;
    let name = format!("{archive_name}:{member}");
    let entry = zip
        .by_index(index)
        .map_err(|e| file_err(&name, format!("cannot read the .npz member: {e}")))?;
    let declared = entry.size();
    body(Array::Member {
        name: &name,
        entry: Box::new(entry),
        declared,
    })
}

/// The bytes of one input array.
enum Array<'a> {
    File(File),
    Member {
        /// `ARCHIVE:MEMBER`, for messages.
        name: &'a str,
        entry: Box<dyn Read + 'a>,
        /// The uncompressed size the archive declares.
        declared: u64,
    },
}

/// Read a float array (`.npy` file or `.npz` member) as `T`, checking its number of
/// dimensions against `ndims`; `arg` is the flag in messages.
pub fn read<T: Real>(spec: &str, arg: &str, ndims: &[usize]) -> Result<ArrayD<T>> {
    with_array(spec, arg, |a| match a {
        Array::File(f) => npy::read_from(f, spec, arg, ndims),
        Array::Member {
            name,
            entry,
            declared,
        } => {
            // Streamed: the header is checked against the declared size, and the data
            // converted into the array as it is inflated (nothing else is buffered); the
            // rest of the member is then read through, so that its checksum is verified.
            let mut entry = entry;
            let a = npy::read_stream(&mut entry, declared, name, arg, ndims)?;
            std::io::copy(&mut entry.take(declared), &mut std::io::sink())
                .map_err(|e| file_err(name, format!("cannot read the .npz member: {e}")))?;
            Ok(a)
        }
    })
}

/// The header of an input array (dtype and shape), read alone.
pub fn header_of(spec: &str, arg: &str) -> Result<npy::Header> {
    with_array(spec, arg, |a| match a {
        Array::File(f) => npy::header_of(spec, f),
        Array::Member { name, entry, .. } => npy::header_of(name, entry),
    })
}

/// The float dtype of an input array, from its header alone.
pub fn dtype_of(spec: &str, arg: &str) -> Result<Dtype> {
    Ok(header_of(spec, arg)?.dtype)
}
/// The precision of a command: `--f32`/`--f64` when given, else numpy's promotion of the
/// inputs' dtypes (float64 when any input is float64, float32 when all are float32).
pub fn precision(f32: bool, f64: bool, inputs: &[(&str, Option<&str>)]) -> Result<Dtype> {
    if f32 {
        return Ok(Dtype::F32);
    }
    if f64 {
        return Ok(Dtype::F64);
    }
    let mut dtype = Dtype::F32;
    for (arg, spec) in inputs {
        if let Some(spec) = spec {
            if dtype_of(spec, arg)? == Dtype::F64 {
                dtype = Dtype::F64;
            }
        }
    }
    Ok(dtype)
}
