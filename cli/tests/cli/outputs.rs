//! The command line's outputs (cli/src/output.rs), through the `logot` binary: a
//! failed run leaves every existing file byte for byte as it was and no temporary behind
//! (a write cut short by a file-size limit, an output that cannot be created, an error in
//! the computation); an output naming an input or another output is refused before any
//! work with a message naming both flags; every command echoes the outputs it wrote.

use ndarray::{Array1, Array2, Array3};
use ndarray_npy::read_npy;
use std::path::Path;

use crate::common;
use common::cli::{fresh, json, logot, logot_file_limit, npy, npy_bytes, p, snapshot, write_npz};

/// Distinct old contents for the files a run may replace.
fn old_file(d: &Path, name: &str) {
    std::fs::write(d.join(name), format!("old contents of {name}\n")).unwrap();
}

/// Inputs of every command in `d`: a 200×200 problem (large outputs) and small ones.
fn write_inputs(d: &Path) {
    let n = 200;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    npy(d, "mu.npy", &Array1::from_elem(n, 1.0 / n as f64));
    npy(
        d,
        "nu.npy",
        &Array1::from_shape_fn(n, |i| (1.0 + x[i]) / (n as f64 * 1.5)),
    );
    npy(
        d,
        "c.npy",
        &Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2)),
    );
    npy(
        d,
        "x.npy",
        &Array2::from_shape_fn((6, 2), |(i, k)| (i * (k + 1)) as f64 * 0.1),
    );
    npy(
        d,
        "y.npy",
        &Array2::from_shape_fn((5, 2), |(j, k)| 0.3 + (j + k) as f64 * 0.07),
    );
    npy(d, "h.npy", &Array2::from_elem((2, 4), 0.25));
    npy(d, "w.npy", &Array1::from(vec![0.5, 0.5]));
    npy(
        d,
        "c44.npy",
        &Array2::from_shape_fn((4, 4), |(i, j)| (i as f64 - j as f64).powi(2) / 9.0),
    );
    npy(
        d,
        "sq.npy",
        &Array2::from_shape_fn((3, 3), |(i, j)| (i * j) as f64 * 0.2),
    );
    npy(
        d,
        "a.npy",
        &Array3::from_shape_fn((400, 20, 3), |(b, i, j)| {
            ((b + 2 * i + 5 * j) % 7) as f64 - 3.0
        }),
    );
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The refusal of a failed run: exit status 2, nothing on stdout, no panic, every needle in
/// stderr, and the folder exactly as before (same files, same bytes, no temporary).
fn assert_failed_untouched(
    d: &Path,
    before: &std::collections::BTreeMap<String, Option<Vec<u8>>>,
    (code, out, err): (i32, String, String),
    needles: &[&str],
) {
    assert_eq!(code, 2, "exit {code}: {out} {err}");
    assert!(out.trim().is_empty(), "{out}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
    let after = snapshot(d);
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(
        changed.is_empty(),
        "files changed or left behind: {changed:?} ({err})"
    );
}

#[test]
fn a_plan_past_the_file_size_limit_is_refused_and_leaves_the_old_file() {
    let d = fresh("file_limit");
    write_inputs(&d);
    let f = |n: &str| p(&d, n);
    // The 200×200 plan is 320 kB, past the limit (16 blocks: 8 or 16 kB).
    old_file(&d, "P.npy");
    let before = snapshot(&d);
    let args = [
        "coupling",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.05",
        "--out",
        &f("P.npy"),
    ];
    // The plan's file (320 kB) is refused before any work, naming the limit.
    assert_failed_untouched(
        &d,
        &before,
        logot_file_limit(16, &args),
        &[&f("P.npy"), "--out", "file-size limit"],
    );
    // An old .npy of another shape (a previous result) survives the same way, and the run
    // without the limit replaces it with the full plan.
    let small = Array2::from_elem((3, 3), 7.0f64);
    npy(&d, "P.npy", &small);
    let before = snapshot(&d);
    assert_failed_untouched(
        &d,
        &before,
        logot_file_limit(16, &args),
        &[&f("P.npy"), "file-size limit"],
    );
    let back: Array2<f64> = read_npy(f("P.npy")).unwrap();
    assert_eq!(back, small);
    let (code, out, err) = logot(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["outputs"]["--out"], f("P.npy"));
    let plan: Array2<f64> = read_npy(f("P.npy")).unwrap();
    assert_eq!(plan.dim(), (200, 200));
}

#[test]
fn a_third_output_failing_leaves_the_first_two_as_they_were() {
    let d = fresh("third");
    write_inputs(&d);
    let f = |n: &str| p(&d, n);
    for n in ["gm.npy", "gn.npy", "gc.npy", "U.npy", "S.npy", "VH.npy"] {
        old_file(&d, n);
    }
    // Written in the order --grad-mu (1.7 kB), --grad-nu (1.7 kB), --grad-cost (320 kB):
    // the third is cut short by the file-size limit after the first two were written.
    let before = snapshot(&d);
    let grads = [
        "wasserstein",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.05",
        "--grad-mu",
        &f("gm.npy"),
        "--grad-nu",
        &f("gn.npy"),
        "--grad-cost",
        &f("gc.npy"),
    ];
    assert_failed_untouched(
        &d,
        &before,
        logot_file_limit(16, &grads),
        &[&f("gc.npy"), "--grad-cost", "cannot write"],
    );
    // svd3 of 400 matrices: U (192 kB) is written first, then S and Vᵀ; a third output
    // that cannot be created at all is refused before any work.
    let svd = |vh: &str| -> Vec<String> {
        [
            "svd3",
            "--a",
            &f("a.npy"),
            "--out-u",
            &f("U.npy"),
            "--out-s",
            &f("S.npy"),
            "--out-vh",
            vh,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    std::fs::create_dir_all(d.join("a_folder")).unwrap();
    let before = snapshot(&d);
    for (vh, needle) in [
        (f("missing/VH.npy"), "does not exist"),
        (f("a_folder"), "is a folder"),
        (f("U.npy/VH.npy"), "--out-vh"),
        (format!("{}/", f("VH.npy")), "--out-vh"),
        (String::new(), "--out-vh"),
    ] {
        let args = svd(&vh);
        assert_failed_untouched(&d, &before, logot(&strs(&args)), &["--out-vh", needle]);
    }
    // A read-only destination is refused rather than replaced behind its owner's back.
    let mut perm = std::fs::metadata(d.join("VH.npy")).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(d.join("VH.npy"), perm.clone()).unwrap();
    let before = snapshot(&d);
    let args = svd(&f("VH.npy"));
    assert_failed_untouched(&d, &before, logot(&strs(&args)), &["--out-vh", "read-only"]);
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(d.join("VH.npy"), perm).unwrap();
    // All three written when nothing fails.
    let (code, out, err) = logot(&strs(&args));
    assert_eq!(code, 0, "{err}");
    let outputs = &json(&out)["outputs"];
    assert_eq!(outputs["--out-u"], f("U.npy"));
    assert_eq!(outputs["--out-s"], f("S.npy"));
    assert_eq!(outputs["--out-vh"], f("VH.npy"));
    let s: Array2<f64> = read_npy(f("S.npy")).unwrap();
    assert_eq!(s.dim(), (400, 3));
}

#[test]
fn a_failed_computation_leaves_the_outputs_and_no_temporary() {
    let d = fresh("failed_work");
    write_inputs(&d);
    let f = |n: &str| p(&d, n);
    npy(
        &d,
        "neg.npy",
        &Array1::from_shape_fn(200, |i| if i == 3 { -1.0 } else { 0.01 }),
    );
    for n in ["P.npy", "F.npy", "G.npy"] {
        old_file(&d, n);
    }
    let before = snapshot(&d);
    let args = [
        "coupling",
        "--mu",
        &f("neg.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.05",
        "--out",
        &f("P.npy"),
        "--out-f",
        &f("F.npy"),
        "--out-g",
        &f("G.npy"),
    ];
    assert_failed_untouched(&d, &before, logot(&args), &["mu: negative mass"]);
    // A barycenter whose weights do not sum to 1.
    npy(&d, "w_bad.npy", &Array1::from(vec![0.5, 0.6]));
    old_file(&d, "B.npy");
    let before = snapshot(&d);
    let args = [
        "barycenter",
        "--inputs",
        &f("h.npy"),
        "--weights",
        &f("w_bad.npy"),
        "--cost",
        &f("c44.npy"),
        "--eps",
        "0.1",
        "--out",
        &f("B.npy"),
    ];
    assert_failed_untouched(&d, &before, logot(&args), &["weights"]);
}

/// (command line, output flag, the flag of the file it names): each must be refused.
fn same_file_cases(d: &Path) -> Vec<(Vec<String>, &'static str, &'static str)> {
    let f = |n: &str| p(d, n);
    let w = |extra: &[&str]| -> Vec<String> {
        let mut a = vec![
            "wasserstein".to_string(),
            "--mu".into(),
            f("mu.npy"),
            "--nu".into(),
            f("nu.npy"),
            "--cost".into(),
            f("c.npy"),
            "--eps".into(),
            "0.05".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let pts = |cmd: &str, extra: &[&str]| -> Vec<String> {
        let mut a = vec![
            cmd.to_string(),
            "--x".into(),
            f("x.npy"),
            "--y".into(),
            f("y.npy"),
            "--eps".into(),
            "0.1".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let coupling = |extra: &[&str]| -> Vec<String> {
        let mut a = w(extra);
        a[0] = "coupling".into();
        a
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let bary = |out: &str| {
        s(&[
            "barycenter",
            "--inputs",
            &f("h.npy"),
            "--weights",
            &f("w.npy"),
            "--cost",
            &f("c44.npy"),
            "--eps",
            "0.1",
            "--out",
            out,
        ])
    };
    let svd = |u: &str, sv: &str, vh: &str| {
        s(&[
            "svd3",
            "--a",
            &f("a.npy"),
            "--out-u",
            u,
            "--out-s",
            sv,
            "--out-vh",
            vh,
        ])
    };
    // Other names of the same files: a symbolic link, a hard link, `.` and `..` detours.
    let dotted = format!("{}/./mu.npy", d.display());
    let detour = format!("{}/sub/../nu.npy", d.display());
    vec![
        (w(&["--grad-mu", &f("mu.npy")]), "--grad-mu", "--mu"),
        (w(&["--grad-nu", &f("nu.npy")]), "--grad-nu", "--nu"),
        (w(&["--grad-cost", &f("c.npy")]), "--grad-cost", "--cost"),
        (
            w(&["--grad-mu", &f("link_to_cost.npy")]),
            "--grad-mu",
            "--cost",
        ),
        (w(&["--out-f", &f("hard_mu.npy")]), "--out-f", "--mu"),
        (w(&["--out-g", &dotted]), "--out-g", "--mu"),
        (coupling(&["--out", &f("c.npy")]), "--out", "--cost"),
        (coupling(&["--out", &detour]), "--out", "--nu"),
        (
            coupling(&["--out", &f("P.npy"), "--out-f", &f("c.npy")]),
            "--out-f",
            "--cost",
        ),
        (
            pts("wasserstein", &["--grad-x", &f("x.npy")]),
            "--grad-x",
            "--x",
        ),
        (
            pts("wasserstein", &["--out-g", &f("hard_y.npy")]),
            "--out-g",
            "--y",
        ),
        (pts("coupling", &["--out", &f("y.npy")]), "--out", "--y"),
        (
            pts("divergence", &["--grad-x", &f("y.npy")]),
            "--grad-x",
            "--y",
        ),
        (
            pts(
                "divergence",
                &[
                    "--mu",
                    &format!("{}:a", f("wx.npz")),
                    "--grad-y",
                    &f("wx.npz"),
                ],
            ),
            "--grad-y",
            "--mu",
        ),
        (
            svd(&f("a.npy"), &f("S.npy"), &f("VH.npy")),
            "--out-u",
            "--a",
        ),
        (
            svd(&f("U.npy"), &f("S.npy"), &f("hard_a.npy")),
            "--out-vh",
            "--a",
        ),
        (bary(&f("h.npy")), "--out", "--inputs"),
        (bary(&f("w.npy")), "--out", "--weights"),
        (bary(&f("c44.npy")), "--out", "--cost"),
        (
            s(&["bistochastic", "--x", &f("sq.npy"), "--out", &f("sq.npy")]),
            "--out",
            "--x",
        ),
        (
            s(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &f("R.npy"),
                "--grad",
                &f("g33.npy"),
                "--out-grad",
                &f("g33.npy"),
            ]),
            "--out-grad",
            "--grad",
        ),
        (
            s(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &f("link_to_sq.npy"),
            ]),
            "--out",
            "--x",
        ),
        // Two outputs naming one file: the same path, a hard link, a file not there yet.
        (
            svd(&f("U.npy"), &f("U.npy"), &f("VH.npy")),
            "--out-s",
            "--out-u",
        ),
        (
            svd(&f("U.npy"), &f("S.npy"), &f("hard_u.npy")),
            "--out-vh",
            "--out-u",
        ),
        (
            coupling(&["--out", &f("new.npy"), "--out-g", &f("new.npy")]),
            "--out-g",
            "--out",
        ),
        (
            w(&["--grad-mu", &f("new.npy"), "--out-f", &f("sub/../new.npy")]),
            "--out-f",
            "--grad-mu",
        ),
    ]
}

#[test]
fn an_output_naming_an_input_or_another_output_is_refused_naming_both() {
    let d = fresh("same_file");
    write_inputs(&d);
    let f = |n: &str| p(&d, n);
    std::fs::create_dir_all(d.join("sub")).unwrap();
    npy(&d, "g33.npy", &Array2::from_elem((3, 3), 0.5));
    write_npz(
        &f("wx.npz"),
        &[("a", npy_bytes(&Array1::from_elem(6, 1.0 / 6.0)))],
        false,
    );
    for n in ["U.npy", "S.npy", "VH.npy"] {
        old_file(&d, n);
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(f("c.npy"), f("link_to_cost.npy")).unwrap();
        std::os::unix::fs::symlink(f("sq.npy"), f("link_to_sq.npy")).unwrap();
    }
    std::fs::hard_link(f("mu.npy"), f("hard_mu.npy")).unwrap();
    std::fs::hard_link(f("y.npy"), f("hard_y.npy")).unwrap();
    std::fs::hard_link(f("a.npy"), f("hard_a.npy")).unwrap();
    std::fs::hard_link(f("U.npy"), f("hard_u.npy")).unwrap();
    let before = snapshot(&d);
    let mut failures = Vec::new();
    let cases = same_file_cases(&d);
    for (args, out_flag, in_flag) in &cases {
        if !cfg!(unix) && args.iter().any(|a| a.contains("link_to")) {
            continue;
        }
        let (code, out, err) = logot(&strs(args));
        let names_both =
            err.contains(&format!("{out_flag} = ")) && err.contains(&format!(" {in_flag} "));
        if code != 2 || !out.trim().is_empty() || !names_both || err.contains("panicked") {
            failures.push(format!("{args:?}: exit {code}, stderr {err}"));
        }
        if snapshot(&d) != before {
            failures.push(format!("{args:?} changed the folder"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(cases.len() >= 25);
    // Refused before any work: the inputs are not even read (a bad --mu would be refused
    // with its own message after reading).
    npy(
        &d,
        "neg.npy",
        &Array1::from_shape_fn(200, |i| if i == 0 { -1.0 } else { 0.01 }),
    );
    let (code, _, err) = logot(&[
        "wasserstein",
        "--mu",
        &f("neg.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.05",
        "--grad-mu",
        &f("neg.npy"),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--grad-mu = ") && err.contains("--mu") && !err.contains("negative"),
        "{err}"
    );
}

/// `(flag, path)` of each output of a command line.
type Outputs<'a> = Vec<(&'a str, String)>;

#[test]
fn every_command_echoes_the_outputs_it_wrote_and_keeps_file_modes() {
    let d = fresh("echo");
    write_inputs(&d);
    let f = |n: &str| p(&d, n);
    npy(&d, "g33.npy", &Array2::from_elem((3, 3), 0.5));
    npy(&d, "mu6.npy", &Array1::from_elem(6, 1.0 / 6.0));
    npy(&d, "nu5.npy", &Array1::from_elem(5, 0.2));
    let cmds: Vec<(Vec<&str>, Outputs)> = vec![
        (
            vec![
                "wasserstein",
                "--mu",
                "MU",
                "--nu",
                "NU",
                "--cost",
                "C",
                "--eps",
                "0.05",
            ],
            vec![
                ("--grad-mu", f("o_gm.npy")),
                ("--grad-nu", f("o_gn.npy")),
                ("--grad-cost", f("o_gc.npy")),
                ("--out-f", f("o_f.npy")),
                ("--out-g", f("o_g.npy")),
            ],
        ),
        (
            vec![
                "wasserstein",
                "--mu",
                "MU",
                "--nu",
                "NU",
                "--cost",
                "C",
                "--eps",
                "0.05",
            ],
            vec![],
        ),
        (
            vec!["wasserstein", "--x", "X", "--y", "Y", "--eps", "0.1"],
            vec![
                ("--grad-x", f("o_gx.npy")),
                ("--grad-y", f("o_gy.npy")),
                ("--out-g", f("o_pg.npy")),
            ],
        ),
        (
            vec![
                "coupling", "--mu", "MU", "--nu", "NU", "--cost", "C", "--eps", "0.05",
            ],
            vec![("--out", f("o_P.npy")), ("--out-f", f("o_cf.npy"))],
        ),
        (
            vec!["coupling", "--x", "X", "--y", "Y", "--eps", "0.1"],
            vec![("--out", f("o_Pp.npy"))],
        ),
        (
            vec!["divergence", "--x", "X", "--y", "Y", "--eps", "0.1"],
            vec![("--grad-x", f("o_dx.npy")), ("--grad-y", f("o_dy.npy"))],
        ),
        (
            vec![
                "barycenter",
                "--inputs",
                "H",
                "--weights",
                "W",
                "--cost",
                "C44",
                "--eps",
                "0.1",
            ],
            vec![("--out", f("o_bar.npy"))],
        ),
        (
            vec!["bistochastic", "--x", "SQ", "--grad", "G33"],
            vec![("--out", f("o_R.npy")), ("--out-grad", f("o_dX.npy"))],
        ),
        (
            vec!["svd3", "--a", "A"],
            vec![
                ("--out-u", f("o_U.npy")),
                ("--out-s", f("o_S.npy")),
                ("--out-vh", f("o_V.npy")),
            ],
        ),
        (
            vec!["newton-schulz", "--x", "SQ"],
            vec![("--out", f("o_ns.npy"))],
        ),
    ];
    let file = |tag: &str| -> String {
        match tag {
            "MU" => f("mu.npy"),
            "NU" => f("nu.npy"),
            "C" => f("c.npy"),
            "X" => f("x.npy"),
            "Y" => f("y.npy"),
            "H" => f("h.npy"),
            "W" => f("w.npy"),
            "C44" => f("c44.npy"),
            "SQ" => f("sq.npy"),
            "G33" => f("g33.npy"),
            "A" => f("a.npy"),
            other => other.to_string(),
        }
    };
    for (base, outputs) in cmds {
        let mut args: Vec<String> = base.iter().map(|t| file(t)).collect();
        for (flag, path) in &outputs {
            args.push(flag.to_string());
            args.push(path.clone());
        }
        let (code, out, err) = logot(&strs(&args));
        assert_eq!(code, 0, "{args:?}: {err}");
        let j = json(&out);
        let echoed = j["outputs"]
            .as_object()
            .unwrap_or_else(|| panic!("{args:?}: no outputs: {out}"));
        assert_eq!(echoed.len(), outputs.len(), "{args:?}: {out}");
        for (flag, path) in &outputs {
            assert_eq!(echoed[*flag], *path, "{args:?}");
            let bytes = std::fs::read(path).unwrap();
            assert!(bytes.starts_with(b"\x93NUMPY"), "{path} is not a .npy");
        }
    }
    // The file a run replaces keeps its permissions, and no temporary is left.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f("o_ns.npy"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let (code, _, err) = logot(&[
            "newton-schulz",
            "--x",
            &f("sq.npy"),
            "--out",
            &f("o_ns.npy"),
        ]);
        assert_eq!(code, 0, "{err}");
        let mode = std::fs::metadata(f("o_ns.npy"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let stray: Vec<String> = snapshot(&d)
        .into_keys()
        .filter(|k| k.contains("logot-tmp") || k.contains("logot-old"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

#[test]
#[cfg(unix)]
fn a_device_output_is_written_directly() {
    // /dev/null is not replaced by a file: the output goes to the device.
    let d = fresh("device");
    write_inputs(&d);
    let (code, out, err) = logot(&[
        "newton-schulz",
        "--x",
        &p(&d, "sq.npy"),
        "--out",
        "/dev/null",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["outputs"]["--out"], "/dev/null");
    let m = std::fs::metadata("/dev/null").unwrap();
    assert!(!m.is_file());
}
