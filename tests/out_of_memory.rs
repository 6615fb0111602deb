//! Allocation failures are errors, never aborts: under an address-space limit
//! (`setrlimit(RLIMIT_AS)`) a solve whose cost, plan or batch cannot be allocated returns
//! `Error::OutOfMemory` naming what and its size in bytes, and a solve that fits in the limit
//! succeeds — the peak is what is needed (the cost copied once, shifted as it is copied; the
//! plan held once, never cloned on its way to the host).
//!
//! Each case runs in a child process, this test binary run again with `LOGOT_TEST_OOM_CASE`
//! naming the case (read here by the test, never by the library): a limit cannot be lifted
//! once lowered, and an abort must not take the test runner with it. The child sets its
//! limit to its current address space plus a budget, then solves and prints the outcome.
#![cfg(target_os = "linux")]

mod common;

use common::Lcg;
use logot::{CpuBackend, Error, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2, Array3};
use std::process::Command;

const CASE_VAR: &str = "LOGOT_TEST_OOM_CASE";

/// This process's address space in bytes (`/proc/self/statm`, in pages).
fn address_space() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize
}

/// Lower the address-space limit to the current size plus `budget` bytes.
fn limit_to(budget: usize) {
    let lim = (address_space() + budget) as libc::rlim_t;
    let r = libc::rlimit {
        rlim_cur: lim,
        rlim_max: lim,
    };
    // SAFETY: a valid rlimit for RLIMIT_AS.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &r) }, 0);
}

/// Uniform marginals and a non-symmetric cost `n×n` in [offset, offset + 1) (so the CPU
/// keeps both `C` and `Cᵀ`: two copies).
fn problem(n: usize, offset: f64) -> (Array1<f64>, Array2<f64>) {
    let mut r = Lcg(7);
    let c = Array2::from_shape_simple_fn((n, n), || offset + r.next());
    (Array1::from_elem(n, 1.0 / n as f64), c)
}

/// The child's outcome on stdout: `OK` or `ERR <message>`.
fn report<T>(what: &str, r: logot::Result<T>) {
    match r {
        Ok(_) => println!("OUTCOME {what}: OK"),
        Err(e @ Error::OutOfMemory { .. }) => println!("OUTCOME {what}: ERR {e}"),
        Err(e) => println!("OUTCOME {what}: OTHER {e}"),
    }
}

