//! Line plots of histograms and series, and scatter plots of point clouds.

use super::*;

/// Line plot of 1-D histograms (or any series) over `x`, with a legend: `solid` series as
/// thick lines, then `dashed` ones on top (e.g. a computed marginal over its target). `axes`
/// gives the labels and scales (`("x", "mass")` for linear ones; see [`Axes`]). On a linear
/// y axis the range starts at 0 unless every value lies above half the largest; then it fits
/// the data. On a log axis values ≤ 0 are left out (the line breaks there).
///
/// ```
/// use logot::ndarray::Array1;
/// let x: Vec<f64> = (0..100).map(|i| i as f64 / 99.0).collect();
/// let bump = Array1::from_iter(x.iter().map(|v| (-0.5 * ((v - 0.5) / 0.1).powi(2)).exp()));
/// let h = &bump / bump.sum();
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
