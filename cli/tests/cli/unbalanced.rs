//! Unbalanced OT through the `logot` binary (`--reg-m`, `--reg-m-mu`, `--reg-m-nu` on
//! `wasserstein` and `coupling`, dense, batched and point-cloud costs, f64 and f32) against
//! POT 0.9.7's `ot.unbalanced.sinkhorn_unbalanced(..., reg_type="kl")`, and every bad use of
//! the flags refused with a message naming the flag.
//!
//! The inputs are closed-form, the same here ([`problem`], [`clouds`]) and in
//! `tests/data/make_pot_cli_unbalanced.py`, which prints the reference values below:
//! `a_i = (0.6 + 0.5 sin²(0.7i + 0.3 + 0.2k))(1 + 0.4k)`, `b_j = 0.2 + 0.6 cos²(1.1j + 0.4k)`,
//! `M_ij = (i/n − j/m − 0.1k)² + 0.3 sin²(i + 2j)` (masses unequal throughout). `objective`
//! is `⟨P,M⟩ + ε·kl_div(P, a⊗b) + ρ_a·kl_div(P1, a) + ρ_b·kl_div(Pᵀ1, b)` with POT's
//! `kl_div(mass=True)` (the generalized KL) on POT's plan, a term with ρ = ∞ left out;
//! `distance` is `sinkhorn_unbalanced2(..., returnCost="linear")` = `⟨P, M⟩`, `mass` is `Σ P`.

use ndarray::{Array1, Array2, Array3};
use ndarray_npy::read_npy;
use std::path::Path;

use crate::common;
use common::cli::{dir, npy, ok, p, refused};
use common::pot_bary::pot;

/// The test problem `k` of size `n×m` (see the module docs).
fn problem(n: usize, m: usize, k: usize) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let k = k as f64;
    let a = Array1::from_shape_fn(n, |i| {
        (0.6 + 0.5 * (0.7 * i as f64 + 0.3 + 0.2 * k).sin().powi(2)) * (1.0 + 0.4 * k)
    });
    let b = Array1::from_shape_fn(m, |j| 0.2 + 0.6 * (1.1 * j as f64 + 0.4 * k).cos().powi(2));
    let c = Array2::from_shape_fn((n, m), |(i, j)| {
        let (x, y) = (i as f64, j as f64);
        (x / n as f64 - y / m as f64 - 0.1 * k).powi(2) + 0.3 * (x + 2.0 * y).sin().powi(2)
    });
    (a, b, c)
}

/// Weights and point clouds: `X_ic = sin(1.7i + 0.9c)`, `Y_jc = 0.5 + 0.8 cos(1.3j + 0.4c)`,
/// `a_i = 0.1 + 0.05i`, `b_j = 0.3 − 0.02j`.
fn clouds(n: usize, m: usize, d: usize) -> (Array1<f64>, Array1<f64>, Array2<f64>, Array2<f64>) {
    let x = Array2::from_shape_fn((n, d), |(i, c)| (1.7 * i as f64 + 0.9 * c as f64).sin());
    let y = Array2::from_shape_fn((m, d), |(j, c)| {
        0.5 + 0.8 * (1.3 * j as f64 + 0.4 * c as f64).cos()
    });
    let a = Array1::from_shape_fn(n, |i| 0.1 + 0.05 * i as f64);
    let b = Array1::from_shape_fn(m, |j| 0.3 - 0.02 * j as f64);
    (a, b, x, y)
}

/// A POT reference for `problem(7, 5, 0)` solved with `flags`.
struct Reference {
    flags: &'static [&'static str],
    eps: &'static str,
    distance: f64,
    objective: f64,
    mass: f64,
    plan: &'static [f64],
}

