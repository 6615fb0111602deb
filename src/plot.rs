//! PNG plots of histograms, couplings and images (feature `plot`, on by default).
//!
//! Drawn with plotters' bitmap backend and text rendered by ab_glyph from a bundled font
//! (DejaVu Sans, `assets/fonts/`, with its licence), so a fresh machine needs no system
//! font libraries. Heatmaps use the viridis colour scale with a colour bar; every
//! function writes one PNG file and returns [`Error::File`] naming it on failure.
//!
//! ```
//! use ndarray::{array, Array2};
//! let dir = std::env::temp_dir().join("logot-doc");
//! let img = Array2::from_shape_fn((32, 32), |(r, c)| ((r * c) as f64).sin().abs());
//! logot::plot::heatmap(dir.join("img.png"), img.view(), "An image", ("column", "row"))?;
//! let h = array![0.2, 0.5, 0.3];
//! logot::plot::lines(dir.join("h.png"), &[0.0, 0.5, 1.0], &[("h", h.view())], &[], "A histogram", ("x", "mass"))?;
//! # Ok::<(), logot::Error>(())
//! ```

use crate::{Error, Real, Result};
use ndarray::{ArrayView1, ArrayView2};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;

/// DejaVu Sans 2.37 (Bitstream Vera licence, see `assets/fonts/DejaVuSans-LICENSE.txt`).
static FONT_BYTES: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
const FONT: &str = "sans-serif";

/// Register the bundled font under plotters' "sans-serif" family, once.
fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Unavailable(
            "plot: the bundled font could not be loaded".into(),
        ))
    }
}

type Draw<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Run a drawing routine and turn its error into [`Error::File`] for `path`; creates the
/// parent directory.
fn render(
    path: &Path,
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> Draw<()>,
    size: (u32, u32),
) -> Result<()> {
    ensure_font()?;
    let file_err = |msg: String| Error::File {
        path: path.display().to_string(),
        msg,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| file_err(format!("cannot create the directory: {e}")))?;
    }
    let root = BitMapBackend::new(path, size).into_drawing_area();
    let res = (|| -> Draw<()> {
        root.fill(&WHITE)?;
        draw(root.clone())?;
        root.present()?;
        Ok(())
    })();
    res.map_err(|e| file_err(format!("cannot draw the plot: {e}")))
}

