//! Sliced Wasserstein on `.npy` clouds, timed: the logot side of
//! `scripts/bench-sliced-vs-pot.py`.
//!
//! ```text
//! exact_sliced_npy XS.npy XT.npy (--projections P.npy | --count L --seed S) [--p P] [--repeat K] [--grad]
//! ```
//! `XS` (`n×d`) and `XT` (`m×d`) in float64, uniform weights; `P` is `d×L` (POT's layout).
//! Prints one JSON object: the distance, the median and every time in milliseconds (each
//! repeat recomputes everything from the clouds), and the number of rayon threads.

use logot::exact::{sliced_wasserstein_distance, sliced_wasserstein_grad, Projections};
use ndarray::Array2;
use ndarray_npy::read_npy;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|k| args[k + 1].clone())
    };
    let xs: Array2<f64> = read_npy(&args[0]).expect("XS.npy");
    let xt: Array2<f64> = read_npy(&args[1]).expect("XT.npy");
    let p: f64 = flag("--p").map_or(2.0, |s| s.parse().expect("--p"));
    let repeat: usize = flag("--repeat").map_or(1, |s| s.parse().expect("--repeat"));
    let grad = args.iter().any(|a| a == "--grad");
    let given: Option<Array2<f64>> = flag("--projections").map(|f| read_npy(f).expect("P.npy"));
    let projections = match &given {
        Some(p) => Projections::Given(p.view()),
        None => Projections::Random {
            count: flag("--count").map_or(50, |s| s.parse().expect("--count")),
            seed: flag("--seed").map_or(0, |s| s.parse().expect("--seed")),
        },
    };
    let mut times = Vec::new();
    let mut distance = 0.0;
    for _ in 0..repeat {
        let t = Instant::now();
        distance = if grad {
            sliced_wasserstein_grad(xs.view(), xt.view(), None, None, &projections, p)
                .expect("sliced_wasserstein_grad")
                .distance
        } else {
            sliced_wasserstein_distance(xs.view(), xt.view(), None, None, &projections, p)
                .expect("sliced_wasserstein_distance")
                .distance
        };
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "{{\"distance\": {distance:?}, \"median_ms\": {:?}, \"times_ms\": {times:?}, \"threads\": {}}}",
        sorted[sorted.len() / 2],
        rayon::current_num_threads()
    );
}
