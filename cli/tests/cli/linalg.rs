//! `logot svd3` and `logot newton-schulz`: outputs equal the library's, shapes follow the
//! input (one matrix or a batch), precision follows the .npy dtype, bad input is refused.

use logot::linalg::{newton_schulz, svd3, svd3_batch, NewtonSchulzParams};
use logot::CpuBackend;
use ndarray::{Array1, Array2, Array3};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, logot, npy, p};

#[test]
fn svd3_single_and_batch_match_the_library() {
    let d = dir("svd3");
    let a = Array2::from_shape_fn((7, 3), |(i, j)| ((i * 3 + j * 5) % 11) as f64 - 4.5);
    npy(&d, "a.npy", &a);
    let (code, out, err) = logot(&[
        "svd3",
        "--a",
        &p(&d, "a.npy"),
        "--out-u",
        &p(&d, "u.npy"),
        "--out-s",
        &p(&d, "s.npy"),
        "--out-vh",
        &p(&d, "vh.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let js: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(js["m"], 7);
    assert_eq!(js["dtype"], "float64");
    let want = svd3(a.view()).unwrap();
    let u: Array2<f64> = read_npy(p(&d, "u.npy")).unwrap();
    let s: Array1<f64> = read_npy(p(&d, "s.npy")).unwrap();
    let vh: Array2<f64> = read_npy(p(&d, "vh.npy")).unwrap();
    assert_eq!((u, s, vh), (want.u, want.s, want.vt));

    let b = Array3::from_shape_fn((4, 6, 3), |(k, i, j)| {
        (((k + 1) * i + j * j) % 7) as f32 - 3.0
    });
    npy(&d, "b.npy", &b);
    let (code, _, err) = logot(&[
        "svd3",
        "--a",
        &p(&d, "b.npy"),
        "--out-u",
        &p(&d, "u.npy"),
        "--out-s",
        &p(&d, "s.npy"),
        "--out-vh",
        &p(&d, "vh.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let want = svd3_batch(&CpuBackend, b.view()).unwrap();
    let s: Array2<f32> = read_npy(p(&d, "s.npy")).unwrap();
    let u: Array3<f32> = read_npy(p(&d, "u.npy")).unwrap();
    assert_eq!((s, u), (want.s, want.u));
}

#[test]
fn newton_schulz_matches_the_library() {
    let d = dir("ns");
    let x = Array2::from_shape_fn((5, 9), |(i, j)| ((i * 7 + j * 3) % 10) as f32 - 4.0);
    npy(&d, "x.npy", &x);
    let (code, out, err) = logot(&[
        "newton-schulz",
        "--x",
        &p(&d, "x.npy"),
        "--steps",
        "3",
        "--out",
        &p(&d, "y.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let js: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(js["steps"], 3);
    assert_eq!(js["dtype"], "float32");
    let y: Array2<f32> = read_npy(p(&d, "y.npy")).unwrap();
    assert_eq!(
        y,
        newton_schulz(
            &CpuBackend,
            x.view(),
            &NewtonSchulzParams::default().steps(3)
        )
        .unwrap()
    );
}

#[test]
fn bad_inputs_are_refused() {
    let d = dir("bad");
    npy(&d, "a4.npy", &Array2::<f64>::ones((5, 4)));
    npy(&d, "a1.npy", &Array1::<f64>::ones(3));
    let mut nan = Array2::<f64>::ones((4, 3));
    nan[(1, 1)] = f64::NAN;
    npy(&d, "nan.npy", &nan);
    let svd = |a: &str| {
        logot(&[
            "svd3",
            "--a",
            a,
            "--out-u",
            &p(&d, "u.npy"),
            "--out-s",
            &p(&d, "s.npy"),
            "--out-vh",
            &p(&d, "v.npy"),
        ])
    };
    for (res, msg) in [
        (svd(&p(&d, "a4.npy")), "B×M×3"),
        (svd(&p(&d, "a1.npy")), "--a"),
        (svd(&p(&d, "nan.npy")), "non-finite"),
        (svd(&p(&d, "missing.npy")), "missing.npy"),
        (
            logot(&[
                "newton-schulz",
                "--x",
                &p(&d, "a1.npy"),
                "--out",
                &p(&d, "y.npy"),
            ]),
            "--x",
        ),
        (
            logot(&[
                "newton-schulz",
                "--x",
                &p(&d, "nan.npy"),
                "--out",
                &p(&d, "y.npy"),
            ]),
            "non-finite",
        ),
    ] {
        let (code, out, err) = res;
        assert_ne!(code, 0, "{msg}: accepted");
        assert!(out.is_empty());
        assert!(
            err.contains(msg) && !err.contains("panicked"),
            "expected '{msg}' in: {err}"
        );
    }
}
