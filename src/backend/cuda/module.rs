//! Run-time compilation of the kernels in `cuda/` with NVRTC, once per process and
//! architecture: the sources are embedded with `include_str!`, `common.cuh` is prepended
//! (NVRTC has no include path or standard headers here), and NVRTC emits a CUBIN for the
//! device's own `sm_XY`, so the driver loads machine code and JIT-compiles nothing.

use crate::{Error, Result};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

/// The kernel sources: (module name, text).
pub(crate) const SOURCES: &[(&str, &str)] = &[("sinkstep", include_str!("../../../cuda/sinkstep.cu"))];
const COMMON: &str = include_str!("../../../cuda/common.cuh");

type Cache = Mutex<HashMap<(String, String), Arc<Vec<u8>>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The CUBIN of module `name` for `arch` (e.g. `sm_90`), compiled on first use.
pub(crate) fn cubin(name: &str, arch: &str) -> Result<Arc<Vec<u8>>> {
    let key = (name.to_string(), arch.to_string());
    let mut guard = cache().lock().map_err(|_| Error::Cuda("the kernel cache lock was poisoned".into()))?;
    if let Some(c) = guard.get(&key) {
        return Ok(c.clone());
    }
    let src = SOURCES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .ok_or_else(|| Error::Cuda(format!("no kernel module named {name}")))?;
    let bin = Arc::new(compile(name, &format!("{COMMON}\n#line 1 \"{name}.cu\"\n{src}"), arch)?);
    guard.insert(key, bin.clone());
    Ok(bin)
}

fn compile(name: &str, src: &str, arch: &str) -> Result<Vec<u8>> {
    let err = |what: &str, e: nvrtc::NvrtcError| Error::Cuda(format!("NVRTC {what} for {name}.cu: {e:?}"));
    let csrc = CString::new(src).map_err(|_| Error::Cuda(format!("{name}.cu holds a NUL byte")))?;
    let cname = CString::new(format!("{name}.cu")).map_err(|_| Error::Cuda("bad module name".into()))?;
    let prog = nvrtc::create_program(&csrc, Some(&cname)).map_err(|e| err("create", e))?;
    let opts = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "-lineinfo".to_string(),
        "--device-as-default-execution-space".to_string(),
    ];
    let compiled = unsafe { nvrtc::compile_program(prog, &opts) };
    let out = match compiled {
        Ok(()) => {
            let mut size = 0usize;
            let r = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) };
            if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                Err(Error::Cuda(format!("NVRTC produced no CUBIN for {name}.cu on {arch} ({r:?})")))
            } else {
                let mut buf = vec![0u8; size];
                let r = unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char) };
                if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
                    Err(Error::Cuda(format!("NVRTC could not return the CUBIN of {name}.cu ({r:?})")))
                } else {
                    Ok(buf)
                }
            }
        }
        Err(e) => {
            let log = unsafe { nvrtc::get_program_log(prog) }
                .ok()
                .map(|l| unsafe { CStr::from_ptr(l.as_ptr()) }.to_string_lossy().into_owned())
                .unwrap_or_default();
            Err(Error::Cuda(format!("NVRTC could not compile {name}.cu for {arch} ({e:?}):\n{log}")))
        }
    };
    // A failure to free the program does not affect the result.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}
