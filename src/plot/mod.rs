//! PNG plots of histograms, couplings, images and point clouds (feature `plot`, on by
//! default).
//!
//! Drawn with plotters' bitmap backend; every text (titles, ticks, legends) is laid out and
//! rasterised from a bundled font (DejaVu Sans, `assets/fonts/`, with its licence), so a
//! fresh machine needs no system font libraries. Figures follow matplotlib's defaults: a
//! frame with outward ticks at round values (integers only on [`Scale::Integer`] axes,
//! decades on [`Scale::Log`] axes), titles wrapped or shrunk to fit, heatmaps in viridis with
//! a colour bar labelled by the caller, legends in the corner that hides the least data.
//! Every function writes one PNG file and returns [`Error::File`] naming it on failure.
//!
//! ```
//! use logot::ndarray::{array, Array2};
//! use logot::plot::{Axes, Scale};
//! let dir = std::env::temp_dir().join("logot-doc");
//! let img = Array2::from_shape_fn((32, 32), |(r, c)| ((r * c) as f64).sin().abs());
//! logot::plot::heatmap(dir.join("img.png"), img.view(), "An image", ("column", "row"), "|sin(rc)|")?;
//! let h = array![0.2, 0.5, 0.3];
//! logot::plot::lines(dir.join("h.png"), &[0.0, 0.5, 1.0], &[("h", h.view())], &[], "A histogram", ("x", "mass"))?;
//! let loss = array![1.0, 0.1, 0.02, 0.01];
//! let axes = Axes::new("step", "loss").x_scale(Scale::Integer).y_scale(Scale::Log);
//! logot::plot::lines(dir.join("loss.png"), &[0.0, 1.0, 2.0, 3.0], &[("loss", loss.view())], &[], "A loss", axes)?;
//! # Ok::<(), logot::Error>(())
//! ```

mod figure;
mod text;
mod ticks;

use crate::{Error, Real, Result};
use figure::{
    axes, grid, legend, sample_polyline, title_band, x_axis_space, x_overhang, y_axis_space, Area,
    AxisSpec, ColourBar, Draw, Mark, Rect, Title, CAPTION_SIZE, FONT,
};
use ndarray::{ArrayView1, ArrayView2};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::CoordTranslate;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::OnceLock;
use ticks::Ticks;

/// How an axis maps values to positions and where its ticks go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scale {
    /// Linear, ticks at round values (1, 2, 2.5 or 5 × 10ᵏ apart).
    #[default]
    Linear,
    /// Linear with integer ticks only: counts, steps, indices ("5", never "5.0" or "2.5").
    Integer,
    /// Logarithmic: equal ratios at equal distances, ticks at the decades (`10⁻³`) with
    /// minor ticks at 2…9 × 10ᵏ; values ≤ 0 are left out of the plot.
    Log,
}

/// Labels and scales of a plot's two axes: `("x", "mass").into()` for linear axes, or
/// `Axes::new("step", "loss").x_scale(Scale::Integer).y_scale(Scale::Log)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axes<'a> {
    /// Label of the horizontal axis.
    pub x: &'a str,
    /// Label of the vertical axis.
    pub y: &'a str,
    /// Scale of the horizontal axis.
    pub x_scale: Scale,
    /// Scale of the vertical axis.
    pub y_scale: Scale,
}

impl<'a> Axes<'a> {
    /// Linear axes with these labels.
    pub fn new(x: &'a str, y: &'a str) -> Axes<'a> {
        Axes {
            x,
            y,
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
        }
    }
    /// The same axes with the horizontal one on `scale`.
    pub fn x_scale(self, scale: Scale) -> Axes<'a> {
        Axes {
            x_scale: scale,
            ..self
        }
    }
    /// The same axes with the vertical one on `scale`.
    pub fn y_scale(self, scale: Scale) -> Axes<'a> {
        Axes {
            y_scale: scale,
            ..self
        }
    }
}

impl<'a> From<(&'a str, &'a str)> for Axes<'a> {
    fn from((x, y): (&'a str, &'a str)) -> Axes<'a> {
        Axes::new(x, y)
    }
}

