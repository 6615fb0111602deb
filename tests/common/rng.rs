//! The seeded generator of the tests: a 64-bit LCG, its uniforms and seeded histograms.

/// `rows` seeded histograms of `len` bins, each normalised to 1, with its first `zeros` bins
/// empty (zero-mass bins).
pub fn bin_weights(rows: usize, len: usize, zeros: usize, seed: u64) -> ndarray::Array2<f64> {
    let mut r = Lcg(seed);
    let mut w = ndarray::Array2::from_shape_vec((rows, len), r.vec(rows * len, 0.2, 1.0)).unwrap();
    for mut row in w.rows_mut() {
        row.iter_mut().take(zeros).for_each(|v| *v = 0.0);
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    w
}

/// The generator as a closure: uniforms in [0, 1) from `seed`, the sequence of
/// `Lcg(seed).next()`.
pub fn uniforms(seed: u64) -> impl FnMut() -> f64 {
    let mut g = Lcg(seed);
    move || g.next()
}

/// 64-bit LCG (Knuth's constants), uniform in [0, 1).
pub struct Lcg(pub u64);
impl Lcg {
    pub fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next()
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.next().max(1e-300);
        let v = self.next();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
    pub fn vec(&mut self, len: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..len).map(|_| self.uniform(lo, hi)).collect()
    }
}