/// Colours of the line and scatter series, in order (matplotlib's first six).
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// The viridis colour scale at `t ∈ [0, 1]` (matplotlib's anchors, linearly interpolated).
///
/// ```
/// use logot::plot::viridis;
/// assert_eq!((viridis(0.0).0, viridis(0.0).1, viridis(0.0).2), (68, 1, 84)); // dark purple
/// assert_eq!((viridis(1.0).0, viridis(1.0).1, viridis(1.0).2), (253, 231, 37)); // yellow
/// assert_eq!(viridis(f64::NAN), viridis(0.0)); // never panics
/// ```
pub fn viridis(t: f64) -> RGBColor {
    const ANCHORS: [(u8, u8, u8); 9] = [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (ANCHORS.len() - 1) as f64;
    let k = (x.floor() as usize).min(ANCHORS.len() - 2);
    let f = x - k as f64;
    let mix = |a: u8, b: u8| (a as f64 + f * (b as f64 - a as f64)).round() as u8;
    let (a, b) = (ANCHORS[k], ANCHORS[k + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Tick label for values of magnitude up to `scale`: fixed notation for moderate values,
/// scientific otherwise.
fn tick(v: f64, scale: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if (1e-2..1e4).contains(&scale) {
        let digits = (2.0 - scale.log10().floor()).clamp(0.0, 4.0) as usize;
        format!("{v:.digits$}")
    } else {
        format!("{v:.1e}")
    }
}

fn range_of(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        (0.0, 1.0)
    } else if hi > lo {
        (lo, hi)
    } else {
        (lo, lo + if lo == 0.0 { 1.0 } else { lo.abs() * 1e-3 })
    }
}

/// Cells of a matrix as filled rectangles (row 0 at the top), coloured on `[lo, hi]`.
fn cells<T: Real>(data: &ArrayView2<'_, T>, lo: f64, hi: f64) -> Vec<Rectangle<(f64, f64)>> {
    data.indexed_iter()
        .map(|((r, c), v)| {
            let (r, c) = (r as f64, c as f64);
            Rectangle::new(
                [(c, r), (c + 1.0, r + 1.0)],
                viridis((v.f64() - lo) / (hi - lo)).filled(),
            )
        })
        .collect()
}

/// A vertical colour bar for `[lo, hi]` in `area` (about 120 px wide), ticks and `label`
/// on its right, leaving `top` and `bottom` pixels free.
fn colour_bar(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    lo: f64,
    hi: f64,
    label: &str,
    top: u32,
    bottom: u32,
) -> Draw<()> {
    let mut bar = ChartBuilder::on(area)
        .margin_top(top)
        .margin_bottom(bottom)
        .margin_left(10)
        .margin_right(6)
        .right_y_label_area_size(84)
        .build_cartesian_2d(0f64..1f64, lo..hi)?;
    let steps = 128;
    bar.draw_series((0..steps).map(|k| {
        let a = lo + (hi - lo) * k as f64 / steps as f64;
        let b = lo + (hi - lo) * (k + 1) as f64 / steps as f64;
        Rectangle::new(
            [(0.0, a), (1.0, b)],
            viridis((k as f64 + 0.5) / steps as f64).filled(),
        )
    }))?;
    let scale = lo.abs().max(hi.abs());
    bar.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .y_label_formatter(&|v| tick(*v, scale))
        .y_desc(label)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()?;
    bar.draw_series(std::iter::once(Rectangle::new(
        [(0.0, lo), (1.0, hi)],
        BLACK.stroke_width(1),
    )))?;
    Ok(())
}

/// Draw `text` centred in `area`.
fn centred(area: &DrawingArea<BitMapBackend<'_>, Shift>, text: &str, size: u32) -> Draw<()> {
    let (w, h) = area.dim_in_pixel();
    let style = TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    area.draw(&Text::new(
        text.to_string(),
        (w as i32 / 2, h as i32 / 2),
        style,
    ))?;
    Ok(())
}

/// A heatmap of `data` (row 0 at the top, like an image) with a colour bar; cells are
/// square.
///
/// ```
/// use ndarray::Array2;
/// // The cost C_ij = (x_i − x_j)² on linspace(0, 1, 50).
/// let x = logot::problems::linspace(0.0, 1.0, 50);
/// let cost = Array2::from_shape_fn((50, 50), |(i, j)| (x[i] - x[j]).powi(2));
/// let path = std::env::temp_dir().join("logot-doc").join("cost.png");
/// logot::plot::heatmap(&path, cost.view(), "C = (x_i − x_j)²", ("j", "i"))?;
/// assert!(path.exists());
/// # Ok::<(), logot::Error>(())
/// ```
pub fn heatmap<T: Real>(
    path: impl AsRef<Path>,
    data: ArrayView2<'_, T>,
    title: &str,
    labels: (&str, &str),
) -> Result<()> {
    let (rows, cols) = data.dim();
    if rows == 0 || cols == 0 {
        return Err(Error::Empty {
            arg: "data".into(),
            detail: format!("{rows}×{cols}"),
        });
    }
    let (lo, hi) = range_of(data.iter().map(|v| v.f64()));
    // Plot area of at most 560 px on its longer side, square cells.
    let cell = (560.0 / rows.max(cols) as f64).max(1.0);
    let (pw, ph) = (
        (cell * cols as f64).round() as u32,
        (cell * rows as f64).round() as u32,
    );
    let (head, xlab, ylab, pad, bar_w) = (44u32, 46u32, 58u32, 12u32, 130u32);
    let size = (ylab + pw + 2 * pad + bar_w, head + ph + xlab + pad);
    render(
        path.as_ref(),
        |root| {
            let (title_area, body) = root.split_vertically(head);
            centred(&title_area, title, 20)?;
            let (main, bar) = body.split_horizontally(ylab + pw + 2 * pad);
            let mut chart = ChartBuilder::on(&main)
                .margin_right(pad)
                .margin_bottom(pad)
                .margin_left(pad)
                .x_label_area_size(xlab)
                .y_label_area_size(ylab)
                .build_cartesian_2d(0f64..cols as f64, rows as f64..0f64)?;
            chart.draw_series(cells(&data, lo, hi))?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_label_formatter(&|v| format!("{v:.0}"))
                .y_label_formatter(&|v| format!("{v:.0}"))
                .x_desc(labels.0)
                .y_desc(labels.1)
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()?;
            colour_bar(&bar, lo, hi, "value", 0, xlab + pad)
        },
        size,
    )
}

/// Images in a grid of `columns` panels, each with its own title, on one shared colour
/// scale (with a colour bar), under a common `title`. Pixels are square.
///
/// ```
/// use ndarray::ArrayView2;
/// let images = logot::problems::bary64_images(32); // 3×32×32
/// let panels: Vec<(String, ArrayView2<f64>)> =
///     images.outer_iter().enumerate().map(|(k, img)| (format!("input {k}"), img)).collect();
/// let path = std::env::temp_dir().join("logot-doc").join("panels.png");
/// logot::plot::image_panels(&path, &panels, 3, "The bary64 shapes")?;
/// # Ok::<(), logot::Error>(())
/// ```
pub fn image_panels<T: Real>(
    path: impl AsRef<Path>,
    panels: &[(String, ArrayView2<'_, T>)],
    columns: usize,
    title: &str,
) -> Result<()> {
    if panels.is_empty() || columns == 0 {
        return Err(Error::Empty {
            arg: "panels".into(),
            detail: format!("{} panels in {columns} columns", panels.len()),
        });
    }
    let columns = columns.min(panels.len());
    let rows = panels.len().div_ceil(columns);
    let (lo, hi) = range_of(panels.iter().flat_map(|(_, p)| p.iter().map(|v| v.f64())));
    let (h0, w0) = panels[0].1.dim();
    let (h0, w0) = (h0.max(1) as f64, w0.max(1) as f64);
    // Each panel: a caption band, then the image scaled to at most `side` px, a margin.
    let (side, cap, gap, head, bar_w) = (180.0, 24u32, 8u32, 44u32, 130u32);
    let scale = side / h0.max(w0);
    let (iw, ih) = ((w0 * scale).round() as u32, (h0 * scale).round() as u32);
    let (pw, ph) = (iw + 2 * gap, ih + cap + gap);
    let size = (columns as u32 * pw + bar_w, head + rows as u32 * ph + gap);
    render(
        path.as_ref(),
        |root| {
            let (title_area, body) = root.split_vertically(head);
            centred(&title_area, title, 20)?;
            let (grid, bar) = body.split_horizontally(columns as u32 * pw);
            for (k, (name, img)) in panels.iter().enumerate() {
                let (r, c) = ((k / columns) as i32, (k % columns) as i32);
                let (x0, y0) = (c * pw as i32, r * ph as i32);
                let caption = grid.clone().shrink((x0, y0), (pw, cap));
                centred(&caption, name, 14)?;
                let area = grid
                    .clone()
                    .shrink((x0 + gap as i32, y0 + cap as i32), (iw, ih));
                let (h, w) = img.dim();
                let mut chart = ChartBuilder::on(&area)
                    .build_cartesian_2d(0f64..w.max(1) as f64, h.max(1) as f64..0f64)?;
                chart.draw_series(cells(img, lo, hi))?;
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(0.0, 0.0), (w as f64, h as f64)],
                    BLACK.stroke_width(1),
                )))?;
            }
            colour_bar(&bar, lo, hi, "mass per pixel", cap, 2 * gap)
        },
        size,
    )
}

/// A coupling `plan` (`n×m`) as a heatmap with its marginals: `mu` (length `n`) on the
/// left along the rows, `nu` (length `m`) on top along the columns, and a colour bar.
/// `x` and `y` are the coordinates of the rows and columns (e.g. the grid points).
///
/// ```
/// use ndarray::Axis;
/// let x = logot::problems::linspace(0.0, 1.0, 40);
/// let mu = logot::problems::gaussian_histogram::<f64>(&x, 0.3, 0.1, 0.0);
/// let nu = logot::problems::gaussian_histogram::<f64>(&x, 0.6, 0.05, 0.0);
/// let cost = logot::problems::squared_distance_cost::<f64>(&x, false);
/// let c = logot::coupling(mu.view(), nu.view(), cost.view(), 1e-3)?;
/// let path = std::env::temp_dir().join("logot-doc").join("coupling.png");
/// logot::plot::coupling(&path, c.plan.index_axis(Axis(0), 0), mu.view(), nu.view(), (&x, &x), "ε = 1e-3")?;
/// # Ok::<(), logot::Error>(())
/// ```
pub fn coupling<T: Real>(
    path: impl AsRef<Path>,
    plan: ArrayView2<'_, T>,
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    coords: (&[f64], &[f64]),
    title: &str,
) -> Result<()> {
    let (n, m) = plan.dim();
    let (x, y) = coords;
    if mu.len() != n || nu.len() != m || x.len() != n || y.len() != m {
        return Err(Error::shape(
            "coupling",
            format!(
                "plan is {n}×{m} but mu has {}, nu {}, x {} and y {} entries",
                mu.len(),
                nu.len(),
                x.len(),
                y.len()
            ),
        ));
    }
    if n < 2 || m < 2 {
        return Err(Error::Empty {
            arg: "plan".into(),
            detail: format!("{n}×{m}: need at least 2×2"),
        });
    }
    let (lo, hi) = range_of(plan.iter().map(|v| v.f64()));
    let (xr, yr) = ((x[0], x[n - 1]), (y[0], y[m - 1]));
    let (dx, dy) = (
        (xr.1 - xr.0) / (n - 1) as f64,
        (yr.1 - yr.0) / (m - 1) as f64,
    );
    let (side, margin_w, bar_w, head) = (520u32, 170u32, 110u32, 50u32);
    let size = (margin_w + side + bar_w, head + margin_w + side);
    let mu_max = mu
        .iter()
        .map(|v| v.f64())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let nu_max = nu
        .iter()
        .map(|v| v.f64())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    render(
        path.as_ref(),
        |root| {
            let root = root.titled(title, (FONT, 22))?;
            let (left, rest) = root.split_horizontally(margin_w);
            let (middle, bar) = rest.split_horizontally(side);
            let (corner, mu_area) = left.split_vertically(margin_w);
            let (nu_area, main) = middle.split_vertically(margin_w);
            corner.draw(&Text::new(
                "μ: source (left)",
                (16, margin_w as i32 / 2 - 14),
                (FONT, 15).into_font().color(&BLUE),
            ))?;
            corner.draw(&Text::new(
                "ν: target (top)",
                (16, margin_w as i32 / 2 + 10),
                (FONT, 15).into_font().color(&RED),
            ))?;
            // Top: ν along the columns.
            let mut top = ChartBuilder::on(&nu_area)
                .margin_right(8)
                .margin_top(8)
                .y_label_area_size(52)
                .x_label_area_size(10)
                .build_cartesian_2d(yr.0 - dy / 2.0..yr.1 + dy / 2.0, 0f64..nu_max * 1.08)?;
            top.configure_mesh()
                .disable_mesh()
                .disable_x_axis()
                .y_labels(3)
                .y_label_formatter(&|v| tick(*v, nu_max))
                .label_style((FONT, 12))
                .draw()?;
            top.draw_series(
                AreaSeries::new(
                    y.iter().zip(nu.iter()).map(|(&a, b)| (a, b.f64())),
                    0.0,
                    RED.mix(0.25),
                )
                .border_style(RED),
            )?;
            // Left: μ along the rows (mass grows to the left, rows top to bottom).
            let mut side_chart = ChartBuilder::on(&mu_area)
                .margin_bottom(46)
                .margin_left(8)
                .margin_right(14)
                .x_label_area_size(10)
                .y_label_area_size(12)
                .build_cartesian_2d(mu_max * 1.08..0f64, xr.1 + dx / 2.0..xr.0 - dx / 2.0)?;
            side_chart
                .configure_mesh()
                .disable_mesh()
                .disable_y_axis()
                .x_labels(3)
                .x_label_formatter(&|v| tick(*v, mu_max))
                .label_style((FONT, 12))
                .draw()?;
            side_chart.draw_series(AreaSeries::new(
                x.iter().zip(mu.iter()).map(|(&a, b)| (b.f64(), a)),
                0.0,
                BLUE.mix(0.25),
            ))?;
            side_chart.draw_series(LineSeries::new(
                x.iter().zip(mu.iter()).map(|(&a, b)| (b.f64(), a)),
                BLUE,
            ))?;
            // The plan: row i at x[i] (top to bottom), column j at y[j].
            let mut chart = ChartBuilder::on(&main)
                .margin_right(8)
                .x_label_area_size(44)
                .y_label_area_size(52)
                .build_cartesian_2d(
                    yr.0 - dy / 2.0..yr.1 + dy / 2.0,
                    xr.1 + dx / 2.0..xr.0 - dx / 2.0,
                )?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc("target y (columns)")
                .y_desc("source x (rows)")
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()?;
            chart.draw_series(plan.indexed_iter().map(|((i, j), v)| {
                let (cx, cy) = (y[j], x[i]);
                Rectangle::new(
                    [
                        (cx - dy / 2.0, cy - dx / 2.0),
                        (cx + dy / 2.0, cy + dx / 2.0),
                    ],
                    viridis((v.f64() - lo) / (hi - lo)).filled(),
                )
            }))?;
            colour_bar(&bar, lo, hi, "plan entry", margin_w, 44)
        },
        size,
    )
}

/// Line plot of 1-D histograms (or any series) over `x`, with a legend: `solid` series as
/// thick lines, then `dashed` ones on top (e.g. a computed marginal over its target). The
/// y axis starts at 0 unless every value lies above half the largest; then it fits the data.
///
/// ```
/// use ndarray::Array1;
/// let x = logot::problems::linspace(0.0, 1.0, 100);
/// let h = logot::problems::gaussian_histogram::<f64>(&x, 0.5, 0.1, 0.0);
/// let flat = Array1::from_elem(100, 0.01);
/// let path = std::env::temp_dir().join("logot-doc").join("lines.png");
/// logot::plot::lines(&path, &x, &[("bump", h.view())], &[("uniform", flat.view())], "Two histograms", ("x", "mass"))?;
/// # Ok::<(), logot::Error>(())
/// ```
pub fn lines<T: Real>(
    path: impl AsRef<Path>,
    x: &[f64],
    solid: &[(&str, ArrayView1<'_, T>)],
    dashed: &[(&str, ArrayView1<'_, T>)],
    title: &str,
    labels: (&str, &str),
) -> Result<()> {
    let series: Vec<&(&str, ArrayView1<'_, T>)> = solid.iter().chain(dashed).collect();
    if x.len() < 2 || series.is_empty() {
        return Err(Error::Empty {
            arg: "series".into(),
            detail: format!("{} points, {} series", x.len(), series.len()),
        });
    }
    if let Some((name, s)) = series.iter().find(|(_, s)| s.len() != x.len()) {
        return Err(Error::shape(
            "series",
            format!("{name} has {} values but x has {}", s.len(), x.len()),
        ));
    }
    let (x0, x1) = range_of(x.iter().copied());
    let (lo, hi) = range_of(series.iter().flat_map(|(_, s)| s.iter().map(|v| v.f64())));
    // From 0 (histograms), unless every value sits above half the largest: then fit the
    // data (e.g. a cost that varies by a few percent), 8% margins.
    let (bottom, top) = if lo >= 0.0 && lo <= 0.5 * hi {
        (0.0, hi * 1.08)
    } else {
        (lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo))
    };
    render(
        path.as_ref(),
        |root| {
            let mut chart = ChartBuilder::on(&root)
                .caption(title, (FONT, 20))
                .margin(14)
                .x_label_area_size(44)
                .y_label_area_size(70)
                .build_cartesian_2d(x0..x1, bottom..top)?;
            chart
                .configure_mesh()
                .light_line_style(RGBColor(235, 235, 235))
                .x_desc(labels.0)
                .y_desc(labels.1)
                .y_label_formatter(&|v| tick(*v, top.abs().max(bottom.abs())))
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()?;
            for (k, (name, s)) in series.iter().enumerate() {
                let colour = PALETTE[k % PALETTE.len()];
                let points = x.iter().zip(s.iter()).map(|(&a, b)| (a, b.f64()));
                if k < solid.len() {
                    chart
                        .draw_series(LineSeries::new(points, colour.stroke_width(3)))?
                        .label(*name)
                        .legend(move |(a, b)| {
                            PathElement::new(vec![(a, b), (a + 20, b)], colour.stroke_width(3))
                        });
                } else {
                    chart
                        .draw_series(DashedLineSeries::new(points, 6, 5, colour.stroke_width(2)))?
                        .label(*name)
                        .legend(move |(a, b)| {
                            PathElement::new(vec![(a, b), (a + 8, b)], colour.stroke_width(2))
                        });
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font((FONT, 14))
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
            Ok(())
        },
        (800, 500),
    )
}

/// One panel of [`scatter`]: a caption and its point sets, each `k×2` (x, y per row).
pub type ScatterPanel<'a, T> = (String, Vec<(&'a str, ArrayView2<'a, T>)>);

/// 2-D point clouds as dots: one panel per entry of `panels`, `columns` panels per row, all
/// on the same axes (the range of every point, equal scales), under a common `title`. Series `k` of a
/// panel gets the `k`-th colour in every panel; the first panel carries the legend.
///
/// ```
/// use ndarray::array;
/// let target = array![[0.0, 0.0], [1.0, 1.0]];
/// let cloud = array![[0.2, 0.1], [0.9, 0.7]];
/// let panels = vec![(
///     "step 0".to_string(),
///     vec![("target", target.view()), ("cloud", cloud.view())],
/// )];
/// let path = std::env::temp_dir().join("logot-doc").join("scatter.png");
/// logot::plot::scatter(&path, &panels, 1, "Two point clouds")?;
/// assert!(std::fs::read(&path).map_err(|e| logot::Error::File {
///     path: path.display().to_string(),
///     msg: e.to_string()
/// })?.starts_with(b"\x89PNG"));
/// # Ok::<(), logot::Error>(())
/// ```
pub fn scatter<T: Real>(
    path: impl AsRef<Path>,
    panels: &[ScatterPanel<'_, T>],
    columns: usize,
    title: &str,
) -> Result<()> {
    if panels.is_empty() || columns == 0 || panels.iter().all(|(_, s)| s.is_empty()) {
        return Err(Error::Empty {
            arg: "panels".into(),
            detail: format!("{} panels in {columns} columns", panels.len()),
        });
    }
    for (caption, series) in panels {
        if let Some((name, pts)) = series.iter().find(|(_, p)| p.ncols() != 2) {
            return Err(Error::shape(
                "panels",
                format!(
                    "series {name} of panel {caption} is {}×{}: expected k×2 points",
                    pts.nrows(),
                    pts.ncols()
                ),
            ));
        }
    }
    let coords = |axis: usize| {
        panels.iter().flat_map(move |(_, series)| {
            series
                .iter()
                .flat_map(move |(_, p)| p.column(axis).into_iter().map(|v| v.f64()))
        })
    };
    // Equal scales on both axes (the panels are square), 5% margin.
    let ((xa, xb), (ya, yb)) = (range_of(coords(0)), range_of(coords(1)));
    let half = 0.55 * (xb - xa).max(yb - ya);
    let (xc, yc) = (0.5 * (xa + xb), 0.5 * (ya + yb));
    let ((x0, x1), (y0, y1)) = ((xc - half, xc + half), (yc - half, yc + half));
    let columns = columns.min(panels.len());
    let rows = panels.len().div_ceil(columns);
    let (pw, ph, head) = (330u32, 330u32, 44u32);
    let size = (columns as u32 * pw, head + rows as u32 * ph);
    render(
        path.as_ref(),
        |root| {
            let (title_area, body) = root.split_vertically(head);
            centred(&title_area, title, 20)?;
            for (k, (caption, series)) in panels.iter().enumerate() {
                let (r, c) = ((k / columns) as i32, (k % columns) as i32);
                let area = body
                    .clone()
                    .shrink((c * pw as i32, r * ph as i32), (pw, ph));
                let mut chart = ChartBuilder::on(&area)
                    .caption(caption, (FONT, 15))
                    .margin(8)
                    .x_label_area_size(26)
                    .y_label_area_size(44)
                    .build_cartesian_2d(x0..x1, y0..y1)?;
                chart
                    .configure_mesh()
                    .light_line_style(RGBColor(235, 235, 235))
                    .x_labels(5)
                    .y_labels(5)
                    .x_label_formatter(&|v| tick(*v, x0.abs().max(x1.abs())))
                    .y_label_formatter(&|v| tick(*v, y0.abs().max(y1.abs())))
                    .label_style((FONT, 12))
                    .draw()?;
                for (s, (name, pts)) in series.iter().enumerate() {
                    let colour = PALETTE[s % PALETTE.len()];
                    let dots = pts
                        .rows()
                        .into_iter()
                        .map(|p| (p[0].f64(), p[1].f64()))
                        .filter(|(a, b)| a.is_finite() && b.is_finite())
                        .map(move |p| Circle::new(p, 3, colour.mix(0.8).filled()));
                    let drawn = chart.draw_series(dots)?;
                    if k == 0 {
                        drawn
                            .label(*name)
                            .legend(move |(a, b)| Circle::new((a + 6, b), 4, colour.filled()));
                    }
                }
                if k == 0 {
                    chart
                        .configure_series_labels()
                        .background_style(WHITE.mix(0.85))
                        .border_style(BLACK)
                        .label_font((FONT, 13))
                        .position(SeriesLabelPosition::UpperLeft)
                        .draw()?;
                }
            }
            Ok(())
        },
        size,
    )
}
