//! A progress bar on standard error for long runs: shown once a run has lasted a second,
//! and only when standard error is a terminal (so pipes and logs stay clean). It listens to
//! the library's [`logot::Observer`] (iteration, error, ε, elapsed).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use logot::{Observer, Progress};
use std::io::IsTerminal;
use std::time::Duration;

/// How long a run goes before the bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// An observer that draws `what`'s progress, or `None` when standard error is not a
/// terminal.
pub fn bar(what: &'static str) -> Option<Observer> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{prefix} {wide_bar} {pos}/{len} iterations  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(what);
    Some(Observer::new(move |p: &Progress| {
        if bar.is_hidden() && p.elapsed >= SHOW_AFTER {
            bar.set_draw_target(ProgressDrawTarget::stderr());
        }
        bar.set_length(p.max_iters as u64);
        bar.set_position(p.iteration as u64);
        bar.set_message(match p.error {
            Some(e) => format!("error {e:.2e}  eps {:.2e}", p.eps),
            None => format!("eps {:.2e}", p.eps),
        });
        if p.finished {
            bar.finish_and_clear();
        }
    }))
}
