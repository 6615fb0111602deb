//! The command line at its limits and in its messages: values that look like flags
//! (`--eps -inf`), numbers printed short, an input too large for the memory left, a plan
//! too large refused before any input is read, help wrapped to the terminal, and every
//! message naming flags (`--mu`), never the library's names or Rust items.

use ndarray::{Array1, Array2};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common;
use common::cli::{dir, logot, npy, p};

/// A small balanced problem in `d`: `mu.npy`, `nu.npy` (5 bins) and `c.npy` (5×5).
fn small(d: &Path) {
    let x: Vec<f64> = (0..5).map(|i| i as f64 / 4.0).collect();
    npy(d, "mu.npy", &Array1::from_elem(5, 0.2));
    npy(d, "nu.npy", &Array1::from_elem(5, 0.2));
    let c = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]).powi(2));
    npy(d, "c.npy", &c);
    npy(
        d,
        "pts.npy",
        &Array2::from_shape_fn((5, 2), |(i, k)| x[i] * k as f64),
    );
    npy(d, "hists.npy", &Array2::from_elem((2, 5), 0.2));
    npy(d, "w.npy", &Array1::from_elem(2, 0.5));
}

/// The longest run of digits in `s` (a number printed in full has hundreds).
fn longest_digit_run(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// A .npy header declaring float64 `shape`, followed by a sparse hole as long as the data
/// it declares: a file of that size that takes no room on disk.
fn sparse_npy(path: &str, shape: &[usize]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let dict = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}), }}",
        dims.join(", ")
    );
    let mut header = dict.into_bytes();
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(&header);
    let data: u64 = shape.iter().map(|&d| d as u64).product::<u64>() * 8;
    std::fs::write(path, &bytes).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(bytes.len() as u64 + data).unwrap();
}

