//! Point clouds of N = M = 90000 points: a half-step and the transport cost run in
//! O(N + M) memory. The N×M cost in f32 would take 32.4 GB (more than this machine has);
//! the test checks the process's peak resident memory and spot-checks the half-step
//! against an f64 brute-force log-sum-exp. Its own binary, so the peak is this test's.

use logot::backend::Side;
use logot::{Backend, CpuBackend, PointCloudCost};
use std::time::Instant;

/// Peak resident set size of this process in bytes (Linux), if available.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
fn ninety_thousand_points_in_bounded_memory() {
    let n = 90_000;
    let d = 3;
    let eps = 0.05f32;
    let (_, nu, x, y) = logot_cli::problems::ot_c::<f32>(n, d);
    let be = CpuBackend;
    let cost = be
        .prepare_cost(&PointCloudCost::new(x.view(), y.view()).unwrap().into())
        .unwrap();
    // A non-constant source potential, and the uniform target marginal.
    let f: Vec<f32> = (0..n)
        .map(|i| 0.02 * (7.0 * x[[i, 0]] + 3.0 * x[[i, 2]]).sin())
        .collect();
    let log_nu: Vec<f32> = nu.iter().map(|v| v.ln()).collect();
    let mut g = vec![0.0f32; n];
    let t = Instant::now();
    be.sinkstep(&cost, Side::Col, eps, &f, &log_nu, &mut g)
        .unwrap();
    let half = t.elapsed().as_secs_f64();
    // Spot checks in f64: g_j = ε log ν_j − ε LSE_i((f_i − |x_i − y_j|²)/ε).
    let e = eps as f64;
    for j in (0..n).step_by(n / 16 + 1) {
        let v: Vec<f64> = (0..n)
            .map(|i| {
                let c: f64 = (0..d)
                    .map(|k| (x[[i, k]] as f64 - y[[j, k]] as f64).powi(2))
                    .sum();
                (f[i] as f64 - c) / e
            })
            .collect();
        let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = m + v.iter().map(|t| (t - m).exp()).sum::<f64>().ln();
        let want = e * ((nu[j] as f64).ln() - lse);
        assert!(
            (g[j] as f64 - want).abs() < 2e-5 * want.abs().max(1.0),
            "g[{j}] = {} vs {want}",
            g[j]
        );
    }
    let t = Instant::now();
    let tc = be.transport_cost(&cost, &f, &g, eps).unwrap();
    let transport = t.elapsed().as_secs_f64();
    // After the column half-step every column of P sums to ν_j, so ⟨P, C⟩ is a weighted
    // mean of costs: within (0, d] on the unit cube.
    assert!(tc[0] > 0.0 && tc[0] <= d as f32, "⟨P, C⟩ = {}", tc[0]);
    let peak = peak_rss();
    eprintln!(
        "N = M = {n}: half-step {half:.2} s ({:.2} G pairs/s), transport cost {transport:.2} s, ⟨P,C⟩ = {}, peak RSS {:?} MB",
        (n * n) as f64 / half / 1e9,
        tc[0],
        peak.map(|b| b / (1 << 20))
    );
    if let Some(bytes) = peak {
        // The dense f32 cost alone would be n²·4 = 32.4 GB.
        assert!(bytes < 512 << 20, "peak resident memory {} MB", bytes >> 20);
    }
}