/// The child's entry point: does nothing unless `LOGOT_TEST_OOM_CASE` names a case.
#[test]
fn oom_child_entry() {
    let Ok(case) = std::env::var(CASE_VAR) else {
        return;
    };
    // Start rayon's threads and their allocations before the limit.
    let (w, c) = problem(300, 0.0);
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1))
        .coupling(&Problem::new(w.view(), w.view(), c.view()).unwrap())
        .unwrap();
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.5).fixed_iterations(2));
    let n = 2048;
    let cost_bytes = n * n * 8;
    match case.as_str() {
        // The cost's copy does not fit: f64, f32, a batch, unbalanced.
        "cost" => {
            let (w, c) = problem(n, 0.0);
            limit_to(cost_bytes / 2);
            report(
                "cost",
                solver.solve(&Problem::new(w.view(), w.view(), c.view()).unwrap()),
            );
        }
        "cost_f32" => {
            let (w, c) = problem(n, 0.0);
            let (w, c) = (w.mapv(|v| v as f32), c.mapv(|v| v as f32));
            limit_to(cost_bytes / 4);
            report(
                "cost_f32",
                solver.solve(&Problem::new(w.view(), w.view(), c.view()).unwrap()),
            );
        }
        "batch" => {
            let (w, c) = problem(n / 2, 0.0);
            let costs = Array3::from_shape_fn((4, n / 2, n / 2), |(_, i, j)| c[[i, j]]);
            let ws = Array2::from_shape_fn((4, n / 2), |(_, i)| w[i]);
            limit_to(cost_bytes / 2);
            report(
                "batch",
                solver.solve(&Problem::new(ws.view(), ws.view(), costs.view()).unwrap()),
            );
        }
        "unbalanced" => {
            let (w, c) = problem(n, 0.0);
            limit_to(cost_bytes / 2);
            report(
                "unbalanced",
                solver.solve(
                    &Problem::new(w.view(), w.view(), c.view())
                        .unwrap()
                        .relaxed(1.0),
                ),
            );
        }
        // A cost far from 0 is shifted as it is copied: C and Cᵀ, no third copy.
        "shifted_fits" => {
            let (w, c) = problem(n, 100.0);
            limit_to(cost_bytes * 5 / 2);
            report(
                "shifted_fits",
                solver.solve(&Problem::new(w.view(), w.view(), c.view()).unwrap()),
            );
        }
        // The plan held once: C, Cᵀ and 1.5 plans fit; 2 plans would not.
        "plan_fits" => {
            let (w, c) = problem(n, 0.0);
            limit_to(2 * cost_bytes + cost_bytes * 3 / 2);
            report(
                "plan_fits",
                solver.coupling(&Problem::new(w.view(), w.view(), c.view()).unwrap()),
            );
        }
        // Half a plan beyond C and Cᵀ: refused by the check of the peak (the plan with the
        // cost's two copies), before the cost is copied or anything solved.
        "plan" => {
            let (w, c) = problem(n, 0.0);
            limit_to(2 * cost_bytes + cost_bytes / 2);
            report(
                "plan",
                solver.coupling(&Problem::new(w.view(), w.view(), c.view()).unwrap()),
            );
        }
        // Point clouds store no cost; their plan does not fit.
        "cloud_plan" => {
            let mut r = Lcg(3);
            let x = Array2::from_shape_simple_fn((n, 3), || r.next());
            let w = Array1::from_elem(n, 1.0 / n as f64);
            let (w2, x2) = (w.view().insert_axis(ndarray::Axis(0)), x.view());
            let cloud = PointCloudCost::new(x2, x2).unwrap();
            limit_to(cost_bytes / 2);
            report(
                "cloud_plan",
                solver.coupling(&Problem::new(w2, w2, cloud).unwrap()),
            );
        }
        other => panic!("unknown case {other}"),
    }
}

/// Run `case` in a child process: its exit code (`None`: killed by a signal, e.g. an
/// abort) and its outcome line.
fn run_child(case: &str) -> (Option<i32>, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "oom_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CASE_VAR, case)
        // One malloc arena: threads do not reserve address space of their own.
        .env("MALLOC_ARENA_MAX", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The harness may print the test's name on the same line first.
    let line = stdout
        .lines()
        .find_map(|l| l.find("OUTCOME").map(|k| l[k..].to_string()))
        .unwrap_or_else(|| panic!("{case}: no outcome ({:?})\n{stdout}\n{stderr}", out.status));
    (out.status.code(), line)
}

/// What cannot be allocated is an error naming it and its bytes; the process lives on.
#[test]
fn allocations_beyond_the_limit_are_errors() {
    let n = 2048usize;
    let matrix = |bytes: usize| format!("{} bytes", n * n * bytes);
    for (case, what, bytes) in [
        ("cost", "cost", matrix(8)),
        ("cost_f32", "cost", matrix(4)),
        ("batch", "cost", matrix(8)),
        ("unbalanced", "cost", matrix(8)),
        ("plan", "plan", matrix(8)),
        ("cloud_plan", "plan", matrix(8)),
    ] {
        let (code, line) = run_child(case);
        assert_eq!(code, Some(0), "{case}: {line}");
        assert!(
            line.contains(&format!("ERR {what}: out of memory")) && line.contains(&bytes),
            "{case}: {line}"
        );
    }
}

/// The peak is what a solve needs: a shifted cost is copied once (with its transpose), and
/// a coupling holds its plan once.
#[test]
fn solves_within_their_peak_succeed() {
    for case in ["shifted_fits", "plan_fits"] {
        let (code, line) = run_child(case);
        assert_eq!(code, Some(0), "{case}: {line}");
        assert!(line.ends_with(": OK"), "{case}: {line}");
    }
}