/// Register the bundled font under plotters' "sans-serif" family (plotters uses it to size
/// legend boxes and text elements), once; the text itself is drawn by `text::Canvas`.
fn ensure_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        text::font().is_some()
            && plotters::style::register_font(FONT, FontStyle::Normal, text::FONT_BYTES).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(Error::Unavailable(
            "plot: the bundled font could not be loaded".into(),
        ))
    }
}

/// Run a drawing routine on a white `size` canvas and write it to `path` (creating the
/// parent directory); its errors become [`Error::File`] naming `path`.
fn render(path: &Path, size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Draw<()>) -> Result<()> {
    ensure_font()?;
    let file_err = |msg: String| Error::File {
        path: path.display().to_string(),
        msg,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| file_err(format!("cannot create the directory: {e}")))?;
    }
    let root = text::Canvas(BitMapBackend::new(path, size)).into_drawing_area();
    let res = (|| -> Draw<()> {
        root.fill(&WHITE)?;
        draw(&root)?;
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

/// The finite range of `values`, widened when empty or flat.
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

/// About one tick per `spacing` pixels along an axis of `length` pixels (2 to 10).
fn tick_count(length: u32, spacing: u32) -> usize {
    (length / spacing).clamp(2, 10) as usize
}

/// Ticks of an axis over `[lo, hi]` in the axis's own coordinates (`log10` of the values on a
/// log axis).
fn axis_ticks(scale: Scale, lo: f64, hi: f64, max_ticks: usize) -> Ticks {
    match scale {
        Scale::Linear => ticks::linear(lo, hi, max_ticks, false),
        Scale::Integer => ticks::linear(lo, hi, max_ticks, true),
        Scale::Log => ticks::log(10f64.powf(lo), 10f64.powf(hi)),
    }
}

/// A value in axis coordinates: itself, or its `log10` on a log axis (`None` where a log
/// axis cannot show it).
fn to_axis(scale: Scale, v: f64) -> Option<f64> {
    match scale {
        Scale::Log if v > 0.0 => Some(v.log10()),
        Scale::Log => None,
        _ => v.is_finite().then_some(v),
    }
}

/// Where a chart puts a point, in pixels of the whole figure (a copy of its coordinate map,
/// so the chart stays free to draw).
fn pixel_map(
    chart: &ChartContext<'_, text::Canvas<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
) -> impl Fn(f64, f64) -> (i32, i32) {
    let coord = chart.as_coord_spec().clone();
    move |x, y| coord.translate(&(x, y))
}

/// Cells of a matrix, `(row, col) → [c − ½, c + ½] × [r − ½, r + ½]`, coloured on `[lo, hi]`.
fn cells<T: Real>(data: &ArrayView2<'_, T>, lo: f64, hi: f64) -> Vec<Rectangle<(f64, f64)>> {
    data.indexed_iter()
        .map(|((r, c), v)| {
            let (r, c) = (r as f64, c as f64);
            Rectangle::new(
                [(c - 0.5, r - 0.5), (c + 0.5, r + 0.5)],
                viridis((v.f64() - lo) / (hi - lo)).filled(),
            )
        })
        .collect()
}

/// A heatmap of `data` (row 0 at the top, like an image; cells square, integer ticks at the
/// cell centres) with a colour bar labelled `colour_label` (what a cell's value is; `""` for
/// none).
///
/// ```
/// use logot::ndarray::Array2;
/// // The cost C_ij = (x_i − x_j)² on linspace(0, 1, 50).
/// let x = logot::problems::linspace(0.0, 1.0, 50);
/// let cost = Array2::from_shape_fn((50, 50), |(i, j)| (x[i] - x[j]).powi(2));
/// let path = std::env::temp_dir().join("logot-doc").join("cost.png");
/// logot::plot::heatmap(&path, cost.view(), "C = (x_i − x_j)²", ("j", "i"), "cost")?;
/// assert!(path.exists());
/// # Ok::<(), logot::Error>(())
/// ```
pub fn heatmap<T: Real>(
    path: impl AsRef<Path>,
    data: ArrayView2<'_, T>,
    title: &str,
    labels: (&str, &str),
    colour_label: &str,
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
    let xt = ticks::linear(0.0, (cols - 1) as f64, tick_count(pw, 70), true);
    let yt = ticks::linear(0.0, (rows - 1) as f64, tick_count(ph, 50), true);
    let (left, bottom) = (y_axis_space(&yt, labels.1), x_axis_space(&xt, labels.0));
    let bar = ColourBar::new(lo, hi, colour_label);
    let gap = 20;
    let width = left + pw + (gap + bar.width()).max(x_overhang(&xt));
    let (title, head) = title_band(title, width);
    let height = head + ph + bottom;
    let rect = Rect::at(left as i32, head as i32, pw, ph);
    render(path.as_ref(), (width, height), |root| {
        let area = rect.area(root);
        let mut chart = ChartBuilder::on(&area)
            .build_cartesian_2d(-0.5..cols as f64 - 0.5, rows as f64 - 0.5..-0.5)?;
        chart.draw_series(cells(&data, lo, hi))?;
        let at = pixel_map(&chart);
        let (mx, my) = (|v: f64| at(v, 0.0).0, |v: f64| at(0.0, v).1);
        let x = AxisSpec {
            ticks: &xt,
            label: labels.0,
            map: &mx,
        };
        let y = AxisSpec {
            ticks: &yt,
            label: labels.1,
            map: &my,
        };
        axes(root, rect, Some(&x), Some(&y))?;
        bar.draw(root, rect.x1 + gap as i32, rect.y0, rect.y1)?;
        title.draw(root, width as i32 / 2, 12)
    })
}

/// Images in a grid of `columns` panels, each with its own caption (wrapped or shrunk to
/// its panel), on one shared colour scale with a colour bar labelled `colour_label`, under a
/// common `title`. Pixels are square, scaled by a whole factor where the images are small.
///
/// ```
/// use logot::ndarray::ArrayView2;
/// let images = logot::problems::bary64_images(32); // 3×32×32
/// let panels: Vec<(String, ArrayView2<f64>)> =
///     images.outer_iter().enumerate().map(|(k, img)| (format!("input {k}"), img)).collect();
/// let path = std::env::temp_dir().join("logot-doc").join("panels.png");
/// logot::plot::image_panels(&path, &panels, 3, "The bary64 shapes", "mass per pixel")?;
/// # Ok::<(), logot::Error>(())
/// ```
pub fn image_panels<T: Real>(
    path: impl AsRef<Path>,
    panels: &[(String, ArrayView2<'_, T>)],
    columns: usize,
    title: &str,
    colour_label: &str,
) -> Result<()> {
    if panels.is_empty() || columns == 0 {
        return Err(Error::Empty {
            arg: "panels".into(),
            detail: format!("{} panels in {columns} columns", panels.len()),
        });
    }
    if let Some((name, _)) = panels.iter().find(|(_, p)| p.is_empty()) {
        return Err(Error::Empty {
            arg: "panels".into(),
            detail: format!("panel {name} has no pixels"),
        });
    }
    let columns = columns.min(panels.len());
    let rows = panels.len().div_ceil(columns);
    let (lo, hi) = range_of(panels.iter().flat_map(|(_, p)| p.iter().map(|v| v.f64())));
    let (h0, w0) = panels[0].1.dim();
    let longest = h0.max(w0) as f64;
    // Images of at most 200 px on the longer side, by a whole factor where that fits.
    let scale = if longest <= 200.0 {
        (200.0 / longest).floor()
    } else {
        200.0 / longest
    };
    let (iw, ih) = (
        (w0 as f64 * scale).round() as u32,
        (h0 as f64 * scale).round() as u32,
    );
    let (gap, margin) = (14u32, 12u32);
    let captions: Vec<Title> = panels
        .iter()
        .map(|(name, _)| Title::fit(name, CAPTION_SIZE, (iw + gap - 4) as f64))
        .collect();
    let cap = captions.iter().map(|t| t.text_height()).max().unwrap_or(0) as u32 + 8;
    let (pw, ph) = (iw + gap, cap + ih + gap);
    let bar = ColourBar::new(lo, hi, colour_label);
    let width = margin + columns as u32 * pw + 8 + bar.width();
    let (title, head) = title_band(title, width);
    let height = head + rows as u32 * ph;
    render(path.as_ref(), (width, height), |root| {
        for (k, (_, img)) in panels.iter().enumerate() {
            let (r, c) = ((k / columns) as u32, (k % columns) as u32);
            let (x0, y0) = (margin + c * pw, head + r * ph);
            captions[k].draw(root, (x0 + iw / 2) as i32, y0 as i32)?;
            let rect = Rect::at(x0 as i32, (y0 + cap) as i32, iw, ih);
            let area = rect.area(root);
            let (h, w) = img.dim();
            let mut chart = ChartBuilder::on(&area)
                .build_cartesian_2d(-0.5..w as f64 - 0.5, h as f64 - 0.5..-0.5)?;
            chart.draw_series(cells(img, lo, hi))?;
            axes(root, rect, None, None)?;
        }
        let (top, bottom) = (head + cap, head + (rows as u32 - 1) * ph + cap + ih - 1);
        bar.draw(
            root,
            (margin + columns as u32 * pw + 8) as i32,
            top as i32,
            bottom as i32,
        )?;
        title.draw(root, width as i32 / 2, 12)
    })
}

/// The polygon between the curve `points` (data coordinates) and the zero baseline along
/// the other axis: `(v, 0)` ends for a curve over x (`vertical`), `(0, v)` otherwise.
fn filled_curve(points: &[(f64, f64)], over_x: bool) -> Vec<(f64, f64)> {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Vec::new();
    };
    let foot = |p: &(f64, f64)| if over_x { (p.0, 0.0) } else { (0.0, p.1) };
    let mut poly = vec![foot(first)];
    poly.extend_from_slice(points);
    poly.push(foot(last));
    poly
}

/// A coupling `plan` (`n×m`) as a heatmap with its marginals: `mu` (length `n`) on the
/// left along the rows, `nu` (length `m`) on top along the columns, and a colour bar.
/// `x` and `y` are the coordinates of the rows and columns (e.g. the grid points).
///
/// ```
/// use logot::ndarray::Axis;
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
    let peak = |h: &ArrayView1<'_, T>| {
        h.iter()
            .map(|v| v.f64())
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE)
            * 1.08
    };
    let (mu_top, nu_top) = (peak(&mu), peak(&nu));
    // Axes in data order: rows (source x) top to bottom, columns (target y) left to right.
    let (cols_range, rows_range) = (
        (yr.0 - dy / 2.0, yr.1 + dy / 2.0),
        (xr.1 + dx / 2.0, xr.0 - dx / 2.0),
    );
    let (side, marg, gap, pad) = (460u32, 120u32, 10u32, 12u32);
    let xt = ticks::linear(cols_range.0, cols_range.1, tick_count(side, 70), false);
    let yt = ticks::linear(rows_range.0, rows_range.1, tick_count(side, 50), false);
    let nu_t = ticks::linear(0.0, nu_top, 3, false);
    let mu_t = ticks::linear(0.0, mu_top, 3, false);
    let (x_label, y_label) = ("target y (columns)", "source x (rows)");
    let label_col = y_axis_space(&yt, y_label).max(y_axis_space(&nu_t, ""));
    let bottom = x_axis_space(&xt, x_label).max(x_axis_space(&mu_t, "μ"));
    let bar = ColourBar::new(lo, hi, "plan entry");
    let main_x = pad + marg + label_col;
    let width = main_x + side + 20 + bar.width();
    let (title, head) = title_band(title, width);
    let main_y = head + marg + gap;
    let height = main_y + side + bottom;
    let main = Rect::at(main_x as i32, main_y as i32, side, side);
    let top = Rect::at(main_x as i32, head as i32, side, marg);
    let left = Rect::at(pad as i32, main_y as i32, marg, side);
    let red = PALETTE[1];
    let blue = PALETTE[0];
    render(path.as_ref(), (width, height), |root| {
        // The plan: row i at x[i] (top to bottom), column j at y[j].
        let area = main.area(root);
        let mut chart = ChartBuilder::on(&area)
            .build_cartesian_2d(cols_range.0..cols_range.1, rows_range.0..rows_range.1)?;
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
        let at = pixel_map(&chart);
        let (mx, my) = (
            |v: f64| at(v, rows_range.0).0,
            |v: f64| at(cols_range.0, v).1,
        );
        axes(
            root,
            main,
            Some(&AxisSpec {
                ticks: &xt,
                label: x_label,
                map: &mx,
            }),
            Some(&AxisSpec {
                ticks: &yt,
                label: y_label,
                map: &my,
            }),
        )?;
        // Top: ν along the columns, on the plan's horizontal scale.
        let area = top.area(root);
        let mut nu_chart =
            ChartBuilder::on(&area).build_cartesian_2d(cols_range.0..cols_range.1, 0.0..nu_top)?;
        let curve: Vec<(f64, f64)> = y
            .iter()
            .zip(nu.iter())
            .map(|(&a, b)| (a, b.f64()))
            .collect();
        nu_chart.draw_series(std::iter::once(Polygon::new(
            filled_curve(&curve, true),
            red.mix(0.25).filled(),
        )))?;
        nu_chart.draw_series(LineSeries::new(curve, red.stroke_width(2)))?;
        let at = pixel_map(&nu_chart);
        let ny = |v: f64| at(cols_range.0, v).1;
        axes(
            root,
            top,
            None,
            Some(&AxisSpec {
                ticks: &nu_t,
                label: "",
                map: &ny,
            }),
        )?;
        // Left: μ along the rows, mass growing to the left, on the plan's vertical scale.
        let area = left.area(root);
        let mut mu_chart =
            ChartBuilder::on(&area).build_cartesian_2d(mu_top..0.0, rows_range.0..rows_range.1)?;
        let curve: Vec<(f64, f64)> = x
            .iter()
            .zip(mu.iter())
            .map(|(&a, b)| (b.f64(), a))
            .collect();
        mu_chart.draw_series(std::iter::once(Polygon::new(
            filled_curve(&curve, false),
            blue.mix(0.25).filled(),
        )))?;
        mu_chart.draw_series(LineSeries::new(curve, blue.stroke_width(2)))?;
        let at = pixel_map(&mu_chart);
        let lx = |v: f64| at(v, rows_range.0).0;
        axes(
            root,
            left,
            Some(&AxisSpec {
                ticks: &mu_t,
                label: "μ",
                map: &lx,
            }),
            None,
        )?;
        // The corner says which marginal is which.
        let (cx, cy) = (pad as i32 + 4, head as i32 + marg as i32 / 2);
        figure::text(
            root,
            "μ: source (left)",
            (cx, cy - 12),
            CAPTION_SIZE,
            (HPos::Left, VPos::Center),
            &blue,
            false,
        )?;
        figure::text(
            root,
            "ν: target (top)",
            (cx, cy + 12),
            CAPTION_SIZE,
            (HPos::Left, VPos::Center),
            &red,
            false,
        )?;
        bar.draw(root, main.x1 + 20, main.y0, main.y1)?;
        title.draw(root, width as i32 / 2, 12)
    })
}

