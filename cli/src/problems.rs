//! The canonical benchmark problems of the design (`logot bench --problem NAME` and the
//! criterion benches build them from here, so both measure the same thing; see
//! `benches/README.md`).
//!
//! ```
//! use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
//! use logot_cli::problems;
//! // otA as `logot bench --problem otA` runs it: ε = 1e-3, 200 iterations, no early stop.
//! let (mu, nu, cost) = problems::ot_a::<f32>();
//! let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e-3).fixed_iterations(200));
//! let r = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
//! assert_eq!(r.convergence.iterations, 200);
//! assert!(r.distance[0] > 0.0 && r.distance[0] < 1.0); // the cost is normalised to [0, 1]
//! # Ok::<(), logot::Error>(())
//! ```

use logot::Real;
use ndarray::{Array1, Array2, Array3};

/// `n` points of `linspace(lo, hi, n)`.
///
/// ```
/// assert_eq!(logot_cli::problems::linspace(0.0, 1.0, 5), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
/// ```
pub fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![lo];
    }
    (0..n)
        .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
        .collect()
}

/// Squared-distance cost `C_ij = (x_i − x_j)²` on `x`, divided by its maximum when
/// `normalise` (POT's `M /= M.max()`).
pub fn squared_distance_cost<T: Real>(x: &[f64], normalise: bool) -> Array2<T> {
    let c = Array2::from_shape_fn((x.len(), x.len()), |(i, j)| (x[i] - x[j]).powi(2));
    let max = if normalise {
        c.iter().cloned().fold(0.0, f64::max).max(f64::MIN_POSITIVE)
    } else {
        1.0
    };
    c.mapv(|v| T::of(v / max))
}

/// Normalised Gaussian density `exp(−(x − mean)²/(2 sd²))` sampled on `x`, plus `floor`,
/// summing to 1.
pub fn gaussian_histogram<T: Real>(x: &[f64], mean: f64, sd: f64, floor: f64) -> Array1<T> {
    let h: Vec<f64> = x
        .iter()
        .map(|&v| (-0.5 * ((v - mean) / sd).powi(2)).exp() + floor)
        .collect();
    let s: f64 = h.iter().sum();
    h.iter().map(|&v| T::of(v / s)).collect()
}

/// otA: n = 100 on linspace(0, 100), μ = N(20, 10), ν = N(60, 30), `C = (xᵢ − xⱼ)²/max`;
/// solved at ε = 1e-3 for 200 iterations.
///
/// ```
/// let (mu, nu, cost) = logot_cli::problems::ot_a::<f64>();
/// assert!((mu.sum() - 1.0).abs() < 1e-12 && (nu.sum() - 1.0).abs() < 1e-12);
/// assert_eq!(cost.dim(), (100, 100));
/// assert_eq!(cost[[0, 99]], 1.0); // normalised by its maximum
/// ```
pub fn ot_a<T: Real>() -> (Array1<T>, Array1<T>, Array2<T>) {
    let x = linspace(0.0, 100.0, 100);
    (
        gaussian_histogram(&x, 20.0, 10.0, 0.0),
        gaussian_histogram(&x, 60.0, 30.0, 0.0),
        squared_distance_cost(&x, true),
    )
}

/// A batch of `b` Gaussian-bump histograms on linspace(0, 1, n): bump `k` has mean and
/// width from a fixed low-discrepancy sequence shifted by `seed`, plus 1e-6, normalised.
pub fn bump_histograms<T: Real>(b: usize, n: usize, seed: u64) -> Array2<T> {
    let x = linspace(0.0, 1.0, n);
    let golden = 0.618_033_988_749_895;
    let mut out = Array2::zeros((b, n));
    for k in 0..b {
        let t = (seed as f64 * 0.414_213_562 + k as f64 * golden).fract();
        let u = (seed as f64 * 0.732_050_807 + k as f64 * golden * golden).fract();
        let row = gaussian_histogram::<T>(&x, t, 0.05 + 0.2 * u, 1e-6);
        out.row_mut(k).assign(&row);
    }
    out
}

/// otB-shaped problem: `b` pairs of bump histograms on linspace(0, 1, n) with
/// `C = (xᵢ − xⱼ)²` (otB: b = 64, n = 2048; otBcpu: b = 8, n = 1024; ε = 1e-2, 100 iterations).
///
/// ```
/// let (mu, nu, cost) = logot_cli::problems::ot_b::<f32>(8, 1024); // otBcpu
/// assert_eq!((mu.dim(), nu.dim(), cost.dim()), ((8, 1024), (8, 1024), (1024, 1024)));
/// assert!(mu.rows().into_iter().all(|r| (r.sum() - 1.0).abs() < 1e-5));
/// ```
pub fn ot_b<T: Real>(b: usize, n: usize) -> (Array2<T>, Array2<T>, Array2<T>) {
    let x = linspace(0.0, 1.0, n);
    (
        bump_histograms(b, n, 1),
        bump_histograms(b, n, 2),
        squared_distance_cost(&x, false),
    )
}

