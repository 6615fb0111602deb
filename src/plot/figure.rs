//! The parts of a figure, drawn the way matplotlib draws them: titles that wrap (then
//! shrink) to their width, a frame with outward ticks and labels clear of them, a colour bar
//! with its own ticks, and a legend placed in the corner that hides the least data.

use super::text::{self, Canvas};
use super::ticks::Ticks;
use super::viridis;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontTransform;

pub(super) type Area<'a> = DrawingArea<Canvas<'a>, Shift>;
pub(super) type Draw<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Font family name the bundled font is registered under (for plotters' own estimates).
pub(super) const FONT: &str = "sans-serif";
/// Text sizes (px, ascent − descent; an em is size / 1.164).
pub(super) const TICK_SIZE: f64 = 14.0;
pub(super) const LABEL_SIZE: f64 = 15.5;
pub(super) const CAPTION_SIZE: f64 = 15.5;
pub(super) const TITLE_SIZE: f64 = 19.0;
/// Tick lengths and the gap between a tick and its label (px).
const TICK_LEN: i32 = 4;
const MINOR_LEN: i32 = 2;
const TICK_PAD: i32 = 5;
/// Gap between tick labels and the axis label.
const LABEL_PAD: i32 = 6;

pub(super) const FRAME: RGBColor = RGBColor(0, 0, 0);
const TEXT: RGBColor = RGBColor(0, 0, 0);
const GRID: RGBColor = RGBColor(224, 224, 224);
const MINOR_GRID: RGBColor = RGBColor(242, 242, 242);

/// A pixel rectangle, inclusive bounds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl Rect {
    /// The rectangle at `(x, y)` of `w × h` pixels.
    pub fn at(x: i32, y: i32, w: u32, h: u32) -> Rect {
        Rect {
            x0: x,
            y0: y,
            x1: x + w as i32 - 1,
            y1: y + h as i32 - 1,
        }
    }
    pub fn width(&self) -> u32 {
        (self.x1 - self.x0 + 1).max(0) as u32
    }
    pub fn height(&self) -> u32 {
        (self.y1 - self.y0 + 1).max(0) as u32
    }
    /// The drawing area of this rectangle inside `root`.
    pub fn area<'a>(&self, root: &Area<'a>) -> Area<'a> {
        root.clone()
            .shrink((self.x0, self.y0), (self.width(), self.height()))
    }
}

/// Height of a line of text at `size`.
pub(super) fn line_height(size: f64) -> i32 {
    size.ceil() as i32
}

/// Draw `s` anchored at `at`; `vertical` turns it to read bottom to top (the anchor then
/// refers to the unrotated box: `(Center, Bottom)` puts the text left of `at`).
pub(super) fn text(
    area: &Area<'_>,
    s: &str,
    at: (i32, i32),
    size: f64,
    anchor: (HPos, VPos),
    colour: &RGBColor,
    vertical: bool,
) -> Draw<()> {
    if s.is_empty() {
        return Ok(());
    }
    let mut style = TextStyle::from((FONT, size).into_font())
        .pos(Pos::new(anchor.0, anchor.1))
        .color(colour);
    if vertical {
        style = style.transform(FontTransform::Rotate270);
    }
    area.draw(&Text::new(s.to_string(), at, style))?;
    Ok(())
}

/// A title or caption laid out to fit a width: one line if it fits, else wrapped at spaces
/// (at most two lines), else shrunk to 80 % and wrapped as needed, and shrunk further only
/// for a single word wider than the width.
#[derive(Clone, Debug)]
pub(super) struct Title {
    pub lines: Vec<String>,
    pub size: f64,
}

