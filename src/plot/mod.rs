//! PNG plots of histograms, couplings, images and point clouds (feature `plot`, on by
//! default).
//!
//! Drawn with plotters' bitmap backend; every text (titles, ticks, legends) is laid out and
//! rasterised from a bundled font (DejaVu Sans, `assets/fonts/`, with its licence), so a
//! fresh machine needs no system font libraries. Figures follow matplotlib's defaults: a
//! frame with outward ticks at round values (integers only on [`Scale::Integer`] axes,
//! decades on [`Scale::Log`] axes), titles wrapped or shrunk to fit, heatmaps in viridis with
//! a colour bar labelled by the caller and ticked at both ends, legends in the corner that
//! hides the least data. In every text, `_x` sets `x` as a subscript and `_{…}` a group
//! (`"ρ_μ"`, `"S_{ε,1}"`); `\_` is an underscore. Tick labels take a fixed least width, so
//! figures of one kind drawn from different data (the frames of a series) share one size.
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
mod plan;
mod series;
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

pub use plan::{coupling, coupling_with_marginals, Marginal};
pub use series::{lines, scatter, ScatterPanel, SCATTER_PANEL};

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
#[non_exhaustive]
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
/// let x: Vec<f64> = (0..50).map(|i| i as f64 / 49.0).collect();
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
    let (lo, hi) = bar.range();
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
/// use logot::ndarray::{Array3, ArrayView2};
/// // Three 32×32 images: a square, a disk and a ring.
/// let images = Array3::from_shape_fn((3, 32, 32), |(k, r, c)| {
///     let (y, x) = (r as f64 - 15.5, c as f64 - 15.5);
///     let r2 = x * x + y * y;
///     let inside = [x.abs() < 8.0 && y.abs() < 8.0, r2 < 100.0, (64.0..144.0).contains(&r2)];
///     if inside[k] { 1.0 } else { 0.0 }
/// });
/// let panels: Vec<(String, ArrayView2<f64>)> =
///     images.outer_iter().enumerate().map(|(k, img)| (format!("input {k}"), img)).collect();
/// let path = std::env::temp_dir().join("logot-doc").join("panels.png");
/// logot::plot::image_panels(&path, &panels, 3, "Three shapes", "mass per pixel")?;
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
    let (lo, hi) = bar.range();
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
