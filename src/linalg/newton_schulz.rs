//! Newton–Schulz orthogonalisation and the symmetric product `X·Xᵀ`.
//!
//! With `X₀ = X/‖X‖_F` (exactly; Muon's reference code divides by `‖X‖_F + 1e-7`, a
//! relative difference of `1e-7/‖X‖_F`), each step applies the odd quintic
//! `f(x) = a·x + b·x³ + c·x⁵` to the singular values of `X` (keeping its singular vectors):
//!
//! `A = X·Xᵀ`,  `P = a·I + b·A + c·A²`,  `X ← P·X`,
//!
//! with `P = c·(A + s·I)² + t·I` (`s = b/2c`, `t = a − b²/4c`), so a step is two symmetric
//! products ([`LinalgKernels::syrk`]: upper tiles only, mirrored), two diagonal shifts and
//! one GEMM, and never copies a matrix. For a tall `X` (more rows than columns) the same
//! iteration runs on `Xᵀ` without forming it: `A = XᵀX`, `X ← X·P` (`P` is symmetric), so
//! `A` is always the smaller Gram matrix.
//!
//! # The band of the default coefficients
//! With `(a, b, c) = (3.4445, −4.7750, 2.0315)` ([`MUON_COEFFICIENTS`]), `f` has a local
//! maximum `f(0.5545) = 1.2024` and a local minimum `f(1.0501) = 0.6818`, and maps
//! `[0.6818, 1.2024]` into itself; near 0 it grows like `3.4445·x`. Five steps therefore
//! send every singular value `σ` with `σ/‖X‖_F ≥ 0.0015` into `[0.6818, 1.2024]`
//! (and those with `σ/‖X‖_F ≥ 0.01` into `[0.6818, 1.1344]`): a fast, approximate
//! orthogonalisation (the "Muon" iteration), not a converged polar factor. For the polar
//! factor itself use [`NewtonSchulzParams::polar`], which adds cubic steps
//! `f(x) = 1.5·x − 0.5·x³` that converge quadratically to 1 from that band.

use super::{check_matrix, download2, upload2};
use crate::backend::linalg::{GemmShape, LinalgKernels, SyrkShape, Transpose};
use crate::{Error, Real, Result};
use ndarray::{Array2, ArrayView2};

/// `(a, b, c)` of the quintic Newton–Schulz step used by Muon.
pub const MUON_COEFFICIENTS: [f64; 3] = [3.4445, -4.7750, 2.0315];
/// `(a, b, c)` of the classical cubic Newton–Schulz step (converges to the polar factor
/// for singular values in `(0, √3)`).
pub const CUBIC_COEFFICIENTS: [f64; 3] = [1.5, -0.5, 0.0];

/// Parameters of [`newton_schulz`], set by builder methods
/// (`NewtonSchulzParams::default().steps(3)`). `Default`: 5 quintic steps with
/// [`MUON_COEFFICIENTS`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NewtonSchulzParams {
    /// Number of steps with `coefficients`.
    pub steps: usize,
    /// `(a, b, c)` of `f(x) = a·x + b·x³ + c·x⁵`.
    pub coefficients: [f64; 3],
    /// Cubic steps ([`CUBIC_COEFFICIENTS`]) run after `steps`, to converge to the polar
    /// factor; 0 by default.
    pub polish_steps: usize,
}

impl Default for NewtonSchulzParams {
    fn default() -> Self {
        NewtonSchulzParams {
            steps: 5,
            coefficients: MUON_COEFFICIENTS,
            polish_steps: 0,
        }
    }
}