/// `problem(7, 5, 0)`, `eps = 0.1`, `reg_m = 0.5`.
const SCALAR: Reference = Reference {
    flags: &["--reg-m", "0.5"],
    eps: "0.1",
    distance: 0.44104742210135606,
    objective: 1.714000560253445,
    mass: 3.7306259913065785,
    plan: &[
        0.4904363669030781,
        0.004681721170553275,
        0.0031830527526674436,
        0.0050167629962991475,
        7.115312076520104e-06,
        0.21177934641049923,
        0.3370680624356974,
        0.012740810294469532,
        0.0348434488052323,
        0.002862347267365852,
        0.1183156956303725,
        0.09067345695603501,
        0.39786483077030643,
        0.029892646231955172,
        0.015379893330921367,
        0.19974790567158235,
        0.008510620006276292,
        0.06479789759921835,
        0.2819814536987679,
        0.0027447494116285016,
        0.00919905688793773,
        0.04549861776661378,
        0.009517056415136433,
        0.2593880995124504,
        0.05526634675723743,
        0.0011204954694151534,
        0.009616329610985918,
        0.11650500969809291,
        0.06007381301251452,
        0.2616522078389583,
        0.0024852709678319347,
        0.0005859731383592702,
        0.04446320260638122,
        0.5018453378376244,
        0.04088099013203622,
    ],
};

/// `problem(7, 5, 0)`, `eps = 0.1`, `reg_m = (0.5, 2.0)`.
const PAIR: Reference = Reference {
    flags: &["--reg-m-mu", "0.5", "--reg-m-nu", "2"],
    eps: "0.1",
    distance: 0.36464731293623887,
    objective: 1.853022352327554,
    mass: 3.0092901208313565,
    plan: &[
        0.4060820206498134,
        0.00327450675418689,
        0.00209755155299529,
        0.003479430318609015,
        4.868549553552743e-06,
        0.191095568371735,
        0.2569176065033071,
        0.009149592955058298,
        0.026335502597583164,
        0.0021343413641965758,
        0.11261429617602105,
        0.07290219253419274,
        0.3013869401380064,
        0.02383246654253866,
        0.012097037744670138,
        0.18143071206903622,
        0.006529787097187771,
        0.04684111217671957,
        0.2145371859931045,
        0.0020601830900065974,
        0.008778292953255353,
        0.03667534599031168,
        0.007227816561357524,
        0.2073338809066479,
        0.0435814895956119,
        0.001089772975609462,
        0.007900317057180929,
        0.09017958698884142,
        0.048940070618617285,
        0.2102930305733172,
        0.0023842278172212664,
        0.00047485494272103506,
        0.033947864302694745,
        0.403271343540063,
        0.03240932282938401,
    ],
};

/// `problem(7, 5, 0)`, `eps = 0.05`, `reg_m = (1.0, inf)`: ν exact because it has no flag.
const MU_ONLY: Reference = Reference {
    flags: &["--reg-m-mu", "1"],
    eps: "0.05",
    distance: 0.25767555741783477,
    objective: 2.047985539641787,
    mass: 2.572991677198932,
    plan: &[
        0.3365586896534137,
        2.202553797919518e-05,
        5.185909585193757e-06,
        9.679601827530582e-06,
        2.1308064775244985e-11,
        0.14849814288032767,
        0.27015249606812136,
        0.00019660280369085504,
        0.0011048693701970116,
        8.159416215457464e-06,
        0.0811043298887027,
        0.03420894060599119,
        0.33548430973261767,
        0.001422993418178971,
        0.00041221765808396307,
        0.23276316391515312,
        0.0003034534945129775,
        0.00896011134343114,
        0.12749868987412594,
        1.3219523818129868e-05,
        0.0010234654810880527,
        0.0179805493741528,
        0.00040071322049096964,
        0.22366680486507548,
        0.011111398746030345,
        1.4759387612403375e-05,
        0.000780704658218591,
        0.05836857929477814,
        0.01166093499990157,
        0.24207924908687928,
        3.74487937024952e-05,
        1.4950844201730856e-06,
        0.004384636701880221,
        0.4197058054582523,
        0.003047851329168013,
    ],
};

