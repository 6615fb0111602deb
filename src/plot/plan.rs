//! A coupling drawn as a heatmap with its two marginals along the sides.

use super::*;

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
/// use logot::ndarray::{Array1, Array2, Axis};
/// let x: Vec<f64> = (0..40).map(|i| i as f64 / 39.0).collect();
/// // Gaussian bumps sampled on x, normalised to mass 1.
/// let bump = |mean: f64, sd: f64| {
///     let h = Array1::from_iter(x.iter().map(|v| (-0.5 * ((v - mean) / sd).powi(2)).exp()));
///     &h / h.sum()
/// };
/// let (mu, nu) = (bump(0.3, 0.1), bump(0.6, 0.05));
/// let cost = Array2::from_shape_fn((40, 40), |(i, j)| (x[i] - x[j]).powi(2));
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
    coupling_with_marginals(
        path,
        plan,
        Marginal::new(mu, "μ", "source"),
        Marginal::new(nu, "ν", "target"),
        coords,
        title,
    )
}

/// A curve drawn along one side of a coupling ([`coupling_with_marginals`]): its values,
/// its symbol (the side panel's axis label) and what it is (the corner caption reads
/// "symbol: what").
#[derive(Clone, Copy, Debug)]
pub struct Marginal<'a, T> {
    /// One value per row (left side) or column (top side) of the plan.
    pub values: ArrayView1<'a, T>,
    /// The symbol, e.g. `"μ"` or `"P·1"`.
    pub symbol: &'a str,
    /// What the curve is, e.g. `"source"` or `"row sums of P"`.
    pub what: &'a str,
}

impl<'a, T> Marginal<'a, T> {
    /// The curve `values` named `symbol`, described as `what`.
    pub fn new(values: ArrayView1<'a, T>, symbol: &'a str, what: &'a str) -> Self {
        Marginal {
            values,
            symbol,
            what,
        }
    }
}

/// As [`coupling`], with the side curves and their names chosen by the caller: `rows` on the
/// left along the rows, `cols` on top along the columns. An unbalanced plan, whose sums are
/// not the input marginals, names its own: `Marginal::new(row_sums, "P·1", "row sums of P")`.
///
/// ```
/// use logot::ndarray::{Array2, Axis};
/// use logot::plot::Marginal;
/// let x: Vec<f64> = (0..30).map(|i| i as f64 / 29.0).collect();
/// let plan = Array2::from_shape_fn((30, 30), |(i, j)| if i == j { 1.0 / 30.0 } else { 0.0 });
/// let (rows, cols) = (plan.sum_axis(Axis(1)), plan.sum_axis(Axis(0)));
/// let path = std::env::temp_dir().join("logot-doc").join("coupling_sums.png");
/// logot::plot::coupling_with_marginals(
///     &path,
///     plan.view(),
///     Marginal::new(rows.view(), "P·1", "row sums"),
///     Marginal::new(cols.view(), "Pᵀ·1", "column sums"),
///     (&x, &x),
///     "the identity plan",
/// )?;
/// # Ok::<(), logot::Error>(())
/// ```
pub fn coupling_with_marginals<T: Real>(
    path: impl AsRef<Path>,
    plan: ArrayView2<'_, T>,
    rows: Marginal<'_, T>,
    cols: Marginal<'_, T>,
    coords: (&[f64], &[f64]),
    title: &str,
) -> Result<()> {
    let (mu, nu) = (rows.values, cols.values);
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
    let bottom = x_axis_space(&xt, x_label).max(x_axis_space(&mu_t, rows.symbol));
    let bar = ColourBar::new(lo, hi, "plan entry");
    let (lo, hi) = bar.range();
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
        // Top: the columns' curve (ν), on the plan's horizontal scale.
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
        // Left: the rows' curve (μ), mass growing to the left, on the plan's vertical scale.
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
                label: rows.symbol,
                map: &lx,
            }),
            None,
        )?;
        // The corner says which marginal is which.
        let (cx, cy) = (pad as i32 + 4, head as i32 + marg as i32 / 2);
        figure::text(
            root,
            &format!("{}: {} (left)", rows.symbol, rows.what),
            (cx, cy - 12),
            CAPTION_SIZE,
            (HPos::Left, VPos::Center),
            &blue,
            false,
        )?;
        figure::text(
            root,
            &format!("{}: {} (top)", cols.symbol, cols.what),
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