/// Line plot of 1-D histograms (or any series) over `x`, with a legend: `solid` series as
/// thick lines, then `dashed` ones on top (e.g. a computed marginal over its target). `axes`
/// gives the labels and scales (`("x", "mass")` for linear ones; see [`Axes`]). On a linear
/// y axis the range starts at 0 unless every value lies above half the largest; then it fits
/// the data. On a log axis values ≤ 0 are left out (the line breaks there).
///
/// ```
/// use logot::ndarray::Array1;
/// let x = logot::problems::linspace(0.0, 1.0, 100);
/// let h = logot::problems::gaussian_histogram::<f64>(&x, 0.5, 0.1, 0.0);
/// let flat = Array1::from_elem(100, 0.01);
/// let path = std::env::temp_dir().join("logot-doc").join("lines.png");
/// logot::plot::lines(&path, &x, &[("bump", h.view())], &[("uniform", flat.view())], "Two histograms", ("x", "mass"))?;
/// # Ok::<(), logot::Error>(())
/// ```
pub fn lines<'a, T: Real>(
    path: impl AsRef<Path>,
    x: &[f64],
    solid: &[(&str, ArrayView1<'_, T>)],
    dashed: &[(&str, ArrayView1<'_, T>)],
    title: &str,
    axes_spec: impl Into<Axes<'a>>,
) -> Result<()> {
    let spec: Axes<'a> = axes_spec.into();
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
    // Every point in axis coordinates; None where the axis cannot show it.
    let xs: Vec<Option<f64>> = x.iter().map(|&v| to_axis(spec.x_scale, v)).collect();
    let curves: Vec<Vec<Option<(f64, f64)>>> = series
        .iter()
        .map(|(_, s)| {
            xs.iter()
                .zip(s.iter())
                .map(|(a, b)| Some(((*a)?, to_axis(spec.y_scale, b.f64())?)))
                .collect()
        })
        .collect();
    let shown = curves.iter().flatten().flatten();
    if shown.clone().next().is_none() {
        return Err(Error::Empty {
            arg: "series".into(),
            detail: format!(
                "no point can be shown on these axes (x {:?}, y {:?}: log axes need values > 0)",
                spec.x_scale, spec.y_scale
            ),
        });
    }
    let (x0, x1) = range_of(shown.clone().map(|p| p.0));
    let (lo, hi) = range_of(shown.map(|p| p.1));
    let (bottom, top) = match spec.y_scale {
        Scale::Log => (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)),
        // From 0 (histograms), unless every value sits above half the largest: then fit the
        // data (e.g. a cost that varies by a few percent), 8% margins.
        _ if lo >= 0.0 && lo <= 0.5 * hi => (0.0, hi * 1.08),
        _ => (lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo)),
    };
    let size = (800u32, 500u32);
    let (title, head) = title_band(title, size.0);
    let yt = axis_ticks(spec.y_scale, bottom, top, tick_count(size.1 - head, 45));
    let xt = axis_ticks(spec.x_scale, x0, x1, tick_count(size.0, 90));
    let left = y_axis_space(&yt, spec.y);
    let (below, right) = (x_axis_space(&xt, spec.x), x_overhang(&xt).max(20));
    let rect = Rect::at(
        left as i32,
        head as i32,
        size.0 - left - right,
        size.1 - head - below,
    );
    render(path.as_ref(), size, |root| {
        let area = rect.area(root);
        let mut chart = ChartBuilder::on(&area).build_cartesian_2d(x0..x1, bottom..top)?;
        let at = pixel_map(&chart);
        let (mx, my) = (|v: f64| at(v, bottom).0, |v: f64| at(x0, v).1);
        let xa = AxisSpec {
            ticks: &xt,
            label: spec.x,
            map: &mx,
        };
        let ya = AxisSpec {
            ticks: &yt,
            label: spec.y,
            map: &my,
        };
        grid(root, rect, Some(&xa), Some(&ya))?;
        let mut marks = Vec::new();
        let mut pixels = Vec::new();
        for (k, ((name, _), curve)) in series.iter().zip(&curves).enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let dashed = k >= solid.len();
            let width = if dashed { 2 } else { 3 };
            // Runs of consecutive showable points.
            for run in curve.split(|p| p.is_none()).filter(|r| !r.is_empty()) {
                let pts: Vec<(f64, f64)> = run.iter().flatten().copied().collect();
                let px: Vec<(i32, i32)> = pts.iter().map(|p| at(p.0, p.1)).collect();
                sample_polyline(&px, &mut pixels);
                if dashed {
                    chart.draw_series(DashedLineSeries::new(
                        pts,
                        7,
                        5,
                        colour.stroke_width(width),
                    ))?;
                } else {
                    chart.draw_series(LineSeries::new(pts, colour.stroke_width(width)))?;
                }
            }
            marks.push((
                *name,
                Mark::Line {
                    colour,
                    width,
                    dashed,
                },
            ));
        }
        axes(root, rect, Some(&xa), Some(&ya))?;
        legend(root, rect, &marks, &pixels)?;
        title.draw(root, size.0 as i32 / 2, 12)
    })
}