/// `problem(7, 5, 0)`, `eps = 0.05`, `reg_m = (inf, 0.3)`: μ exact through an explicit `inf`.
const NU_ONLY: Reference = Reference {
    flags: &["--reg-m-mu", "inf", "--reg-m-nu", "0.3"],
    eps: "0.05",
    distance: 0.5451399617737174,
    objective: 1.5821597415378705,
    mass: 5.983359688264161,
    plan: &[
        0.643537356892063,
        7.287291449210482e-05,
        2.48145834446448e-05,
        3.105176966894023e-05,
        1.1291066776258029e-10,
        0.22912632192080257,
        0.721256276667614,
        0.0007591240703408228,
        0.0028600972739822646,
        3.488920404440659e-05,
        0.090039242453963,
        0.06571342100290735,
        0.9320283005951635,
        0.002650370519895347,
        0.001268213572934323,
        0.41042472760506926,
        0.0009258445399324234,
        0.03953682290882571,
        0.3771732619758595,
        6.45971104502719e-05,
        0.0014002609632541298,
        0.042566250728628116,
        0.0013719508317938005,
        0.5133968795717543,
        0.04212913364876438,
        1.3866708573302965e-05,
        0.0012691661501050317,
        0.1372313282372047,
        0.01838037354835974,
        0.630290304710192,
        5.577881584610471e-05,
        3.853220242027389e-06,
        0.016343089777139153,
        1.0487991887582886,
        0.01258065489965115,
    ],
};

/// `problem(6, 4, k)` for `k = 0, 1, 2` with per-problem costs, `eps = 0.2`, `reg_m = 1.0`:
/// `(distance, objective, mass)`.
const BATCH: [(f64, f64, f64); 3] = [
    (0.6191070229708535, 2.0943621977990716, 3.3636869890668715),
    (0.7231689512035351, 3.571799249457124, 3.9672080609424127),
    (0.8127111619112759, 5.363713450031376, 4.3074833514424045),
];

/// `clouds(9, 11, 3)` with `M = ot.dist(X, Y)` (squared Euclidean), `eps = 0.05`,
/// `reg_m = 0.3`: `(distance, objective, mass)`.
const CLOUDS: (f64, f64, f64) = (0.49351854568246495, 1.16233308663368, 0.9302567897943396);

/// `|got − want| ≤ tol·max(1, |want|)` entry by entry.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{k}]: got {g:e}, POT {w:e} (tolerance {tol:e})"
        );
    }
}

