//! Point clouds for the CUDA point-cloud tests at any dimension: seeded clouds away from the
//! origin, ε scaled with the mean cost, error measures, and one GPU half-step in a chosen
//! precision of the cross term (shared by cuda_pointcloud_anyd and cuda_pointcloud_tc).

use super::Lcg;
use logot::{PointMetric, Real};
use ndarray::Array2;

pub fn cast<T: Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::of(x)).collect()
}

pub fn f64s<T: Real>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.f64()).collect()
}

/// Largest |a − b| over the largest |b| (at least 1e-300); −∞ entries must coincide.
pub fn worst(a: &[f64], b: &[f64]) -> f64 {
    worst_above(a, b, 1e-300)
}

/// [`worst`] relative to the largest |b| or `floor`, whichever is larger (potentials, defined
/// up to a constant and often near 0, against the cost's scale).
pub fn worst_above(a: &[f64], b: &[f64], floor: f64) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut scale = floor.max(1e-300);
    for &y in b {
        if y.is_finite() {
            scale = scale.max(y.abs());
        }
    }
    let mut w = 0.0f64;
    for (k, (&x, &y)) in a.iter().zip(b).enumerate() {
        if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
            assert_eq!(x, y, "entry {k}: {x} vs {y} (−∞ must match)");
            continue;
        }
        assert!(x.is_finite() && y.is_finite(), "entry {k}: {x} vs {y}");
        w = w.max((x - y).abs() / scale);
    }
    w
}

/// The f32 tolerance of half-steps with exact products at dimension `d`: the rounding of
/// the d-term sums that form the costs.
pub fn tol32(d: usize) -> f64 {
    (2e-6 * (d as f64).sqrt()).max(2e-5)
}

/// Seeded clouds x ∈ [2, 3)^d and y ∈ [2.1, 3.1)^d, `n×d` and `m×d`.
pub fn clouds(n: usize, m: usize, d: usize, seed: u64) -> (Array2<f64>, Array2<f64>) {
    let mut r = Lcg(seed);
    let x = Array2::from_shape_vec((n, d), r.vec(n * d, 2.0, 3.0)).unwrap();
    let y = Array2::from_shape_vec((m, d), r.vec(m * d, 2.1, 3.1)).unwrap();
    (x, y)
}

/// The mean cost of uniform unit-cube clouds, E|x − y|² = d/6 (its root for |x − y|), which
/// sets ε so that every dimension gives a comparable, non-degenerate problem.
pub fn mean_cost(d: usize, metric: PointMetric) -> f64 {
    let c = d as f64 / 6.0;
    match metric {
        PointMetric::SqEuclidean => c,
        PointMetric::Euclidean => c.sqrt(),
    }
}

/// One half-step to check on a side: its input potentials (`other`), log-weights (`lm`),
/// output length (`batch` times the side's points) and the f64 CPU result.
pub struct HalfStep {
    pub side: logot::Side,
    pub other: Vec<f64>,
    pub lm: Vec<f64>,
    pub len: usize,
    pub want: Vec<f64>,
}

/// A half-step case of the any-d GPU tests: seeded clouds `n×d`, `m×d` (seed `seeds.0`),
/// ε = `ratio`·the mean cost, random potentials and log-weights for a batch of `batch`
/// (seed `seeds.1`) with a −∞ potential on each side and a zero-mass source point, and the
/// f64 CPU half-steps on both sides (the column side first).
pub struct StepCase {
    pub x: Array2<f64>,
    pub y: Array2<f64>,
    pub eps: f64,
    pub steps: [HalfStep; 2],
}

/// Inputs of half-steps on both sides for a batch of `batch`: potentials `f` (`batch·n`) and
/// `g` (`batch·m`) in [−0.2, 0.2) with `f[1] = g[2] = −∞`, and log-weights `lmu`, `lnu` in
/// [−9, −6) with a zero-mass source point (`lmu[3] = −∞`).
pub fn step_inputs(
    r: &mut Lcg,
    (n, m, batch): (usize, usize, usize),
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut f = r.vec(batch * n, -0.2, 0.2);
    let mut g = r.vec(batch * m, -0.2, 0.2);
    let mut lmu = r.vec(batch * n, -9.0, -6.0);
    let lnu = r.vec(batch * m, -9.0, -6.0);
    f[1] = f64::NEG_INFINITY;
    g[2] = f64::NEG_INFINITY;
    lmu[3] = f64::NEG_INFINITY;
    (f, g, lmu, lnu)
}

pub fn step_case(
    (n, m, d, batch): (usize, usize, usize, usize),
    metric: PointMetric,
    ratio: f64,
    seeds: (u64, u64),
) -> StepCase {
    use logot::{Backend, CpuBackend, PointCloudCost, Side};
    let eps = ratio * mean_cost(d, metric);
    let (x, y) = clouds(n, m, d, seeds.0);
    let (f, g, lmu, lnu) = step_inputs(&mut Lcg(seeds.1), (n, m, batch));
    let cpu = CpuBackend;
    let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
    let pc = cpu.prepare_cost(&cost.into()).unwrap();
    let step = |side: Side, other: Vec<f64>, lm: Vec<f64>, len: usize| {
        let mut want = vec![0.0; batch * len];
        cpu.sinkstep(&pc, side, eps, &other, &lm, &mut want)
            .unwrap();
        HalfStep {
            side,
            other,
            lm,
            len: batch * len,
            want,
        }
    };
    let steps = [step(Side::Col, f, lnu, m), step(Side::Row, g, lmu, n)];
    StepCase { x, y, eps, steps }
}

/// One half-step on `side` on the GPU in precision `T` with the cross term in `precision`,
/// as f64.
#[cfg(feature = "cuda")]
#[allow(clippy::too_many_arguments)]
pub fn gpu_step<T: logot::backend::cuda::CudaReal>(
    gpu: &logot::backend::cuda::CudaBackend,
    x: &Array2<f64>,
    y: &Array2<f64>,
    metric: PointMetric,
    precision: logot::CrossPrecision,
    side: logot::Side,
    eps: f64,
    other: &[f64],
    lm: &[f64],
    len: usize,
) -> Vec<f64> {
    use logot::{Backend, PointCloudCost};
    let (xt, yt) = (x.mapv(T::of), y.mapv(T::of));
    let cost = PointCloudCost::with_metric(xt.view(), yt.view(), metric)
        .unwrap()
        .with_precision(precision);
    let gc = gpu.prepare_cost(&cost.into()).unwrap();
    let (o, l) = (
        gpu.upload(&cast::<T>(other)).unwrap(),
        gpu.upload(&cast::<T>(lm)).unwrap(),
    );
    let mut out = gpu.filled(len, T::of(0.0)).unwrap();
    gpu.sinkstep(&gc, side, T::of(eps), &o, &l, &mut out)
        .unwrap();
    f64s(&gpu.download(&out).unwrap())
}
