//! Match a planar curve with a rotated, permuted and noisy copy of it embedded in 3-D by
//! Gromov–Wasserstein: the two shapes live in different spaces, so no cost between their
//! points exists, but their distance matrices agree up to the permutation. Prints the GW
//! value, the solver's report and the fraction of points whose largest plan entry is their
//! true partner; draws the plan as lines in `out/gromov/matching.png`.
//!
//! ```text
//! cargo run --release --example gromov
//! ```
//!
//! In the picture the curve is on the left and the copy, seen along its third principal
//! axis, on the right; each point of the curve is joined to the point of the copy that
//! receives most of its mass, in green where that is its true partner and in red where not.

use logot::gromov::{EntropicGwParams, GromovProblem, GromovSolver};
use logot::CpuBackend;
use ndarray::{array, Array1, Array2, Axis};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::error::Error;
use std::time::Instant;

/// `n` points along a planar spiral arm with a hook at its end: no symmetry maps it onto
/// itself, so the matching is unique.
fn curve(n: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, 2), |(i, k)| {
        let t = i as f64 / (n - 1) as f64;
        let (r, a) = (0.3 + t, 3.0 * std::f64::consts::PI * t);
        let hook = if t > 0.85 { 0.8 * (t - 0.85) } else { 0.0 };
        if k == 0 {
            r * a.cos() + hook
        } else {
            r * a.sin() - hook
        }
    })
}

/// Rodrigues: rotation by `angle` about `axis`.
fn rotation(axis: [f64; 3], angle: f64) -> Array2<f64> {
    let n = axis.iter().map(|v| v * v).sum::<f64>().sqrt();
    let k = axis.map(|v| v / n);
    let kx = array![[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]];
    Array2::eye(3) + &kx * angle.sin() + kx.dot(&kx) * (1.0 - angle.cos())
}

/// Squared Euclidean distances within a cloud.
fn sqdist(x: &Array2<f64>) -> Array2<f64> {
    let n = x.nrows();
    Array2::from_shape_fn((n, n), |(i, k)| {
        (&x.row(i) - &x.row(k)).mapv(|v| v * v).sum()
    })
}

/// The two leading principal coordinates of a centred cloud (power iteration on its 3×3
/// covariance, then deflation): how the copy is seen face on.
fn face_on(y: &Array2<f64>) -> Array2<f64> {
    let c = y - &y.mean_axis(Axis(0)).expect("points");
    let mut cov = c.t().dot(&c);
    let mut axes = Vec::new();
    for _ in 0..2 {
        let mut v = Array1::from_elem(3, 1.0);
        for _ in 0..200 {
            v = cov.dot(&v);
            v /= v.dot(&v).sqrt();
        }
        let lambda = v.dot(&cov.dot(&v));
        let vv = v.clone().insert_axis(Axis(1));
        cov = cov - lambda * vv.dot(&vv.t());
        axes.push(v);
    }
    Array2::from_shape_fn((y.nrows(), 2), |(i, k)| c.row(i).dot(&axes[k]))
}

/// Points in pixels.
type Pixels = Vec<(i32, i32)>;

/// Both clouds in pixels: `a` in the left half of a `w×h` image, `b` in the right half.
fn to_pixels(a: &Array2<f64>, b: &Array2<f64>, w: i32, h: i32) -> (Pixels, Pixels) {
    let place = |p: &Array2<f64>, x0: i32| {
        let c = p - &p.mean_axis(Axis(0)).expect("points");
        let r = c.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let s = 0.42 * (w / 2).min(h) as f64 / r;
        c.rows()
            .into_iter()
            .map(|q| (x0 + w / 4 + (s * q[0]) as i32, h / 2 - (s * q[1]) as i32))
            .collect::<Pixels>()
    };
    (place(a, 0), place(b, w / 2))
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut rng = StdRng::seed_from_u64(7);
    let n = 150;
    let noise = 0.01;
    let x = curve(n);
    // The copy: embedded in 3-D (z = 0), rotated, noisy, its points shuffled.
    let rot = rotation([1.0, -2.0, 0.7], 1.9);
    let x3 = Array2::from_shape_fn((n, 3), |(i, k)| if k < 2 { x[[i, k]] } else { 0.0 });
    let moved = x3.dot(&rot.t())
        + &Array2::from_shape_fn((n, 3), |_| noise * rng.sample::<f64, _>(StandardNormal));
    let mut partner: Vec<usize> = (0..n).collect();
    partner.shuffle(&mut rng);
    let mut y = Array2::zeros((n, 3));
    for (i, &j) in partner.iter().enumerate() {
        y.row_mut(j).assign(&moved.row(i));
    }

    // The structures on one scale: both divided by the curve's largest squared distance.
    let (c1, c2) = (sqdist(&x), sqdist(&y));
    let scale = c1.iter().fold(0.0f64, |m, &v| m.max(v));
    let (c1, c2) = (c1 / scale, c2 / scale);
    let w = Array1::from_elem(n, 1.0 / n as f64);
    let problem = GromovProblem::new(c1.view(), c2.view(), w.view(), w.view())?;
    let params = EntropicGwParams::new(5e-4)
        .max_iters(60)
        .inner_max_iters(20_000)
        .inner_tol(1e-7);
    let start = Instant::now();
    let r = GromovSolver::new(CpuBackend, params).solve(&problem)?;
    let secs = start.elapsed().as_secs_f64();

    let best: Vec<usize> = r
        .plan
        .rows()
        .into_iter()
        .map(|row| {
            (0..n)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0)
        })
        .collect();
    let matched = best.iter().zip(&partner).filter(|(b, p)| b == p).count();
    println!(
        "n = {n}, noise σ = {noise}: GW value {:.3e} (linear {:.1e}, quadratic {:.3e}), {secs:.2} s",
        r.value, r.linear, r.quadratic
    );
    let rep = &r.report;
    println!(
        "report: {} outer iterations, converged {}, last step {:.2e}, stationarity {:.2e}, \
         marginal error {:.2e}, {} inner iterations ({} unconverged)",
        rep.iterations,
        rep.converged,
        rep.step,
        rep.stationarity,
        rep.marginal_error,
        rep.inner_iterations,
        rep.inner_unconverged
    );
    println!(
        "matched to the true partner: {matched}/{n} ({:.1}%)",
        100.0 * matched as f64 / n as f64
    );

    let (w_px, h_px) = (1200, 600);
    std::fs::create_dir_all("out/gromov")?;
    let path = "out/gromov/matching.png";
    let (a, b) = to_pixels(&x, &face_on(&y), w_px, h_px);
    {
        let root = BitMapBackend::new(path, (w_px as u32, h_px as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let biggest = r.plan.iter().fold(0.0f64, |m, &v| m.max(v));
        for (i, &j) in best.iter().enumerate() {
            let colour = if j == partner[i] {
                RGBColor(44, 160, 44)
            } else {
                RGBColor(214, 39, 40)
            };
            let strength = (r.plan[[i, j]] / biggest).clamp(0.15, 1.0);
            root.draw(&PathElement::new(
                vec![a[i], b[j]],
                colour.mix(0.6 * strength).stroke_width(1),
            ))?;
        }
        for p in &a {
            root.draw(&Circle::new(*p, 3, RGBColor(31, 119, 180).filled()))?;
        }
        for p in &b {
            root.draw(&Circle::new(*p, 3, RGBColor(255, 127, 14).filled()))?;
        }
        root.present()?;
    }
    println!("wrote {path}");
    Ok(())
}
