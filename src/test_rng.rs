//! The unit tests' seeded generator (test builds only): Knuth's MMIX linear congruential
//! step, s ← 6364136223846793005·s + 1442695040888963407 (mod 2⁶⁴), and its top 53 bits as a
//! uniform in [0, 1). tests/common has the same generator for the integration tests.

/// Uniforms in [0, 1) from `seed`, one per call.
pub(crate) fn uniforms(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64) / ((1u64 << 53) as f64)
    }
}