impl NewtonSchulzParams {
    /// These parameters with `steps` steps of the `coefficients`.
    pub fn steps(self, steps: usize) -> Self {
        NewtonSchulzParams { steps, ..self }
    }
    /// These parameters with the step `f(x) = a·x + b·x³ + c·x⁵`, `(a, b, c) = coefficients`.
    pub fn coefficients(self, coefficients: [f64; 3]) -> Self {
        NewtonSchulzParams {
            coefficients,
            ..self
        }
    }
    /// These parameters with `polish_steps` cubic steps after `steps`.
    pub fn polish_steps(self, polish_steps: usize) -> Self {
        NewtonSchulzParams {
            polish_steps,
            ..self
        }
    }
    /// These parameters converging to the orthogonal polar factor `U·Vᵀ` of `X = U·S·Vᵀ`:
    /// 8 cubic steps after the quintic ones (from the default 5 Muon steps, the error
    /// `1 − σ` goes from at most 0.32 to below 1e-20). Singular values below about
    /// `0.0015·‖X‖_F` need more cubic steps (each multiplies them by 1.5).
    pub fn polar(self) -> Self {
        self.polish_steps(8)
    }

    /// The most steps (and cubic steps) one call takes: each step's singular-value map is
    /// applied in a few products, and the iteration settles in tens of steps, so a larger
    /// count is a mistake, refused rather than run for hours.
    pub const MAX_STEPS: usize = 10_000;

    fn validate(&self) -> Result<()> {
        if let Some(c) = self.coefficients.iter().find(|c| !c.is_finite()) {
            return Err(Error::parameter("coefficients", c, "must be finite"));
        }
        for (arg, v) in [("steps", self.steps), ("polish_steps", self.polish_steps)] {
            if v > Self::MAX_STEPS {
                return Err(Error::parameter(
                    arg,
                    v,
                    format!("at most {} steps", Self::MAX_STEPS),
                ));
            }
        }
        Ok(())
    }
}

/// Newton–Schulz orthogonalisation of `x` (`r×c`) on `backend`.
///
/// An all-zero `x` (no direction to orthogonalise) gives an all-zero result.
///
/// ```
/// use logot::linalg::{newton_schulz, NewtonSchulzParams};
/// use logot::ndarray::array;
/// // Singular values 3 and 1 (scaled to 0.95 and 0.32): five Muon steps put both in the
/// // band [0.68, 1.21]; `polar()` adds cubic steps that converge to the polar factor I.
/// let x = array![[3.0f64, 0.0], [0.0, 1.0]];
/// let y = newton_schulz(&logot::CpuBackend, x.view(), &NewtonSchulzParams::default())?;
/// assert!(y.diag().iter().all(|s| (0.68..1.21).contains(s)));
/// let p = newton_schulz(&logot::CpuBackend, x.view(), &NewtonSchulzParams::default().polar())?;
/// assert!((&p - &logot::ndarray::Array2::<f64>::eye(2)).iter().all(|e| e.abs() < 1e-12));
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// use logot::linalg::{newton_schulz, NewtonSchulzParams};
/// let x = logot::ndarray::array![[2.0f64, 0.0], [0.0, 0.5]];
/// let y = newton_schulz(&logot::CpuBackend, x.view(), &NewtonSchulzParams::default().polar())?;
/// assert!((y[[0, 0]] - 1.0).abs() < 1e-6 && (y[[1, 1]] - 1.0).abs() < 1e-6);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn newton_schulz<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    x: ArrayView2<'_, T>,
    params: &NewtonSchulzParams,
) -> Result<Array2<T>> {
    params.validate()?;
    check_matrix("x", &x)?;
    let (r, c) = x.dim();
    let input = upload2(backend, &x)?;
    let xk = newton_schulz_buffers(backend, &input, r, c, params)?;
    let out = download2(backend, &xk, r, c)?;
    if out.iter().any(|v| !v.is_finite()) {
        return Err(Error::Numerical(
            "Newton–Schulz produced a non-finite entry (coefficients diverge?)".into(),
        ));
    }
    Ok(out)
}

