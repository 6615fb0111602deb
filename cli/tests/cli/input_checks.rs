//! Every command-line row (`C…`) of docs/input-checks.md, through the `logot` binary: each
//! bad input exits with status 2, prints a message naming the argument or file on stderr,
//! and never panics; a corpus of corrupt .npy files (made here) is fed to every file
//! argument of every command; valid edge cases (zero-mass bins, one-point supports,
//! Fortran-order and float32 files, 1×1 matrices) are accepted.

use ndarray::{Array1, Array2, Array3};
use std::collections::BTreeSet;
use std::path::Path;

use crate::common;
use common::cli::{dir, json, logot, npy, p};

/// A version-1 .npy file: magic, header dict padded to a multiple of 64 bytes, data.
fn npy_bytes(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    raw_npy(1, &dict, data)
}

/// A .npy file with the given version byte and header text (padded, newline-terminated).
fn raw_npy(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    let pre = if version == 1 { 10 } else { 12 };
    while (pre + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.push(version);
    out.push(0);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The corrupt corpus: (file name, text the message must contain besides the path).
fn write_corpus(d: &Path) -> Vec<(&'static str, &'static str)> {
    let quarter = f64_bytes(&[0.25; 4]);
    let files: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty_file.npy", vec![], "not a .npy file"),
        ("short.npy", b"\x93NUM".to_vec(), "not a .npy file"),
        ("bad_magic.npy", {
            let mut b = npy_bytes("<f8", false, "(4,)", &quarter);
            b[1] = b'X';
            b
        }, "not a .npy file"),
        ("text.npy", b"0.25 0.25 0.25 0.25\n".to_vec(), "not a .npy file"),
        ("version9.npy", {
            let mut b = npy_bytes("<f8", false, "(4,)", &quarter);
            b[6] = 9;
            b
        }, "unsupported .npy format version 9"),
        ("huge_header_len.npy", {
            let mut b = b"\x93NUMPY\x02\x00".to_vec();
            b.extend_from_slice(&u32::MAX.to_le_bytes());
            b
        }, "implausible .npy header length"),
        ("truncated_header.npy", npy_bytes("<f8", false, "(4,)", &quarter)[..40].to_vec(), "truncated .npy header"),
        ("no_descr.npy", raw_npy(1, "{'fortran_order': False, 'shape': (4,), }", &quarter), "no 'descr'"),
        ("no_shape.npy", raw_npy(1, "{'descr': '<f8', 'fortran_order': False, }", &quarter), "no valid 'shape'"),
        ("bad_shape.npy", npy_bytes("<f8", false, "(4, x)", &quarter), "bad dimension"),
        ("negative_dim.npy", npy_bytes("<f8", false, "(-4,)", &quarter), "bad dimension"),
        ("bad_fortran.npy", raw_npy(1, "{'descr': '<f8', 'fortran_order': maybe, 'shape': (4,), }", &quarter), "fortran_order"),
        ("garbage_header.npy", raw_npy(1, "\u{0}\u{1}\u{2}\u{3}", &quarter), "no 'descr'"),
        ("int8.npy", npy_bytes("|i1", false, "(4,)", &[1, 1, 1, 1]), "dtype |i1 is not supported"),
        ("int64.npy", npy_bytes("<i8", false, "(4,)", &[0; 32]), "dtype <i8 is not supported"),
        ("complex.npy", npy_bytes("<c16", false, "(4,)", &[0; 64]), "dtype <c16 is not supported"),
        ("unicode.npy", npy_bytes("<U3", false, "(4,)", &[0; 48]), "dtype <U3 is not supported"),
        ("object.npy", npy_bytes("|O", false, "(4,)", &[0; 32]), "dtype |O is not supported"),
        ("bigendian.npy", npy_bytes(">f8", false, "(4,)", &quarter), "dtype >f8 is not supported"),
        ("float16.npy", npy_bytes("<f2", false, "(4,)", &[0; 8]), "dtype <f2 is not supported"),
        ("bool.npy", npy_bytes("|b1", false, "(4,)", &[1; 4]), "dtype |b1 is not supported"),
        ("truncated_data.npy", {
            let mut b = npy_bytes("<f8", false, "(2, 2)", &quarter);
            b.truncate(b.len() - 5);
            b
        }, "truncated .npy data"),
        ("claims_1e12.npy", npy_bytes("<f8", false, "(1000000, 1000000)", &quarter), "truncated .npy data: the header declares shape [1000000, 1000000] (8000000000000 bytes)"),
        ("claims_1e5x1e5.npy", npy_bytes("<f4", false, "(100000, 100000)", &quarter), "truncated .npy data"),
        ("overflow_shape.npy", npy_bytes("<f8", false, "(4294967296, 4294967296, 4294967296)", &quarter), "more elements than fit in memory"),
    ];
    for (name, bytes, _) in &files {
        std::fs::write(d.join(name), bytes).unwrap();
    }
    files.into_iter().map(|(n, _, msg)| (n, msg)).collect()
}

/// Valid inputs of every command.
fn write_valid(d: &Path) {
    let x: Vec<f64> = (0..4).map(|i| i as f64 / 3.0).collect();
    npy(d, "mu.npy", &Array1::from_elem(4, 0.25));
    npy(d, "nu.npy", &Array1::from_elem(3, 1.0 / 3.0));
    let c = Array2::from_shape_fn((4, 3), |(i, j)| (x[i] - j as f64 / 2.0).powi(2));
    npy(d, "c.npy", &c);
    npy(
        d,
        "c44.npy",
        &Array2::from_shape_fn((4, 4), |(i, j)| (x[i] - x[j]).powi(2)),
    );
    npy(
        d,
        "x.npy",
        &Array2::from_shape_fn((4, 2), |(i, k)| x[i] * (k + 1) as f64),
    );
    npy(
        d,
        "y.npy",
        &Array2::from_shape_fn((3, 2), |(j, k)| j as f64 / 2.0 - k as f64),
    );
    npy(d, "h.npy", &Array2::from_elem((2, 4), 0.25));
    npy(d, "w.npy", &Array1::from(vec![0.5, 0.5]));
    npy(d, "img.npy", &Array3::from_elem((2, 3, 3), 1.0 / 9.0));
    npy(
        d,
        "sq.npy",
        &Array2::from_shape_fn((3, 3), |(i, j)| (i * j) as f64 * 0.2),
    );
    npy(
        d,
        "a.npy",
        &Array2::from_shape_fn((5, 3), |(i, j)| ((i + 2 * j) % 4) as f64),
    );
}

/// Run `logot` and check the refusal: exit status 2, no panic, stderr containing `needle`.
fn refused(args: &[&str], needle: &str) -> Result<(), String> {
    let (code, out, err) = logot(args);
    if err.contains("panicked") || out.contains("panicked") {
        return Err(format!("{args:?} panicked: {err}"));
    }
    if code != 2 {
        return Err(format!("{args:?} exited with {code} (want 2): {out} {err}"));
    }
    if !err.contains(needle) {
        return Err(format!(
            "{args:?}: stderr does not contain {needle:?}: {err}"
        ));
    }
    if !out.trim().is_empty() {
        return Err(format!(
            "{args:?}: a refused command printed to stdout: {out}"
        ));
    }
    Ok(())
}

/// The command lines of every command, with `{}` standing for the file argument under test:
/// (label, args).
fn file_slots(d: &Path) -> Vec<(String, Vec<String>)> {
    let f = |n: &str| p(d, n);
    let out = f("out.npy");
    let mut slots: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |label: &str, args: Vec<String>| slots.push((label.to_string(), args));
    let w = |slot: usize| {
        let mut a = vec![
            "wasserstein".into(),
            "--mu".into(),
            f("mu.npy"),
            "--nu".into(),
            f("nu.npy"),
            "--cost".into(),
            f("c.npy"),
            "--eps".into(),
            "0.1".into(),
        ];
        a[slot] = "{}".into();
        a
    };
    add("wasserstein --mu", w(2));
    add("wasserstein --nu", w(4));
    add("wasserstein --cost", w(6));
    let pc = |x: &str, y: &str| -> Vec<String> {
        vec![
            "coupling".into(),
            "--mu".into(),
            f("mu.npy"),
            "--nu".into(),
            f("nu.npy"),
            "--x".into(),
            x.into(),
            "--y".into(),
            y.into(),
            "--eps".into(),
            "0.1".into(),
            "--out".into(),
            out.clone(),
        ]
    };
    add("coupling --x", pc("{}", &f("y.npy")));
    add("coupling --y", pc(&f("x.npy"), "{}"));
    let bary = |inputs: &str, weights: &str, cost: &str| -> Vec<String> {
        vec![
            "barycenter".into(),
            "--inputs".into(),
            inputs.into(),
            "--weights".into(),
            weights.into(),
            "--cost".into(),
            cost.into(),
            "--eps".into(),
            "0.1".into(),
            "--out".into(),
            out.clone(),
        ]
    };
    add(
        "barycenter --inputs",
        bary("{}", &f("w.npy"), &f("c44.npy")),
    );
    add(
        "barycenter --weights",
        bary(&f("h.npy"), "{}", &f("c44.npy")),
    );
    add("barycenter --cost", bary(&f("h.npy"), &f("w.npy"), "{}"));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    add(
        "bistochastic --x",
        s(&["bistochastic", "--x", "{}", "--out", &out]),
    );
    add(
        "bistochastic --grad",
        s(&[
            "bistochastic",
            "--x",
            &f("sq.npy"),
            "--out",
            &out,
            "--grad",
            "{}",
            "--out-grad",
            &f("dx.npy"),
        ]),
    );
    add(
        "svd3 --a",
        s(&[
            "svd3",
            "--a",
            "{}",
            "--out-u",
            &f("u.npy"),
            "--out-s",
            &f("s.npy"),
            "--out-vh",
            &f("v.npy"),
        ]),
    );
    add(
        "newton-schulz --x",
        s(&["newton-schulz", "--x", "{}", "--out", &out]),
    );
    add(
        "wasserstein --grad-mu (input)",
        s(&[
            "wasserstein",
            "--mu",
            "{}",
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("c.npy"),
            "--eps",
            "0.1",
            "--grad-mu",
            &f("gm.npy"),
        ]),
    );
    slots
}

#[test]
fn every_corrupt_npy_is_refused_by_every_file_argument() {
    let d = dir("corpus");
    write_valid(&d);
    let corpus = write_corpus(&d);
    let mut failures = Vec::new();
    let mut runs = 0;
    for (label, args) in file_slots(&d) {
        // The valid command line must succeed, so the refusals below are the file's doing.
        let valid: Vec<String> = args
            .iter()
            .map(|a| a.replace("{}", &p(&d, default_for(&label))))
            .collect();
        let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
        let (code, _, err) = logot(&valid);
        assert_eq!(code, 0, "{label}: the valid command failed: {err}");
        for (file, msg) in &corpus {
            let path = p(&d, file);
            let a: Vec<String> = args.iter().map(|x| x.replace("{}", &path)).collect();
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            runs += 1;
            if let Err(e) = refused(&a, &format!("{path}: ")).and(refused(&a, msg)) {
                failures.push(format!("{label} with {file}: {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(runs >= 300, "{runs}");
}

/// The valid file for a slot of [`file_slots`].
fn default_for(label: &str) -> &'static str {
    match label {
        "wasserstein --mu" | "wasserstein --grad-mu (input)" => "mu.npy",
        "wasserstein --nu" => "nu.npy",
        "wasserstein --cost" => "c.npy",
        "coupling --x" => "x.npy",
        "coupling --y" => "y.npy",
        "barycenter --inputs" => "h.npy",
        "barycenter --weights" => "w.npy",
        "barycenter --cost" => "c44.npy",
        "bistochastic --x" | "bistochastic --grad" => "sq.npy",
        "svd3 --a" => "a.npy",
        "newton-schulz --x" => "sq.npy",
        other => panic!("no default for {other}"),
    }
}

/// The row ids of a section of docs/input-checks.md.
fn table_ids(prefix: char) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/input-checks.md"
    ))
    .expect("docs/input-checks.md");
    doc.lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next())
        .filter(|id| id.starts_with(prefix) && id[1..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_line_row_is_refused_with_a_message() {
    let d = dir("rows");
    write_valid(&d);
    write_corpus(&d);
    let f = |n: &str| p(&d, n);
    // Extra inputs.
    let nan4 = Array1::from(vec![0.25, f64::NAN, 0.25, 0.25]);
    npy(&d, "nan4.npy", &nan4);
    npy(&d, "neg4.npy", &Array1::from(vec![0.5, 0.5, 0.25, -0.25]));
    npy(&d, "zero4.npy", &Array1::<f64>::zeros(4));
    npy(&d, "heavy3.npy", &Array1::from_elem(3, 1.0));
    npy(&d, "empty.npy", &Array1::<f64>::zeros(0));
    npy(&d, "mu5.npy", &Array1::from_elem(5, 0.2));
    npy(&d, "mu_b.npy", &Array2::from_elem((2, 4), 0.25));
    npy(&d, "nu_b1.npy", &Array2::from_elem((1, 3), 1.0 / 3.0));
    npy(&d, "nu_b.npy", &Array2::from_elem((2, 3), 1.0 / 3.0));
    npy(&d, "c_b3.npy", &Array3::from_elem((3, 4, 3), 0.5));
    npy(&d, "scalar.npy", &ndarray::arr0(1.0f64));
    npy(&d, "cube.npy", &Array3::from_elem((1, 1, 4), 0.25));
    npy(&d, "cnan.npy", &Array2::from_elem((4, 3), f64::INFINITY));
    npy(&d, "x0.npy", &Array2::<f64>::zeros((0, 2)));
    npy(&d, "x3d.npy", &Array2::from_elem((4, 3), 0.5));
    npy(&d, "xnan.npy", &Array2::from_elem((4, 2), f64::NAN));
    npy(
        &d,
        "h_un.npy",
        &Array2::from_shape_vec((2, 4), vec![0.25, 0.25, 0.25, 0.25, 1.0, 1.0, 1.0, 1.0]).unwrap(),
    );
    npy(
        &d,
        "h_neg.npy",
        &Array2::from_shape_vec((2, 4), vec![0.5, 0.5, 0.25, -0.25, 0.25, 0.25, 0.25, 0.25])
            .unwrap(),
    );
    npy(&d, "h3.npy", &Array3::from_elem((2, 2, 4), 0.25));
    npy(&d, "w3.npy", &Array1::from(vec![0.2, 0.3, 0.5]));
    npy(&d, "w_sum.npy", &Array1::from(vec![0.5, 0.6]));
    npy(&d, "w_neg.npy", &Array1::from(vec![1.5, -0.5]));
    npy(&d, "w_nan.npy", &Array1::from(vec![f64::NAN, 0.5]));
    npy(&d, "c43.npy", &Array2::from_elem((3, 4), 0.5));
    npy(
        &d,
        "img5d.npy",
        &ndarray::ArrayD::<f64>::zeros(ndarray::IxDyn(&[1, 1, 1, 1, 1])),
    );
    npy(&d, "img0.npy", &Array3::<f64>::zeros((2, 0, 3)));
    npy(&d, "rect.npy", &Array2::from_elem((5, 3), 0.1));
    npy(&d, "big.npy", &Array2::from_elem((40, 40), 0.1));
    npy(&d, "sqnan.npy", &Array2::from_elem((3, 3), f64::NAN));
    npy(&d, "sq_b.npy", &Array3::from_elem((2, 3, 3), 0.1));
    npy(&d, "a4.npy", &Array2::from_elem((5, 4), 0.1));
    npy(&d, "a0.npy", &Array3::<f64>::zeros((2, 0, 3)));
    npy(&d, "anan.npy", &Array2::from_elem((5, 3), f64::NAN));
    npy(&d, "e23.npy", &Array2::<f64>::zeros((0, 3)));
    // Outputs: a folder, a read-only file, a dangling symbolic link; .npz archives.
    std::fs::create_dir_all(f("a_folder")).unwrap();
    let _ = std::fs::remove_file(f("readonly.npy"));
    std::fs::write(f("readonly.npy"), b"keep").unwrap();
    let mut perm = std::fs::metadata(f("readonly.npy")).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(f("readonly.npy"), perm).unwrap();
    #[cfg(unix)]
    {
        let _ = std::fs::remove_file(f("dangling.npy"));
        std::os::unix::fs::symlink(f("no_such_target.npy"), f("dangling.npy")).unwrap();
    }
    common::cli::write_npz(
        &f("arrays.npz"),
        &[
            ("mu", common::cli::npy_bytes(&Array1::from_elem(4, 0.25))),
            (
                "nu",
                common::cli::npy_bytes(&Array1::from_elem(3, 1.0 / 3.0)),
            ),
        ],
        true,
    );
    std::fs::copy(f("mu.npy"), f("mu.npz")).unwrap();
    let mut cut = common::cli::npy_bytes(&Array1::from_elem(4, 0.25));
    cut.truncate(cut.len() - 4);
    common::cli::write_npz(&f("short.npz"), &[("mu", cut)], false);

    let (mu, nu, c, out) = (f("mu.npy"), f("nu.npy"), f("c.npy"), f("out.npy"));
    let w = |mu: &str, nu: &str, cost: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "wasserstein",
            "--mu",
            mu,
            "--nu",
            nu,
            "--cost",
            cost,
            "--eps",
            "0.1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let pts = |x: &str, y: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "wasserstein",
            "--mu",
            &mu,
            "--nu",
            &nu,
            "--x",
            x,
            "--y",
            y,
            "--eps",
            "0.1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let bary = |inputs: &str, weights: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "barycenter",
            "--inputs",
            inputs,
            "--weights",
            weights,
            "--eps",
            "0.1",
            "--out",
            &out,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let c44 = f("c44.npy");
    let svd = |a: &str| {
        v(&[
            "svd3",
            "--a",
            a,
            "--out-u",
            &f("u.npy"),
            "--out-s",
            &f("s.npy"),
            "--out-vh",
            &f("v.npy"),
        ])
    };
    let mut cases: Vec<(&str, Vec<String>, String)> = vec![
        ("C01", v(&["frobnicate"]), "frobnicate".into()),
        (
            "C01",
            v(&["wasserstein", "--mu", &mu, "--nu", &nu, "--cost", &c]),
            "--eps".into(),
        ),
        ("C01", w(&mu, &nu, &c, &["--bogus"]), "--bogus".into()),
        (
            "C01",
            v(&["wasserstein", "--mu", &mu, "--nu", &nu, "--eps", "0.1"]),
            "--cost".into(),
        ),
        ("C01", v(&["svd3", "--a", &f("a.npy")]), "--out-u".into()),
        ("C02", w(&mu, &nu, &c, &["--iters", "-1"]), "--iters".into()),
        (
            "C02",
            w(&mu, &nu, &c, &["--iters", "99999999999999999999999"]),
            "--iters".into(),
        ),
        (
            "C02",
            w(&mu, &nu, &c, &["--iters", "ten"]),
            "--iters".into(),
        ),
        ("C02", w(&mu, &nu, &c, &["--tol", "x"]), "--tol".into()),
        (
            "C02",
            v(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "1e-3x",
            ]),
            "--eps".into(),
        ),
        (
            "C02",
            w(
                &mu,
                &nu,
                &c,
                &["--grad-mu", &f("g.npy"), "--cg-iters", "-3"],
            ),
            "--cg-iters".into(),
        ),
        (
            "C02",
            v(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--steps",
                "-1",
            ]),
            "--steps".into(),
        ),
        (
            "C02",
            v(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--iters",
                "1.5",
            ]),
            "--iters".into(),
        ),
        (
            "C02",
            bary(
                &f("h.npy"),
                &f("w.npy"),
                &["--cost", &c44, "--check-every", "-2"],
            ),
            "--check-every".into(),
        ),
        ("C03", w(&mu, &nu, &c, &["--backend", "tpu"]), "tpu".into()),
        (
            "C03",
            v(&["bench", "--problem", "otA", "--backend", "gpu"]),
            "gpu".into(),
        ),
        (
            "C06",
            w(&f("missing.npy"), &nu, &c, &[]),
            "missing.npy".into(),
        ),
        (
            "C06",
            w(&mu, &nu, &d.to_string_lossy(), &[]),
            d.to_string_lossy().into_owned(),
        ),
        (
            "C07",
            w(&f("empty_file.npy"), &nu, &c, &[]),
            "not a .npy file".into(),
        ),
        (
            "C07",
            w(&f("bad_magic.npy"), &nu, &c, &[]),
            "not a .npy file".into(),
        ),
        (
            "C08",
            w(&f("version9.npy"), &nu, &c, &[]),
            "unsupported .npy format version 9".into(),
        ),
        (
            "C08",
            w(&f("huge_header_len.npy"), &nu, &c, &[]),
            "implausible .npy header length".into(),
        ),
        (
            "C09",
            w(&f("truncated_header.npy"), &nu, &c, &[]),
            "truncated .npy header".into(),
        ),
        (
            "C10",
            w(&f("no_descr.npy"), &nu, &c, &[]),
            "no 'descr'".into(),
        ),
        (
            "C10",
            w(&f("bad_fortran.npy"), &nu, &c, &[]),
            "fortran_order".into(),
        ),
        (
            "C10",
            w(&f("bad_shape.npy"), &nu, &c, &[]),
            "bad dimension".into(),
        ),
        (
            "C11",
            w(&f("int8.npy"), &nu, &c, &[]),
            "dtype |i1 is not supported".into(),
        ),
        (
            "C11",
            w(&f("complex.npy"), &nu, &c, &[]),
            "dtype <c16 is not supported".into(),
        ),
        (
            "C11",
            w(&f("unicode.npy"), &nu, &c, &[]),
            "dtype <U3 is not supported".into(),
        ),
        (
            "C12",
            w(&f("overflow_shape.npy"), &nu, &c, &["--f32"]),
            "more elements than fit in memory".into(),
        ),
        (
            "C13",
            w(&f("claims_1e12.npy"), &nu, &c, &[]),
            "truncated .npy data".into(),
        ),
        (
            "C13",
            w(&mu, &nu, &f("claims_1e5x1e5.npy"), &[]),
            "truncated .npy data".into(),
        ),
        (
            "C13",
            w(&f("truncated_data.npy"), &nu, &c, &[]),
            "truncated .npy data".into(),
        ),
        ("C15", w(&f("scalar.npy"), &nu, &c, &[]), "--mu: ".into()),
        (
            "C15",
            w(&f("cube.npy"), &nu, &c, &[]),
            "expected 1-D or 2-D".into(),
        ),
        ("C15", w(&mu, &nu, &mu, &[]), "--cost: ".into()),
        (
            "C15",
            v(&[
                "svd3",
                "--a",
                &mu,
                "--out-u",
                &f("u.npy"),
                "--out-s",
                &f("s.npy"),
                "--out-vh",
                &f("v.npy"),
            ]),
            "--a: ".into(),
        ),
        (
            "C15",
            v(&["newton-schulz", "--x", &f("scalar.npy"), "--out", &out]),
            "--x: ".into(),
        ),
        (
            "C15",
            bary(&mu, &f("w.npy"), &["--cost", &c44]),
            "inputs: ".into(),
        ),
        (
            "C15",
            bary(&f("h.npy"), &f("scalar.npy"), &["--cost", &c44]),
            "weights: ".into(),
        ),
        (
            "C16",
            w(&mu, &f("nu_b1.npy"), &c, &[]),
            "--nu: is 2-D but --mu is 1-D".into(),
        ),
        (
            "C17",
            w(&mu, &nu, &c, &["--metric", "euclidean"]),
            "--metric".into(),
        ),
        (
            "C18",
            pts(&f("x0.npy"), &f("y.npy"), &[]),
            "--x: empty input".into(),
        ),
        (
            "C18",
            pts(&f("x.npy"), &f("xnan.npy"), &[]),
            "--y: non-finite".into(),
        ),
        (
            "C18",
            pts(&f("x3d.npy"), &f("y.npy"), &[]),
            "--y: points have 2 coordinates".into(),
        ),
        (
            "C18",
            pts(&f("y.npy"), &f("x.npy"), &[]),
            "--mu: has 4 weights for 3 points of x".into(),
        ),
        (
            "C19",
            w(&mu, &nu, &c, &["--grad-x", &f("gx.npy")]),
            "--grad-x/--grad-y".into(),
        ),
        (
            "C19",
            pts(
                &f("x.npy"),
                &f("y.npy"),
                &["--grad-x", &f("gx.npy"), "--grad-mu", &f("gm.npy")],
            ),
            "--grad-x/--grad-y".into(),
        ),
        (
            "C20",
            pts(&f("x.npy"), &f("y.npy"), &["--grad-mu", &f("gm.npy")]),
            "--grad-mu/--grad-nu/--grad-cost".into(),
        ),
        (
            "C20",
            w(
                &mu,
                &nu,
                &c,
                &["--grad-cost", &f("gc.npy"), "--backend", "cuda"],
            ),
            "--grad-mu/--grad-nu/--grad-cost".into(),
        ),
        (
            "C21",
            v(&[
                "coupling",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "0.1",
                "--out",
                "/nonexistent-dir/p.npy",
            ]),
            "/nonexistent-dir/p.npy".into(),
        ),
        (
            "C21",
            w(&mu, &nu, &c, &["--grad-mu", "/nonexistent-dir/g.npy"]),
            "/nonexistent-dir/g.npy".into(),
        ),
        (
            "C21",
            svd(&f("a.npy"))
                .into_iter()
                .map(|a| {
                    if a.ends_with("s.npy") {
                        "/nonexistent-dir/s.npy".into()
                    } else {
                        a
                    }
                })
                .collect(),
            "/nonexistent-dir/s.npy".into(),
        ),
        (
            "C22",
            w(&f("nan4.npy"), &nu, &c, &[]),
            "mu: non-finite value NaN".into(),
        ),
        (
            "C22",
            w(&f("neg4.npy"), &nu, &c, &[]),
            "mu: negative mass".into(),
        ),
        (
            "C22",
            w(&f("zero4.npy"), &nu, &c, &[]),
            "mu: total mass is zero".into(),
        ),
        (
            "C22",
            w(&mu, &f("heavy3.npy"), &c, &[]),
            "unequal total masses".into(),
        ),
        (
            "C22",
            w(&f("empty.npy"), &nu, &c, &[]),
            "mu: empty input".into(),
        ),
        (
            "C22",
            w(&f("mu5.npy"), &nu, &c, &[]),
            "cost: is 4×3 but mu has 5".into(),
        ),
        (
            "C22",
            w(&f("mu_b.npy"), &f("nu_b1.npy"), &c, &[]),
            "nu: batch of 1 problems but mu has 2".into(),
        ),
        (
            "C22",
            w(&f("mu_b.npy"), &f("nu_b.npy"), &f("c_b3.npy"), &[]),
            "cost: holds 3 matrices".into(),
        ),
        (
            "C22",
            w(&mu, &nu, &f("cnan.npy"), &[]),
            "cost: non-finite value inf".into(),
        ),
        (
            "C22",
            w(&mu, &nu, &c, &["--iters", "0"]),
            "--iters = 0".into(),
        ),
        ("C22", w(&mu, &nu, &c, &["--tol", "-1"]), "tol = -1".into()),
        (
            "C22",
            w(&mu, &nu, &c, &["--tol", "nan"]),
            "tol = NaN".into(),
        ),
        (
            "C22",
            v(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "0",
            ]),
            "eps = 0".into(),
        ),
        (
            "C22",
            v(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "-1",
            ]),
            "eps = -1".into(),
        ),
        (
            "C22",
            v(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "nan",
            ]),
            "eps = NaN".into(),
        ),
        (
            "C22",
            v(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "inf",
            ]),
            "eps = inf".into(),
        ),
        (
            "C22",
            w(&mu, &nu, &c, &["--grad-mu", &f("g.npy"), "--cg-iters", "0"]),
            "--cg-iters = 0".into(),
        ),
        (
            "C22",
            w(&mu, &nu, &c, &["--grad-mu", &f("g.npy"), "--cg-tol", "-1"]),
            "--cg-tol = -1".into(),
        ),
        (
            "C22",
            v(&[
                "coupling",
                "--mu",
                &f("nan4.npy"),
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "0.1",
                "--out",
                &out,
            ]),
            "mu: non-finite".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w3.npy"), &["--cost", &c44]),
            "weights: shape (1, 3)".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w_sum.npy"), &["--cost", &c44]),
            "weights must sum to 1".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w_neg.npy"), &["--cost", &c44]),
            "weight 1 is negative".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w_nan.npy"), &["--cost", &c44]),
            "weights: non-finite".into(),
        ),
        (
            "C23",
            bary(&f("h_un.npy"), &f("w.npy"), &["--cost", &c44]),
            "inputs = input 1 has mass 4".into(),
        ),
        (
            "C23",
            bary(&f("h_neg.npy"), &f("w.npy"), &["--cost", &c44]),
            "inputs: negative mass".into(),
        ),
        (
            "C23",
            bary(&f("h3.npy"), &f("w.npy"), &["--cost", &c44]),
            "weights: one weight vector for 2 problems".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w.npy"), &["--cost", &f("c43.npy")]),
            "cost: has 3 rows".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w.npy"), &["--cost", &f("cnan.npy")]),
            "cost: non-finite".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w.npy"), &["--cost", &c44])
                .into_iter()
                .map(|a| if a == "0.1" { "0".into() } else { a })
                .collect(),
            "eps = 0".into(),
        ),
        (
            "C23",
            bary(&f("h.npy"), &f("w.npy"), &["--cost", &c44, "--iters", "0"]),
            "--iters = 0".into(),
        ),
        (
            "C23",
            bary(
                &f("h.npy"),
                &f("w.npy"),
                &["--cost", &c44, "--check-every", "0"],
            ),
            "--check-every = 0".into(),
        ),
        ("C23", bary(&f("h.npy"), &f("w.npy"), &[]), "--cost".into()),
        (
            "C23",
            bary(&f("img5d.npy"), &f("w.npy"), &["--grid"]),
            "inputs: ".into(),
        ),
        (
            "C23",
            bary(&f("img0.npy"), &f("w.npy"), &["--grid"]),
            "empty input".into(),
        ),
        (
            "C24",
            v(&["bistochastic", "--x", &f("rect.npy"), "--out", &out]),
            "x: holds 5×3 matrices; square matrices are needed".into(),
        ),
        (
            "C24",
            v(&["bistochastic", "--x", &f("big.npy"), "--out", &out]),
            "this backend handles n ≤ 32".into(),
        ),
        (
            "C24",
            v(&["bistochastic", "--x", &f("sqnan.npy"), "--out", &out]),
            "x: non-finite".into(),
        ),
        (
            "C24",
            v(&["bistochastic", "--x", &f("e23.npy"), "--out", &out]),
            "x: ".into(),
        ),
        (
            "C24",
            v(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--iters",
                "0",
            ]),
            "iters = 0".into(),
        ),
        (
            "C24",
            v(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--tol",
                "-1",
            ]),
            "tol = -1".into(),
        ),
        (
            "C24",
            v(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--grad",
                &f("sq_b.npy"),
                "--out-grad",
                &f("dx.npy"),
            ]),
            "--grad: is (2, 3, 3) but --x is (1, 3, 3)".into(),
        ),
        (
            "C24",
            v(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--grad",
                &f("sqnan.npy"),
                "--out-grad",
                &f("dx.npy"),
            ]),
            "g: non-finite".into(),
        ),
        (
            "C24",
            v(&[
                "bistochastic",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--grad",
                &f("sq.npy"),
            ]),
            "--out-grad".into(),
        ),
        (
            "C25",
            svd(&f("a4.npy")),
            "a: expected B×M×3 (or M×3) matrices, got shape [1, 5, 4]".into(),
        ),
        ("C25", svd(&f("a0.npy")), "a: empty input".into()),
        ("C25", svd(&f("anan.npy")), "a: non-finite".into()),
        (
            "C26",
            v(&["newton-schulz", "--x", &f("e23.npy"), "--out", &out]),
            "x: empty input (shape 0×3)".into(),
        ),
        (
            "C26",
            v(&["newton-schulz", "--x", &f("sqnan.npy"), "--out", &out]),
            "x: non-finite".into(),
        ),
        ("C27", v(&["bench", "--problem", "otZ"]), "otZ".into()),
        (
            "C27",
            v(&["bench", "--problem", "otA", "--max-seconds", "nan"]),
            "--max-seconds = NaN".into(),
        ),
        (
            "C27",
            v(&["bench", "--problem", "otA", "--max-seconds", "-1"]),
            "--max-seconds = -1".into(),
        ),
        (
            "C28",
            v(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &f("a_folder"),
            ]),
            "--out: is a folder".into(),
        ),
        (
            "C28",
            v(&["newton-schulz", "--x", &f("sq.npy"), "--out", ""]),
            "--out = \"\"".into(),
        ),
        (
            "C28",
            v(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &f("readonly.npy"),
            ]),
            "--out: the file is read-only".into(),
        ),
        (
            "C28",
            v(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &f("dangling.npy"),
            ]),
            "--out: is a symbolic link to a missing file".into(),
        ),
        (
            "C29",
            w(&mu, &nu, &c, &["--grad-mu", &mu]),
            format!("--grad-mu = {mu}: is the same file as the input --mu"),
        ),
        (
            "C29",
            v(&[
                "svd3",
                "--a",
                &f("a.npy"),
                "--out-u",
                &f("a.npy"),
                "--out-s",
                &f("s.npy"),
                "--out-vh",
                &f("v.npy"),
            ]),
            "--out-u = ".into(),
        ),
        (
            "C30",
            v(&[
                "svd3",
                "--a",
                &f("a.npy"),
                "--out-u",
                &f("u.npy"),
                "--out-s",
                &f("u.npy"),
                "--out-vh",
                &f("v.npy"),
            ]),
            "is the same file as the output --out-u".into(),
        ),
        (
            "C32",
            w(&format!("{}:m", f("arrays.npz")), &nu, &c, &[]),
            "--mu: no array \"m\" in this .npz archive (it holds mu, nu)".into(),
        ),
        (
            "C32",
            w(&f("arrays.npz"), &nu, &c, &[]),
            "--mu: a .npz archive of several arrays needs a member name".into(),
        ),
        (
            "C32",
            w(&format!("{}:mu", f("mu.npz")), &nu, &c, &[]),
            "not a readable .npz (zip) archive".into(),
        ),
        (
            "C32",
            w(&format!("{}:mu", f("short.npz")), &nu, &c, &[]),
            "short.npz:mu: --mu: truncated .npy data".into(),
        ),
        (
            "C33",
            v(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--steps",
                "100000000000",
            ]),
            "--steps = 100000000000: at most 10000 steps".into(),
        ),
        (
            "C33",
            v(&[
                "newton-schulz",
                "--x",
                &f("sq.npy"),
                "--out",
                &out,
                "--polish-steps",
                "10001",
            ]),
            "--polish-steps = 10001".into(),
        ),
        (
            "C34",
            v(&[
                "bench",
                "--problem",
                "otA",
                "--runs",
                "18446744073709551615",
            ]),
            "--runs = 18446744073709551615: at most 1000000 runs".into(),
        ),
        (
            "C34",
            v(&["bench", "--problem", "otA", "--warmup", "1000001"]),
            "--warmup = 1000001".into(),
        ),
        (
            "C35",
            v(&[
                "divergence",
                "--x",
                &f("x.npy"),
                "--y",
                &f("y.npy"),
                "--mu",
                &f("mu5.npy"),
                "--eps",
                "0.1",
            ]),
            "--mu: has 5 weights for 4 points of x".into(),
        ),
        (
            "C35",
            v(&[
                "divergence",
                "--x",
                &f("x.npy"),
                "--y",
                &f("y.npy"),
                "--nu",
                &f("nu_b.npy"),
                "--eps",
                "0.1",
            ]),
            "--nu: ".into(),
        ),
        (
            "C35",
            v(&[
                "divergence",
                "--x",
                &f("xnan.npy"),
                "--y",
                &f("y.npy"),
                "--eps",
                "0.1",
            ]),
            "--x: non-finite".into(),
        ),
        (
            "C35",
            v(&[
                "divergence",
                "--x",
                &f("x.npy"),
                "--y",
                &f("y.npy"),
                "--mu",
                &f("neg4.npy"),
                "--eps",
                "0.1",
            ]),
            "--mu: negative mass".into(),
        ),
        // Unbalanced OT flags (cli/tests/cli/unbalanced.rs checks the values against POT).
        ("C36", w(&mu, &nu, &c, &["--reg-m", "0"]), "--reg-m = 0: the marginal penalty ρ must be > 0".into()),
        ("C36", w(&mu, &nu, &c, &["--reg-m", "-2"]), "--reg-m = -2: the marginal penalty".into()),
        ("C36", w(&mu, &nu, &c, &["--reg-m-mu", "NaN"]), "--reg-m-mu = NaN: the marginal penalty".into()),
        ("C36", w(&mu, &nu, &c, &["--reg-m-nu", "-inf"]), "--reg-m-nu = -inf: the marginal penalty".into()),
        (
            "C37",
            w(&mu, &nu, &c, &["--reg-m", "1", "--reg-m-mu", "1"]),
            "the argument '--reg-m <RHO>' cannot be used with '--reg-m-mu <RHO>'".into(),
        ),
        (
            "C38",
            w(&mu, &f("heavy3.npy"), &c, &[]),
            "unequal total masses (balanced OT needs equal masses; relax a marginal with --reg-m RHO".into(),
        ),
        (
            "C38",
            w(&mu, &f("heavy3.npy"), &c, &["--reg-m", "inf"]),
            "unequal total masses (balanced OT needs equal masses".into(),
        ),
        (
            "C40",
            bary(&f("h.npy"), &f("w.npy"), &["--cost", &c44, "--reg-m", "0"]),
            "--reg-m = 0: the marginal penalty ρ must be > 0".into(),
        ),
        (
            "C40",
            bary(&f("h.npy"), &f("w.npy"), &["--cost", &c44, "--reg-m-nu", "NaN"]),
            "--reg-m-nu = NaN: the marginal penalty ρ must be > 0".into(),
        ),
        (
            "C41",
            v(&["divergence", "--x", &f("x.npy"), "--y", &f("y.npy"), "--eps", "0.1", "--reg-m", "0"]),
            "--reg-m = 0: the marginal penalty ρ must be > 0".into(),
        ),
        (
            "C41",
            v(&["divergence", "--x", &f("x.npy"), "--y", &f("y.npy"), "--eps", "0.1", "--reg-m-mu", "0.4"]),
            "--reg-m-mu = 0.4: the unbalanced Sinkhorn divergence needs one penalty ρ on both marginals".into(),
        ),
        (
            "C41",
            v(&[
                "divergence", "--x", &f("x.npy"), "--y", &f("y.npy"), "--eps", "0.1", "--reg-m", "1",
                "--convention", "linear",
            ]),
            "--convention = Linear: the unbalanced Sinkhorn divergence debiases the unbalanced objective".into(),
        ),
        (
            "C44",
            v(&["emd", "--mu", &mu, "--nu", &nu, "--cost", &c, "--backend", "cuda"]),
            "--cost: 4×3 is not square: the GPU auction solves assignment problems".into(),
        ),
        (
            "C44",
            v(&["emd", "--mu", &mu, "--nu", &mu, "--cost", &c]),
            "nu: has 4 entries per problem but cost has 3 columns".into(),
        ),
        (
            "C44",
            v(&["emd", "--mu", &f("mu5.npy"), "--nu", &nu, "--cost", &c]),
            "mu: has 5 entries per problem but cost has 4 rows".into(),
        ),
        (
            "C44",
            v(&["emd", "--mu", &mu, "--nu", &f("heavy3.npy"), "--cost", &c]),
            "unequal total masses".into(),
        ),
        (
            "C44",
            v(&["emd", "--mu", &f("neg4.npy"), "--nu", &nu, "--cost", &c]),
            "mu: negative mass".into(),
        ),
        (
            "C45",
            v(&["sliced", "--x", &f("x.npy"), "--y", &f("y.npy"), "--nu", &mu]),
            "--nu: has 4 weights for the 3 points of --y".into(),
        ),
        (
            "C45",
            v(&["sliced", "--x", &f("x.npy"), "--y", &f("y.npy"), "--mu", &f("neg4.npy")]),
            "--mu: negative mass".into(),
        ),
        (
            "C45",
            v(&["sliced", "--x", &f("x.npy"), "--y", &f("x3d.npy")]),
            "--y".into(),
        ),
        (
            "C46",
            v(&["bench", "--problem", "otA", "--data", "sphere"]),
            "--data = otA: applies to the point-cloud problems".into(),
        ),
        (
            "C46",
            v(&["bench", "--problem", "otC10", "--data", "cubes"]),
            "clustered".into(),
        ),
        (
            "C46",
            v(&["bench", "--problem", "otC10", "--eps-rel", "0"]),
            "--eps-rel = 0: must be finite and > 0".into(),
        ),
        (
            "C46",
            v(&["bench", "--problem", "otC10", "--seed", "-1"]),
            "--seed".into(),
        ),
        (
            "C46",
            v(&[
                "bench",
                "--problem",
                "otC10",
                "--points",
                "4",
                "--dump",
                &format!("{}/sub", f("x.npy")),
            ]),
            "--dump: cannot create the folder".into(),
        ),
        (
            "C47",
            v(&["gw", "--c1", &c, "--c2", &f("sq.npy")]),
            "--c1: is 4×3, not square".into(),
        ),
        (
            "C47",
            v(&["gw", "--c1", &c44, "--c2", &f("sq.npy"), "--p", &nu]),
            "--p: has 3 entries but --c1 is 4×4".into(),
        ),
        (
            "C47",
            v(&["gw", "--c1", &c44, "--c2", &f("sq.npy"), "--q", &f("heavy3.npy")]),
            "--q = total 3: the total mass must equal that of p".into(),
        ),
        (
            "C47",
            v(&["gw", "--c1", &c44, "--c2", &f("sq.npy"), "--loss", "kl"]),
            "--c2 = 0 at (0, 0): the KL loss needs C2 > 0".into(),
        ),
        (
            "C47",
            v(&["fgw", "--c1", &c44, "--c2", &f("sq.npy"), "--m", &c44]),
            "--m: is 4×4 but --c1 is 4×4 and --c2 is 3×3".into(),
        ),
        (
            "C47",
            v(&["fgw", "--c1", &c44, "--c2", &f("sq.npy"), "--m", &c, "--alpha", "2"]),
            "--alpha = 2: must lie in [0, 1]".into(),
        ),
        (
            "C47",
            v(&["gw", "--c1", &c44, "--c2", &f("sq.npy"), "--init", &c44]),
            "--init: is 4×4 but the plan is 4×3".into(),
        ),
        (
            "C47",
            v(&["gw", "--c1", &c44, "--c2", &f("sq.npy"), "--eps", "0.1", "--max-iters", "0"]),
            "--max-iters = 0: must be ≥ 1".into(),
        ),
        (
            "C47",
            v(&["gw", "--x", &f("x.npy"), "--y", &f("y.npy")]),
            "--eps = absent: point clouds (--x/--y) are solved by entropic GW".into(),
        ),
    ];
    // C04/C05: `--backend cuda` without CUDA support in this build, or without a GPU.
    let cuda_needle = if cfg!(feature = "cuda") {
        "CUDA".to_string()
    } else {
        "--backend cuda: this logot was built without CUDA support".to_string()
    };
    let cuda_row = if cfg!(feature = "cuda") { "C05" } else { "C04" };
    for cmd in [
        w(&mu, &nu, &c, &["--backend", "cuda"]),
        v(&[
            "coupling",
            "--mu",
            &mu,
            "--nu",
            &nu,
            "--cost",
            &c,
            "--eps",
            "0.1",
            "--out",
            &out,
            "--backend",
            "cuda",
        ]),
        bary(
            &f("h.npy"),
            &f("w.npy"),
            &["--cost", &c44, "--backend", "cuda"],
        ),
    ] {
        // With a GPU (CUDA build on a GPU machine) the command succeeds: nothing to refuse.
        let (code, _, err) = logot(&cmd.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!err.contains("panicked"), "{err}");
        if code != 0 {
            cases.push((cuda_row, cmd, cuda_needle.clone()));
        }
    }
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for (id, args, needle) in &cases {
        seen.insert(id.to_string());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Err(e) = refused(&a, needle) {
            failures.push(format!("{id}: {e}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // C04 (no CUDA in the build) and C05 (no GPU) exclude each other; C14 (data the
    // reader refuses after a valid header) is reached only by corruptions the header
    // checks cannot see, which the fuzz target explores (fuzz/, scripts/fuzz).
    let mut table = table_ids('C');
    table.remove(if cfg!(feature = "cuda") { "C04" } else { "C05" });
    table.remove("C14");
    // C31 (a write failing part-way) needs a file-size limit: cli/tests/cli/outputs.rs.
    table.remove("C31");
    // C42 (a plan too large for memory or disk) and C43 (an input too large for memory)
    // need an address-space or file-size limit: cli/tests/cli/limits.rs, outputs.rs.
    table.remove("C42");
    table.remove("C43");
    let untested: Vec<_> = table.difference(&seen).collect();
    assert!(untested.is_empty(), "rows without a test: {untested:?}");
    let all = table_ids('C');
    let unknown: Vec<_> = seen.difference(&all).collect();
    assert!(
        unknown.is_empty(),
        "tests for rows not in the table: {unknown:?}"
    );
}

/// Valid edge cases through the command line: zero-mass bins, one-point supports,
/// Fortran-order files (read as numpy would), float32 files, a 1×1 bistochastic matrix,
/// a zero matrix for Newton–Schulz, a 1×3 svd3 input, a batch of one problem.
#[test]
fn valid_edge_cases_are_accepted() {
    let d = dir("edge");
    write_valid(&d);
    let f = |n: &str| p(&d, n);
    let ok = |args: &[&str]| -> serde_json::Value {
        let (code, out, err) = logot(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        json(&out)
    };
    // Zero-mass bins: the same distance as the problem without them.
    npy(&d, "mu_z.npy", &Array1::from(vec![0.0, 0.5, 0.5, 0.0]));
    npy(&d, "nu_z.npy", &Array1::from(vec![0.5, 0.0, 0.5]));
    let x: Vec<f64> = (0..4).map(|i| i as f64 / 3.0).collect();
    let c = Array2::from_shape_fn((4, 3), |(i, j)| (x[i] - j as f64 / 2.0).powi(2));
    let sub = Array2::from_shape_fn((2, 2), |(i, j)| c[[i + 1, 2 * j]]);
    npy(&d, "c_sub.npy", &sub);
    npy(&d, "half.npy", &Array1::from(vec![0.5, 0.5]));
    let full = ok(&[
        "wasserstein",
        "--mu",
        &f("mu_z.npy"),
        "--nu",
        &f("nu_z.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.05",
    ]);
    let part = ok(&[
        "wasserstein",
        "--mu",
        &f("half.npy"),
        "--nu",
        &f("half.npy"),
        "--cost",
        &f("c_sub.npy"),
        "--eps",
        "0.05",
    ]);
    let (a, b) = (
        full["distance"][0].as_f64().unwrap(),
        part["distance"][0].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    // One point against one point: the cost entry times the mass.
    npy(&d, "one.npy", &Array1::from(vec![1.0]));
    npy(&d, "c11.npy", &Array2::from_elem((1, 1), 0.7));
    let one = ok(&[
        "wasserstein",
        "--mu",
        &f("one.npy"),
        "--nu",
        &f("one.npy"),
        "--cost",
        &f("c11.npy"),
        "--eps",
        "0.01",
    ]);
    assert!((one["distance"][0].as_f64().unwrap() - 0.7).abs() < 1e-12);
    // One point cloud point against three.
    npy(&d, "p1.npy", &Array2::from_elem((1, 2), 0.0));
    npy(&d, "w3u.npy", &Array1::from_elem(3, 1.0 / 3.0));
    ok(&[
        "wasserstein",
        "--mu",
        &f("one.npy"),
        "--nu",
        &f("w3u.npy"),
        "--x",
        &f("p1.npy"),
        "--y",
        &f("y.npy"),
        "--eps",
        "0.1",
    ]);
    // Fortran order: the same numbers as C order.
    let vals: Vec<f64> = c.t().iter().copied().collect();
    std::fs::write(
        f("c_fortran.npy"),
        npy_bytes("<f8", true, "(4, 3)", &f64_bytes(&vals)),
    )
    .unwrap();
    let cf = ok(&[
        "wasserstein",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c_fortran.npy"),
        "--eps",
        "0.1",
    ]);
    let cc = ok(&[
        "wasserstein",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.1",
    ]);
    assert_eq!(cf["distance"], cc["distance"]);
    // float32 inputs run in float32; a batch of one problem.
    npy(&d, "mu32.npy", &Array1::from_elem(4, 0.25f32));
    npy(&d, "nu32.npy", &Array1::from_elem(3, 1.0f32 / 3.0));
    npy(&d, "c32.npy", &c.mapv(|v| v as f32));
    let r32 = ok(&[
        "wasserstein",
        "--mu",
        &f("mu32.npy"),
        "--nu",
        &f("nu32.npy"),
        "--cost",
        &f("c32.npy"),
        "--eps",
        "0.1",
    ]);
    assert_eq!(r32["dtype"], "float32");
    npy(&d, "mu_1.npy", &Array2::from_elem((1, 4), 0.25));
    npy(&d, "nu_1.npy", &Array2::from_elem((1, 3), 1.0 / 3.0));
    let b1 = ok(&[
        "wasserstein",
        "--mu",
        &f("mu_1.npy"),
        "--nu",
        &f("nu_1.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.1",
    ]);
    assert_eq!(b1["distance"], cc["distance"]);
    // A 1×1 bistochastic matrix, a zero matrix for Newton–Schulz, a 1×3 svd3 input.
    npy(&d, "x11.npy", &Array2::from_elem((1, 1), 3.0));
    ok(&["bistochastic", "--x", &f("x11.npy"), "--out", &f("r11.npy")]);
    npy(&d, "zeros.npy", &Array2::<f64>::zeros((3, 2)));
    ok(&[
        "newton-schulz",
        "--x",
        &f("zeros.npy"),
        "--out",
        &f("z.npy"),
    ]);
    npy(
        &d,
        "a13.npy",
        &Array2::from_shape_vec((1, 3), vec![3.0, 0.0, 4.0]).unwrap(),
    );
    let s = ok(&[
        "svd3",
        "--a",
        &f("a13.npy"),
        "--out-u",
        &f("u.npy"),
        "--out-s",
        &f("s.npy"),
        "--out-vh",
        &f("v.npy"),
    ]);
    assert!((s["s_max"].as_f64().unwrap() - 5.0).abs() < 1e-12);
    // A grid barycenter of one-pixel images.
    npy(&d, "px.npy", &Array2::from_elem((2, 1), 1.0));
    ok(&[
        "barycenter",
        "--inputs",
        &f("px.npy"),
        "--weights",
        &f("w.npy"),
        "--grid",
        "--eps",
        "0.1",
        "--out",
        &f("b.npy"),
    ]);
}
