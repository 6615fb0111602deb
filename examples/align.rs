//! Align a rotated, translated, noisy and shuffled copy of a 3-D point cloud with
//! Wasserstein–Procrustes (entropic couplings ↔ Kabsch rotations), print the errors and
//! save before/after scatter plots (two projections each) to `out/align/`.
//!
//! ```text
//! cargo run --release --example align
//! ```
//!
//! Titles and axes need a font: the example registers DejaVu Sans from the system (or the
//! TTF named by `LOGOT_FONT`) and draws plain panels without text when there is none.

use logot::linalg::align::rotation_angle;
use logot::linalg::{wasserstein_procrustes, WassersteinProcrustesParams};
use ndarray::{array, Array2, ArrayView2};
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::error::Error;
use std::time::Instant;

/// Rodrigues: rotation by `angle` about `axis`.
fn rotation(axis: [f64; 3], angle: f64) -> Array2<f64> {
    let n = axis.iter().map(|v| v * v).sum::<f64>().sqrt();
    let k = axis.map(|v| v / n);
    let kx = array![[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]];
    Array2::eye(3) + &kx * angle.sin() + kx.dot(&kx) * (1.0 - angle.cos())
}

/// A conical helix with a blob at one end: asymmetric, so the rotation is identifiable.
fn cloud(rng: &mut StdRng, n: usize) -> Array2<f64> {
    let mut x = Array2::zeros((n, 3));
    for (i, mut p) in x.rows_mut().into_iter().enumerate() {
        if i < n * 4 / 5 {
            let t = 4.0 * std::f64::consts::PI * i as f64 / (n * 4 / 5) as f64;
            let r = 1.0 + 0.15 * t;
            p.assign(&array![r * t.cos(), r * t.sin(), 0.35 * t]);
        } else {
            let g = [0, 1, 2].map(|_| rng.sample::<f64, _>(StandardNormal));
            p.assign(&array![2.5 + 0.4 * g[0], 0.4 * g[1], 4.5 + 0.4 * g[2]]);
        }
    }
    x
}

fn register_font() -> bool {
    let path = std::env::var("LOGOT_FONT")
        .unwrap_or_else(|_| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    match std::fs::read(&path) {
        Ok(bytes) => plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            Box::leak(bytes.into_boxed_slice()),
        )
        .is_ok(),
        Err(_) => false,
    }
}

/// Two projections (x–y and x–z) of `a` (blue dots, labelled `a_name`) over `b` (orange
/// rings) side by side.
fn plot(
    path: &str,
    title: &str,
    (a, a_name): (ArrayView2<'_, f64>, &str),
    b: ArrayView2<'_, f64>,
    text: bool,
) -> Result<(), Box<dyn Error>> {
    let root = BitMapBackend::new(path, (1200, 620)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = if text {
        root.titled(title, ("sans-serif", 26))?
    } else {
        root
    };
    let panels = root.split_evenly((1, 2));
    let all = a.iter().chain(b.iter()).fold(0.0f64, |m, v| m.max(v.abs())) * 1.05;
    for (panel, (cy, name)) in panels.iter().zip([(1usize, "y"), (2, "z")]) {
        let mut chart = ChartBuilder::on(panel);
        chart.margin(15);
        if text {
            chart
                .x_label_area_size(35)
                .y_label_area_size(45)
                .caption(format!("projection on x–{name}"), ("sans-serif", 20));
        }
        let mut chart = chart.build_cartesian_2d(-all..all, -all..all)?;
        if text {
            chart
                .configure_mesh()
                .x_desc("x")
                .y_desc(name)
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
        } else {
            chart.plotting_area().draw(&Rectangle::new(
                [(-all, -all), (all, all)],
                BLACK.stroke_width(1),
            ))?;
        }
        let blue = RGBColor(31, 119, 180);
        let orange = RGBColor(255, 127, 14);
        let ser = chart.draw_series(
            b.rows()
                .into_iter()
                .map(|p| Circle::new((p[0], p[cy]), 4, orange.stroke_width(1))),
        )?;
        if text {
            ser.label("target y")
                .legend(move |(x, y)| Circle::new((x, y), 4, orange.stroke_width(1)));
        }
        let ser = chart.draw_series(
            a.rows()
                .into_iter()
                .map(|p| Circle::new((p[0], p[cy]), 2, blue.filled())),
        )?;
        if text {
            ser.label(a_name)
                .legend(move |(x, y)| Circle::new((x, y), 3, blue.filled()));
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .border_style(BLACK)
                .background_style(WHITE.mix(0.9))
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut rng = StdRng::seed_from_u64(2024);
    let n = 400;
    let x = cloud(&mut rng, n);
    let r_true = rotation([1.0, 2.0, -0.5], 2.2); // 126°
    let t_true = array![3.0, -1.0, 2.0];
    let noise = 0.03;
    let mut y = x.dot(&r_true.t())
        + &t_true
        + &Array2::from_shape_fn((n, 3), |_| noise * rng.sample::<f64, _>(StandardNormal));
    let mut rows: Vec<_> = y.rows().into_iter().map(|r| r.to_owned()).collect();
    rows.shuffle(&mut rng);
    for (i, row) in rows.iter().enumerate() {
        y.row_mut(i).assign(row);
    }

    let start = Instant::now();
    let fit = wasserstein_procrustes(x.view(), y.view(), &WassersteinProcrustesParams::default())?;
    let secs = start.elapsed().as_secs_f64();
    let angle = rotation_angle(fit.transform.rotation.view(), r_true.view())?;
    let t_err = (&fit.transform.translation - &t_true)
        .mapv(|v| v * v)
        .sum()
        .sqrt();
    let moved = fit.transform.apply(x.view())?;
    println!(
        "n = {n}, true rotation 126.1°, noise σ = {noise}: rotation error {:.4}°, translation error {t_err:.2e}, \
         {} outer iterations (start {}, converged {}), transport cost {:.3e}, {secs:.2} s",
        angle.to_degrees(),
        fit.iterations,
        fit.start,
        fit.converged,
        fit.distance
    );

    std::fs::create_dir_all("out/align")?;
    let text = register_font();
    if !text {
        eprintln!("no font found (set LOGOT_FONT to a .ttf): plots are drawn without text");
    }
    plot(
        "out/align/before.png",
        "Before: source x and the rotated, noisy, shuffled target y",
        (x.view(), "source x"),
        y.view(),
        text,
    )?;
    let title = format!(
        "After Wasserstein–Procrustes: rotation error {:.3}°",
        angle.to_degrees()
    );
    plot(
        "out/align/after.png",
        &title,
        (moved.view(), "R·x + t"),
        y.view(),
        text,
    )?;
    println!("wrote out/align/before.png and out/align/after.png");
    Ok(())
}
