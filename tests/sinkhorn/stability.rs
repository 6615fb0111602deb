//! The f32 stability sweep on the CPU (tests/common/stability.rs): ε from 1 down to 1e-4
//! (relative to the largest cost) on costs in [0,1], marginals with zero and tiny entries,
//! and costs of large dynamic range. Every f32 result must be finite (−∞ potentials only on
//! zero-mass bins, as in f64) and close to the f64 solve of the same iterations.

use crate::common;

use common::stability::{print, sweep};
use logot::CpuBackend;

#[test]
fn f32_is_finite_and_close_to_f64_down_to_eps_1e_minus_4() {
    let rows = sweep(&CpuBackend);
    print("cpu", &rows);
    for r in &rows {
        assert!(r.finite, "{r:?}");
        // Measured worst: |Δd|/max C = 1.1e-6 and |Δpot|/ε = 9.2e-3 (sq[0,1], ε = 3e-4 and
        // 1e-4: a potential's f32 rounding is amplified by 1/ε in the exponent); the bounds
        // leave a factor of about 10 for other CPUs' instruction sets.
        assert!(r.err <= 1e-5, "{r:?}");
        assert!(r.pot_err <= 0.1, "{r:?}");
    }
}