fn wrap(s: &str, size: f64, max_w: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in s.split(' ').filter(|w| !w.is_empty()) {
        let candidate = if current.is_empty() {
            word.to_string()
        } else {
            format!("{current} {word}")
        };
        if current.is_empty() || text::width(&candidate, size) <= max_w {
            current = candidate;
        } else {
            lines.push(std::mem::replace(&mut current, word.to_string()));
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

impl Title {
    pub fn fit(s: &str, size: f64, max_w: f64) -> Title {
        let max_w = max_w.max(1.0);
        if s.trim().is_empty() {
            return Title {
                lines: Vec::new(),
                size,
            };
        }
        let widest = |lines: &[String], size| {
            lines
                .iter()
                .map(|l| text::width(l, size))
                .fold(0.0, f64::max)
        };
        let smallest = 0.8 * size;
        let mut size_now = size;
        loop {
            let lines = wrap(s, size_now, max_w);
            if lines.len() <= 2 && widest(&lines, size_now) <= max_w {
                return Title {
                    lines,
                    size: size_now,
                };
            }
            if size_now <= smallest {
                break;
            }
            size_now = (size_now * 0.93).max(smallest);
        }
        let lines = wrap(s, smallest, max_w);
        let w = widest(&lines, smallest);
        let size = if w > max_w {
            smallest * max_w / w
        } else {
            smallest
        };
        Title { lines, size }
    }

    /// Height of the text block (no padding).
    pub fn text_height(&self) -> i32 {
        let n = self.lines.len() as i32;
        if n == 0 {
            0
        } else {
            line_height(self.size) + (n - 1) * (1.2 * self.size).round() as i32
        }
    }

    /// Draw the lines centred on `centre_x`, the first line's top at `top`.
    pub fn draw(&self, area: &Area<'_>, centre_x: i32, top: i32) -> Draw<()> {
        let step = (1.2 * self.size).round() as i32;
        for (k, line) in self.lines.iter().enumerate() {
            text(
                area,
                line,
                (centre_x, top + k as i32 * step),
                self.size,
                (HPos::Center, VPos::Top),
                &TEXT,
                false,
            )?;
        }
        Ok(())
    }
}

/// The band a figure title takes at the top: the fitted title with 12 px above and 10 below.
pub(super) fn title_band(title: &str, width: u32) -> (Title, u32) {
    let t = Title::fit(title, TITLE_SIZE, width as f64 - 24.0);
    let h = if t.lines.is_empty() {
        10
    } else {
        12 + t.text_height() + 10
    };
    (t, h as u32)
}

/// Width of the widest tick label.
/// The widest tick label, and at least the width of `−0.000`: labels share a `×10ᵏ` factor
/// and rarely need more, so figures of one kind drawn from different data (the frames of a
/// series) keep one size.
fn widest_label(ticks: &Ticks) -> i32 {
    ticks
        .major
        .iter()
        .map(|t| text::width(&t.label, TICK_SIZE).ceil() as i32)
        .chain((!ticks.major.is_empty()).then(|| text::width("−0.000", TICK_SIZE).ceil() as i32))
        .max()
        .unwrap_or(0)
}

/// Space a y axis needs left of the frame: ticks, labels, the axis label.
pub(super) fn y_axis_space(ticks: &Ticks, label: &str) -> u32 {
    let label = ticks.label(label);
    let desc = if label.is_empty() {
        0
    } else {
        LABEL_PAD + line_height(LABEL_SIZE)
    };
    (TICK_LEN + TICK_PAD + widest_label(ticks) + desc + 8) as u32
}

/// Space an x axis needs below the frame.
pub(super) fn x_axis_space(ticks: &Ticks, label: &str) -> u32 {
    let label = ticks.label(label);
    let labels = if ticks.major.is_empty() {
        0
    } else {
        line_height(TICK_SIZE)
    };
    let desc = if label.is_empty() {
        0
    } else {
        LABEL_PAD + line_height(LABEL_SIZE)
    };
    (TICK_LEN + TICK_PAD + labels + desc + 8) as u32
}

/// Half the width of the last x tick label: how far it reaches right of the frame.
pub(super) fn x_overhang(ticks: &Ticks) -> u32 {
    ticks
        .major
        .last()
        .map(|t| (text::width(&t.label, TICK_SIZE) / 2.0).ceil() as u32 + 4)
        .unwrap_or(0)
}

/// One axis of a frame: its ticks and label, and where a value lands (pixel column for an
/// x axis, row for a y axis).
pub(super) struct AxisSpec<'a> {
    pub ticks: &'a Ticks,
    pub label: &'a str,
    pub map: &'a dyn Fn(f64) -> i32,
}

/// Grid lines at the major (and light ones at the minor) ticks, inside `rect`; draw before
/// the data.
pub(super) fn grid(
    root: &Area<'_>,
    rect: Rect,
    x: Option<&AxisSpec<'_>>,
    y: Option<&AxisSpec<'_>>,
) -> Draw<()> {
    for (ticks, colour) in [(false, MINOR_GRID), (true, GRID)] {
        if let Some(x) = x {
            let at: Vec<f64> = if ticks {
                x.ticks.major.iter().map(|t| t.at).collect()
            } else {
                x.ticks.minor.clone()
            };
            for v in at {
                let px = (x.map)(v);
                if px > rect.x0 && px < rect.x1 {
                    root.draw(&PathElement::new(
                        vec![(px, rect.y0), (px, rect.y1)],
                        colour.stroke_width(1),
                    ))?;
                }
            }
        }
        if let Some(y) = y {
            let at: Vec<f64> = if ticks {
                y.ticks.major.iter().map(|t| t.at).collect()
            } else {
                y.ticks.minor.clone()
            };
            for v in at {
                let py = (y.map)(v);
                if py > rect.y0 && py < rect.y1 {
                    root.draw(&PathElement::new(
                        vec![(rect.x0, py), (rect.x1, py)],
                        colour.stroke_width(1),
                    ))?;
                }
            }
        }
    }
    Ok(())
}

/// The frame around `rect` with outward ticks on the bottom (`x`) and left (`y`) axes, tick
/// labels `TICK_PAD` px clear of the ticks, and the axis labels (with a common `×10ᵏ`).
pub(super) fn axes(
    root: &Area<'_>,
    rect: Rect,
    x: Option<&AxisSpec<'_>>,
    y: Option<&AxisSpec<'_>>,
) -> Draw<()> {
    root.draw(&Rectangle::new(
        [(rect.x0, rect.y0), (rect.x1, rect.y1)],
        FRAME.stroke_width(1),
    ))?;
    let inside = |p: i32, a: i32, b: i32| p >= a - 1 && p <= b + 1;
    if let Some(x) = x {
        for &m in &x.ticks.minor {
            let px = (x.map)(m);
            if inside(px, rect.x0, rect.x1) {
                root.draw(&PathElement::new(
                    vec![(px, rect.y1), (px, rect.y1 + MINOR_LEN)],
                    FRAME.stroke_width(1),
                ))?;
            }
        }
        for t in &x.ticks.major {
            let px = (x.map)(t.at);
            if !inside(px, rect.x0, rect.x1) {
                continue;
            }
            root.draw(&PathElement::new(
                vec![(px, rect.y1), (px, rect.y1 + TICK_LEN)],
                FRAME.stroke_width(1),
            ))?;
            text(
                root,
                &t.label,
                (px, rect.y1 + TICK_LEN + TICK_PAD),
                TICK_SIZE,
                (HPos::Center, VPos::Top),
                &TEXT,
                false,
            )?;
        }
        let label = x.ticks.label(x.label);
        let below = if x.ticks.major.is_empty() {
            0
        } else {
            line_height(TICK_SIZE)
        };
        text(
            root,
            &label,
            (
                (rect.x0 + rect.x1) / 2,
                rect.y1 + TICK_LEN + TICK_PAD + below + LABEL_PAD,
            ),
            LABEL_SIZE,
            (HPos::Center, VPos::Top),
            &TEXT,
            false,
        )?;
    }
    if let Some(y) = y {
        for &m in &y.ticks.minor {
            let py = (y.map)(m);
            if inside(py, rect.y0, rect.y1) {
                root.draw(&PathElement::new(
                    vec![(rect.x0 - MINOR_LEN, py), (rect.x0, py)],
                    FRAME.stroke_width(1),
                ))?;
            }
        }
        for t in &y.ticks.major {
            let py = (y.map)(t.at);
            if !inside(py, rect.y0, rect.y1) {
                continue;
            }
            root.draw(&PathElement::new(
                vec![(rect.x0 - TICK_LEN, py), (rect.x0, py)],
                FRAME.stroke_width(1),
            ))?;
            text(
                root,
                &t.label,
                (rect.x0 - TICK_LEN - TICK_PAD, py),
                TICK_SIZE,
                (HPos::Right, VPos::Center),
                &TEXT,
                false,
            )?;
        }
        let label = y.ticks.label(y.label);
        text(
            root,
            &label,
            (
                rect.x0 - TICK_LEN - TICK_PAD - widest_label(y.ticks) - LABEL_PAD,
                (rect.y0 + rect.y1) / 2,
            ),
            LABEL_SIZE,
            (HPos::Center, VPos::Bottom),
            &TEXT,
            true,
        )?;
    }
    Ok(())
}

/// A vertical colour bar for values in `[lo, hi]` (viridis), ticks and label on its right.
pub(super) struct ColourBar {
    lo: f64,
    hi: f64,
    ticks: Ticks,
    label: String,
}

/// Width of the bar itself (px).
const BAR_W: i32 = 18;

impl ColourBar {
    /// A bar for values in `[lo, hi]`, widened to the ticks that enclose them so that its
    /// bottom and top are labelled ([`ColourBar::range`] is the range to colour with).
    pub fn new(lo: f64, hi: f64, label: &str) -> ColourBar {
        let (ticks, lo, hi) = super::ticks::enclosing(lo, hi, 6);
        let label = ticks.label(label);
        ColourBar {
            lo,
            hi,
            ticks,
            label,
        }
    }

    /// The values the bar's bottom and top stand for: what the colours map from.
    pub fn range(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// Width of the bar, its ticks, labels and axis label.
    pub fn width(&self) -> u32 {
        let desc = if self.label.is_empty() {
            0
        } else {
            LABEL_PAD + line_height(LABEL_SIZE)
        };
        (BAR_W + TICK_LEN + TICK_PAD + widest_label(&self.ticks) + desc + 10) as u32
    }

    /// Draw the bar with its left edge at `x0`, from `y0` (the top, `hi`) to `y1` (`lo`).
    pub fn draw(&self, root: &Area<'_>, x0: i32, y0: i32, y1: i32) -> Draw<()> {
        let x1 = x0 + BAR_W - 1;
        let span = (y1 - y0).max(1) as f64;
        for y in y0..=y1 {
            let t = (y1 - y) as f64 / span;
            root.draw(&PathElement::new(
                vec![(x0, y), (x1, y)],
                viridis(t).stroke_width(1),
            ))?;
        }
        root.draw(&Rectangle::new([(x0, y0), (x1, y1)], FRAME.stroke_width(1)))?;
        let row = |v: f64| {
            let f = if self.hi > self.lo {
                (v - self.lo) / (self.hi - self.lo)
            } else {
                0.5
            };
            y1 - (f * span).round() as i32
        };
        for t in &self.ticks.major {
            let py = row(t.at);
            if py < y0 - 1 || py > y1 + 1 {
                continue;
            }
            root.draw(&PathElement::new(
                vec![(x1, py), (x1 + TICK_LEN, py)],
                FRAME.stroke_width(1),
            ))?;
            text(
                root,
                &t.label,
                (x1 + TICK_LEN + TICK_PAD, py),
                TICK_SIZE,
                (HPos::Left, VPos::Center),
                &TEXT,
                false,
            )?;
        }
        text(
            root,
            &self.label,
            (
                x1 + TICK_LEN + TICK_PAD + widest_label(&self.ticks) + LABEL_PAD,
                (y0 + y1) / 2,
            ),
            LABEL_SIZE,
            (HPos::Center, VPos::Top),
            &TEXT,
            true,
        )
    }
}

/// How a legend entry is drawn.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mark {
    Line {
        colour: RGBColor,
        width: u32,
        dashed: bool,
    },
    Dot {
        colour: RGBColor,
    },
}

const LEGEND_SIZE: f64 = 14.0;

/// A legend inside `rect`, at the first of matplotlib's "best" locations (upper right, upper
/// left, lower left, lower right, right, centre left, centre right, lower centre, upper
/// centre, centre) that covers the fewest of `points` (the data, in pixels).
pub(super) fn legend(
    root: &Area<'_>,
    rect: Rect,
    entries: &[(&str, Mark)],
    points: &[(i32, i32)],
) -> Draw<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let (pad, handle, gap, inset) = (7, 26, 8, 8);
    let row = (1.4 * LEGEND_SIZE).round() as i32;
    let text_w = entries
        .iter()
        .map(|(name, _)| text::width(name, LEGEND_SIZE).ceil() as i32)
        .max()
        .unwrap_or(0);
    let (w, h) = (
        pad + handle + gap + text_w + pad,
        pad + row * entries.len() as i32 + pad - 4,
    );
    let (left, right) = (rect.x0 + inset, rect.x1 - inset - w);
    let (top, bottom) = (rect.y0 + inset, rect.y1 - inset - h);
    let (mid_x, mid_y) = ((rect.x0 + rect.x1 - w) / 2, (rect.y0 + rect.y1 - h) / 2);
    let locations = [
        (right, top),
        (left, top),
        (left, bottom),
        (right, bottom),
        (right, mid_y),
        (left, mid_y),
        (right, mid_y),
        (mid_x, bottom),
        (mid_x, top),
        (mid_x, mid_y),
    ];
    let covered = |(x, y): (i32, i32)| {
        points
            .iter()
            .filter(|p| p.0 >= x - 3 && p.0 <= x + w + 3 && p.1 >= y - 3 && p.1 <= y + h + 3)
            .count()
    };
    // The first location of least cover (min_by_key keeps the first of equal keys).
    let (x, y) = locations
        .iter()
        .copied()
        .min_by_key(|&c| covered(c))
        .unwrap_or(locations[0]);
    root.draw(&Rectangle::new(
        [(x, y), (x + w, y + h)],
        WHITE.mix(0.85).filled(),
    ))?;
    root.draw(&Rectangle::new(
        [(x, y), (x + w, y + h)],
        RGBColor(204, 204, 204).stroke_width(1),
    ))?;
    for (k, (name, mark)) in entries.iter().enumerate() {
        let cy = y + pad + row * k as i32 + row / 2 - 2;
        let (hx0, hx1) = (x + pad, x + pad + handle);
        match *mark {
            Mark::Line {
                colour,
                width,
                dashed: false,
            } => {
                root.draw(&PathElement::new(
                    vec![(hx0, cy), (hx1, cy)],
                    colour.stroke_width(width),
                ))?;
            }
            Mark::Line {
                colour,
                width,
                dashed: true,
            } => {
                for (a, b) in [(hx0, hx0 + 9), (hx0 + 14, hx0 + 23)] {
                    root.draw(&PathElement::new(
                        vec![(a, cy), (b.min(hx1), cy)],
                        colour.stroke_width(width),
                    ))?;
                }
            }
            Mark::Dot { colour } => {
                root.draw(&Circle::new(((hx0 + hx1) / 2, cy), 4, colour.filled()))?;
            }
        }
        text(
            root,
            name,
            (hx1 + gap, cy),
            LEGEND_SIZE,
            (HPos::Left, VPos::Center),
            &TEXT,
            false,
        )?;
    }
    Ok(())
}

/// Pixels along the polyline through `points`, every 3 px: what a legend must not hide.
pub(super) fn sample_polyline(points: &[(i32, i32)], out: &mut Vec<(i32, i32)>) {
    out.extend(points.first().copied());
    for w in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        let n = ((x1 - x0).abs().max((y1 - y0).abs()) / 3).max(1);
        for k in 1..=n {
            out.push((x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n));
        }
    }
}