/// The JSON array `key` as numbers.
fn numbers(j: &serde_json::Value, key: &str) -> Vec<f64> {
    j[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array {key:?} in {j}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// Write `problem(7, 5, 0)` as `mu.npy`, `nu.npy`, `c.npy` and their float32 copies.
fn write_problem(d: &Path) {
    let (a, b, c) = problem(7, 5, 0);
    npy(d, "mu.npy", &a);
    npy(d, "nu.npy", &b);
    npy(d, "c.npy", &c);
    npy(d, "mu32.npy", &a.mapv(|v| v as f32));
    npy(d, "nu32.npy", &b.mapv(|v| v as f32));
    npy(d, "c32.npy", &c.mapv(|v| v as f32));
}

/// The four dense references ([`SCALAR`], [`PAIR`], [`MU_ONLY`], [`NU_ONLY`]) solved from
/// the files of [`write_problem`] in `d` (`suffix` "" for float64, "32" for float32) with
/// `opts` added: `coupling` (its plan, distance, objective and mass) and `wasserstein`
/// (distance, objective, mass) against POT to `tol`.
fn dense_relaxations_match_pot(d: &Path, suffix: &str, opts: &[&str], tol: f64) {
    let (mu, nu, c, out) = (
        p(d, &format!("mu{suffix}.npy")),
        p(d, &format!("nu{suffix}.npy")),
        p(d, &format!("c{suffix}.npy")),
        p(d, "p.npy"),
    );
    let dtype = if suffix.is_empty() {
        "float64"
    } else {
        "float32"
    };
    for r in [&SCALAR, &PAIR, &MU_ONLY, &NU_ONLY] {
        let base = ["--mu", &mu, "--nu", &nu, "--cost", &c, "--eps", r.eps];
        let what = format!("{dtype} {opts:?} {:?}", r.flags);
        let check = |how: &str, j: &serde_json::Value| {
            assert_eq!(j["converged"], true, "{what} {how}: {j}");
            assert_eq!(j["dtype"], dtype, "{what} {how}: {j}");
            for (key, want) in [
                ("distance", r.distance),
                ("objective", r.objective),
                ("mass", r.mass),
            ] {
                assert_close(
                    &format!("{what} {how} {key}"),
                    &numbers(j, key),
                    &[want],
                    tol,
                );
            }
            assert!(
                j.get("ot_eps").is_none(),
                "{what} {how}: OT_ε is the balanced dual: {j}"
            );
        };
        // coupling: the plan, its cost, objective and mass.
        let j = ok(&[&["coupling", "--out", &out], &base[..], r.flags, opts].concat());
        check("coupling", &j);
        let plan: Array2<f64> = if suffix.is_empty() {
            read_npy(&out).unwrap()
        } else {
            read_npy::<_, Array2<f32>>(&out).unwrap().mapv(f64::from)
        };
        assert_eq!(plan.dim(), (7, 5), "{what}");
        let plan: Vec<f64> = plan.iter().copied().collect();
        assert_close(&format!("{what} plan"), &plan, r.plan, tol);
        // wasserstein: the same numbers without the plan (mass from a half-step).
        let j = ok(&[&["wasserstein"], &base[..], r.flags, opts].concat());
        check("wasserstein", &j);
    }
}

#[test]
fn dense_relaxations_match_pot_in_f64() {
    let d = dir("dense");
    write_problem(&d);
    dense_relaxations_match_pot(&d, "", &["--tol", "1e-13", "--iters", "100000"], 1e-9);
    // The side without a flag is exact: `--reg-m-mu 1` is `--reg-m-mu 1 --reg-m-nu inf`.
    let (mu, nu, c) = (p(&d, "mu.npy"), p(&d, "nu.npy"), p(&d, "c.npy"));
    let base = [
        "wasserstein",
        "--mu",
        &mu,
        "--nu",
        &nu,
        "--cost",
        &c,
        "--eps",
        "0.05",
    ];
    let one = ok(&[&base[..], &["--reg-m-mu", "1"]].concat());
    let explicit = ok(&[&base[..], &["--reg-m-mu", "1", "--reg-m-nu", "inf"]].concat());
    assert_eq!(one["distance"], explicit["distance"]);
    assert_eq!(one["objective"], explicit["objective"]);
}

#[test]
fn float32_matches_pot() {
    let d = dir("f32");
    write_problem(&d);
    dense_relaxations_match_pot(&d, "32", &[], 1e-4);
}

#[test]
fn batch_with_per_problem_costs_matches_pot() {
    let d = dir("batch");
    let probs: Vec<_> = (0..3).map(|k| problem(6, 4, k)).collect();
    let mu = Array2::from_shape_fn((3, 6), |(k, i)| probs[k].0[i]);
    let nu = Array2::from_shape_fn((3, 4), |(k, j)| probs[k].1[j]);
    let c = Array3::from_shape_fn((3, 6, 4), |(k, i, j)| probs[k].2[[i, j]]);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "c.npy", &c);
    let args = [
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.2",
        "--reg-m",
        "1",
        "--tol",
        "1e-13",
        "--iters",
        "100000",
    ];
    let want = |i: usize| {
        BATCH
            .iter()
            .map(|r| [r.0, r.1, r.2][i])
            .collect::<Vec<f64>>()
    };
    for cmd in [
        vec!["wasserstein"],
        vec!["coupling", "--out", &p(&d, "p.npy")],
    ] {
        let j = ok(&[&cmd[..], &args[..]].concat());
        assert_eq!(
            j["converged_each"],
            serde_json::json!([true, true, true]),
            "{j}"
        );
        assert_close("batch distance", &numbers(&j, "distance"), &want(0), 1e-9);
        assert_close("batch objective", &numbers(&j, "objective"), &want(1), 1e-9);
        assert_close("batch mass", &numbers(&j, "mass"), &want(2), 1e-9);
    }
    // The plans written carry the reported masses.
    let plans: Array3<f64> = read_npy(p(&d, "p.npy")).unwrap();
    for (k, plan) in plans.outer_iter().enumerate() {
        assert_close("batch plan mass", &[plan.sum()], &[BATCH[k].2], 1e-9);
    }
}

#[test]
fn point_clouds_match_pot() {
    let d = dir("clouds");
    let (a, b, x, y) = clouds(9, 11, 3);
    for (name, v) in [("a.npy", &a), ("b.npy", &b)] {
        npy(&d, name, v);
    }
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    let args = [
        "--mu",
        &p(&d, "a.npy"),
        "--nu",
        &p(&d, "b.npy"),
        "--x",
        &p(&d, "x.npy"),
        "--y",
        &p(&d, "y.npy"),
        "--eps",
        "0.05",
        "--reg-m",
        "0.3",
        "--tol",
        "1e-13",
        "--iters",
        "100000",
    ];
    let (dist, obj, mass) = CLOUDS;
    for cmd in [
        vec!["wasserstein"],
        vec!["coupling", "--out", &p(&d, "p.npy")],
    ] {
        let j = ok(&[&cmd[..], &args[..]].concat());
        assert_eq!(j["converged"], true, "{j}");
        assert_close("clouds distance", &numbers(&j, "distance"), &[dist], 1e-9);
        assert_close("clouds objective", &numbers(&j, "objective"), &[obj], 1e-9);
        assert_close("clouds mass", &numbers(&j, "mass"), &[mass], 1e-9);
    }
    let plan: Array2<f64> = read_npy(p(&d, "p.npy")).unwrap();
    assert_close("clouds plan mass", &[plan.sum()], &[mass], 1e-9);
}

#[test]
fn bad_flags_and_unequal_masses_are_refused_naming_the_flag() {
    let d = dir("errors");
    write_problem(&d);
    let (mu, nu, c) = (p(&d, "mu.npy"), p(&d, "nu.npy"), p(&d, "c.npy"));
    // An existing --out is left as it was by every refused run.
    let out = p(&d, "keep.npy");
    std::fs::write(&out, b"keep").unwrap();
    let w = |extra: &[&str]| -> Vec<String> {
        let base = [
            "wasserstein",
            "--mu",
            &mu,
            "--nu",
            &nu,
            "--cost",
            &c,
            "--eps",
            "0.1",
        ];
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let cpl = |extra: &[&str]| -> Vec<String> {
        let base = [
            "coupling", "--mu", &mu, "--nu", &nu, "--cost", &c, "--eps", "0.1", "--out", &out,
        ];
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        // Unequal masses in a balanced solve: the message says how to relax a marginal.
        (
            w(&[]),
            vec![
                "unequal total masses",
                "--reg-m RHO",
                "--reg-m-mu",
                "--reg-m-nu",
            ],
        ),
        (cpl(&[]), vec!["unequal total masses", "--reg-m RHO"]),
        (
            w(&["--reg-m", "inf"]),
            vec!["unequal total masses", "--reg-m RHO"],
        ),
        (
            w(&["--reg-m-mu", "inf", "--reg-m-nu", "inf"]),
            vec!["unequal total masses"],
        ),
        // ρ ≤ 0 or NaN.
        (
            w(&["--reg-m", "0"]),
            vec!["--reg-m = 0: the marginal penalty ρ must be > 0"],
        ),
        (
            w(&["--reg-m", "-1"]),
            vec!["--reg-m = -1: the marginal penalty"],
        ),
        (
            cpl(&["--reg-m", "nan"]),
            vec!["--reg-m = NaN: the marginal penalty"],
        ),
        (
            w(&["--reg-m", "-inf"]),
            vec!["--reg-m = -inf: the marginal penalty"],
        ),
        (
            w(&["--reg-m-mu", "0"]),
            vec!["--reg-m-mu = 0: the marginal penalty"],
        ),
        (
            cpl(&["--reg-m-mu", "1", "--reg-m-nu", "NaN"]),
            vec!["--reg-m-nu = NaN: the marginal penalty"],
        ),
        (
            w(&["--reg-m", "abc"]),
            vec!["invalid value 'abc' for '--reg-m <RHO>'"],
        ),
        // --reg-m with a per-side flag.
        (
            w(&["--reg-m", "1", "--reg-m-mu", "2"]),
            vec!["'--reg-m <RHO>' cannot be used with '--reg-m-mu <RHO>'"],
        ),
        (
            cpl(&["--reg-m", "1", "--reg-m-nu", "2"]),
            vec!["'--reg-m <RHO>' cannot be used with '--reg-m-nu <RHO>'"],
        ),
    ];
    for (args, needles) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&a, needles);
    }
    assert_eq!(std::fs::read(&out).unwrap(), b"keep");

    // Point clouds for the unequal-mass refusal below.
    let (a, b, x, y) = clouds(9, 11, 3);
    npy(&d, "a.npy", &a);
    npy(&d, "b.npy", &b);
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    // Unequal-mass clouds without a relaxation.
    refused(
        &[
            "coupling",
            "--mu",
            &p(&d, "a.npy"),
            "--nu",
            &p(&d, "b.npy"),
            "--x",
            &p(&d, "x.npy"),
            "--y",
            &p(&d, "y.npy"),
            "--eps",
            "0.1",
            "--out",
            &out,
        ],
        &["unequal total masses", "--reg-m RHO"],
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"keep");

    // Barycenters: a bad ρ is refused naming the flag, the output untouched.
    let (_, _, c55) = problem(5, 5, 0);
    npy(&d, "c55.npy", &c55);
    npy(&d, "h.npy", &Array2::from_elem((2, 5), 0.2));
    npy(&d, "wts.npy", &Array1::from(vec![0.5, 0.5]));
    for flags in [
        vec!["--reg-m", "0"],
        vec!["--reg-m-mu", "inf", "--reg-m-nu", "nan"],
    ] {
        let base = [
            "barycenter",
            "--inputs",
            &p(&d, "h.npy"),
            "--weights",
            &p(&d, "wts.npy"),
            "--cost",
            &p(&d, "c55.npy"),
            "--eps",
            "0.1",
            "--out",
            &out,
        ];
        let want = if flags[0] == "--reg-m" {
            "--reg-m = 0: the marginal penalty ρ must be > 0"
        } else {
            "--reg-m-nu = NaN: the marginal penalty ρ must be > 0"
        };
        refused(&[&base[..], &flags[..]].concat(), &[want]);
    }
    assert_eq!(std::fs::read(&out).unwrap(), b"keep");
}