/// otBbatch: `b` problems of `n` points with one cost each, `C_k = (1 + k/b)·(x_i − x_j)²`
/// on `x = linspace(0, 1, n)`, and otB's Gaussian-bump marginals (`b×n` each; the costs
/// `b×n×n`).
///
/// ```
/// let (mu, nu, cost) = logot_cli::problems::ot_b_batch::<f32>(4, 16);
/// assert_eq!((mu.dim(), nu.dim(), cost.dim()), ((4, 16), (4, 16), (4, 16, 16)));
/// assert_eq!(cost[[2, 0, 15]], 1.5); // (1 + 2/4)·(0 − 1)²
/// ```
pub fn ot_b_batch<T: Real>(b: usize, n: usize) -> (Array2<T>, Array2<T>, Array3<T>) {
    use ndarray::parallel::prelude::*;
    let shared = squared_distance_cost::<f64>(&linspace(0.0, 1.0, n), false);
    let mut cost = Array3::<T>::zeros((b, n, n));
    cost.outer_iter_mut()
        .into_par_iter()
        .enumerate()
        .for_each(|(k, mut c)| {
            let scale = 1.0 + k as f64 / b as f64;
            c.zip_mut_with(&shared, |v, &s| *v = T::of(scale * s));
        });
    (bump_histograms(b, n, 1), bump_histograms(b, n, 2), cost)
}

/// bary64: the three test images of the barycenter benchmark, on `n×n` pixels with
/// coordinates `linspace(−5, 5, n)`: a square (rows and columns `n/5 .. n − ⌈n/5⌉`), a ring
/// `4 < r² < 9`, and two disks of radius 2 at `(2, 2)` and `(−2, −2)`. Each is normalised,
/// `1e-10` is added everywhere, and each is normalised again (as POT's examples do), so
/// every pixel is positive. Returns `3×n×n`.
///
/// ```
/// let images = logot_cli::problems::bary64_images(64);
/// assert_eq!(images.dim(), (3, 64, 64));
/// assert!(images.iter().all(|&p| p > 0.0));
/// // The square's centre is inside it, the ring's centre is not.
/// assert!(images[[0, 32, 32]] > 1e-4 && images[[1, 32, 32]] < 1e-9);
/// ```
pub fn bary64_images(n: usize) -> Array3<f64> {
    let step = if n > 1 { 10.0 / (n - 1) as f64 } else { 0.0 };
    let xs: Vec<f64> = (0..n)
        .map(|i| {
            if i + 1 == n && n > 1 {
                5.0
            } else {
                i as f64 * step + -5.0
            }
        })
        .collect();
    let mut imgs = Array3::<f64>::zeros((3, n, n));
    // NumPy's a[n//5 : -n//5] (which parses as (−n)//5: the end is n − ⌈n/5⌉).
    let (lo, hi) = (n / 5, n - n.div_ceil(5));
    for r in 0..n {
        for c in 0..n {
            let (x, y) = (xs[c], xs[r]);
            let r2 = x * x + y * y;
            let disk = |cx: f64, cy: f64| (x - cx) * (x - cx) + (y - cy) * (y - cy) < 4.0;
            imgs[[0, r, c]] = if (lo..hi).contains(&r) && (lo..hi).contains(&c) {
                1.0
            } else {
                0.0
            };
            imgs[[1, r, c]] = if r2 > 4.0 && r2 < 9.0 { 1.0 } else { 0.0 };
            imgs[[2, r, c]] = if disk(2.0, 2.0) || disk(-2.0, -2.0) {
                1.0
            } else {
                0.0
            };
        }
    }
    for mut img in imgs.outer_iter_mut() {
        let s = img.sum();
        if s > 0.0 {
            img /= s;
        }
        img += 1e-10;
        let s = img.sum();
        img /= s;
    }
    imgs
}

/// bary64's dense cost on `n×n` pixels: squared distances between the pixel centres on
/// `linspace(−5, 5)²`, divided by their maximum (POT's `M /= M.max()`), i.e. half the
/// unit-grid cost of [`crate::GridCost`]. `n²×n²`: 128 MiB in f64 for n = 64.
pub fn bary64_dense_cost<T: Real>(n: usize) -> Array2<T> {
    let grid = logot::GridCost::image(n.max(1), n.max(1)).map(|g| g.to_dense::<f64>());
    match grid {
        Ok(c) => c.mapv(|v| T::of(0.5 * v)),
        Err(_) => Array2::zeros((0, 0)),
    }
}

