//! Runs every CUDA kernel once on small inputs (both precisions, every tile shape, the
//! K-split, the fused loop and the per-half-step kernels, the exact and redo paths, the
//! fused and the separate grid-barycenter kernels, the auction of exact minibatch OT), for
//! `compute-sanitizer --tool memcheck|racecheck|initcheck|synccheck`.
//!
//! `cargo build --release --features cuda --example cuda_sanitize`

#[cfg(feature = "cuda")]
fn main() -> logot::Result<()> {
    use logot::backend::cuda::{CudaBackend, CudaReal, Tuning};
    use logot::backend::{Backend, CostSource, Marginals, Potentials, Side};
    use logot::{
        BarycenterParams, BarycenterProblem, BarycenterSolver, GridCost, Problem, SinkhornParams,
        SinkhornSolver,
    };
    use ndarray::{Array1, Array2, Array3};

    fn run<T: CudaReal>(gpu: &CudaBackend) -> logot::Result<()> {
        let mut seed = 12345u64;
        let mut rnd = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let hist = |b: usize, n: usize, rnd: &mut dyn FnMut() -> f64| {
            let mut h =
                Array2::from_shape_fn((b, n), |(_, k)| if k % 13 == 5 { 0.0 } else { 0.1 + rnd() });
            for mut r in h.rows_mut() {
                let s = r.sum();
                r.mapv_inplace(|v| v / s);
            }
            h.mapv(T::of)
        };
        // (problems, n, m, one cost per problem)
        for &(b, n, m, per) in &[
            (16usize, 40usize, 70usize, false),
            (3, 600, 40, false),
            (2, 30, 50, true),
            (20, 130, 90, false),
        ] {
            let mu = hist(b, n, &mut rnd);
            let nu = hist(b, m, &mut rnd);
            let c3 = Array3::from_shape_fn((if per { b } else { 1 }, n, m), |_| T::of(rnd()));
            let c2 = c3.index_axis(ndarray::Axis(0), 0).to_owned();
            let src: CostSource<'_, T> = if per {
                c3.view().into()
            } else {
                c2.view().into()
            };
            // A whole solve with its plans (fused loop or half-steps, report, plan kernel).
            let p = if per {
                Problem::new(mu.view(), nu.view(), c3.view())?
            } else {
                Problem::new(mu.view(), nu.view(), c2.view())?
            };
            SinkhornSolver::new(gpu.clone(), SinkhornParams::new(0.05).fixed_iterations(3))
                .coupling(&p)?;
            // Half-steps with a garbage hint (exact path, redo), both sides.
            let cost = gpu.prepare_cost(&src)?;
            let f = gpu.upload(
                &(0..b * n)
                    .map(|k| T::of(0.3 * rnd() - (k % 7) as f64))
                    .collect::<Vec<T>>(),
            )?;
            let lnu = gpu.upload(&nu.iter().map(|v| v.ln()).collect::<Vec<T>>())?;
            let lmu = gpu.upload(&mu.iter().map(|v| v.ln()).collect::<Vec<T>>())?;
            let mut g = gpu.filled(b * m, T::of(1e3))?;
            gpu.sinkstep(&cost, Side::Col, T::of(0.05), &f, &lnu, &mut g)?;
            let mut f2 = gpu.filled(b * n, T::nan())?;
            gpu.sinkstep(&cost, Side::Row, T::of(0.05), &g, &lmu, &mut f2)?;
            let nub = gpu.upload(&nu.iter().copied().collect::<Vec<T>>())?;
            let mub = gpu.upload(&mu.iter().copied().collect::<Vec<T>>())?;
            let marginals = Marginals {
                mu: &mub,
                nu: &nub,
                log_mu: &lmu,
                log_nu: &lnu,
            };
            let pot = Potentials { f: f2, g };
            gpu.column_error_and_cost(&cost, &pot, &marginals, T::of(0.05))?;
            gpu.transport_cost(&cost, &pot.f, &pot.g, T::of(0.05))?;
            gpu.marginal_error(b, &nub, &pot.g, &pot.g, T::of(0.05))?;
        }
        // A barycenter on a small 6×7 grid: the fused cluster kernel (the kernels one by
        // one with `bary_cluster: 0`), then the dense path (4-problem tiles, K split).
        let grid = GridCost::image(6, 7)?;
        let h = hist(3, 42, &mut rnd);
        let w = Array1::from(vec![T::of(0.2), T::of(0.3), T::of(0.5)]);
        let solver =
            BarycenterSolver::new(gpu.clone(), BarycenterParams::new(0.01).fixed_iterations(3));
        let problem = BarycenterProblem::new(h.view(), w.view())?;
        solver.solve(&problem, grid.clone())?;
        let dense = grid.to_dense::<T>();
        solver.solve(&problem, dense.view())?;
        // Exact minibatch OT: the auction on stored costs (per problem and shared) and on
        // clouds, with the team path of the last free rows and a round limit.
        let params = logot::exact::EmdParams::default();
        for (b, n) in [(3usize, 37usize), (2, 1), (1, 130)] {
            let w = Array2::from_elem((b, n), T::of(1.0 / n as f64));
            let c = Array3::from_shape_fn((b, n, n), |_| T::of(rnd()));
            gpu.emd_batch(w.view(), w.view(), c.view(), &params)?;
            let shared = Array3::from_shape_fn((1, n, n), |_| T::of((rnd() * 4.0).floor()));
            gpu.emd_batch(
                w.view(),
                w.view(),
                shared.view(),
                &params.clone().max_iters(2),
            )?;
            let x = Array3::from_shape_fn((b, n, 5), |_| T::of(rnd()));
            let y = Array3::from_shape_fn((b, n, 5), |_| T::of(rnd()));
            let sq = logot::exact::Metric::SqEuclidean;
            gpu.emd_points_batch(None, None, x.view(), y.view(), sq, &params)?;
        }
        gpu.synchronize()
    }

    for tuning in [
        Tuning::default(),
        Tuning {
            fused: false,
            bary_cluster: 0,
            ..Tuning::default()
        },
    ] {
        let gpu = CudaBackend::with_tuning(0, tuning, None)?;
        run::<f32>(&gpu)?;
        run::<f64>(&gpu)?;
    }
    println!("every kernel ran");
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("this example needs `--features cuda`");
}
