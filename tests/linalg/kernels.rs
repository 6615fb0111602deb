//! The CPU backend's matrix-product kernels (faer underneath): GEMM with every transpose
//! combination and `X·Xᵀ` against an f64 triple loop at odd sizes, α and β included, and
//! their bits on rayon pools of 1, 2 and 3 threads (the products split over output blocks
//! only, never over the reduction).

use logot::backend::linalg::{GemmShape, LinalgKernels, SyrkShape, Transpose};
use logot::{CpuBackend, Real};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

fn gaussian(rng: &mut StdRng, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.sample(StandardNormal)).collect()
}

fn cast<T: Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::of(x)).collect()
}

/// Entry `(r, c)` of `op(X)` for `X` stored row-major as `rows×cols` (or `cols×rows`
/// transposed), in f64.
fn at<T: Real>(x: &[T], rows: usize, cols: usize, t: Transpose, r: usize, c: usize) -> f64 {
    let _ = rows;
    match t {
        Transpose::No => x[r * cols + c].f64(),
        Transpose::Yes => x[c * rows + r].f64(),
    }
}

/// `α·op(A)·op(B) + β·C0` by the triple loop in f64, and the sum of `|α·a·b|` per entry
/// (the scale of the rounding error).
#[allow(clippy::too_many_arguments)]
fn naive<T: Real>(
    s: GemmShape,
    alpha: f64,
    a: &[T],
    b: &[T],
    beta: f64,
    c0: &[T],
) -> (Vec<f64>, Vec<f64>) {
    let mut want = vec![0.0; s.m * s.n];
    let mut scale = vec![0.0; s.m * s.n];
    for i in 0..s.m {
        for j in 0..s.n {
            let (mut v, mut w) = (0.0, 0.0);
            for l in 0..s.k {
                let p = at(a, s.m, s.k, s.ta, i, l) * at(b, s.k, s.n, s.tb, l, j);
                v += p;
                w += p.abs();
            }
            want[i * s.n + j] = alpha * v + beta * c0[i * s.n + j].f64();
            scale[i * s.n + j] = (alpha * w).abs() + (beta * c0[i * s.n + j].f64()).abs();
        }
    }
    (want, scale)
}

const SIZES: [usize; 6] = [1, 3, 17, 65, 130, 257];