/// Equal masses with both sides infinite (`--reg-m inf`) is the balanced problem: the same
/// distance as without the flag, and no unbalanced fields.
#[test]
fn infinite_penalties_are_the_balanced_problem() {
    let d = dir("balanced");
    let (a, _, c) = problem(7, 5, 0);
    let b = Array1::from_elem(5, a.sum() / 5.0);
    npy(&d, "mu.npy", &a);
    npy(&d, "nu.npy", &b);
    npy(&d, "c.npy", &c);
    let base = [
        "wasserstein",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.1",
    ];
    let plain = ok(&base);
    let inf = ok(&[&base[..], &["--reg-m", "inf"]].concat());
    assert_eq!(plain["distance"], inf["distance"]);
    assert!(
        inf.get("objective").is_none() && inf.get("mass").is_none(),
        "{inf}"
    );
    assert!(inf.get("ot_eps").is_some());
    // A large finite ρ approaches it (the plan's marginals ≈ the inputs': mass ≈ Σ μ).
    let big = ok(&[&base[..], &["--reg-m", "1e6"]].concat());
    let (dp, db) = (numbers(&plain, "distance")[0], numbers(&big, "distance")[0]);
    assert!((dp - db).abs() < 1e-4 * dp, "{dp} vs {db}");
    assert!((numbers(&big, "mass")[0] - a.sum()).abs() < 1e-4 * a.sum());
}