/// One panel of [`scatter`]: a caption and its point sets, each `k×2` (x, y per row).
pub type ScatterPanel<'a, T> = (String, Vec<(&'a str, ArrayView2<'a, T>)>);

/// Side of one [`scatter`] panel in pixels (caption, axes and the square plot).
pub const SCATTER_PANEL: u32 = 330;

/// 2-D point clouds as dots: one panel per entry of `panels`, `columns` panels per row (each
/// [`SCATTER_PANEL`] pixels square), all on the same axes (the range of every point, equal
/// scales), under a common `title`. Series `k` of a panel gets the `k`-th colour in every
/// panel; the first panel carries the legend.
///
/// ```
/// use logot::ndarray::array;
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
    let p = SCATTER_PANEL;
    let xt = ticks::linear(x0, x1, 5, false);
    let yt = ticks::linear(y0, y1, 6, false);
    let (left, below) = (y_axis_space(&yt, ""), x_axis_space(&xt, ""));
    let captions: Vec<Title> = panels
        .iter()
        .map(|(c, _)| Title::fit(c, CAPTION_SIZE, (p - left - 12) as f64))
        .collect();
    let cap = captions.iter().map(|t| t.text_height()).max().unwrap_or(0) as u32 + 10;
    let side = (p - left - x_overhang(&xt).max(10)).min(p - cap - below);
    let width = columns as u32 * p;
    let (title, head) = title_band(title, width);
    let size = (width, head + rows as u32 * p);
    render(path.as_ref(), size, |root| {
        for (k, (_, series)) in panels.iter().enumerate() {
            let (r, c) = ((k / columns) as u32, (k % columns) as u32);
            let (px0, py0) = (c * p, head + r * p);
            let rect = Rect::at((px0 + left) as i32, (py0 + cap) as i32, side, side);
            captions[k].draw(root, (rect.x0 + rect.x1) / 2, py0 as i32 + 2)?;
            let area = rect.area(root);
            let mut chart = ChartBuilder::on(&area).build_cartesian_2d(x0..x1, y0..y1)?;
            let at = pixel_map(&chart);
            let (mx, my) = (|v: f64| at(v, y0).0, |v: f64| at(x0, v).1);
            let xa = AxisSpec {
                ticks: &xt,
                label: "",
                map: &mx,
            };
            let ya = AxisSpec {
                ticks: &yt,
                label: "",
                map: &my,
            };
            grid(root, rect, Some(&xa), Some(&ya))?;
            let mut marks = Vec::new();
            let mut pixels = Vec::new();
            for (s, (name, pts)) in series.iter().enumerate() {
                let colour = PALETTE[s % PALETTE.len()];
                let dots: Vec<(f64, f64)> = pts
                    .rows()
                    .into_iter()
                    .map(|p| (p[0].f64(), p[1].f64()))
                    .filter(|(a, b)| a.is_finite() && b.is_finite())
                    .collect();
                pixels.extend(dots.iter().map(|d| at(d.0, d.1)));
                chart.draw_series(
                    dots.into_iter()
                        .map(|d| Circle::new(d, 3, colour.mix(0.8).filled())),
                )?;
                marks.push((*name, Mark::Dot { colour }));
            }
            axes(root, rect, Some(&xa), Some(&ya))?;
            if k == 0 {
                legend(root, rect, &marks, &pixels)?;
            }
        }
        title.draw(root, size.0 as i32 / 2, 12)
    })
}
