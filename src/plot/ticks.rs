//! Tick positions and labels: nice linear steps (1, 2, 2.5, 5 × 10ᵏ), integer steps for
//! counts and indices, decades on logarithmic axes; labels share one number of decimals and
//! a common `×10ᵏ` factor when the values are very small or very large (as matplotlib's
//! `ScalarFormatter` does).

/// One labelled tick at `at` in axis coordinates (`log10` of the value on a log axis).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Tick {
    pub at: f64,
    pub label: String,
}

/// The ticks of one axis: labelled `major` ones, unlabelled `minor` positions, and a factor
/// the labels are in units of (`"×10⁻³"`), to be shown with the axis label.
#[derive(Clone, Debug, Default)]
pub(super) struct Ticks {
    pub major: Vec<Tick>,
    pub minor: Vec<f64>,
    pub factor: Option<String>,
}

impl Ticks {
    /// The axis label with the common factor, e.g. `"mass (×10⁻³)"`.
    pub fn label(&self, label: &str) -> String {
        match (&self.factor, label.is_empty()) {
            (None, _) => label.to_string(),
            (Some(f), true) => f.clone(),
            (Some(f), false) => format!("{label} ({f})"),
        }
    }
}

/// `10` followed by `e` in superscript digits, e.g. `10⁻³`.
pub(super) fn power_of_ten(e: i32) -> String {
    format!("10{}", superscript(e))
}

fn superscript(e: i32) -> String {
    e.to_string()
        .chars()
        .map(|c| match c {
            '-' => '⁻',
            '0' => '⁰',
            '1' => '¹',
            '2' => '²',
            '3' => '³',
            '4' => '⁴',
            '5' => '⁵',
            '6' => '⁶',
            '7' => '⁷',
            '8' => '⁸',
            _ => '⁹',
        })
        .collect()
}

/// A number with a typographic minus sign (U+2212), never "-0".
fn signed(s: String) -> String {
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().any(|c| c.is_ascii_digit() && c != '0') => format!("−{rest}"),
        Some(rest) => rest.to_string(),
        None => s,
    }
}

/// Ticks on `[lo, hi]` (either order) at multiples of a step of 1, 2, 2.5 or 5 × 10ᵏ, the
/// smallest step that gives at most `max_ticks`; `integer` allows integer steps only (counts,
/// indices). Labels share the step's number of decimals.
pub(super) fn linear(lo: f64, hi: f64, max_ticks: usize, integer: bool) -> Ticks {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    if !(lo.is_finite() && hi.is_finite()) {
        return Ticks::default();
    }
    let span = hi - lo;
    let max_ticks = max_ticks.max(2);
    if span <= 0.0 {
        return label_linear(&[lo], 1.0);
    }
    let e0 = (span / max_ticks as f64).log10().floor() as i32 - 1;
    let mut chosen = None;
    'search: for e in e0..e0 + 4 {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let step = m * 10f64.powi(e);
            if integer && (step < 1.0 || step.fract() != 0.0) {
                continue;
            }
            let (k0, k1) = ((lo / step - 1e-9).ceil(), (hi / step + 1e-9).floor());
            if k1 - k0 + 1.0 <= max_ticks as f64 {
                chosen = Some((step, k0 as i64, k1 as i64));
                break 'search;
            }
        }
    }
    let (step, k0, k1) = chosen.unwrap_or_else(|| {
        let step = span.max(1.0);
        (step, (lo / step).ceil() as i64, (hi / step).floor() as i64)
    });
    let values: Vec<f64> = (k0..=k1).map(|k| k as f64 * step).collect();
    label_linear(&values, step)
}

/// Ticks whose first and last fall on the ends of the range they come with: the nice step of
/// [`linear`] on `[lo, hi]`, the range widened to the multiples of it that enclose `[lo, hi]`
/// (a colour bar then labels its bottom and top, `0` for plans and densities).
pub(super) fn enclosing(lo: f64, hi: f64, max_ticks: usize) -> (Ticks, f64, f64) {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    let inner = linear(lo, hi, max_ticks, false);
    let step = match inner.major.as_slice() {
        [a, b, ..] => b.at - a.at,
        _ => return (inner, lo, hi),
    };
    let (k0, k1) = ((lo / step + 1e-9).floor(), (hi / step - 1e-9).ceil());
    let values: Vec<f64> = (k0 as i64..=k1 as i64).map(|k| k as f64 * step).collect();
    (label_linear(&values, step), k0 * step, k1 * step)
}