/// `--backend cuda` (a CUDA build with a GPU; skips with the reason otherwise, fails under
/// `LOGOT_REQUIRE_GPU=1`): dense, batched and point-cloud unbalanced solves against POT in
/// f64 and f32, the transported mass included (computed by a half-step on the GPU).
#[cfg(feature = "cuda")]
#[test]
fn cuda_backend_matches_pot() {
    if common::gpu::gpu().is_none() {
        return;
    }
    let d = dir("cuda");
    write_problem(&d);
    let tight = ["--tol", "1e-13", "--iters", "100000", "--backend", "cuda"];
    dense_relaxations_match_pot(&d, "", &tight, 1e-9);
    dense_relaxations_match_pot(&d, "32", &["--backend", "cuda"], 1e-4);
    // Point clouds on the GPU, f64.
    let (a, b, x, y) = clouds(9, 11, 3);
    npy(&d, "a.npy", &a);
    npy(&d, "b.npy", &b);
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    let j = ok(&[
        &[
            "wasserstein",
            "--mu",
            &p(&d, "a.npy"),
            "--nu",
            &p(&d, "b.npy"),
            "--x",
            &p(&d, "x.npy"),
            "--y",
            &p(&d, "y.npy"),
            "--eps",
            "0.05",
            "--reg-m",
            "0.3",
        ][..],
        &tight,
    ]
    .concat());
    assert_eq!(j["converged"], true, "{j}");
    let (dist, obj, mass) = CLOUDS;
    assert_close(
        "cuda clouds distance",
        &numbers(&j, "distance"),
        &[dist],
        1e-9,
    );
    assert_close(
        "cuda clouds objective",
        &numbers(&j, "objective"),
        &[obj],
        1e-9,
    );
    assert_close("cuda clouds mass", &numbers(&j, "mass"), &[mass], 1e-9);
}

