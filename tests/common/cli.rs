//! Helpers for the tests that drive the `logot` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh scratch folder `TARGET_TMPDIR/<test crate>/<name>`.
pub fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(env!("CARGO_CRATE_NAME"))
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
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

/// Parse stdout as JSON, failing the test with the text when it is not.
pub fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}