/// Labels for linear ticks `values` spaced by `step`: a common `×10ᵏ` factor when the largest
/// magnitude is below 10⁻² or at least 10⁵ (so no label needs more than a few digits), then
/// the decimals the step needs.
fn label_linear(values: &[f64], step: f64) -> Ticks {
    let largest = values.iter().fold(0f64, |m, v| m.max(v.abs()));
    let e = if largest > 0.0 && !(1e-2..1e5).contains(&largest) {
        largest.log10().floor() as i32
    } else {
        0
    };
    let unit = 10f64.powi(e);
    let step = step / unit;
    // The fewest decimals that write the step exactly (ticks are multiples of it).
    let decimals = (0..=12)
        .find(|&d| {
            let s = step * 10f64.powi(d);
            (s - s.round()).abs() <= 1e-6 * s.abs().max(1.0)
        })
        .unwrap_or(12) as usize;
    let major = values
        .iter()
        .map(|&v| Tick {
            at: v,
            label: signed(format!("{:.decimals$}", v / unit)),
        })
        .collect();
    Ticks {
        major,
        minor: Vec::new(),
        factor: (e != 0).then(|| format!("×{}", power_of_ten(e))),
    }
}

/// Ticks of a logarithmic axis over the values `[lo, hi]` (both > 0), placed at `log10` of
/// the value: labelled decades (every n-th when there are more than ten), minor ticks at
/// 2…9 × 10ᵏ; when the range holds fewer than two decades the 2 and 5 multiples are labelled
/// too, and below one such tick the labels fall back to linear ones.
pub(super) fn log(lo: f64, hi: f64) -> Ticks {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    if !(lo > 0.0 && hi.is_finite()) {
        return Ticks::default();
    }
    let (a, b) = (lo.log10(), hi.log10());
    let inside = |t: f64| t >= a - 1e-9 && t <= b + 1e-9;
    let (k0, k1) = ((a - 1e-9).ceil() as i32, (b + 1e-9).floor() as i32);
    let decades = (k1 - k0 + 1).max(0);
    let every = ((decades + 9) / 10).max(1);
    let mut major: Vec<Tick> = (k0..=k1)
        .filter(|k| (k - k0) % every == 0)
        .map(|k| Tick {
            at: k as f64,
            label: power_of_ten(k),
        })
        .collect();
    let mut minor = Vec::new();
    for k in a.floor() as i32..=b.floor() as i32 {
        for m in 2..=9 {
            let t = (m as f64).log10() + k as f64;
            if !inside(t) {
                continue;
            }
            if decades < 2 && (m == 2 || m == 5) {
                major.push(Tick {
                    at: t,
                    label: format!("{m}×{}", power_of_ten(k)),
                });
            } else if every == 1 {
                minor.push(t);
            }
        }
    }
    // Thinned decades: the skipped ones become minor ticks.
    if every > 1 {
        minor.extend(
            (k0..=k1)
                .filter(|k| (k - k0) % every != 0)
                .map(|k| k as f64),
        );
    }
    if major.len() < 2 {
        // Less than a factor of about 2.5 between the ends: linear ticks of the values.
        let lin = linear(lo, hi, 5, false);
        return Ticks {
            major: lin
                .major
                .into_iter()
                .filter(|t| t.at > 0.0)
                .map(|t| Tick {
                    at: t.at.log10(),
                    label: t.label,
                })
                .collect(),
            minor: Vec::new(),
            factor: lin.factor,
        };
    }
    major.sort_by(|p, q| p.at.total_cmp(&q.at));
    Ticks {
        major,
        minor,
        factor: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enclosing_ticks_label_both_ends() {
        for (lo, hi) in [
            (0.0, 0.0123),
            (1e-9, 7.3e-4),
            (-0.37, 2.2),
            (3.1, 3.9),
            (0.0, 1.0),
        ] {
            let (t, a, b) = enclosing(lo, hi, 6);
            let (first, last) = (t.major.first().unwrap(), t.major.last().unwrap());
            assert!(a <= lo && b >= hi, "[{a}, {b}] encloses [{lo}, {hi}]");
            assert_eq!(
                (first.at, last.at),
                (a, b),
                "ticks at both ends of [{a}, {b}]"
            );
            // The widening is less than a step on each side.
            let step = t.major[1].at - t.major[0].at;
            assert!(lo - a < step && b - hi < step, "{lo} {hi} {a} {b} {step}");
            assert!(t.major.len() <= 8, "{:?}", t.major);
        }
        // Non-negative data starting near 0 (a plan, a density) get a 0 tick.
        let (t, a, _) = enclosing(1e-12, 0.0123, 6);
        assert_eq!((a, t.major[0].label.parse::<f64>()), (0.0, Ok(0.0)));
    }

    fn labels(t: &Ticks) -> Vec<&str> {
        t.major.iter().map(|t| t.label.as_str()).collect()
    }

    #[test]
    fn integer_axes_get_integer_ticks() {
        let t = linear(0.0, 30.0, 8, true);
        assert_eq!(labels(&t), ["0", "5", "10", "15", "20", "25", "30"]);
        // A short count axis: steps of 1, never 0.5.
        let t = linear(0.0, 3.0, 8, true);
        assert_eq!(labels(&t), ["0", "1", "2", "3"]);
        for (lo, hi) in [(0.0, 1.0), (-0.5, 63.5), (0.0, 1999.0), (3.0, 3.0)] {
            for t in linear(lo, hi, 7, true).major {
                assert_eq!(t.at.fract(), 0.0, "{lo}..{hi}: tick at {}", t.at);
                assert!(!t.label.contains('.'), "{lo}..{hi}: label {}", t.label);
            }
        }
    }

    #[test]
    fn linear_labels_share_the_decimals_of_the_step() {
        assert_eq!(
            labels(&linear(0.0, 1.0, 6, false)),
            ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
        );
        assert_eq!(
            labels(&linear(0.0, 30.0, 8, false)),
            ["0", "5", "10", "15", "20", "25", "30"]
        );
        assert_eq!(
            labels(&linear(-1.0, 1.0, 5, false)),
            ["−1.0", "−0.5", "0.0", "0.5", "1.0"]
        );
        // Steps of 2.5 × 10ᵏ take one more decimal; no ticks outside the range.
        assert_eq!(
            labels(&linear(0.0, 1.0, 5, false)),
            ["0.00", "0.25", "0.50", "0.75", "1.00"]
        );
        let t = linear(0.1515, 0.1725, 8, false);
        assert_eq!(labels(&t), ["0.155", "0.160", "0.165", "0.170"]);
        assert!(t.factor.is_none());
    }

    #[test]
    fn tiny_values_share_a_power_of_ten() {
        let t = linear(1.2e-18, 6.9e-16, 6, false);
        assert_eq!(t.factor.as_deref(), Some("×10⁻¹⁶"));
        assert_eq!(labels(&t), ["1", "2", "3", "4", "5", "6"]);
        assert_eq!(t.label("value"), "value (×10⁻¹⁶)");
        // Masses per pixel of a 64×64 image: 0.25 … 1.5 × 10⁻³, not 0.00025 … 0.0015.
        let t = linear(0.0, 1.6e-3, 7, false);
        assert_eq!(t.factor.as_deref(), Some("×10⁻³"));
        assert_eq!(
            labels(&t),
            ["0.00", "0.25", "0.50", "0.75", "1.00", "1.25", "1.50"]
        );
    }

    #[test]
    fn log_axes_label_decades() {
        let t = log(1e-4, 0.1);
        assert_eq!(labels(&t), ["10⁻⁴", "10⁻³", "10⁻²", "10⁻¹"]);
        let at: Vec<f64> = t.major.iter().map(|t| t.at).collect();
        assert_eq!(at, [-4.0, -3.0, -2.0, -1.0]);
        // Minor ticks at 2…9 × 10ᵏ, between the decades.
        assert_eq!(t.minor.len(), 3 * 8);
        assert!(t
            .minor
            .iter()
            .any(|&m| (m - 2f64.log10() + 4.0).abs() < 1e-12));
        // Within about one decade: the 2 and 5 multiples are labelled too.
        let t = log(0.004, 0.03);
        assert_eq!(labels(&t), ["5×10⁻³", "10⁻²", "2×10⁻²"]);
        // Many decades: every other one.
        let t = log(1e-12, 1e8);
        assert!(
            t.major.len() <= 11 && t.major.len() >= 5,
            "{:?}",
            labels(&t)
        );
    }
}