/// `logot barycenter --reg-m RHO` against POT, dense (`--cost`) and on the grid (`--grid`),
/// f64 to 1e-7 of the largest entry, f32 to 1e-4.
#[test]
fn barycenter_reg_m_matches_pot() {
    let d = dir("barycenter");
    for (name, case, on_grid) in [
        ("dense2", pot::DENSE2, false),
        ("grid1d", pot::GRID1D, true),
    ] {
        assert_eq!(case.shape.len(), 1, "{name}");
        let (inputs, weights) = (case.inputs::<f64>(), case.weights::<f64>());
        let cost = case.dense_cost::<f64>();
        npy(&d, "h.npy", &inputs);
        npy(&d, "h32.npy", &inputs.mapv(|v| v as f32));
        npy(&d, "w.npy", &weights);
        npy(&d, "w32.npy", &weights.mapv(|v| v as f32));
        npy(&d, "c.npy", &cost);
        npy(&d, "c32.npy", &cost.mapv(|v| v as f32));
        for (rho, want) in case.rhos.iter().zip(case.barycenters) {
            let top = want.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
            for (suffix, tol) in [("", 1e-7), ("32", 1e-4)] {
                let (h, w, c, out) = (
                    p(&d, &format!("h{suffix}.npy")),
                    p(&d, &format!("w{suffix}.npy")),
                    p(&d, &format!("c{suffix}.npy")),
                    p(&d, "bar.npy"),
                );
                let (eps, rho_s) = (case.eps.to_string(), rho.to_string());
                let mut args = vec![
                    "barycenter",
                    "--inputs",
                    &h,
                    "--weights",
                    &w,
                    "--eps",
                    &eps,
                    "--out",
                    &out,
                    "--reg-m",
                    &rho_s,
                    "--iters",
                    "200000",
                ];
                let tol_s = if suffix.is_empty() { "1e-12" } else { "1e-6" };
                args.extend(["--tol", tol_s]);
                if on_grid {
                    args.push("--grid");
                } else {
                    args.extend(["--cost", &c]);
                }
                let j = ok(&args);
                let got: Vec<f64> = if suffix.is_empty() {
                    read_npy::<_, Array1<f64>>(&out).unwrap().to_vec()
                } else {
                    read_npy::<_, Array1<f32>>(&out)
                        .unwrap()
                        .iter()
                        .map(|&v| v as f64)
                        .collect()
                };
                assert_eq!(got.len(), want.len());
                let err = got
                    .iter()
                    .zip(want.iter())
                    .map(|(g, w)| (g - w).abs())
                    .fold(0.0f64, f64::max);
                assert!(
                    err <= tol * top,
                    "{name} ρ = {rho} f{suffix}: max error {err:e} vs POT (top {top:e}); {j}"
                );
            }
        }
    }
}

