//! The PNG plots: each function writes a valid PNG (with the bundled font, no system fonts)
//! and refuses inconsistent input with an error instead of drawing garbage; decoded, the
//! pictures have the properties a careful figure needs (titles inside the figure, tick labels
//! clear of the colour bar, integer ticks on count axes, decades evenly spaced on log axes).
#![cfg(feature = "plot")]

use logot::ndarray::{Array1, Array2};
use logot::plot::{self, Axes, Scale};
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
    plot::heatmap(
        &p,
        img.view(),
        "heatmap ε = 0.1",
        ("column", "row"),
        "value",
    )
    .unwrap();
    let (w, h) = is_png(&p);
    assert!(w > 400 && h > 300);

    let panels: Vec<(String, _)> = (0..3).map(|k| (format!("panel {k}"), img.view())).collect();
    let p = out("panels.png");
    plot::image_panels(&p, &panels, 2, "panels", "value").unwrap();
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
    assert!(plot::heatmap(out("bad3.png"), empty.view(), "t", ("a", "b"), "").is_err());
    // An unwritable path is a File error naming it.
    let blocker = out("a_file");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, b"x").unwrap();
    let img = Array2::<f64>::ones((4, 4));
    match plot::heatmap(blocker.join("sub.png"), img.view(), "t", ("a", "b"), "") {
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
    let p1 = out("scatter_one_row.png");
    plot::scatter(&p1, &panels[..3], 3, "three panels in a row").unwrap();
    // Square panels, three columns; the second row adds one panel's height.
    let ((w, h), (w1, h1)) = (is_png(&p), is_png(&p1));
    assert_eq!((w, w1), (3 * plot::SCATTER_PANEL, 3 * plot::SCATTER_PANEL));
    assert_eq!(h - h1, plot::SCATTER_PANEL);
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

/// A decoded RGB picture.
struct Picture {
    w: usize,
    h: usize,
    rgb: Vec<u8>,
}

impl Picture {
    fn read(path: &PathBuf) -> Picture {
        let file = std::fs::File::open(path).unwrap();
        let mut reader = png::Decoder::new(file).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgb, "{}", path.display());
        buf.truncate(info.buffer_size());
        Picture {
            w: info.width as usize,
            h: info.height as usize,
            rgb: buf,
        }
    }
    fn px(&self, x: usize, y: usize) -> (u8, u8, u8) {
        let k = 3 * (y * self.w + x);
        (self.rgb[k], self.rgb[k + 1], self.rgb[k + 2])
    }
    /// Ink: black or dark grey (text, frames, ticks), not a colour of the data.
    fn dark(&self, x: usize, y: usize) -> bool {
        let (r, g, b) = self.px(x, y);
        let (hi, lo) = (r.max(g).max(b), r.min(g).min(b));
        hi < 150 && hi - lo < 30
    }
    /// A saturated colour (viridis cells, the colour bar).
    fn coloured(&self, x: usize, y: usize) -> bool {
        let (r, g, b) = self.px(x, y);
        r.max(g).max(b) - r.min(g).min(b) > 40
    }
}

#[test]
fn a_title_wider_than_the_figure_is_wrapped_inside_it() {
    let img = Array2::from_shape_fn((20, 20), |(r, c)| (r * c) as f64);
    let title =
        "The same barycenter from both costs on the 32×32 grid (ε = 0.004, 100 iterations, \
                 weights 0.3, 0.3 and 0.4), a title far wider than this one small panel";
    let p = out("long_title.png");
    plot::image_panels(&p, &[(String::new(), img.view())], 1, title, "mass").unwrap();
    let pic = Picture::read(&p);
    // The title band: the rows above the first image row (the panel has no caption).
    let first_image_row = (0..pic.h)
        .find(|&y| (0..pic.w).any(|x| pic.coloured(x, y)))
        .unwrap();
    let band = first_image_row.saturating_sub(3);
    let ink: Vec<(usize, usize)> = (0..band)
        .flat_map(|y| (0..pic.w).map(move |x| (x, y)))
        .filter(|&(x, y)| pic.dark(x, y))
        .collect();
    assert!(ink.len() > 200, "no title drawn");
    let (left, right) = (
        ink.iter().map(|p| p.0).min().unwrap(),
        ink.iter().map(|p| p.0).max().unwrap(),
    );
    assert!(
        left >= 4 && right + 4 < pic.w,
        "title ink spans columns {left}..={right} of a {} px wide figure: cut at the edges",
        pic.w
    );
    // Wrapped: several lines of text, separated by ink-free rows.
    let rows: Vec<bool> = (0..band).map(|y| ink.iter().any(|p| p.1 == y)).collect();
    let lines = rows.windows(2).filter(|w| w[0] && !w[1]).count();
    assert!(lines >= 3, "{lines} text lines in the title band");
}

