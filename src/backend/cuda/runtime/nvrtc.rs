//! Run-time compilation of the kernels in `cuda/` with NVRTC, once per process and
//! architecture: the sources are embedded with `include_str!`, the headers they include are
//! handed to NVRTC by name (it has no include path or standard headers here), and NVRTC
//! emits a CUBIN for the device's own `sm_XY`, so the driver loads machine code and
//! JIT-compiles nothing. Where the backend was given a cache directory, the CUBINs are also
//! kept there, so later processes skip NVRTC.

use super::kernels::{Module, HEADERS};
use crate::{Error, Result};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// What a compiled module depends on besides its source: the architecture (`sm_90`) and
/// the extra `-D` options.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    module: Module,
    arch: String,
    defines: Vec<String>,
}

type Cache = Mutex<HashMap<Key, Arc<Vec<u8>>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The CUBIN of `module` for `arch` (e.g. `sm_90`) with the macro definitions `defines`
/// (`NAME=VALUE`), compiled on first use in the process; with `disk`, also kept there
/// between processes (a file per source, architecture, options and crate version).
pub(in crate::backend::cuda) fn cubin(
    module: Module,
    arch: &str,
    defines: &[String],
    disk: Option<&Path>,
) -> Result<Arc<Vec<u8>>> {
    let key = Key {
        module,
        arch: arch.to_string(),
        defines: defines.iter().map(|d| format!("-D{d}")).collect(),
    };
    let mut guard = cache()
        .lock()
        .map_err(|_| Error::Cuda("the kernel cache lock was poisoned".into()))?;
    if let Some(c) = guard.get(&key) {
        return Ok(c.clone());
    }
    let name = module.name();
    let file = disk.map(|dir| disk_path(dir, name, arch, module.source(), &key.defines));
    let bin = match file.as_ref().and_then(|p| std::fs::read(p).ok()) {
        Some(b) if !b.is_empty() => b,
        _ => {
            let b = compile(name, module.source(), arch, &key.defines)?;
            if let Some(p) = &file {
                store(p, &b);
            }
            b
        }
    };
    let bin = Arc::new(bin);
    guard.insert(key, bin.clone());
    Ok(bin)
}

/// The file of a compiled module in the cache directory `dir`: the name hashes the source,
/// the headers, the architecture, the options and the crate version.
fn disk_path(dir: &Path, name: &str, arch: &str, src: &str, defines: &[String]) -> PathBuf {
    // FNV-1a, 64 bits: stable across runs and toolchains.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let (options, defines) = (OPTIONS.join(" "), defines.join(" "));
    let headers = HEADERS.iter().flat_map(|&(n, text)| [n, text]);
    for part in [
        src,
        arch,
        options.as_str(),
        defines.as_str(),
        env!("CARGO_PKG_VERSION"),
    ]
    .into_iter()
    .chain(headers)
    {
        for &b in part.as_bytes().iter().chain(&[0u8]) {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    dir.join(format!("{name}-{arch}-{h:016x}.cubin"))
}

/// Write atomically (temporary file, then rename); a cache that cannot be written is skipped.
fn store(path: &std::path::Path, bin: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, bin).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

const OPTIONS: &[&str] = &[
    "--std=c++17",
    "-lineinfo",
    "--device-as-default-execution-space",
];

fn compile(name: &str, src: &str, arch: &str, defines: &[String]) -> Result<Vec<u8>> {
    let err = |what: &str, e: nvrtc::NvrtcError| {
        Error::Cuda(format!("NVRTC {what} for {name}.cu: {e:?}"))
    };
    let nul = |what: &str| Error::Cuda(format!("{what} holds a NUL byte"));
    let csrc = CString::new(src).map_err(|_| nul(&format!("{name}.cu")))?;
    let cname = CString::new(format!("{name}.cu")).map_err(|_| nul("a module name"))?;
    let texts = HEADERS
        .iter()
        .map(|&(n, text)| CString::new(text).map_err(|_| nul(n)))
        .collect::<Result<Vec<_>>>()?;
    let names = HEADERS
        .iter()
        .map(|&(n, _)| CString::new(n).map_err(|_| nul("a header name")))
        .collect::<Result<Vec<_>>>()?;
    let text_ptrs: Vec<*const std::ffi::c_char> = texts.iter().map(|t| t.as_ptr()).collect();
    let name_ptrs: Vec<*const std::ffi::c_char> = names.iter().map(|t| t.as_ptr()).collect();
    let mut prog = std::mem::MaybeUninit::uninit();
    // SAFETY: every pointer is to a NUL-terminated string that outlives the call, and the
    // two header arrays hold `HEADERS.len()` entries each.
    unsafe {
        nvrtc_sys::nvrtcCreateProgram(
            prog.as_mut_ptr(),
            csrc.as_ptr(),
            cname.as_ptr(),
            HEADERS.len() as i32,
            text_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
        )
    }
    .result()
    .map_err(|e| err("create", e))?;
    // SAFETY: initialised by the successful call above.
    let prog = unsafe { prog.assume_init() };
    let mut opts = vec![format!("--gpu-architecture={arch}")];
    opts.extend(OPTIONS.iter().map(|o| o.to_string()));
    opts.extend(defines.iter().cloned());
    let compiled = unsafe { nvrtc::compile_program(prog, &opts) };
    let out = match compiled {
        Ok(()) => {
            let mut size = 0usize;
            let r = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) };
            if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                Err(Error::Cuda(format!(
                    "NVRTC produced no CUBIN for {name}.cu on {arch} ({r:?})"
                )))
            } else {
                let mut buf = vec![0u8; size];
                let r = unsafe {
                    nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char)
                };
                if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
                    Err(Error::Cuda(format!(
                        "NVRTC could not return the CUBIN of {name}.cu ({r:?})"
                    )))
                } else {
                    Ok(buf)
                }
            }
        }
        Err(e) => {
            let log = unsafe { nvrtc::get_program_log(prog) }
                .ok()
                .map(|l| {
                    unsafe { CStr::from_ptr(l.as_ptr()) }
                        .to_string_lossy()
                        .into_owned()
                })
                .unwrap_or_default();
            Err(Error::Cuda(format!(
                "NVRTC could not compile {name}.cu for {arch} ({e:?}):\n{log}"
            )))
        }
    };
    // A failure to free the program does not affect the result.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}
