//! Helpers shared by the gradient tests: a seeded generator, forward-mode dual numbers
//! (an independent reference for derivatives of unrolled iterations), and a dense solver.
#![allow(dead_code)]

pub mod bary;
pub mod cloud_reports;
pub mod clouds;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod pot_bary;
pub mod relaxed;
pub mod reports;
mod rng;
pub mod stability;

#[allow(unused_imports)]
pub use rng::{bin_weights, uniforms, Lcg};

use std::ops::{Add, Div, Mul, Neg, Sub};

/// A dual number `v + d·ε` (ε² = 0): forward-mode derivative along one direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dual {
    pub v: f64,
    pub d: f64,
}
impl Dual {
    pub fn new(v: f64, d: f64) -> Self {
        Dual { v, d }
    }
    pub fn c(v: f64) -> Self {
        Dual { v, d: 0.0 }
    }
    pub fn exp(self) -> Self {
        let e = self.v.exp();
        Dual {
            v: e,
            d: self.d * e,
        }
    }
    pub fn ln(self) -> Self {
        Dual {
            v: self.v.ln(),
            d: self.d / self.v,
        }
    }
}
impl Add for Dual {
    type Output = Dual;
    fn add(self, o: Dual) -> Dual {
        Dual {
            v: self.v + o.v,
            d: self.d + o.d,
        }
    }
}
impl Sub for Dual {
    type Output = Dual;
    fn sub(self, o: Dual) -> Dual {
        Dual {
            v: self.v - o.v,
            d: self.d - o.d,
        }
    }
}
impl Mul for Dual {
    type Output = Dual;
    fn mul(self, o: Dual) -> Dual {
        Dual {
            v: self.v * o.v,
            d: self.d * o.v + self.v * o.d,
        }
    }
}
impl Div for Dual {
    type Output = Dual;
    fn div(self, o: Dual) -> Dual {
        Dual {
            v: self.v / o.v,
            d: (self.d * o.v - self.v * o.d) / (o.v * o.v),
        }
    }
}
impl Neg for Dual {
    type Output = Dual;
    fn neg(self) -> Dual {
        Dual {
            v: -self.v,
            d: -self.d,
        }
    }
}

/// `LSE_k x_k` in dual numbers (max-shifted).
pub fn lse(xs: &[Dual]) -> Dual {
    let m = xs.iter().map(|x| x.v).fold(f64::NEG_INFINITY, f64::max);
    let s = xs
        .iter()
        .fold(Dual::c(0.0), |acc, &x| acc + (x - Dual::c(m)).exp());
    Dual::c(m) + s.ln()
}

/// Solve the square system `a·x = b` (row-major `a`, size `n`) by Gaussian elimination with
/// partial pivoting.
pub fn dense_solve(mut a: Vec<f64>, mut b: Vec<f64>, n: usize) -> Vec<f64> {
    for k in 0..n {
        let p = (k..n)
            .max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs()))
            .unwrap();
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            b.swap(k, p);
        }
        let piv = a[k * n + k];
        assert!(piv.abs() > 1e-300, "singular system");
        for i in k + 1..n {
            let f = a[i * n + k] / piv;
            if f != 0.0 {
                for j in k..n {
                    a[i * n + j] -= f * a[k * n + j];
                }
                b[i] -= f * b[k];
            }
        }
    }
    let mut x = vec![0.0; n];
    for k in (0..n).rev() {
        let s: f64 = (k + 1..n).map(|j| a[k * n + j] * x[j]).sum();
        x[k] = (b[k] - s) / a[k * n + k];
    }
    x
}
