//! The point clouds of the point-cloud benchmarks (`logot bench --problem otC… --data KIND
//! --weights KIND --seed S`): real-looking data sets beside the uniform cube of the canonical
//! problems, drawn from seeded generators so that a problem is reproducible on any machine.
//!
//! Every kind draws `X` and `Y` (`n×d`) as two samples of one distribution (the clouds of
//! seed `s` come from the streams `2s + 1` and `2s + 2`; seed 0 with uniform data and
//! weights is exactly [`crate::problems::ot_c`]). The scale is that of the uniform cube or
//! of `E|x|² = 1`; the benchmarks set ε relative to the [`mean_cost`] of the clouds drawn.
//!
//! ```
//! use logot_cli::clouds::{cloud_problem, mean_cost, CloudData, CloudWeights};
//! let (mu, nu, x, y) = cloud_problem::<f64>(500, 8, CloudData::Sphere, CloudWeights::Random, 3);
//! assert!(x.rows().into_iter().all(|r| (r.dot(&r) - 1.0).abs() < 1e-12)); // unit norms
//! assert!((mu.sum() - 1.0).abs() < 1e-12 && (nu.sum() - 1.0).abs() < 1e-12);
//! let ratio = mu.iter().cloned().fold(0.0, f64::max) / mu.iter().cloned().fold(1.0, f64::min);
//! assert!((ratio - 100.0).abs() < 1e-9); // the 100:1 range of random weights
//! assert!(mean_cost(x.view(), y.view()) > 0.0);
//! ```

use logot::Real;
use ndarray::{Array1, Array2, ArrayView2};

/// The distribution the points are drawn from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CloudData {
    /// Uniform in the cube `[0, 1)^d` (the canonical problems' clouds).
    #[default]
    Uniform,
    /// Standard Gaussian scaled by `1/√d` (`E|x|² = 1`).
    Gaussian,
    /// A mixture of [`CLUSTERS`] tight Gaussian clusters of unequal sizes.
    Clustered,
    /// Student-t with 2 degrees of freedom (heavy tails, infinite variance), scaled by `1/√d`.
    Heavy,
    /// Anisotropic Gaussian: variance `1/(k·H_d)` along axis `k` (a spectrum decaying as
    /// `1/k`, total variance 1).
    Aniso,
    /// Uniform in the cube with [`DUPLICATED`] of the points exact copies of others.
    Dup,
    /// Clustered unit-norm embeddings: a mixture of [`CLUSTERS`] clusters on the unit sphere.
    Sphere,
}

/// The weights of the points.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CloudWeights {
    /// `1/n` each.
    #[default]
    Uniform,
    /// Log-uniform positive weights spanning exactly a 100:1 range, normalised to sum 1.
    Random,
}

impl CloudData {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CloudData::Uniform => "uniform",
            CloudData::Gaussian => "gaussian",
            CloudData::Clustered => "clustered",
            CloudData::Heavy => "heavy",
            CloudData::Aniso => "aniso",
            CloudData::Dup => "dup",
            CloudData::Sphere => "sphere",
        }
    }
}

impl CloudWeights {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CloudWeights::Uniform => "uniform",
            CloudWeights::Random => "random",
        }
    }
}

/// Clusters of the `clustered` and `sphere` mixtures.
pub const CLUSTERS: usize = 10;
/// Spread of a `clustered` point around its centre, relative to the spread of the centres
/// (centres `N(0, I/d)`, points `centre + CLUSTER_SPREAD·N(0, I/d)`).
pub const CLUSTER_SPREAD: f64 = 0.05;
/// Spread of a `sphere` point around its unit centre before it is normalised (points
/// `(u + SPHERE_SPREAD·N(0, I/d))/|…|`: a cosine of about 0.8 between two points of a cluster).
pub const SPHERE_SPREAD: f64 = 0.5;
/// Fraction of the `dup` points that repeat another point of their cloud.
pub const DUPLICATED: f64 = 0.2;
/// Largest over smallest of the `random` weights.
pub const WEIGHT_RANGE: f64 = 100.0;

/// The seeded 64-bit LCG of [`crate::problems::uniform_cloud`]: uniforms from its top 53
/// bits, normals by Box–Muller.
struct Stream {
    state: u64,
    spare: Option<f64>,
}

impl Stream {
    fn new(seed: u64) -> Self {
        Stream {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            spare: None,
        }
    }