/// [`newton_schulz_on`] for a matrix already on the device: `x` holds `rows×cols`
/// row-major; returns a new buffer with the result (all zeros when `x` is zero). Nothing
/// but `‖X‖_F` crosses to the host, so a caller that keeps its matrices on the device (or
/// a benchmark) pays no transfer. Entries are not validated here (the host never sees
/// them): a non-finite input gives a non-finite norm, which is an error.
///
/// ```
/// use logot::{linalg::{newton_schulz_buffers, NewtonSchulzParams}, Backend, CpuBackend};
/// let x = CpuBackend.upload(&[3.0f64, 0.0, 0.0, 0.0, 0.25, 0.0])?; // 2×3
/// let y = newton_schulz_buffers(&CpuBackend, &x, 2, 3, &NewtonSchulzParams::default().polar())?;
/// let y = CpuBackend.download(&y)?;
/// assert!((y[0] - 1.0).abs() < 1e-6 && (y[4] - 1.0).abs() < 1e-6);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn newton_schulz_buffers<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    x: &B::Buffer,
    rows: usize,
    cols: usize,
    params: &NewtonSchulzParams,
) -> Result<B::Buffer> {
    params.validate()?;
    let (r, c) = (rows, cols);
    if r == 0 || c == 0 {
        return Err(Error::Empty {
            arg: "x".into(),
            detail: format!("shape {r}×{c}"),
        });
    }
    if backend.len(x) != r * c {
        return Err(Error::shape(
            "x",
            format!(
                "buffer of length {} does not hold a {r}×{c} matrix",
                backend.len(x)
            ),
        ));
    }
    let norm = backend.frobenius_norm(x)?;
    if !norm.is_finite() {
        return Err(Error::Numerical(format!(
            "‖x‖_F = {norm} is not finite in {}",
            T::NAME
        )));
    }
    let mut xk = backend.filled(r * c, T::zero())?;
    if norm == T::zero() {
        return Ok(xk);
    }
    let inv = T::one() / norm;
    let steps = std::iter::repeat_n(params.coefficients, params.steps)
        .chain(std::iter::repeat_n(CUBIC_COEFFICIENTS, params.polish_steps));
    // The first step reads `x` with the 1/‖x‖_F scale folded into its products, unless
    // `x·xᵀ` itself would leave the range of `T` (‖x‖_F² overflows or underflows): then
    // `x/‖x‖_F` is formed first, so the result does not depend on the scale of `x`.
    let e = T::max_value().f64().log2().floor() / 4.0;
    let prescale = !(norm.f64() >= 2f64.powf(-e) && norm.f64() <= 2f64.powf(e));
    if prescale || params.steps + params.polish_steps == 0 {
        backend.scaled_copy(inv, x, &mut xk)?;
        if params.steps + params.polish_steps == 0 {
            return Ok(xk);
        }
    }
    // Work on X (wide) or implicitly on Xᵀ (tall): the Gram matrix is n×n, n = min(r, c).
    let wide = r <= c;
    let (n, k) = if wide { (r, c) } else { (c, r) };
    let gram = SyrkShape {
        n,
        k,
        ta: if wide { Transpose::No } else { Transpose::Yes },
    };
    let mut a = backend.filled(n * n, T::zero())?;
    let mut pm = backend.filled(n * n, T::zero())?;
    let mut next = backend.filled(r * c, T::zero())?;
    for (step, coefficients) in steps.enumerate() {
        // This step's X is σ·cur: the first one reads `x` itself with σ = 1/‖x‖_F.
        let (cur, sigma) = if step == 0 && !prescale {
            (x, inv)
        } else {
            (&xk, T::one())
        };
        let p = step_polynomial(backend, gram, cur, sigma, coefficients, &mut a, &mut pm)?;
        // X ← P·X (wide; P is exactly symmetric, so P·X = Pᵀ·X, read transposed as the
        // tiled kernels load fastest) or X·P (tall).
        let shape = if wide {
            GemmShape::new(r, c, r).with_transposes(Transpose::Yes, Transpose::No)
        } else {
            GemmShape::new(r, c, c)
        };
        let (lhs, rhs) = if wide { (p, cur) } else { (cur, p) };
        backend.gemm(shape, sigma, lhs, rhs, T::zero(), &mut next)?;
        std::mem::swap(&mut xk, &mut next);
    }
    Ok(xk)
}

