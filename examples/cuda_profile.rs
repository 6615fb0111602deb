//! Where the time goes on the CUDA backend: CUDA-event timings of the kernels and wall
//! times of the host round trips, for the otA and otB problems.
//!
//! `cargo run --release --features cuda --example cuda_profile [otA|otB|all]`

#[cfg(feature = "cuda")]
fn main() -> logot::Result<()> {
    use logot::backend::cuda::{CudaBackend, Tuning};
    use logot::backend::{Backend, CostSource, Marginals, Potentials, Side};
    use logot::{BufferOutputs, Problem, SinkhornParams, SinkhornSolver};
    use logot_cli::problems;
    use std::time::Instant;

    let which = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let wall = |f: &mut dyn FnMut() -> logot::Result<()>, reps: usize| -> logot::Result<f64> {
        f()?;
        let mut t = Vec::new();
        for _ in 0..reps {
            let s = Instant::now();
            f()?;
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
        Ok(median(t))
    };
    let gpu = CudaBackend::new()?;
    println!("device: {} ({} SMs)", gpu.device_name(), gpu.sm_count());

    if which == "otA" || which == "all" {
        let (mu, nu, cost) = problems::ot_a::<f32>();
        let p = Problem::new(mu.view(), nu.view(), cost.view())?;
        // The fused loop (the default for a problem this small) and the per-half-step
        // kernels of larger problems.
        for fused in [true, false] {
            let tuning = Tuning {
                fused,
                ..Tuning::default()
            };
            let be = CudaBackend::with_tuning(0, tuning, None)?;
            let solver =
                SinkhornSolver::new(be.clone(), SinkhornParams::new(1e-3).fixed_iterations(200));
            let pr = solver.prepare(&p)?;
            let t_solve = wall(
                &mut || solver.solve_prepared(&pr, BufferOutputs::new()).map(|_| ()),
                20,
            )?;
            let cc = be.prepare_cost(&CostSource::Dense(cost.view()))?;
            let (mub, nub) = (
                be.upload(mu.as_slice().unwrap())?,
                be.upload(nu.as_slice().unwrap())?,
            );
            let lmu = be.upload(&mu.iter().map(|v| v.ln()).collect::<Vec<f32>>())?;
            let lnu = be.upload(&nu.iter().map(|v| v.ln()).collect::<Vec<f32>>())?;
            let marginals = Marginals {
                mu: &mub,
                nu: &nub,
                log_mu: &lmu,
                log_nu: &lnu,
            };
            let mut pot = Potentials {
                f: be.filled(100, 0.0f32)?,
                g: be.filled(100, 0.0f32)?,
            };
            let iters: usize = std::env::var("OTA_ITERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(200);
            let mut ev = Vec::new();
            for _ in 0..20 {
                ev.push(
                    be.time_ms(|| be.iterate(&cc, 1e-3, &marginals, &mut pot, iters))?
                        .1,
                );
            }
            let t_iter = median(ev);
            let t_sync = wall(&mut || be.synchronize(), 50)?;
            let t_up = wall(
                &mut || Backend::<f32>::upload(&be, &[0.5f32; 100]).map(|_| ()),
                50,
            )?;
            let Potentials { f, mut g } = pot;
            let t_down = wall(&mut || be.download(&f).map(|_| ()), 50)?;
            let t_err = wall(
                &mut || be.marginal_error(1, &lnu, &g, &f, 1e-3).map(|_| ()),
                50,
            )?;
            let t_tc = wall(&mut || be.transport_cost(&cc, &f, &g, 1e-3).map(|_| ()), 50)?;
            let t_step = wall(
                &mut || {
                    be.sinkstep(&cc, Side::Col, 1e-3, &f, &lnu, &mut g)?;
                    be.synchronize()
                },
                50,
            )?;
            println!(
                "otA fused={fused}: solve_prepared {t_solve:.3} ms | iterate(200) events {t_iter:.3} ms | sync {:.1} us, upload {:.1} us, download {:.1} us, marginal_error {:.1} us, transport_cost {:.1} us, one sinkstep+sync {:.1} us",
                t_sync * 1e3, t_up * 1e3, t_down * 1e3, t_err * 1e3, t_tc * 1e3, t_step * 1e3
            );
        }
    }
    if which == "otB" || which == "all" {
        let (mu, nu, cost) = problems::ot_b::<f32>(64, 2048);
        let p = Problem::new(mu.view(), nu.view(), cost.view())?;
        {
            let be = gpu.clone();
            let cc = be.prepare_cost(&CostSource::Dense(cost.view()))?;
            let (mub, nub) = (
                be.upload(mu.as_slice().unwrap())?,
                be.upload(nu.as_slice().unwrap())?,
            );
            let lmu = be.upload(&mu.iter().map(|v| v.ln()).collect::<Vec<f32>>())?;
            let lnu = be.upload(&nu.iter().map(|v| v.ln()).collect::<Vec<f32>>())?;
            let marginals = Marginals {
                mu: &mub,
                nu: &nub,
                log_mu: &lmu,
                log_nu: &lnu,
            };
            let mut pot = Potentials {
                f: be.filled(64 * 2048, 0.0f32)?,
                g: be.filled(64 * 2048, 0.0f32)?,
            };
            be.iterate(&cc, 1e-2, &marginals, &mut pot, 20)?; // converge a little
            let mut ev = Vec::new();
            for _ in 0..30 {
                ev.push(
                    be.time_ms(|| be.sinkstep(&cc, Side::Col, 1e-2, &pot.f, &lnu, &mut pot.g))?
                        .1,
                );
            }
            let t_half = median(ev);
            let mut ev = Vec::new();
            for _ in 0..5 {
                ev.push(
                    be.time_ms(|| be.iterate(&cc, 1e-2, &marginals, &mut pot, 100))?
                        .1,
                );
            }
            let Potentials { f, g } = pot;
            let t_100 = median(ev);
            let solver =
                SinkhornSolver::new(be.clone(), SinkhornParams::new(1e-2).fixed_iterations(100));
            let pr = solver.prepare(&p)?;
            let t_solve = wall(
                &mut || solver.solve_prepared(&pr, BufferOutputs::new()).map(|_| ()),
                5,
            )?;
            let exps = 64.0 * 2048.0 * 2048.0;
            println!(
                "otB: half-step {t_half:.4} ms ({:.0} Gexp/s) | iterate(100) {t_100:.3} ms | solve_prepared {t_solve:.3} ms",
                exps / t_half / 1e6
            );
            {
                let host = vec![0.0f32; 64 * 2048];
                let t_up = wall(&mut || be.upload(&host).map(|_| ()), 10)?;
                let t_down = wall(&mut || be.download(&f).map(|_| ()), 10)?;
                let t_fill = wall(
                    &mut || {
                        be.filled(64 * 2048, 0.0f32)?;
                        be.synchronize()
                    },
                    10,
                )?;
                let t_err = wall(
                    &mut || be.marginal_error(64, &lnu, &g, &f, 1e-2).map(|_| ()),
                    10,
                )?;
                let t_tc = wall(&mut || be.transport_cost(&cc, &f, &g, 1e-2).map(|_| ()), 10)?;
                println!(
                    "otB pieces: upload 512 KB {t_up:.3} ms, download {t_down:.3} ms, filled+sync {t_fill:.3} ms, marginal_error {t_err:.3} ms, transport_cost {t_tc:.3} ms"
                );
            }
        }
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("this example needs `--features cuda`");
}