#[test]
fn colour_bar_tick_labels_stand_clear_of_their_ticks() {
    let img = Array2::from_shape_fn((12, 12), |(r, c)| (r + c) as f64 / 22.0);
    let p = out("colour_bar.png");
    plot::heatmap(&p, img.view(), "a heatmap", ("column", "row"), "value").unwrap();
    let pic = Picture::read(&p);
    // The colour bar: the rightmost run of coloured columns; its frame is the next column.
    let coloured_cols: Vec<usize> = (0..pic.w)
        .filter(|&x| (0..pic.h).filter(|&y| pic.coloured(x, y)).count() > pic.h / 3)
        .collect();
    let bar_right = *coloured_cols.last().unwrap() + 1;
    assert!(pic.dark(bar_right, pic.h / 2), "no frame right of the bar");
    let rows = 0..pic.h;
    // Tick marks: dark runs starting right of the frame; the longest is the tick length.
    let run = |y: usize| {
        (bar_right + 1..pic.w)
            .take_while(|&x| pic.dark(x, y))
            .count()
    };
    let tick = rows.clone().map(run).max().unwrap();
    let ticked = rows.clone().filter(|&y| run(y) == tick).count();
    assert!(
        (2..=8).contains(&tick) && ticked >= 4,
        "ticks of {tick} px on {ticked} rows"
    );
    // No ink in the 3 columns after the ticks: labels start clear of them.
    for y in rows.clone() {
        for x in bar_right + 1 + tick..bar_right + 4 + tick {
            assert!(!pic.dark(x, y), "ink at ({x}, {y}), right after a tick");
        }
    }
    let label_ink = rows
        .filter(|&y| (bar_right + 4 + tick..pic.w).any(|x| pic.dark(x, y)))
        .count();
    assert!(label_ink > 20, "no tick labels");
}

/// Rows (or columns) of the tick marks just outside a frame edge: the positions where the
/// pixel `offset` px outside is dark, merged into runs, returned as run centres.
fn tick_positions(dark: impl Fn(usize) -> bool, len: usize) -> Vec<usize> {
    let mut centres = Vec::new();
    let mut k = 0;
    while k < len {
        if dark(k) {
            let start = k;
            while k < len && dark(k) {
                k += 1;
            }
            centres.push((start + k - 1) / 2);
        }
        k += 1;
    }
    centres
}

/// The frame of a single-panel plot: the longest dark horizontal and vertical lines
/// (bottom edge row, left edge column).
fn frame(pic: &Picture) -> (usize, usize) {
    let bottom = (0..pic.h)
        .rev()
        .find(|&y| (0..pic.w).filter(|&x| pic.dark(x, y)).count() > pic.w / 2)
        .unwrap();
    let left = (0..pic.w)
        .find(|&x| (0..pic.h).filter(|&y| pic.dark(x, y)).count() > pic.h / 2)
        .unwrap();
    (bottom, left)
}

#[test]
fn count_axes_tick_integers_only() {
    let x = [0.0, 1.0, 2.0, 3.0];
    let v = Array1::from(vec![4.0, 2.0, 3.0, 1.0]);
    let draw = |name: &str, scale: Scale| {
        let p = out(name);
        plot::lines(
            &p,
            &x,
            &[("v", v.view())],
            &[],
            "counts",
            Axes::new("step", "v").x_scale(scale),
        )
        .unwrap();
        let pic = Picture::read(&p);
        let (bottom, left) = frame(&pic);
        // Two pixels below the frame, right of its left edge: only tick marks are there.
        tick_positions(|x| x >= left && pic.dark(x, bottom + 2), pic.w)
    };
    // Steps 0, 1, 2, 3 on an integer axis; a linear one ticks the halves too.
    let integer = draw("integer_axis.png", Scale::Integer);
    assert_eq!(integer.len(), 4, "ticks at {integer:?}");
    let gaps: Vec<usize> = integer.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|&g| g.abs_diff(gaps[0]) <= 1),
        "uneven ticks {integer:?}"
    );
    let linear = draw("linear_axis.png", Scale::Linear);
    assert_eq!(linear.len(), 7, "ticks at {linear:?}");
}

