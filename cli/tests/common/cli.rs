//! Helpers for the tests that drive the `logot` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh scratch folder `TARGET_TMPDIR/<test crate>/<calling file>/<name>`: the calling
/// file (the test module) keeps equal names of different modules of one binary apart.
#[track_caller]
pub fn dir(name: &str) -> PathBuf {
    let caller = std::panic::Location::caller().file();
    let module = Path::new(caller)
        .file_stem()
        .map_or("tests".into(), |s| s.to_string_lossy());
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(module.as_ref())
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An empty scratch folder [`dir`] (a previous run's files removed).
#[track_caller]
pub fn fresh(name: &str) -> PathBuf {
    let d = dir(name);
    std::fs::remove_dir_all(&d).unwrap();
    dir(name)
}

/// Write `a` to `d/f` as .npy; `d/f` as a string argument.
pub fn npy<A: ndarray_npy::WriteNpyExt + ?Sized>(d: &Path, f: &str, a: &A) -> String {
    let path = p(d, f);
    ndarray_npy::write_npy(&path, a).unwrap();
    path
}

/// `d/f` as a string argument.
pub fn p(d: &Path, f: &str) -> String {
    d.join(f).to_string_lossy().into_owned()
}

/// Run `logot ARGS`: exit code, stdout, stderr.
pub fn logot(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_logot"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Run `logot ARGS` with stdout parsed as JSON (`Null` when it is not JSON, e.g. on error).
pub fn logot_json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let (code, out, err) = logot(args);
    let json = serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::Null);
    (code, json, err)
}

/// Run `logot ARGS`, requiring success without a panic; the JSON it prints.
#[track_caller]
pub fn ok(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = logot(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    json(&out)
}

/// Run `logot ARGS`, requiring a refusal (status 2, nothing on stdout, no panic) whose
/// message contains every one of `needles`.
#[track_caller]
pub fn refused(args: &[&str], needles: &[&str]) {
    let (code, out, err) = logot(args);
    assert_eq!(
        code, 2,
        "{args:?} should be refused; stdout {out}, stderr {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.trim().is_empty(), "{args:?}: {out}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err:?}");
    }
}

/// Parse stdout as JSON, failing the test with the text when it is not.
pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// Run `logot ARGS` under a file-size limit of `blocks` (`ulimit -f`, in the shell's units:
/// 512 or 1024 bytes): exit code, stdout, stderr.
pub fn logot_file_limit(blocks: u64, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -f {blocks} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_logot"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Every entry of folder `d` with its bytes (folders as `None`), for before/after checks.
pub fn snapshot(d: &Path) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let path = e.path();
            let bytes = if path.is_dir() {
                None
            } else {
                Some(std::fs::read(&path).unwrap_or_default())
            };
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

/// A `.npz` archive (numpy's `savez` layout: member `NAME.npy` per array), stored or
/// deflated as numpy's `savez_compressed`.
pub fn write_npz(path: &str, arrays: &[(&str, Vec<u8>)], deflated: bool) {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let method = if deflated {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, bytes) in arrays {
        z.start_file(format!("{name}.npy"), opts).unwrap();
        z.write_all(bytes).unwrap();
    }
    z.finish().unwrap();
}

/// The .npy bytes of an array.
pub fn npy_bytes<A: ndarray_npy::WriteNpyExt + ?Sized>(a: &A) -> Vec<u8> {
    let mut v = Vec::new();
    a.write_npy(&mut v).unwrap();
    v
}
