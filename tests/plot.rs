//! The PNG plots: each function writes a valid PNG (with the bundled font, no system fonts)
//! and refuses inconsistent input with an error instead of drawing garbage.
#![cfg(feature = "plot")]

use logot::plot;
use ndarray::{Array1, Array2};
use std::path::PathBuf;

fn out(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("plot")
        .join(name)
}

fn is_png(path: &PathBuf) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    // IHDR: width and height, big-endian, right after the chunk header.
    let w = u32::from_be_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]);
    let h = u32::from_be_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    (w, h)
}

#[test]
fn every_plot_kind_writes_a_png() {
    let img = Array2::from_shape_fn((30, 40), |(r, c)| {
        ((r as f64) * 0.2).sin() + (c as f64) * 0.01
    });
    let p = out("heatmap.png");
    plot::heatmap(&p, img.view(), "heatmap ε = 0.1", ("column", "row")).unwrap();
    let (w, h) = is_png(&p);
    assert!(w > 400 && h > 300);

    let panels: Vec<(String, _)> = (0..3).map(|k| (format!("panel {k}"), img.view())).collect();
    let p = out("panels.png");
    plot::image_panels(&p, &panels, 2, "panels").unwrap();
    is_png(&p);

    let n = 25;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let mu = Array1::from_elem(n, 1.0 / n as f64);
    let plan = Array2::from_shape_fn((n, n), |(i, j)| if i == j { 1.0 / n as f64 } else { 0.0 });
    let p = out("coupling.png");
    plot::coupling(
        &p,
        plan.view(),
        mu.view(),
        mu.view(),
        (&x, &x),
        "identity coupling",
    )
    .unwrap();
    is_png(&p);

    let p = out("lines.png");
    plot::lines(
        &p,
        &x,
        &[("μ", mu.view())],
        &[("ν", mu.view())],
        "lines",
        ("x", "mass"),
    )
    .unwrap();
    assert_eq!(is_png(&p), (800, 500));
}

#[test]
fn inconsistent_input_is_an_error() {
    let x = [0.0, 0.5, 1.0];
    let h = Array1::from_elem(4, 0.25);
    let r = plot::lines(out("bad.png"), &x, &[("h", h.view())], &[], "t", ("x", "y"));
    assert!(matches!(r, Err(logot::Error::Shape { .. })), "{r:?}");
    let plan = Array2::<f64>::zeros((3, 3));
    let r = plot::coupling(
        out("bad2.png"),
        plan.view(),
        h.view(),
        h.view(),
        (&x, &x),
        "t",
    );
    assert!(r.is_err());
    let empty = Array2::<f64>::zeros((0, 3));
    assert!(plot::heatmap(out("bad3.png"), empty.view(), "t", ("a", "b")).is_err());
    // An unwritable path is a File error naming it.
    let blocker = out("a_file");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, b"x").unwrap();
    let img = Array2::<f64>::ones((4, 4));
    match plot::heatmap(blocker.join("sub.png"), img.view(), "t", ("a", "b")) {
        Err(logot::Error::File { path, .. }) => assert!(path.contains("a_file")),
        other => panic!("expected a File error, got {other:?}"),
    }
}

#[test]
fn scatter_panels_write_a_png_of_the_grid_size() {
    let a = Array2::from_shape_fn((50, 2), |(i, k)| ((i * (k + 3)) as f64 * 0.37).sin());
    let b = Array2::from_shape_fn((30, 2), |(i, k)| (i as f64 * 0.1 + k as f64).cos());
    let panels: Vec<plot::ScatterPanel<'_, f64>> = (0..5)
        .map(|k| {
            (
                format!("step {k}"),
                vec![("target", b.view()), ("cloud", a.view())],
            )
        })
        .collect();
    let p = out("scatter.png");
    plot::scatter(&p, &panels, 3, "five panels in rows of three").unwrap();
    // Panels of 330×330 pixels below a 44-pixel title band: 3 columns, 2 rows.
    assert_eq!(is_png(&p), (3 * 330, 44 + 2 * 330));
    // A series that is not k×2, and nothing to draw, are errors.
    let bad = Array2::<f64>::zeros((4, 3));
    let r = plot::scatter(
        out("bad4.png"),
        &[("p".into(), vec![("bad", bad.view())])],
        1,
        "t",
    );
    assert!(matches!(r, Err(logot::Error::Shape { .. })), "{r:?}");
    let none: Vec<plot::ScatterPanel<'_, f64>> = vec![("p".into(), vec![])];
    assert!(plot::scatter(out("bad5.png"), &none, 1, "t").is_err());
}