#[test]
fn a_log_axis_puts_decades_at_equal_distances() {
    let n = 60;
    let steps: Vec<f64> = (0..n).map(|k| k as f64).collect();
    // 10⁻³ … 10¹ over the steps.
    let loss = Array1::from_shape_fn(n, |k| 10f64.powf(1.0 - 4.0 * k as f64 / (n - 1) as f64));
    let p = out("log_axis.png");
    let axes = Axes::new("step", "loss")
        .x_scale(Scale::Integer)
        .y_scale(Scale::Log);
    plot::lines(&p, &steps, &[("loss", loss.view())], &[], "a loss", axes).unwrap();
    let pic = Picture::read(&p);
    let (bottom, left) = frame(&pic);
    // Major ticks reach 3 px left of the frame, minor ones only 1–2 px (above the bottom edge:
    // below it are the x axis's labels).
    let major = tick_positions(|y| y < bottom && pic.dark(left - 3, y), pic.h);
    let all = tick_positions(|y| y < bottom && pic.dark(left - 1, y), pic.h);
    assert_eq!(major.len(), 5, "decade ticks at rows {major:?}");
    let gaps: Vec<usize> = major.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|&g| g.abs_diff(gaps[0]) <= 1),
        "decades at rows {major:?}"
    );
    // Within a decade the minor ticks (2…9 × 10ᵏ) crowd towards the next decade:
    // log10(2) − log10(1) is about 5 times log10(10) − log10(9).
    let (top, next) = (major[0], major[1]);
    let minors: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&y| y > top && y < next)
        .collect();
    assert_eq!(
        minors.len(),
        8,
        "minor ticks {minors:?} between rows {top} and {next}"
    );
    let (near_top, near_next) = (minors[0] - top, next - minors[7]);
    assert!(
        near_next > 3 * near_top,
        "rows grow downwards: 9×10ᵏ lies {near_top} px below the decade above, 2×10ᵏ {near_next} px above the one below"
    );
}

/// Figures of one kind drawn from data of different scales (the frames of a series, the
/// plans of the unbalanced example) have one size: tick labels of `0.0`…`0.5` and of
/// `0.000`…`0.014` take the same room.
#[test]
fn a_series_of_figures_shares_its_size() {
    let x: Vec<f64> = (0..20).map(|i| i as f64 / 19.0).collect();
    let sizes: Vec<(u32, u32)> = [0.5, 0.0123, 3e-5, 850.0]
        .iter()
        .enumerate()
        .map(|(k, &scale)| {
            let plan = Array2::from_shape_fn((20, 20), |(i, j)| {
                scale * (-((i as f64 - j as f64) / 3.0).powi(2)).exp()
            });
            let (rows, cols) = (
                plan.sum_axis(logot::ndarray::Axis(1)),
                plan.sum_axis(logot::ndarray::Axis(0)),
            );
            let p = out(&format!("series_plan_{k}.png"));
            plot::coupling(
                &p,
                plan.view(),
                rows.view(),
                cols.view(),
                (&x, &x),
                "ρ_μ = 1, S_ε (a subscript test)",
            )
            .unwrap();
            let h = out(&format!("series_heatmap_{k}.png"));
            plot::heatmap(&h, plan.view(), "one title", ("j", "i"), "value").unwrap();
            let (a, b) = (is_png(&p), is_png(&h));
            (a.0 * 10_000 + b.0, a.1 * 10_000 + b.1)
        })
        .collect();
    assert!(
        sizes.windows(2).all(|w| w[0] == w[1]),
        "sizes differ: {sizes:?}"
    );
}

/// The colour bar labels its bottom and top: data in [0.013, 0.987] get a bar from 0 to 1
/// with ticks at both ends (a tick mark within a pixel of the bar's first and last rows).
#[test]
fn colour_bars_tick_both_ends() {
    let img = Array2::from_shape_fn((12, 12), |(r, c)| 0.013 + 0.974 * (r + c) as f64 / 22.0);
    let p = out("colour_bar_ends.png");
    plot::heatmap(&p, img.view(), "a heatmap", ("column", "row"), "value").unwrap();
    let pic = Picture::read(&p);
    let coloured_cols: Vec<usize> = (0..pic.w)
        .filter(|&x| (0..pic.h).filter(|&y| pic.coloured(x, y)).count() > pic.h / 3)
        .collect();
    let bar_right = *coloured_cols.last().unwrap() + 1;
    let inside = bar_right - 3;
    let bar_rows: Vec<usize> = (0..pic.h).filter(|&y| pic.coloured(inside, y)).collect();
    let (top, bottom) = (bar_rows[0], *bar_rows.last().unwrap());
    let run = |y: usize| {
        (bar_right + 1..pic.w)
            .take_while(|&x| pic.dark(x, y))
            .count()
    };
    let tick = (0..pic.h).map(run).max().unwrap();
    let ticks: Vec<usize> = (0..pic.h).filter(|&y| run(y) == tick).collect();
    let near = |row: usize| ticks.iter().any(|&t| t.abs_diff(row) <= 1);
    assert!(
        near(top) && near(bottom),
        "ticks {ticks:?}, bar rows {top}..{bottom}"
    );
}
