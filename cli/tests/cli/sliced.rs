//! `logot sliced`: distances against closed forms (translations, a sorted matching worked
//! out by hand), the written gradients against their closed form, batches, seeded
//! directions, bad input refused with the flag named.

use ndarray::{array, Array1, Array2, Array3, Axis};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, logot, logot_json, npy, p};

#[test]
fn a_sorted_matching_by_hand_and_its_gradients() {
    let d = dir("by_hand");
    // Along e₁ the sources are 0, 1, 3 and the targets 2, 0, 7: the sorted matching pairs
    // 0↔0, 1↔2, 3↔7, so W_2² = (0 + 1 + 16)/3 and SW_2 = √(17/3).
    let x = array![[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]];
    let y = array![[2.0, 5.0], [0.0, 1.0], [7.0, 0.0]];
    let theta = array![[1.0], [0.0]];
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    npy(&d, "theta.npy", &theta);
    let (code, js, err) = logot_json(&[
        "sliced",
        "--x",
        &p(&d, "x.npy"),
        "--y",
        &p(&d, "y.npy"),
        "--projections",
        &p(&d, "theta.npy"),
        "--grad-x",
        &p(&d, "gx.npy"),
        "--grad-y",
        &p(&d, "gy.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let sw = (17.0f64 / 3.0).sqrt();
    assert!(
        (js["distance"][0].as_f64().unwrap() - sw).abs() < 1e-14,
        "{js}"
    );
    assert!((js["projected"][0].as_f64().unwrap() - 17.0 / 3.0).abs() < 1e-14);
    assert_eq!(js["projections"], 1);
    assert_eq!(js["dtype"], "float64");
    // ∂SW/∂x_i = (x_i − y_σ(i))/(3·SW) along e₁, and the opposite for the matched target.
    let gx: Array2<f64> = read_npy(p(&d, "gx.npy")).unwrap();
    let gy: Array2<f64> = read_npy(p(&d, "gy.npy")).unwrap();
    let want_x = array![[0.0, 0.0], [-1.0, 0.0], [-4.0, 0.0]] / (3.0 * sw);
    let want_y = array![[1.0, 0.0], [0.0, 0.0], [4.0, 0.0]] / (3.0 * sw);
    assert!((&gx - &want_x).iter().all(|v| v.abs() < 1e-14), "{gx}");
    assert!((&gy - &want_y).iter().all(|v| v.abs() < 1e-14), "{gy}");
}

#[test]
fn translations_give_closed_forms_for_one_pair_and_a_batch() {
    let d = dir("translation");
    let n = 40;
    let x = Array2::from_shape_fn((n, 3), |(i, k)| ((i * 7 + k * 11) % 13) as f64 * 0.1);
    let t = array![0.5, -1.0, 2.0];
    let y = &x + &t;
    // Weights: any, the same on both sides (a translation moves each point by t).
    let mu = Array1::from_shape_fn(n, |i| 1.0 + (i % 4) as f64);
    let eye = Array2::<f64>::eye(3);
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    npy(&d, "mu.npy", &mu);
    npy(&d, "eye.npy", &eye);
    // Along the axes W_p^p = M·|t_k|^p with M = Σμ = 100 the mass moved (POT's convention:
    // unnormalised weights scale the value): SW_p = (M·mean_k |t_k|^p)^{1/p}.
    assert_eq!(mu.sum(), 100.0);
    for (pw, want) in [
        ("2", (100.0 * (0.25f64 + 1.0 + 4.0) / 3.0).sqrt()),
        ("1", 100.0 * (0.5 + 1.0 + 2.0) / 3.0),
        ("3", (100.0 * (0.125f64 + 1.0 + 8.0) / 3.0).cbrt()),
    ] {
        let (code, js, err) = logot_json(&[
            "sliced",
            "--x",
            &p(&d, "x.npy"),
            "--y",
            &p(&d, "y.npy"),
            "--mu",
            &p(&d, "mu.npy"),
            "--nu",
            &p(&d, "mu.npy"),
            "--projections",
            &p(&d, "eye.npy"),
            "--p",
            pw,
        ]);
        assert_eq!(code, 0, "{err}");
        let got = js["distance"][0].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-12 * want,
            "p = {pw}: {got} vs {want}"
        );
    }

    // On the line every direction is ±1: SW_p = |t| whatever the seed, p or batch.
    let shifts = [0.3, -1.7, 4.0];
    let xb = Array3::from_shape_fn((3, 25, 1), |(_, i, _)| ((i * 5) % 9) as f64 * 0.37);
    let mut yb = xb.clone();
    for (k, s) in shifts.iter().enumerate() {
        yb.index_axis_mut(Axis(0), k).mapv_inplace(|v| v + s);
    }
    npy(&d, "xb.npy", &xb);
    npy(&d, "yb.npy", &yb);
    let (code, js, err) = logot_json(&[
        "sliced",
        "--x",
        &p(&d, "xb.npy"),
        "--y",
        &p(&d, "yb.npy"),
        "--seed",
        "7",
        "--n-projections",
        "5",
        "--p",
        "1.5",
        "--grad-x",
        &p(&d, "gxb.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(js["seed"], 7);
    assert_eq!(js["projections"], 5);
    for (k, s) in shifts.iter().enumerate() {
        let got = js["distance"][k].as_f64().unwrap();
        assert!((got - s.abs()).abs() < 1e-12, "problem {k}: {got}");
    }
    // ∂SW_p/∂x_i = −sign(t)/n for a translation (each point pulled towards its image).
    let gx: Array3<f64> = read_npy(p(&d, "gxb.npy")).unwrap();
    assert_eq!(gx.dim(), (3, 25, 1));
    for (k, s) in shifts.iter().enumerate() {
        for v in gx.index_axis(Axis(0), k).iter() {
            assert!((v + s.signum() / 25.0).abs() < 1e-12, "problem {k}: {v}");
        }
    }
}

#[test]
fn seeded_directions_repeat_and_float32_stays_float32() {
    let d = dir("seeded");
    let x = Array2::from_shape_fn((30, 4), |(i, k)| ((i * 3 + k * 5) % 7) as f32 * 0.3);
    let y = Array2::from_shape_fn((20, 4), |(i, k)| ((i * 5 + k) % 11) as f32 * 0.2);
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    let run = |seed: &str| {
        let (code, js, err) = logot_json(&[
            "sliced",
            "--x",
            &p(&d, "x.npy"),
            "--y",
            &p(&d, "y.npy"),
            "--seed",
            seed,
        ]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(js["dtype"], "float32");
        assert_eq!(js["projected"].as_array().unwrap().len(), 50);
        js["distance"][0].as_f64().unwrap()
    };
    let (a, b, c) = (run("3"), run("3"), run("4"));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn bad_inputs_are_refused_naming_the_flag() {
    let d = dir("bad");
    let x = Array2::from_shape_fn((5, 2), |(i, k)| (i + k) as f64);
    npy(&d, "x.npy", &x);
    npy(&d, "y3.npy", &Array2::<f64>::zeros((4, 3)));
    npy(&d, "theta3.npy", &Array2::<f64>::ones((3, 2)));
    npy(&d, "neg.npy", &array![1.0, -1.0, 1.0, 1.0, 1.0]);
    npy(&d, "short.npy", &array![1.0, 1.0]);
    let (xf, y3) = (p(&d, "x.npy"), p(&d, "y3.npy"));
    let cases: [(&[&str], &str); 6] = [
        (&["--y", &y3], "--y"),
        (&["--y", &xf, "--p", "0.5"], "--p"),
        (
            &["--y", &xf, "--projections", &p(&d, "theta3.npy")],
            "--projections",
        ),
        (&["--y", &xf, "--mu", &p(&d, "neg.npy")], "--mu"),
        (&["--y", &xf, "--nu", &p(&d, "short.npy")], "--nu"),
        (&["--y", &xf, "--n-projections", "0"], "--n-projections"),
    ];
    for (extra, named) in cases {
        let mut args = vec!["sliced", "--x", &xf];
        args.extend_from_slice(extra);
        let (code, out, err) = logot(&args);
        assert_eq!(code, 2, "{extra:?}: {out}");
        assert!(err.contains(named), "{named} not named in: {err}");
        assert!(!err.contains("x_s") && !err.contains("x_t"), "{err}");
    }
}

/// `--backend cuda` in a build without CUDA is refused naming it; `--backend` takes cpu and
/// cuda only.
#[test]
fn the_backend_flag_is_checked() {
    let d = dir("backend");
    let x = array![[0.0, 0.0], [1.0, 0.0]];
    npy(&d, "x.npy", &x);
    let base = ["sliced", "--x", &p(&d, "x.npy"), "--y", &p(&d, "x.npy")];
    let (code, js, err) = logot_json(&[&base[..], &["--backend", "cpu"]].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(js["backend"], "cpu");
    assert_eq!(js["distance"][0].as_f64().unwrap(), 0.0);
    let (code, _, err) = logot_json(&[&base[..], &["--backend", "tpu"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("tpu"), "{err}");
    if !cfg!(feature = "cuda") {
        let (code, _, err) = logot_json(&[&base[..], &["--backend", "cuda"]].concat());
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--backend cuda"), "{err}");
    }
}