/// bary64's weights `(0.3, 0.3, 0.4)`, grid ε = 0.004, dense ε = 1e-3 and 100 iterations.
pub const BARY64_WEIGHTS: [f64; 3] = [0.3, 0.3, 0.4];
/// bary64's ε on the unit grid.
pub const BARY64_GRID_EPS: f64 = 0.004;
/// bary64's ε for the normalised dense cost.
pub const BARY64_DENSE_EPS: f64 = 1e-3;
/// bary64's iteration count.
pub const BARY64_ITERS: usize = 100;
/// mhc-shaped problem (mhc4: n = 4, mhc16: n = 16, both with b = 65536): logits
/// `X ~ U[0, 4)` (`b×n×n`) for the bistochastic forward (20 iterations) and an upstream
/// gradient `G ~ N(0, 1)` for the backward, from a seeded 64-bit LCG (Box–Muller normals).
///
/// ```
/// let (x, g) = logot_cli::problems::mhc::<f32>(1000, 4, 1);
/// assert_eq!(x.dim(), (1000, 4, 4));
/// assert!(x.iter().all(|&v| (0.0..4.0).contains(&v)));
/// assert!((g.iter().map(|v| v * v).sum::<f32>() / 16000.0 - 1.0).abs() < 0.1); // unit variance
/// ```
pub fn mhc<T: Real>(b: usize, n: usize, seed: u64) -> (ndarray::Array3<T>, ndarray::Array3<T>) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let x = ndarray::Array3::from_shape_simple_fn((b, n, n), || T::of(4.0 * uniform()));
    let g = ndarray::Array3::from_shape_simple_fn((b, n, n), || {
        let (u, v) = (uniform(), uniform());
        T::of((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos())
    });
    (x, g)
}

/// `len` standard normal values (Box–Muller on a seeded 64-bit LCG): the `N(0, 1)` inputs
/// of the linear-algebra problems (svd3: `A` is `4096×1024×3`; xxt, ns, gemm: `X`, `A`,
/// `B`, `dC` are `n×n`), reproducible across runs and platforms.
///
/// ```
/// let a = logot_cli::problems::standard_normal::<f64>(10_000, 7);
/// let mean = a.iter().sum::<f64>() / 1e4;
/// let var = a.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 1e4;
/// assert!(mean.abs() < 0.05 && (var - 1.0).abs() < 0.05);
/// assert_eq!(a, logot_cli::problems::standard_normal::<f64>(10_000, 7));
/// ```
pub fn standard_normal<T: Real>(len: usize, seed: u64) -> Vec<T> {
    let mut state = seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let (u, v) = (uniform(), uniform());
        let r = (-2.0 * u.ln()).sqrt();
        let t = std::f64::consts::TAU * v;
        out.push(T::of(r * t.cos()));
        if out.len() < len {
            out.push(T::of(r * t.sin()));
        }
    }
    out
}

/// `n` points uniform in `[0, 1)^d` (`n×d`) from a seeded 64-bit LCG.
///
/// ```
/// let x = logot_cli::problems::uniform_cloud::<f32>(1000, 3, 1);
/// assert_eq!(x.dim(), (1000, 3));
/// assert!(x.iter().all(|&v| (0.0..1.0).contains(&v)));
/// assert!((x.mean().unwrap() - 0.5).abs() < 0.05);
/// ```
pub fn uniform_cloud<T: Real>(n: usize, d: usize, seed: u64) -> Array2<T> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Array2::from_shape_simple_fn((n, d), move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        T::of(((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64)
    })
}

/// otC: point clouds `X`, `Y` of `n` points each, uniform in `[0, 1]^d` (seeds 1 and 2),
/// with uniform weights `1/n`; squared Euclidean cost computed on the fly (never stored),
/// ε = [`OTC_EPS`]; the benchmark times one half-step (n = 65536, d = 3).
/// Returns `(μ, ν, X, Y)`.
///
/// ```
/// use logot_cli::problems::{ot_c, OTC_D, OTC_N};
/// let (mu, nu, x, y) = ot_c::<f32>(OTC_N, OTC_D);
/// assert_eq!((x.dim(), y.dim()), ((65_536, 3), (65_536, 3)));
/// assert!((mu.sum() - 1.0).abs() < 1e-3 && mu == nu);
/// ```
pub fn ot_c<T: Real>(n: usize, d: usize) -> (Array1<T>, Array1<T>, Array2<T>, Array2<T>) {
    let w = Array1::from_elem(n, T::of(1.0 / n as f64));
    (w.clone(), w, uniform_cloud(n, d, 1), uniform_cloud(n, d, 2))
}