fn gemm_matches<T: Real>(unit: f64) {
    let mut rng = StdRng::seed_from_u64(11);
    let be = CpuBackend;
    // Every size as m, n and k in turn (the others odd), every transpose combination.
    let mut shapes = Vec::new();
    for &s in &SIZES {
        shapes.extend([(s, 17, 65), (65, s, 3), (130, 17, s)]);
    }
    shapes.push((257, 130, 259));
    for (m, n, k) in shapes {
        for ta in [Transpose::No, Transpose::Yes] {
            for tb in [Transpose::No, Transpose::Yes] {
                for (alpha, beta) in [(1.0, 0.0), (-0.5, 1.0), (2.0, -1.5)] {
                    let a = cast::<T>(&gaussian(&mut rng, m * k));
                    let b = cast::<T>(&gaussian(&mut rng, k * n));
                    let c0 = cast::<T>(&gaussian(&mut rng, m * n));
                    let s = GemmShape::new(m, n, k).with_transposes(ta, tb);
                    let mut c = c0.clone();
                    be.gemm(s, T::of(alpha), &a, &b, T::of(beta), &mut c)
                        .unwrap();
                    let (want, scale) = naive(s, alpha, &a, &b, beta, &c0);
                    for (idx, (&g, (&w, &sc))) in c.iter().zip(want.iter().zip(&scale)).enumerate()
                    {
                        // A k-term sum: at most about k·u of the sum of |terms|.
                        let tol = (k as f64 + 2.0) * unit * sc + 1e-300;
                        assert!(
                            (g.f64() - w).abs() <= tol,
                            "{} {m}×{n}×{k} {ta:?} {tb:?} α {alpha} β {beta} entry {idx}: {g} vs {w}",
                            T::NAME
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_matches_the_triple_loop_at_odd_sizes_and_every_transpose() {
    gemm_matches::<f64>(f64::EPSILON);
    gemm_matches::<f32>(f32::EPSILON as f64);
}

fn syrk_matches<T: Real>(unit: f64) {
    let mut rng = StdRng::seed_from_u64(12);
    let be = CpuBackend;
    for &n in &SIZES {
        for &k in &[1usize, 17, 130, 300] {
            for ta in [Transpose::No, Transpose::Yes] {
                for (alpha, beta) in [(1.0, 0.0), (0.75, -2.0)] {
                    let x = cast::<T>(&gaussian(&mut rng, n * k));
                    // β ≠ 0 reads the upper triangle only: the lower one holds NaN.
                    let c0: Vec<T> = cast::<T>(&gaussian(&mut rng, n * n));
                    let mut c: Vec<T> = (0..n * n)
                        .map(|idx| {
                            if idx % n >= idx / n {
                                c0[idx]
                            } else {
                                T::nan()
                            }
                        })
                        .collect();
                    let upper: Vec<T> = (0..n * n)
                        .map(|idx| {
                            let (i, j) = (idx / n, idx % n);
                            c0[i.min(j) * n + i.max(j)]
                        })
                        .collect();
                    let s = SyrkShape { n, k, ta };
                    be.syrk(s, T::of(alpha), &x, T::of(beta), &mut c).unwrap();
                    // X·Xᵀ = op(X)·op(X)ᵀ: the GEMM reference with op(X) and its transpose.
                    let g = GemmShape::new(n, n, k).with_transposes(
                        ta,
                        match ta {
                            Transpose::No => Transpose::Yes,
                            Transpose::Yes => Transpose::No,
                        },
                    );
                    let (want, scale) = naive(g, alpha, &x, &x, beta, &upper);
                    for i in 0..n {
                        for j in 0..n {
                            let (got, w) = (c[i * n + j], want[i * n + j]);
                            let tol = (k as f64 + 2.0) * unit * scale[i * n + j];
                            assert!(
                                (got.f64() - w).abs() <= tol,
                                "{} n {n} k {k} {ta:?} β {beta} ({i},{j}): {got} vs {w}",
                                T::NAME
                            );
                            assert_eq!(got, c[j * n + i], "not symmetric at ({i},{j})");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn syrk_matches_the_triple_loop_and_is_symmetric() {
    syrk_matches::<f64>(f64::EPSILON);
    syrk_matches::<f32>(f32::EPSILON as f64);
}

/// Bits of `run` on a pool of `threads` threads.
fn on_pool<R: Send>(threads: usize, run: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(run)
}

fn same_bits_on_1_2_3_threads<T: Real + Bits>() {
    let mut rng = StdRng::seed_from_u64(13);
    let be = CpuBackend;
    // Large enough that faer splits them (hundreds of millions of multiply-adds); odd sizes;
    // a reduction longer than faer's 512-term blocks.
    let (m, n, k) = (517, 389, 1100);
    let a = cast::<T>(&gaussian(&mut rng, m * k));
    let b = cast::<T>(&gaussian(&mut rng, k * n));
    let x = cast::<T>(&gaussian(&mut rng, m * k));
    let run = || {
        let mut out = Vec::new();
        for (ta, tb) in [
            (Transpose::No, Transpose::No),
            (Transpose::Yes, Transpose::Yes),
        ] {
            let mut c = vec![T::zero(); m * n];
            let s = GemmShape::new(m, n, k).with_transposes(ta, tb);
            be.gemm(s, T::one(), &a, &b, T::zero(), &mut c).unwrap();
            out.extend(c);
        }
        let mut c = vec![T::zero(); m * m];
        let s = SyrkShape {
            n: m,
            k,
            ta: Transpose::No,
        };
        be.syrk(s, T::one(), &x, T::zero(), &mut c).unwrap();
        out.extend(c);
        out
    };
    let one = on_pool(1, run);
    for threads in [2, 3] {
        let got = on_pool(threads, run);
        let first = one
            .iter()
            .zip(&got)
            .position(|(a, b)| a.to_bits_u64() != b.to_bits_u64());
        assert_eq!(first, None, "{} on {threads} threads", T::NAME);
    }
}

/// The raw bits of a float, for exact comparisons (NaN included).
trait Bits {
    fn to_bits_u64(&self) -> u64;
}
impl Bits for f32 {
    fn to_bits_u64(&self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for f64 {
    fn to_bits_u64(&self) -> u64 {
        self.to_bits()
    }
}

#[test]
fn products_have_the_same_bits_on_every_thread_count() {
    same_bits_on_1_2_3_threads::<f32>();
    same_bits_on_1_2_3_threads::<f64>();
}
