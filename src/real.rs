//! The floating-point types logot computes in (`f32`, `f64`) and their vectorised kernels.
//!
//! The CPU hot loop is a log-sum-exp over a row: `LSE_k x_k = m + ln Σ_k exp(x_k − m)`.
//! Its cost is one `exp` per element, so [`Real`] carries a branch-free exp polynomial that
//! LLVM vectorises over [`LANES`] lanes (AVX2/FMA when the CPU has them, chosen at run time).

use num_traits::{Float, FromPrimitive, ToPrimitive};
use std::fmt::{Debug, Display, LowerExp};

/// Number of lanes processed together by the CPU kernels.
pub const LANES: usize = 8;

mod sealed {
    /// Also faer's scalar, so that the CPU kernels can hand any [`Real`](super::Real) to
    /// its matrix products.
    pub trait Sealed: faer::traits::RealField {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Fused or unfused multiply-add, chosen per instruction set (`mul_add` is a slow library
/// call on CPUs without FMA, so the portable path multiplies then adds).
pub trait MulAdd {
    fn mul_add<T: Float>(a: T, b: T, c: T) -> T;
}
/// Hardware FMA (`a·b + c` in one rounding).
pub struct HwFma;
/// Separate multiply and add.
pub struct NoFma;
impl MulAdd for HwFma {
    #[inline(always)]
    fn mul_add<T: Float>(a: T, b: T, c: T) -> T {
        a.mul_add(b, c)
    }
}
impl MulAdd for NoFma {
    #[inline(always)]
    fn mul_add<T: Float>(a: T, b: T, c: T) -> T {
        a * b + c
    }
}

/// A floating-point type logot computes in: `f32` or `f64`.
pub trait Real:
    Float
    + FromPrimitive
    + ToPrimitive
    + Send
    + Sync
    + Debug
    + Display
    + LowerExp
    + Default
    + 'static
    + sealed::Sealed
{
    /// Type name as in NumPy (`"float32"`, `"float64"`).
    const NAME: &'static str;
    /// Relative tolerance of the "equal total mass" input check in this precision. It
    /// catches unnormalised inputs; a smaller mismatch is a floor under the marginal error,
    /// so the solver reports it as non-convergence rather than hiding it.
    const MASS_TOL: f64;
    /// Default marginal-error tolerance of the solver in this precision.
    const DEFAULT_TOL: f64;

    /// `exp(x)` lane by lane for `x ≤ 0` (larger arguments are clamped at 0); arguments
    /// below the underflow threshold, `-inf` included, give the smallest normal power of
    /// two instead of 0, which is below rounding of any sum that also holds `exp(0) = 1`.
    fn exp_nonpos<M: MulAdd>(x: Self) -> Self;

    /// Convert from `f64` (exact for f64, rounded for f32).
    #[inline(always)]
    fn of(x: f64) -> Self {
        <Self as FromPrimitive>::from_f64(x).unwrap_or_else(Self::nan)
    }
    /// Convert to `f64`.
    #[inline(always)]
    fn f64(self) -> f64 {
        self.to_f64().unwrap_or(f64::NAN)
    }
}

impl Real for f32 {
    const NAME: &'static str = "float32";
    const MASS_TOL: f64 = 1e-4;
    const DEFAULT_TOL: f64 = 1e-5;

    #[inline(always)]
    #[allow(clippy::excessive_precision)] // Cephes' coefficients, as published
    fn exp_nonpos<M: MulAdd>(x: f32) -> f32 {
        // exp(x) = 2^n · exp(r), n = round(x·log2 e), r = x − n·ln 2 (Cody–Waite split),
        // exp(r) by Cephes' degree-7 minimax polynomial (about 1 ulp).
        const MAGIC: f32 = 12_582_912.0; // 1.5·2^23: adding it rounds to an integer
        let x = x.clamp(-87.0, 0.0); // NaN never reaches here: inputs are validated
        let t = M::mul_add(x, std::f32::consts::LOG2_E, MAGIC);
        let n = t - MAGIC;
        let r = M::mul_add(n, -0.693_359_4, x);
        let r = M::mul_add(n, 2.121_944_4e-4, r);
        let mut p = 1.987_569_1e-4f32;
        p = M::mul_add(p, r, 1.398_199_9e-3);
        p = M::mul_add(p, r, 8.333_452e-3);
        p = M::mul_add(p, r, 4.166_579_6e-2);
        p = M::mul_add(p, r, 1.666_666_5e-1);
        p = M::mul_add(p, r, 5.000_000_1e-1);
        let p = M::mul_add(p, r * r, r + 1.0);
        // The integer n sits in the low mantissa bits of t.
        let bits = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
        p * f32::from_bits(((bits + 127) << 23) as u32)
    }
}

impl Real for f64 {
    const NAME: &'static str = "float64";
    const MASS_TOL: f64 = 1e-6;
    const DEFAULT_TOL: f64 = 1e-9;

    #[inline(always)]
    fn exp_nonpos<M: MulAdd>(x: f64) -> f64 {
        let (p, n) = exp_reduced::<M>(x.clamp(-708.0, 0.0));
        p * f64::from_bits(((n + 1023) << 52) as u64)
    }
}

/// `exp(x) = 2^n·exp(r)` for `x` in [−708, 710]: `n = round(x·log2 e)` (an integer in
/// [−1021, 1024]) and `exp(r)`, `r = x − n·ln 2` (Cody–Waite split, `|r| ≤ ln2/2`), by its
/// Taylor series to `r^12` (relative error below 2e-16). Branch-free, so it vectorises.
#[inline(always)]
#[allow(clippy::excessive_precision)] // fdlibm's split of ln 2, as published
fn exp_reduced<M: MulAdd>(x: f64) -> (f64, i64) {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5·2^52: adding it rounds to an integer
    const LN2_HI: f64 = 6.931_471_803_691_238_2e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const INV_FACT: [f64; 13] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
    ];
    let t = M::mul_add(x, std::f64::consts::LOG2_E, MAGIC);
    let n = t - MAGIC;
    let r = M::mul_add(n, -LN2_HI, x);
    let r = M::mul_add(n, -LN2_LO, r);
    let mut p = INV_FACT[12];
    for k in (0..12).rev() {
        p = M::mul_add(p, r, INV_FACT[k]);
    }
    // The integer n sits in the low mantissa bits of t.
    (p, (t.to_bits() as i64).wrapping_sub(MAGIC.to_bits() as i64))
}

/// `exp(x)` in `f64` over the whole range, branch-free (it vectorises, unlike the library
/// call): relative error at most 2·2^−52 for `x` in [−708, 709.78]; `∞` above
/// (overflow), exactly 0 below −708 (results under 2^−1021, `−∞` included: the denormal
/// range is flushed); NaN gives NaN.
#[inline(always)]
pub(crate) fn exp_f64<M: MulAdd>(x: f64) -> f64 {
    let (p, n) = exp_reduced::<M>(x.clamp(-708.0, 710.0));
    // 2^n as 2·2^(n−1): n − 1 ≤ 1023 keeps the power finite, so only the product overflows.
    let v = (p * 2.0) * f64::from_bits(((n + 1022) << 52) as u64);
    if x < -708.0 {
        0.0
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check<T: Real>(rel: f64) {
        let mut worst = 0.0f64;
        for k in 0..=200_000 {
            let x = -(k as f64) * 80.0 / 200_000.0;
            let got = T::exp_nonpos::<NoFma>(T::of(x)).f64();
            let got_fma = T::exp_nonpos::<HwFma>(T::of(x)).f64();
            let want = T::of(x).f64().exp();
            worst = worst
                .max(((got - want) / want).abs())
                .max(((got_fma - want) / want).abs());
        }
        assert!(worst < rel, "{}: worst relative error {worst:e}", T::NAME);
        assert!(T::exp_nonpos::<NoFma>(T::neg_infinity()).f64() < 1e-37);
        assert_eq!(T::exp_nonpos::<NoFma>(T::zero()).f64(), 1.0);
    }

    #[test]
    fn exp_matches_std_f32() {
        check::<f32>(4.0 * f32::EPSILON as f64);
    }

    #[test]
    fn exp_matches_std_f64() {
        check::<f64>(8.0 * f64::EPSILON);
    }

    #[test]
    fn exp_f64_matches_std_over_the_whole_range() {
        // 10^6 arguments, seeded, across [−708, 709.78], against the library's exp.
        let mut next = crate::test_rng::uniforms(0x9e37_79b9_7f4a_7c15);
        let mut worst = 0.0f64;
        for k in 0..1_000_000 {
            let u = next();
            // Half the samples near 0, where sums of plan entries live.
            let x = if k % 2 == 0 {
                -708.0 + u * 1417.78
            } else {
                -40.0 + u * 41.0
            };
            let want = x.exp();
            for got in [exp_f64::<HwFma>(x), exp_f64::<NoFma>(x)] {
                worst = worst.max(((got - want) / want).abs());
            }
        }
        assert!(
            worst <= 2.0 * f64::EPSILON,
            "worst relative error {worst:e}"
        );
        for (x, want) in [
            (0.0, 1.0),
            (1.0, std::f64::consts::E),
            (709.78, 709.78f64.exp()),
            (709.8, f64::INFINITY),
            (1e300, f64::INFINITY),
            (f64::INFINITY, f64::INFINITY),
            (-708.5, 0.0),
            (f64::NEG_INFINITY, 0.0),
        ] {
            let got = exp_f64::<HwFma>(x);
            assert!(
                got == want || ((got - want) / want).abs() <= 2.0 * f64::EPSILON,
                "exp({x}) = {got:e}, want {want:e}"
            );
        }
        assert!(exp_f64::<HwFma>(f64::NAN).is_nan());
        assert!(exp_f64::<NoFma>(f64::NAN).is_nan());
    }
}
