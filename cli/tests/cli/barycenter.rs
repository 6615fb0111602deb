//! `logot barycenter`: .npy in and out, the same numbers as the library (which
//! tests/barycenter.rs checks against POT), and bad input refused with a message.

use logot::{barycenter, grid_barycenter, GridCost};
use logot_cli::problems::bary64_images;
use ndarray::{array, Array1, Array2, Array3, Axis};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, logot_json as logot, npy, p};

fn l1(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

#[test]
fn grid_images_give_the_library_result_in_the_image_shape() {
    let d = dir("grid");
    let imgs = bary64_images(20);
    npy(&d, "h.npy", &imgs);
    npy(&d, "w.npy", &array![0.2, 0.3, 0.5]);
    let (code, json, err) = logot(&[
        "barycenter",
        "--inputs",
        &p(&d, "h.npy"),
        "--weights",
        &p(&d, "w.npy"),
        "--eps",
        "0.01",
        "--grid",
        "--out",
        &p(&d, "bar.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let got: Array2<f64> = read_npy(p(&d, "bar.npy")).unwrap();
    assert_eq!(got.dim(), (20, 20));
    let want = grid_barycenter(imgs.view(), array![0.2, 0.3, 0.5].view(), 0.01).unwrap();
    assert_eq!(json["iterations"], want.iterations);
    assert_eq!(json["converged"], true);
    assert!(l1(got.as_slice().unwrap(), want.histogram.as_slice().unwrap()) < 1e-14);
    // float32 in (images and weights), float32 out.
    npy(&d, "h32.npy", &imgs.mapv(|v| v as f32));
    npy(&d, "w32.npy", &array![0.2f32, 0.3, 0.5]);
    let (code, json, err) = logot(&[
        "barycenter",
        "--inputs",
        &p(&d, "h32.npy"),
        "--weights",
        &p(&d, "w32.npy"),
        "--eps",
        "0.01",
        "--grid",
        "--iters",
        "50",
        "--tol",
        "0",
        "--out",
        &p(&d, "bar32.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json["dtype"], "float32");
    assert_eq!(json["iterations"], 50);
    let got32: Array2<f32> = read_npy(p(&d, "bar32.npy")).unwrap();
    assert!((got32.sum() - 1.0).abs() < 1e-3);
}

#[test]
fn dense_cost_single_and_batched() {
    let d = dir("dense");
    let n = 12;
    let grid = GridCost::new(&[n]).unwrap();
    let cost = grid.to_dense::<f64>();
    let x: Vec<f64> = (0..n).map(|i| GridCost::coordinate(n, i)).collect();
    let bump = |m: f64| -> Array1<f64> {
        let h: Array1<f64> = x
            .iter()
            .map(|&t| (-(t - m).powi(2) / 0.01).exp() + 1e-3)
            .collect();
        &h / h.sum()
    };
    let h = ndarray::stack![Axis(0), bump(0.2), bump(0.8)];
    npy(&d, "h.npy", &h);
    npy(&d, "c.npy", &cost);
    npy(&d, "w.npy", &array![0.5, 0.5]);
    let (code, json, err) = logot(&[
        "barycenter",
        "--inputs",
        &p(&d, "h.npy"),
        "--weights",
        &p(&d, "w.npy"),
        "--eps",
        "0.005",
        "--cost",
        &p(&d, "c.npy"),
        "--out",
        &p(&d, "bar.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let got: Array1<f64> = read_npy(p(&d, "bar.npy")).unwrap();
    let want = barycenter(h.view(), array![0.5, 0.5].view(), cost.view(), 0.005).unwrap();
    assert_eq!(json["iterations"], want.iterations);
    assert!(l1(got.as_slice().unwrap(), want.histogram.as_slice().unwrap()) < 1e-14);
    // Two problems: P×K×n inputs with P×K weights give P×m.
    let hb: Array3<f64> = ndarray::stack![Axis(0), h, h];
    let wb = array![[0.5, 0.5], [0.9, 0.1]];
    npy(&d, "hb.npy", &hb);
    npy(&d, "wb.npy", &wb);
    let (code, json, err) = logot(&[
        "barycenter",
        "--inputs",
        &p(&d, "hb.npy"),
        "--weights",
        &p(&d, "wb.npy"),
        "--eps",
        "0.005",
        "--cost",
        &p(&d, "c.npy"),
        "--out",
        &p(&d, "barb.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let got: Array2<f64> = read_npy(p(&d, "barb.npy")).unwrap();
    assert_eq!(got.dim(), (2, n));
    assert_eq!(json["errors"].as_array().map(|a| a.len()), Some(2));
}

#[test]
fn bad_input_is_refused_with_a_message() {
    let d = dir("bad");
    let h = array![[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]];
    npy(&d, "h.npy", &h);
    npy(&d, "w.npy", &array![0.5, 0.6]);
    npy(&d, "w_ok.npy", &array![0.5, 0.5]);
    npy(&d, "c.npy", &Array2::<f64>::zeros((3, 3)));
    npy(&d, "c_bad.npy", &Array2::<f64>::zeros((4, 3)));
    let base = |w: &str, extra: &[&str]| {
        let mut a = vec![
            "barycenter".to_string(),
            "--inputs".into(),
            p(&d, "h.npy"),
            "--weights".into(),
            p(&d, w),
        ];
        a.extend(["--eps", "0.1", "--out"].iter().map(|s| s.to_string()));
        a.push(p(&d, "bar.npy"));
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let c = p(&d, "c.npy");
    let cb = p(&d, "c_bad.npy");
    for (args, needle) in [
        (base("w.npy", &["--cost", &c]), "weights"),
        (base("w_ok.npy", &["--cost", &cb]), "cost"),
        (base("w_ok.npy", &[]), "--cost"),
        (base("w_ok.npy", &["--grid", "--cost", &c]), "--cost"),
        (
            base("w_ok.npy", &["--cost", &c, "--backend", "cuda"]),
            "cuda",
        ),
        (
            base("w_ok.npy", &["--grid", "--check-every", "0"]),
            "--check-every",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (code, _, err) = logot(&args);
        assert_ne!(code, 0, "{args:?} should fail");
        assert!(
            err.contains(needle),
            "{args:?}: stderr {err:?} should mention {needle}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // An input file that is not .npy.
    std::fs::write(p(&d, "junk.npy"), b"not an array").unwrap();
    let (code, _, err) = logot(&[
        "barycenter",
        "--inputs",
        &p(&d, "junk.npy"),
        "--weights",
        &p(&d, "w_ok.npy"),
        "--eps",
        "0.1",
        "--grid",
        "--out",
        &p(&d, "x.npy"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("junk.npy"), "{err}");
}