/// `clouds(9, 11, 3)`, squared Euclidean, `eps = 0.1`, `reg_m = 0.4`: the unbalanced
/// divergence `OBJ(a, b) − ½ OBJ(a, a) − ½ OBJ(b, b) + (ε/2)(Σa − Σb)²` with `OBJ` the
/// generalized objective of POT's plans (`make_pot_cli_unbalanced.py`), and the three
/// `OBJ`.
const DIVERGENCE: (f64, [f64; 3]) = (
    0.9344069634479385,
    [1.5203877541457715, 0.731012386684276, 0.46594919471139024],
);

#[test]
fn divergence_reg_m_matches_pot() {
    let d = dir("divergence");
    let (a, b, x, y) = clouds(9, 11, 3);
    for (name, v) in [("a.npy", &a), ("b.npy", &b)] {
        npy(&d, name, v);
    }
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    let (ap, bp, xp, yp, gx) = (
        p(&d, "a.npy"),
        p(&d, "b.npy"),
        p(&d, "x.npy"),
        p(&d, "y.npy"),
        p(&d, "gx.npy"),
    );
    let base = [
        "divergence",
        "--mu",
        &ap,
        "--nu",
        &bp,
        "--x",
        &xp,
        "--y",
        &yp,
        "--eps",
        "0.1",
    ];
    let precise = ["--tol", "1e-13", "--iters", "100000"];
    let j = ok(&[
        &base[..],
        &["--reg-m", "0.4", "--grad-x", &gx],
        &precise[..],
    ]
    .concat());
    assert_eq!(j["converged"], true, "{j}");
    let (s, terms) = DIVERGENCE;
    assert_close(
        "divergence",
        &[j["divergence"].as_f64().unwrap()],
        &[s],
        1e-9,
    );
    let got: Vec<f64> = (0..3)
        .map(|k| j["problems"][k]["value"].as_f64().unwrap())
        .collect();
    assert_close("divergence terms", &got, &terms, 1e-9);
    let g: Array2<f64> = read_npy(&gx).unwrap();
    assert_eq!(g.dim(), (9, 3));
    assert!(g.iter().all(|v| v.is_finite()));
    // Without --reg-m the unequal masses are refused, with the way to relax them.
    refused(&base, &["mass", "--reg-m"]);
    // One penalty per side, or the linear convention, is refused naming the flags.
    refused(
        &[&base[..], &["--reg-m-mu", "0.4", "--reg-m-nu", "1"]].concat(),
        &["--reg-m-mu/--reg-m-nu", "one penalty"],
    );
    refused(
        &[&base[..], &["--reg-m", "0.4", "--convention", "linear"]].concat(),
        &["--convention"],
    );
    refused(&[&base[..], &["--reg-m", "-1"]].concat(), &["--reg-m"]);
}