/// otC's regularisation.
pub const OTC_EPS: f64 = 0.05;
/// otC's size (points per cloud).
pub const OTC_N: usize = 65_536;
/// otC's dimension.
pub const OTC_D: usize = 3;

/// `gw`'s regularisation (the structures are normalised to a largest entry of 1).
pub const GW_EPS: f64 = 5e-3;
/// `gw`'s outer (mirror-descent) iterations, run in full.
pub const GW_ITERS: usize = 100;
/// `gw`'s sizes: `n` points in the plane, `m` in space.
pub const GW_N: usize = 4000;
/// See [`GW_N`].
pub const GW_M: usize = 5000;

/// Squared Euclidean distances within the cloud `x`, divided by their maximum.
fn normalised_sqdist<T: Real>(x: &Array2<f64>) -> Array2<T> {
    let n = x.nrows();
    let mut c = Array2::<f64>::zeros((n, n));
    ndarray::Zip::indexed(&mut c).par_for_each(|(i, k), v| {
        *v = x
            .row(i)
            .iter()
            .zip(x.row(k))
            .map(|(a, b)| (a - b) * (a - b))
            .sum();
    });
    let max = c.iter().cloned().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    c.mapv(|v| T::of(v / max))
}

/// `gw`: dense entropic Gromov–Wasserstein between `n` points uniform in `[0, 1]²` (seed 3)
/// and `m` points uniform in `[0, 1]³` (seed 4), uniform weights; the structures are the
/// squared Euclidean distances within each cloud divided by their largest entry (POT's
/// examples' `C /= C.max()`); solved at ε = [`GW_EPS`] for [`GW_ITERS`] outer iterations
/// from the product plan. Returns `(C1, C2, p, q)`.
///
/// ```
/// let (c1, c2, p, q) = logot_cli::problems::gw::<f64>(30, 40);
/// assert_eq!((c1.dim(), c2.dim(), p.len(), q.len()), ((30, 30), (40, 40), 30, 40));
/// assert_eq!(c1.iter().cloned().fold(0.0, f64::max), 1.0);
/// assert!((0..30).all(|i| c1[[i, i]] == 0.0 && c1[[0, i]] == c1[[i, 0]]));
/// ```
#[allow(clippy::type_complexity)]
pub fn gw<T: Real>(n: usize, m: usize) -> (Array2<T>, Array2<T>, Array1<T>, Array1<T>) {
    let (x, y) = (uniform_cloud::<f64>(n, 2, 3), uniform_cloud::<f64>(m, 3, 4));
    (
        normalised_sqdist(&x),
        normalised_sqdist(&y),
        Array1::from_elem(n, T::of(1.0 / n as f64)),
        Array1::from_elem(m, T::of(1.0 / m as f64)),
    )
}

/// `gwpc`'s regularisation.
pub const GWPC_EPS: f64 = 5e-3;
/// `gwpc`'s outer iterations, run in full.
pub const GWPC_ITERS: usize = 20;
/// The most Sinkhorn iterations of each of `gwpc`'s inner solves (warm-started).
pub const GWPC_INNER: usize = 100;
/// `gwpc`'s size (points per cloud).
pub const GWPC_N: usize = 100_000;
/// `gwpc`'s dimension.
pub const GWPC_D: usize = 3;

/// `gwpc`: point-cloud Gromov–Wasserstein between two clouds of `n` points uniform in
/// `[0, 1/√d]^d` (seeds 5 and 6; squared distances at most 1, as `gw`'s), uniform weights;
/// solved in linear memory at ε = [`GWPC_EPS`] for [`GWPC_ITERS`] outer iterations of at
/// most [`GWPC_INNER`] Sinkhorn iterations each. Returns `(X, Y, p, q)`.
///
/// ```
/// let (x, y, p, q) = logot_cli::problems::gw_clouds::<f32>(10, 3);
/// assert_eq!((x.dim(), y.dim(), p.len(), q.len()), ((10, 3), (10, 3), 10, 10));
/// assert!(x.iter().all(|&v| v > 0.0 && v < 1.0 / 3f32.sqrt()));
/// ```
#[allow(clippy::type_complexity)]
pub fn gw_clouds<T: Real>(n: usize, d: usize) -> (Array2<T>, Array2<T>, Array1<T>, Array1<T>) {
    let scale = 1.0 / (d as f64).sqrt();
    let cloud = |seed| uniform_cloud::<f64>(n, d, seed).mapv(|v| T::of(v * scale));
    let w = Array1::from_elem(n, T::of(1.0 / n as f64));
    (cloud(5), cloud(6), w.clone(), w)
}