/// Run `logot ARGS` under an address-space limit of `kib` KiB (`ulimit -v`).
fn logot_memory_limit(kib: u64, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
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

#[test]
fn eps_values_that_look_like_flags_are_read_and_refused_naming_eps() {
    let d = dir("eps");
    small(&d);
    let f = |n: &str| p(&d, n);
    let commands: Vec<Vec<String>> = vec![
        vec![
            "wasserstein".into(),
            "--mu".into(),
            f("mu.npy"),
            "--nu".into(),
            f("nu.npy"),
            "--cost".into(),
            f("c.npy"),
        ],
        vec![
            "coupling".into(),
            "--mu".into(),
            f("mu.npy"),
            "--nu".into(),
            f("nu.npy"),
            "--cost".into(),
            f("c.npy"),
            "--out".into(),
            f("P.npy"),
        ],
        vec![
            "divergence".into(),
            "--x".into(),
            f("pts.npy"),
            "--y".into(),
            f("pts.npy"),
        ],
        vec![
            "barycenter".into(),
            "--inputs".into(),
            f("hists.npy"),
            "--weights".into(),
            f("w.npy"),
            "--cost".into(),
            f("c.npy"),
            "--out".into(),
            f("b.npy"),
        ],
    ];
    for cmd in &commands {
        for (eps, shown) in [
            ("-inf", "-inf"),
            ("-1", "-1"),
            ("-1e308", "-1e308"),
            ("nan", "NaN"),
        ] {
            let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            args.extend(["--eps", eps]);
            let (code, out, err) = logot(&args);
            assert_eq!(code, 2, "{args:?}: {out} {err}");
            let want = format!("--eps = {shown}: ");
            assert!(
                err.contains(&want),
                "{args:?}: stderr lacks {want:?}: {err}"
            );
            assert!(!err.contains("unexpected argument"), "{err}");
        }
    }
    // A huge ε fails in the solve: the message prints it short, as every number.
    let mut args: Vec<&str> = commands[0].iter().map(String::as_str).collect();
    args.extend(["--eps", "1e308"]);
    let (code, _, err) = logot(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("1e308"), "{err}");
    assert!(longest_digit_run(&err) <= 24, "{err}");
}

#[test]
fn an_input_too_large_for_the_memory_left_is_an_error_naming_flag_file_and_size() {
    let d = dir("input_oom");
    let n = 20_000;
    npy(&d, "mu.npy", &Array1::from_elem(n, 1.0 / n as f64));
    // A 20000×20000 float64 cost: 3.2 GB declared, a sparse file on disk.
    let big = p(&d, "big.npy");
    sparse_npy(&big, &[n, n]);
    let args = [
        "wasserstein",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "mu.npy"),
        "--cost",
        &big,
        "--eps",
        "0.1",
    ];
    // 2 GB of address space: the process starts, the 3.2 GB array cannot be allocated.
    let (code, out, err) = logot_memory_limit(2_000_000, &args);
    assert_eq!(code, 2, "an error, not an abort: exit {code}: {out} {err}");
    for needle in [
        "--cost",
        "big.npy",
        "out of memory",
        "3200000000 bytes",
        "[20000, 20000]",
    ] {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
    assert!(!err.contains("memory allocation of"), "{err}");
}

#[test]
fn a_plan_too_large_is_refused_before_any_input_is_read() {
    let d = dir("plan_oom");
    let n = 200_000;
    npy(&d, "mu.npy", &Array1::from_elem(n, 1.0 / n as f64));
    // The cost's 320 GB are a hole: reading them would take minutes, and the plan of as
    // many bytes cannot be allocated under the limit. The refusal names --out and comes
    // before any read of --cost.
    let cost = p(&d, "c.npy");
    sparse_npy(&cost, &[n, n]);
    let args = [
        "coupling",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "mu.npy"),
        "--cost",
        &cost,
        "--eps",
        "0.1",
        "--out",
        &p(&d, "P.npy"),
    ];
    let start = std::time::Instant::now();
    let (code, out, err) = logot_memory_limit(2_000_000, &args);
    assert_eq!(code, 2, "exit {code}: {out} {err}");
    for needle in [
        "--out",
        "out of memory",
        "200000×200000 float64 plan",
        "320000000000 bytes",
    ] {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
    assert!(
        !err.contains("--cost"),
        "refused before --cost is read: {err}"
    );
    assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
    assert!(!d.join("P.npy").exists());
}

/// `logot ARGS` as a user pipes it (stdin closed, stdout not a terminal), with `COLUMNS`
/// set or not: stdout.
fn help(args: &[&str], columns: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_logot"));
    cmd.args(args).stdin(Stdio::null()).env_remove("COLUMNS");
    if let Some(c) = columns {
        cmd.env("COLUMNS", c);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help_is_wrapped_to_the_terminal_or_100_columns() {
    let commands = [
        "wasserstein",
        "coupling",
        "divergence",
        "barycenter",
        "bistochastic",
        "bench",
        "svd3",
        "newton-schulz",
    ];
    let widest = |s: &str| s.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let top = help(&["--help"], None);
    for c in commands {
        assert!(top.contains(c), "logot --help lists {c}: {top}");
        for flag in ["--help", "-h"] {
            let text = help(&[c, flag], None);
            assert!(text.lines().count() > 3, "{c} {flag}: {text}");
            assert!(
                widest(&text) <= 100,
                "{c} {flag}: {} columns\n{text}",
                widest(&text)
            );
            // clap keeps the usage line whole; every other line fits a 60-column terminal.
            let narrow: String = help(&[c, flag], Some("60"))
                .lines()
                .filter(|l| !l.starts_with("Usage:"))
                .map(|l| format!("{l}\n"))
                .collect();
            assert!(
                widest(&narrow) <= 60,
                "{c} {flag}: {} columns\n{narrow}",
                widest(&narrow)
            );
        }
    }
}

#[test]
fn messages_name_flags() {
    let d = dir("names");
    small(&d);
    let f = |n: &str| p(&d, n);
    npy(
        &d,
        "neg.npy",
        &Array1::from_vec(vec![0.5, -0.1, 0.2, 0.2, 0.2]),
    );
    npy(&d, "c43.npy", &Array2::<f64>::zeros((4, 3)));
    npy(
        &d,
        "heavy.npy",
        &Array2::from_shape_fn((2, 5), |(k, _)| 0.2 * (k + 1) as f64),
    );
    let w = |mu: &str, cost: &str| -> Vec<String> {
        [
            "wasserstein",
            "--mu",
            mu,
            "--nu",
            &f("nu.npy"),
            "--cost",
            cost,
            "--eps",
            "0.1",
        ]
        .map(String::from)
        .to_vec()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            w(&f("neg.npy"), &f("c.npy")),
            "error: --mu: negative mass -0.1",
        ),
        (w(&f("mu.npy"), &f("c43.npy")), "error: --cost: "),
        (
            w(&f("missing.npy"), &f("c.npy")),
            "missing.npy: --mu: No such file",
        ),
        (
            w(&f("mu.npy"), &f("missing.npy")),
            "missing.npy: --cost: No such file",
        ),
        (
            [
                "barycenter",
                "--inputs",
                &f("heavy.npy"),
                "--weights",
                &f("w.npy"),
                "--cost",
                &f("c.npy"),
                "--eps",
                "0.1",
                "--out",
                &f("b.npy"),
            ]
            .map(String::from)
            .to_vec(),
            "--inputs = input 1 has mass 2",
        ),
        (
            [
                "barycenter",
                "--inputs",
                &f("hists.npy"),
                "--weights",
                &f("missing.npy"),
                "--cost",
                &f("c.npy"),
                "--eps",
                "0.1",
                "--out",
                &f("b.npy"),
            ]
            .map(String::from)
            .to_vec(),
            "missing.npy: --weights: No such file",
        ),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = logot(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: stderr lacks {needle:?}: {err}"
        );
    }
    // The unequal-mass barycenter says what a command-line user does, not a Rust item.
    let args = [
        "barycenter",
        "--inputs",
        &f("heavy.npy"),
        "--weights",
        &f("w.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.1",
        "--out",
        &f("b.npy"),
    ];
    let (_, _, err) = logot(&args);
    assert!(err.contains("--reg-m RHO") && !err.contains("::"), "{err}");
}