/// `P = a·I + b·A + c·A²` of one step, with `A = σ²·op(X)·op(X)ᵀ` (`X` = `cur`), left in
/// `a_buf` or `p_buf` (the one returned). Both products are symmetric ([`LinalgKernels::syrk`]),
/// so `P` is exactly symmetric. With `c ≠ 0`, `P = c·(A + s·I)² + t·I`
/// (`s = b/2c`, `t = a − b²/4c`): two products and two diagonal shifts, nothing else touches
/// the n×n matrices. That form adds rounding errors of size `c·s²·ε`; when `c·s²` is large
/// against `|a| + |b| + |c|` (a nearly linear step) `b·A` is copied and `c·A²` added to it.
fn step_polynomial<'p, T: Real, B: LinalgKernels<T>>(
    backend: &B,
    gram: SyrkShape,
    cur: &B::Buffer,
    sigma: T,
    [ca, cb, cc]: [f64; 3],
    a_buf: &'p mut B::Buffer,
    p_buf: &'p mut B::Buffer,
) -> Result<&'p B::Buffer> {
    let n = gram.n;
    let square = SyrkShape {
        n,
        k: n,
        // A is exactly symmetric, so A·A = AᵀA, read with the transposed layout.
        ta: Transpose::Yes,
    };
    let s2 = sigma * sigma;
    if cc == 0.0 {
        backend.syrk(gram, T::of(cb) * s2, cur, T::zero(), a_buf)?;
        backend.shift_diagonal(n, T::of(ca), a_buf)?;
        return Ok(a_buf);
    }
    backend.syrk(gram, s2, cur, T::zero(), a_buf)?;
    let s = cb / (2.0 * cc);
    if cc.abs() * s * s <= 4.0 * (ca.abs() + cb.abs() + cc.abs()) {
        backend.shift_diagonal(n, T::of(s), a_buf)?;
        backend.syrk(square, T::of(cc), a_buf, T::zero(), p_buf)?;
        backend.shift_diagonal(n, T::of(ca - cc * s * s), p_buf)?;
    } else {
        backend.scaled_copy(T::of(cb), a_buf, p_buf)?;
        backend.syrk(square, T::of(cc), a_buf, T::one(), p_buf)?;
        backend.shift_diagonal(n, T::of(ca), p_buf)?;
    }
    Ok(p_buf)
}

/// The symmetric product `X·Xᵀ` (`r×r`) of `x` (`r×c`) on `backend`, computed from the tiles
/// on and above the diagonal and mirrored: the result is exactly symmetric.
///
/// ```
/// use logot::ndarray::array;
/// let g = logot::linalg::xxt(&logot::CpuBackend, array![[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]].view())?;
/// assert_eq!(g, array![[5.0, 11.0, 2.0], [11.0, 25.0, 4.0], [2.0, 4.0, 1.0]]);
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// let x = logot::ndarray::Array2::from_shape_fn((5, 8), |(i, j)| ((i * j) % 3) as f32 - 1.0);
/// let g = logot::linalg::xxt(&logot::CpuBackend, x.view())?;
/// assert_eq!(g, g.t()); // exactly symmetric
/// assert_eq!(g, x.dot(&x.t()));
/// # Ok::<(), logot::Error>(())
/// ```
pub fn xxt<T: Real, B: LinalgKernels<T>>(backend: &B, x: ArrayView2<'_, T>) -> Result<Array2<T>> {
    check_matrix("x", &x)?;
    let (r, c) = x.dim();
    let xb = upload2(backend, &x)?;
    let mut out = backend.filled(r * r, T::zero())?;
    backend.syrk(
        SyrkShape {
            n: r,
            k: c,
            ta: Transpose::No,
        },
        T::one(),
        &xb,
        T::zero(),
        &mut out,
    )?;
    download2(backend, &out, r, r)
}