    /// A stream for `role` of seed `seed`, apart from the clouds' own streams (splitmix64).
    fn derived(seed: u64, role: u64) -> Self {
        let mut z = seed ^ role.wrapping_mul(0xD1B5_4A32_D192_ED03);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Stream::new(z ^ (z >> 31))
    }

    /// Uniform in `(0, 1)`.
    fn uniform(&mut self) -> f64 {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        let (u, v) = (self.uniform(), self.uniform());
        let r = (-2.0 * u.ln()).sqrt();
        let t = std::f64::consts::TAU * v;
        self.spare = Some(r * t.sin());
        r * t.cos()
    }

    /// An index in `0..n` (n ≥ 1).
    fn below(&mut self, n: usize) -> usize {
        ((self.uniform() * n as f64) as usize).min(n - 1)
    }
}

/// `n×d` points, row `i` written by `row(i, &mut buffer)` in f64.
fn rows<T: Real>(n: usize, d: usize, mut row: impl FnMut(&mut [f64])) -> Array2<T> {
    let mut out = Array2::<T>::zeros((n, d));
    let mut buf = vec![0.0f64; d];
    for mut r in out.rows_mut() {
        row(&mut buf);
        for (o, &v) in r.iter_mut().zip(&buf) {
            *o = T::of(v);
        }
    }
    out
}

/// Cluster `k` of a mixture with probabilities `∝ 1/(k + 1)`, or in the reverse order.
fn cluster(s: &mut Stream, reversed: bool) -> usize {
    let harmonic: f64 = (1..=CLUSTERS).map(|k| 1.0 / k as f64).sum();
    let mut u = s.uniform() * harmonic;
    for k in 0..CLUSTERS {
        let rank = if reversed { CLUSTERS - k } else { k + 1 };
        u -= 1.0 / rank as f64;
        if u <= 0.0 {
            return k;
        }
    }
    CLUSTERS - 1
}

/// One cloud of `n` points of kind `data` from stream `s`. `centres` are the mixtures'
/// centres, drawn once for both clouds; `second` marks the `Y` cloud, whose mixture has its
/// sizes in the reverse order (so that mass moves between clusters).
fn cloud<T: Real>(
    n: usize,
    d: usize,
    data: CloudData,
    s: &mut Stream,
    centres: &[Vec<f64>],
    second: bool,
) -> Array2<T> {
    let scale = 1.0 / (d as f64).sqrt();
    match data {
        CloudData::Uniform => rows(n, d, |r| r.iter_mut().for_each(|v| *v = s.uniform())),
        CloudData::Gaussian => rows(n, d, |r| {
            r.iter_mut().for_each(|v| *v = scale * s.normal());
        }),
        CloudData::Clustered => rows(n, d, |r| {
            let c = &centres[cluster(s, second)];
            for (v, &ck) in r.iter_mut().zip(c) {
                *v = ck + CLUSTER_SPREAD * scale * s.normal();
            }
        }),
        CloudData::Sphere => rows(n, d, |r| {
            let c = &centres[cluster(s, second)];
            for (v, &ck) in r.iter_mut().zip(c) {
                *v = ck + SPHERE_SPREAD * scale * s.normal();
            }
            let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 0.0 {
                r.iter_mut().for_each(|v| *v /= norm);
            } else {
                r.copy_from_slice(c);
            }
        }),
        CloudData::Heavy => rows(n, d, |r| {
            // z/√d over √(w/2) with w ~ χ²₂ = −2 ln U: |x|² ~ F(d, 2).
            let t = scale / (-s.uniform().ln()).sqrt();
            r.iter_mut().for_each(|v| *v = t * s.normal());
        }),
        CloudData::Aniso => {
            // Squared Euclidean costs are invariant under rotations: the axes stay the
            // principal ones.
            let harmonic: f64 = (1..=d).map(|k| 1.0 / k as f64).sum();
            let sd: Vec<f64> = (1..=d)
                .map(|k| (1.0 / (k as f64 * harmonic)).sqrt())
                .collect();
            rows(n, d, |r| {
                for (v, &sk) in r.iter_mut().zip(&sd) {
                    *v = sk * s.normal();
                }
            })
        }
        CloudData::Dup => {
            let copies = (DUPLICATED * n as f64).round() as usize;
            let distinct = (n - copies).max(1);
            let base: Vec<Vec<f64>> = (0..distinct)
                .map(|_| (0..d).map(|_| s.uniform()).collect())
                .collect();
            // Every distinct point once, then copies of random ones, shuffled (Fisher–Yates).
            let mut order: Vec<usize> = (0..distinct).collect();
            order.extend((distinct..n).map(|_| s.below(distinct)));
            for i in (1..order.len()).rev() {
                order.swap(i, s.below(i + 1));
            }
            let mut next = order.into_iter();
            rows(n, d, |r| {
                r.copy_from_slice(&base[next.next().unwrap_or(0)]);
            })
        }
    }
}

