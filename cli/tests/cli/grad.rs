//! `logot bistochastic` and `logot wasserstein --grad-*`: outputs equal the library's, shapes
//! follow the inputs, bad inputs are refused with a message and a non-zero exit code.

use logot::grad::{bistochastic, bistochastic_backward, BistochasticParams, CgParams};
use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2, Array3, ArrayD, Axis};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, logot_json as logot, npy, p};

#[test]
fn bistochastic_writes_r_and_its_gradient_like_the_library() {
    let d = dir("bisto");
    let x = Array3::from_shape_fn((3, 4, 4), |(b, i, j)| {
        ((b * 7 + i * 3 + j * 5) % 11) as f64 * 0.35
    });
    let g = Array3::from_shape_fn((3, 4, 4), |(b, i, j)| ((b + 2 * i + j) % 5) as f64 - 2.0);
    npy(&d, "x.npy", &x);
    npy(&d, "g.npy", &g);
    let (code, json, err) = logot(&[
        "bistochastic",
        "--x",
        &p(&d, "x.npy"),
        "--iters",
        "50",
        "--out",
        &p(&d, "r.npy"),
        "--grad",
        &p(&d, "g.npy"),
        "--out-grad",
        &p(&d, "dx.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json["iterations"], 50);
    assert_eq!(json["gradient_cg"]["converged"], true);
    let r: Array3<f64> = read_npy(p(&d, "r.npy")).unwrap();
    let dx: Array3<f64> = read_npy(p(&d, "dx.npy")).unwrap();
    let want = bistochastic(x.view(), &BistochasticParams::default().iters(50)).unwrap();
    assert_eq!(r, want.r);
    let want_dx = bistochastic_backward(want.r.view(), g.view(), &CgParams::default())
        .unwrap()
        .dx;
    assert_eq!(dx, want_dx);
    // One matrix in, one matrix out; float32 in, float32 out.
    npy(&d, "x1.npy", &x.index_axis(Axis(0), 0).mapv(|v| v as f32));
    let (code, json, err) = logot(&[
        "bistochastic",
        "--x",
        &p(&d, "x1.npy"),
        "--out",
        &p(&d, "r1.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json["dtype"], "float32");
    let r1: Array2<f32> = read_npy(p(&d, "r1.npy")).unwrap();
    for i in 0..4 {
        assert!((r1.row(i).sum() - 1.0).abs() < 1e-5);
    }
}

#[test]
fn bistochastic_refuses_bad_inputs() {
    let d = dir("bisto_bad");
    npy(&d, "rect.npy", &Array3::<f64>::zeros((2, 3, 4)));
    npy(&d, "x.npy", &Array3::<f64>::zeros((2, 3, 3)));
    npy(&d, "g.npy", &Array3::<f64>::zeros((2, 3, 2)));
    let (code, _, err) = logot(&[
        "bistochastic",
        "--x",
        &p(&d, "rect.npy"),
        "--out",
        &p(&d, "r.npy"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("x"), "{err}");
    let (code, _, err) = logot(&[
        "bistochastic",
        "--x",
        &p(&d, "x.npy"),
        "--out",
        &p(&d, "r.npy"),
        "--grad",
        &p(&d, "g.npy"),
        "--out-grad",
        &p(&d, "dx.npy"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--grad"), "{err}");
    let (code, _, _) = logot(&[
        "bistochastic",
        "--x",
        &p(&d, "x.npy"),
        "--out",
        &p(&d, "r.npy"),
        "--iters",
        "0",
    ]);
    assert_ne!(code, 0);
}

#[test]
fn wasserstein_writes_exact_gradients_like_the_library() {
    let d = dir("wgrad");
    let x: Vec<f64> = (0..5).map(|i| i as f64 / 4.0).collect();
    let c = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]).powi(2));
    let mu = Array1::from(vec![0.1, 0.2, 0.3, 0.25, 0.15]);
    let nu = Array1::from(vec![0.3, 0.3, 0.1, 0.1, 0.2]);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "c.npy", &c);
    let (code, json, err) = logot(&[
        "wasserstein",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.1",
        "--grad-mu",
        &p(&d, "gmu.npy"),
        "--grad-cost",
        &p(&d, "gc.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json["gradient_cg"]["converged"], true);
    let gmu: Array1<f64> = read_npy(p(&d, "gmu.npy")).unwrap();
    let gc: Array2<f64> = read_npy(p(&d, "gc.npy")).unwrap();
    let want = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1))
        .wasserstein_gradients(
            &Problem::new(mu.view(), nu.view(), c.view()).unwrap(),
            &CgParams::default(),
        )
        .unwrap();
    assert_eq!(gmu, want.mu.row(0));
    assert_eq!(gc, want.cost.index_axis(Axis(0), 0));
    assert!((json["distance"][0].as_f64().unwrap() - want.result.distance[0]).abs() < 1e-15);
    // A batch writes B×n and B×n×m.
    let mu_b = ndarray::stack(Axis(0), &[mu.view(), nu.view()]).unwrap();
    npy(&d, "mu_b.npy", &mu_b);
    npy(
        &d,
        "nu_b.npy",
        &ndarray::stack(Axis(0), &[nu.view(), mu.view()]).unwrap(),
    );
    let (code, _, err) = logot(&[
        "wasserstein",
        "--mu",
        &p(&d, "mu_b.npy"),
        "--nu",
        &p(&d, "nu_b.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.1",
        "--grad-mu",
        &p(&d, "gmu_b.npy"),
        "--grad-cost",
        &p(&d, "gc_b.npy"),
        "--grad-nu",
        &p(&d, "gnu_b.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let shapes: Vec<Vec<usize>> = ["gmu_b.npy", "gnu_b.npy", "gc_b.npy"]
        .iter()
        .map(|f| {
            read_npy::<_, ArrayD<f64>>(p(&d, f))
                .unwrap()
                .shape()
                .to_vec()
        })
        .collect();
    assert_eq!(shapes, vec![vec![2, 5], vec![2, 5], vec![2, 5, 5]]);
}