/// `n` weights of kind `weights` from stream `s`, summing to 1.
fn weights<T: Real>(n: usize, kind: CloudWeights, s: &mut Stream) -> Array1<T> {
    let w: Vec<f64> = match kind {
        CloudWeights::Uniform => vec![1.0; n],
        CloudWeights::Random => {
            // Log-uniform exponents stretched to span [0, 1] exactly: max/min = WEIGHT_RANGE.
            let u: Vec<f64> = (0..n).map(|_| s.uniform()).collect();
            let (lo, hi) = u
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                    (lo.min(v), hi.max(v))
                });
            let span = if hi > lo { hi - lo } else { 1.0 };
            u.iter()
                .map(|&v| WEIGHT_RANGE.powf((v - lo) / span))
                .collect()
        }
    };
    let total: f64 = w.iter().sum();
    w.iter().map(|&v| T::of(v / total)).collect()
}

/// A point-cloud problem: `(μ, ν, X, Y)` with `n` points each in dimension `d`, points of
/// kind `data`, weights of kind `weights`, all from `seed`.
pub fn cloud_problem<T: Real>(
    n: usize,
    d: usize,
    data: CloudData,
    kind: CloudWeights,
    seed: u64,
) -> (Array1<T>, Array1<T>, Array2<T>, Array2<T>) {
    // The clusters' centres, shared by both clouds: N(0, I/d), or unit directions.
    let mut shared = Stream::derived(seed, 1);
    let centres: Vec<Vec<f64>> = match data {
        CloudData::Clustered | CloudData::Sphere => (0..CLUSTERS)
            .map(|_| {
                let mut c: Vec<f64> = (0..d)
                    .map(|_| shared.normal() / (d as f64).sqrt())
                    .collect();
                let norm = c.iter().map(|v| v * v).sum::<f64>().sqrt();
                if data == CloudData::Sphere && norm > 0.0 {
                    c.iter_mut().for_each(|v| *v /= norm);
                }
                c
            })
            .collect(),
        _ => Vec::new(),
    };
    let x = cloud(n, d, data, &mut Stream::new(2 * seed + 1), &centres, false);
    let y = cloud(n, d, data, &mut Stream::new(2 * seed + 2), &centres, true);
    let mu = weights(n, kind, &mut Stream::derived(seed, 2));
    let nu = weights(n, kind, &mut Stream::derived(seed, 3));
    (mu, nu, x, y)
}

/// The mean squared Euclidean cost over all pairs, `(1/NM) Σ_ij |x_i − y_j|²`, in f64 from
/// the points as given: `mean|x − x̄|² + mean|y − ȳ|² + |x̄ − ȳ|²` (the centred form, exact
/// in O((N + M)·d)).
///
/// ```
/// use ndarray::array;
/// let (x, y) = (array![[0.0f32, 0.0], [2.0, 0.0]], array![[0.0f32, 1.0]]);
/// // |(0,0) − (0,1)|² = 1, |(2,0) − (0,1)|² = 5
/// assert_eq!(logot_cli::clouds::mean_cost(x.view(), y.view()), 3.0);
/// ```
pub fn mean_cost<T: Real>(x: ArrayView2<'_, T>, y: ArrayView2<'_, T>) -> f64 {
    let centre = |p: ArrayView2<'_, T>| -> (Vec<f64>, f64) {
        let (n, d) = p.dim();
        let mut mean = vec![0.0; d];
        for r in p.rows() {
            for (m, v) in mean.iter_mut().zip(r) {
                *m += v.f64();
            }
        }
        mean.iter_mut().for_each(|m| *m /= n.max(1) as f64);
        let spread: f64 = p
            .rows()
            .into_iter()
            .map(|r| {
                r.iter()
                    .zip(&mean)
                    .map(|(v, m)| (v.f64() - m).powi(2))
                    .sum::<f64>()
            })
            .sum::<f64>()
            / n.max(1) as f64;
        (mean, spread)
    };
    let ((mx, sx), (my, sy)) = (centre(x), centre(y));
    let gap: f64 = mx.iter().zip(&my).map(|(a, b)| (a - b).powi(2)).sum();
    sx + sy + gap
}
