//! Unbalanced (KL-relaxed) Sinkhorn against POT 0.9.7's `ot.unbalanced.sinkhorn_unbalanced`
//! (`reg_type="kl"`, entropy relative to `a⊗b`), closed forms and the balanced solver.
//!
//! The problems are deterministic formulas, the same in Rust ([`problem`]) and in Python
//! (`tests/data/make_pot_unbalanced.py`, which prints the reference values below):
//! `a_i = (0.5 + 0.4 sin²(1.3i + 0.2 + 0.1k))(1 + 0.3k)`, `b_j = 0.3 + 0.5 cos²(0.7j + 0.1 + 0.2k)`,
//! `M_ij = (sin(0.9i + 0.3 + 0.5k) − cos(1.1j − 0.2k))²` (masses unequal throughout).
//! `objective` is `⟨P,M⟩ + reg·kl_div(P, a⊗b, mass=True) + ρ_a·kl_div(P1, a, mass=True)
//! + ρ_b·kl_div(Pᵀ1, b, mass=True)` with POT's `NumpyBackend().kl_div` on POT's plan (a term
//! with ρ = ∞ left out); POT's own `returnCost="total"` omits the `− x + y` mass terms.

use crate::common::relaxed::Relaxed;
use logot::{
    CpuBackend, Error, GridCost, PointCloudCost, Problem, ProblemReport, SinkhornParams,
    SinkhornSolver,
};
use ndarray::{s, Array1, Array2, Array3, Axis};

/// The test problem `k` of size `n×m` (see the module docs).
fn problem(n: usize, m: usize, k: usize) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let k = k as f64;
    let a = Array1::from_shape_fn(n, |i| {
        (0.5 + 0.4 * (1.3 * i as f64 + 0.2 + 0.1 * k).sin().powi(2)) * (1.0 + 0.3 * k)
    });
    let b = Array1::from_shape_fn(m, |j| {
        0.3 + 0.5 * (0.7 * j as f64 + 0.1 + 0.2 * k).cos().powi(2)
    });
    let c = Array2::from_shape_fn((n, m), |(i, j)| {
        ((0.9 * i as f64 + 0.3 + 0.5 * k).sin() - (1.1 * j as f64 - 0.2 * k).cos()).powi(2)
    });
    (a, b, c)
}

struct Reference {
    n: usize,
    m: usize,
    k: usize,
    eps: f64,
    rho: (f64, f64),
    plan: &'static [f64],
    linear: f64,
    /// POT's `returnCost="total"` (KL without its mass terms).
    total: f64,
    objective: f64,
}

/// `a, b, M = problem(7, 5, 0)`; `P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, 0.5, reg_type="kl", numItermax=200000, stopThr=1e-15)`,
/// `linear`/`total` from `sinkhorn_unbalanced2(..., returnCost="linear"/"total")` with the same arguments.
const SCALAR: Reference = Reference {
    n: 7,
    m: 5,
    k: 0,
    eps: 0.1,
    rho: (0.5, 0.5),
    plan: &[
        0.004743945066281889,
        0.3308779073926841,
        8.58456086077334e-05,
        3.116608153056512e-08,
        0.024720905462655346,
        0.6558014935940072,
        0.043589261259636,
        1.9586313536479083e-11,
        4.4266020635064526e-17,
        2.0221021265011553e-07,
        0.3674072528361049,
        0.05181087670438629,
        9.772579295172177e-11,
        3.825210253911752e-16,
        6.85115662618431e-07,
        0.0007644247852531285,
        0.2881686993180313,
        0.001867484223560069,
        2.3243020331150084e-06,
        0.22569795683881558,
        2.735527219570585e-13,
        8.856252204941445e-07,
        0.18262395404076998,
        0.16946716495520076,
        0.20870153458159574,
        2.865366761736445e-18,
        2.6980460875021235e-10,
        0.034422192457006257,
        0.3742108814564718,
        0.006944434027178273,
        2.19163920815332e-11,
        1.5863275656054945e-05,
        0.18789262431580483,
        0.05839649707710955,
        0.4641468600348908,
    ],
    linear: 0.2185239241023186,
    total: -1.609823385706477e-15,
    objective: 1.2730310718092492,
};

/// `a, b, M = problem(7, 5, 0)`; `P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.1, (0.5, 2.0), reg_type="kl", numItermax=200000, stopThr=1e-15)`,
/// `linear`/`total` from `sinkhorn_unbalanced2(..., returnCost="linear"/"total")` with the same arguments.
const PAIR: Reference = Reference {
    n: 7,
    m: 5,
    k: 0,
    eps: 0.1,
    rho: (0.5, 2.0),
    plan: &[
        0.004034811816032845,
        0.2842131623219141,
        7.528448109753226e-05,
        2.823425110661732e-08,
        0.023361880590873227,
        0.5652532194944612,
        0.03794398463078742,
        1.7407126697731034e-11,
        4.0639800103428754e-17,
        1.9365714388393236e-07,
        0.31651789454331497,
        0.04507796145068403,
        8.680874760359384e-11,
        3.5100741577381233e-16,
        6.558042584380333e-07,
        0.0006308460255058039,
        0.24017522232540522,
        0.0015890929382288321,
        2.0431093496092288e-06,
        0.20695505190902838,
        2.2276840312355459e-13,
        7.283754688907954e-07,
        0.15334655984134685,
        0.1469970276115345,
        0.18884173721060885,
        2.3481756418455308e-18,
        2.233019459237865e-10,
        0.029086578209076053,
        0.32664589871561184,
        0.006323346926139502,
        1.7641959077019995e-11,
        1.2896248821282368e-05,
        0.15595209960832937,
        0.05006969933398371,
        0.4151384497356861,
    ],
    linear: 0.19310263328615368,
    total: -1.5543122344752192e-15,
    objective: 1.3353369066916503,
};

/// `a, b, M = problem(6, 8, 1)`; `P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.05, (f64::INFINITY, 1.0), reg_type="kl", numItermax=200000, stopThr=1e-15)`,
/// `linear`/`total` from `sinkhorn_unbalanced2(..., returnCost="linear"/"total")` with the same arguments.
const SEMI_MU: Reference = Reference {
    n: 6,
    m: 8,
    k: 1,
    eps: 0.05,
    rho: (f64::INFINITY, 1.0),
    plan: &[
        0.06193139814501253,
        0.25807957457907693,
        1.1052018860694691e-15,
        6.4120618019090895e-31,
        7.201892604917244e-17,
        0.30435930638763203,
        0.02308576608234247,
        0.04795669492941777,
        0.7502737400044011,
        0.06122575033946508,
        2.9748953363840606e-21,
        2.8770940714344874e-39,
        8.596199605138703e-23,
        0.03452818747553987,
        0.32297214734662727,
        0.0005568165406012731,
        0.0018970865381013654,
        0.14285159760811228,
        2.6640710437593486e-12,
        1.7115693286543334e-25,
        3.1581817400770943e-13,
        0.2899244767202174,
        0.0006360922349012228,
        0.24445567249094424,
        2.542137479262774e-13,
        4.7465319050988845e-06,
        0.36655615903188227,
        1.3974133179930436e-05,
        0.5667168722421198,
        9.899170734503201e-05,
        5.41022492657181e-14,
        0.1116243064235968,
        2.9828568430428803e-29,
        3.0699140859856817e-18,
        0.01607909238804862,
        0.7451871762314809,
        0.14758304985005805,
        3.2218593873033267e-16,
        4.63157539791413e-30,
        5.351794323043035e-11,
        1.0962404233953548e-25,
        2.0384468824562218e-15,
        0.07535427545476224,
        0.21604537365412124,
        0.4855573032892391,
        1.5520174671918163e-13,
        1.812162674203538e-26,
        9.563900535450771e-09,
    ],
    linear: 0.22850343857478844,
    total: 1.42004225065707,
    objective: 1.2219319781605886,
};

/// `a, b, M = problem(6, 8, 1)`; `P = ot.unbalanced.sinkhorn_unbalanced(a, b, M, 0.05, (1.0, f64::INFINITY), reg_type="kl", numItermax=200000, stopThr=1e-15)`,
/// `linear`/`total` from `sinkhorn_unbalanced2(..., returnCost="linear"/"total")` with the same arguments.
const SEMI_NU: Reference = Reference {
    n: 6,
    m: 8,
    k: 1,
    eps: 0.05,
    rho: (1.0, f64::INFINITY),
    plan: &[
        0.05348587120173084,
        0.24938323247698707,
        1.2325267519508456e-15,
        6.642789174630824e-31,
        8.13649627843402e-17,
        0.30074492458033597,
        0.019929719773317922,
        0.05588129668012126,
        0.701274828172726,
        0.06403067007815655,
        3.5905976523654085e-21,
        3.2258721154533854e-39,
        1.0510844118702981e-22,
        0.03692545172579666,
        0.30176042807264664,
        0.0007022143055582969,
        0.0015732043528281308,
        0.13254657958638272,
        2.8527935683690496e-12,
        1.702617420189058e-25,
        3.426081699192388e-13,
        0.2750846840082024,
        0.0005272866828377954,
        0.2735187840326302,
        1.3444538852116023e-13,
        2.8087216869465923e-06,
        0.2503306029944075,
        8.865359164798353e-06,
        0.39208083938046584,
        5.990033114157933e-05,
        2.8601638271600235e-14,
        0.0796516342720302,
        1.4849130875618473e-29,
        1.7099376391749969e-18,
        0.010336100000163393,
        0.4449985307137878,
        0.09610980696805049,
        1.8350957878286498e-16,
        2.3047619453536072e-30,
        3.594653878883587e-11,
        5.366438160694388e-26,
        1.1165164912734926e-15,
        0.047633748857709816,
        0.12686734978690908,
        0.3109448779069453,
        8.692815319544954e-14,
        8.867602342331033e-27,
        6.316905910396471e-09,
    ],
    linear: 0.1696170850487906,
    total: -0.7955857377131901,
    objective: 1.1570848405243843,
};

/// `a, b, M = problem(5, 4, 0)`; POT calls as above with `reg = 0.2, reg_m = 1.0`.
const BATCH_0: Reference = Reference {
    n: 5,
    m: 4,
    k: 0,
    eps: 0.2,
    rho: (1.0, 1.0),
    plan: &[
        0.06004382664302678,
        0.2729128264810095,
        0.014339908117576391,
        0.0005700889927505552,
        0.6102102503663592,
        0.08561987268790039,
        5.9205007311374325e-06,
        1.857084036577332e-08,
        0.3496410379395236,
        0.07145794690751951,
        1.0123762066158193e-05,
        4.179065822917935e-08,
        0.03394186247666695,
        0.35866022619794097,
        0.09418582587056186,
        0.006932942341754284,
        1.5329866964876225e-07,
        0.00015011855624557467,
        0.2223747774412586,
        0.4469548616641101,
    ],
    linear: 0.2513129728529886,
    total: -7.771561172376096e-16,
    objective: 1.2618602344414023,
};

/// `a, b, M = problem(5, 4, 1)`; POT calls as above with `reg = 0.2, reg_m = 1.0`.
const BATCH_1: Reference = Reference {
    n: 5,
    m: 4,
    k: 1,
    eps: 0.2,
    rho: (1.0, 1.0),
    plan: &[
        0.2847846422757852,
        0.2099478552354983,
        0.00020863878084798325,
        1.772372293052359e-07,
        0.6563030989481191,
        0.18099527490729833,
        1.0439104114476068e-05,
        1.7918626507477678e-09,
        0.18000111407261435,
        0.27359545134791824,
        0.002208694481062621,
        6.086515251935196e-06,
        0.00019822234981069204,
        0.006723279291956233,
        0.4353953434669332,
        0.18726247736687823,
        4.34309867459189e-09,
        1.2692797141096994e-06,
        0.04194717950384576,
        0.5990659289161926,
    ],
    linear: 0.19127180850134784,
    total: -2.4424906541753444e-15,
    objective: 1.72567118342355,
};

/// `a, b, M = problem(5, 4, 2)`; POT calls as above with `reg = 0.2, reg_m = 1.0`.
const BATCH_2: Reference = Reference {
    n: 5,
    m: 4,
    k: 2,
    eps: 0.2,
    rho: (1.0, 1.0),
    plan: &[
        0.42611674995101956,
        0.18514605396366407,
        0.00016363450583393795,
        1.663864672010241e-09,
        0.6289655035619093,
        0.34818839618256897,
        0.0014329858634804843,
        4.6168819644829295e-08,
        0.024445124719164206,
        0.04484287475361105,
        0.3717884648691649,
        0.0035942712573010646,
        1.135017803566892e-06,
        7.247139855216101e-06,
        0.16539332352703268,
        0.6062944918677127,
        1.5268636709922324e-08,
        1.3869361732539962e-07,
        0.0296891198421034,
        0.5829529623324956,
    ],
    linear: 0.18262053204123554,
    total: -3.9968028886505635e-15,
    objective: 2.369796090766397,
};

fn params(eps: f64, tol: f64) -> SinkhornParams {
    SinkhornParams::new(eps).tol(tol).max_iters(100_000)
}

/// The solver of problems relaxed by `rho`.
fn solver(eps: f64, rho: (f64, f64), tol: f64) -> Relaxed<CpuBackend> {
    Relaxed::new(SinkhornSolver::new(CpuBackend, params(eps, tol)), rho)
}

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

/// The identity between the generalized objective and POT's `total`:
/// `objective − total = ε(Σa Σb − m) + ρ_a(Σa − m) + ρ_b(Σb − m)`, `m = Σ P`.
fn mass_terms(r: &Reference, a: &Array1<f64>, b: &Array1<f64>, mass: f64) -> f64 {
    let (sa, sb) = (a.sum(), b.sum());
    let side = |rho: f64, s: f64| {
        if rho.is_finite() {
            rho * (s - mass)
        } else {
            0.0
        }
    };
    r.eps * (sa * sb - mass) + side(r.rho.0, sa) + side(r.rho.1, sb)
}

fn check_f64(r: &Reference) {
    let (a, b, c) = problem(r.n, r.m, r.k);
    let solver = solver(r.eps, r.rho, 1e-13);
    let cpl = solver
        .coupling(&Problem::new(a.view(), b.view(), c.view()).unwrap())
        .unwrap();
    let conv = &cpl.result.convergence;
    assert!(conv.converged, "{conv:?}");
    let plan: Vec<f64> = cpl.plan.iter().copied().collect();
    assert_close("plan", &plan, r.plan, 1e-9);
    assert_close("linear", &[cpl.result.distance[0]], &[r.linear], 1e-9);
    let objective = cpl
        .result
        .objective
        .as_ref()
        .expect("an unbalanced objective")[0];
    assert_close("objective", &[objective], &[r.objective], 1e-9);
    let mass: f64 = r.plan.iter().sum();
    assert_close(
        "objective − mass terms vs POT's total",
        &[objective - mass_terms(r, &a, &b, mass)],
        &[r.total],
        1e-9,
    );
    // `solve` hands back the same numbers as `coupling`.
    let sol = solver
        .solve(&Problem::new(a.view(), b.view(), c.view()).unwrap())
        .unwrap();
    assert_close("solve distance", &[sol.distance[0]], &[r.linear], 1e-9);
    assert_close(
        "solve objective",
        &[sol.objective.unwrap()[0]],
        &[r.objective],
        1e-9,
    );
}

#[test]
fn scalar_rho_matches_pot() {
    check_f64(&SCALAR);
}

#[test]
fn rho_pair_matches_pot() {
    check_f64(&PAIR);
}

#[test]
fn semi_unbalanced_matches_pot() {
    check_f64(&SEMI_MU);
    check_f64(&SEMI_NU);
    // ρ = ∞ keeps that marginal exact.
    for (r, axis) in [(&SEMI_MU, Axis(1)), (&SEMI_NU, Axis(0))] {
        let (a, b, c) = problem(r.n, r.m, r.k);
        let cpl = solver(r.eps, r.rho, 1e-13)
            .coupling(&Problem::new(a.view(), b.view(), c.view()).unwrap())
            .unwrap();
        let marginal = cpl.plan.index_axis(Axis(0), 0).sum_axis(axis);
        let want = if axis == Axis(1) { &a } else { &b };
        assert_close(
            "exact marginal",
            marginal.as_slice().unwrap(),
            want.as_slice().unwrap(),
            1e-11,
        );
    }
}

#[test]
fn batch_with_per_problem_costs_matches_pot() {
    let refs = [&BATCH_0, &BATCH_1, &BATCH_2];
    let (n, m) = (5, 4);
    let mut mu = Array2::zeros((3, n));
    let mut nu = Array2::zeros((3, m));
    let mut costs = Array3::zeros((3, n, m));
    for (k, _) in refs.iter().enumerate() {
        let (a, b, c) = problem(n, m, k);
        mu.row_mut(k).assign(&a);
        nu.row_mut(k).assign(&b);
        costs.index_axis_mut(Axis(0), k).assign(&c);
    }
    let solver = solver(0.2, (1.0, 1.0), 1e-13);
    let cpl = solver
        .coupling(&Problem::new(mu.view(), nu.view(), costs.view()).unwrap())
        .unwrap();
    assert!(cpl.result.convergence.converged);
    assert_eq!(cpl.result.convergence.problems.len(), 3);
    for (k, r) in refs.iter().enumerate() {
        let plan: Vec<f64> = cpl.plan.index_axis(Axis(0), k).iter().copied().collect();
        assert_close(&format!("plan {k}"), &plan, r.plan, 1e-9);
        assert_close("linear", &[cpl.result.distance[k]], &[r.linear], 1e-9);
        let obj = cpl.result.objective.as_ref().unwrap()[k];
        assert_close("objective", &[obj], &[r.objective], 1e-9);
    }
}

#[test]
fn float32_matches_pot() {
    for r in [&SCALAR, &PAIR, &SEMI_MU, &SEMI_NU] {
        let (a, b, c) = problem(r.n, r.m, r.k);
        let (a, b, c) = (
            a.mapv(|v| v as f32),
            b.mapv(|v| v as f32),
            c.mapv(|v| v as f32),
        );
        let p = params(r.eps, 0.0).tol(None); // float32's default, 1e-5 of the mass
        let cpl = Relaxed::new(SinkhornSolver::new(CpuBackend, p), r.rho)
            .coupling(&Problem::new(a.view(), b.view(), c.view()).unwrap())
            .unwrap();
        assert!(
            cpl.result.convergence.converged,
            "{:?}",
            cpl.result.convergence
        );
        let plan: Vec<f64> = cpl.plan.iter().map(|&v| v as f64).collect();
        assert_close("f32 plan", &plan, r.plan, 1e-4);
        assert_close(
            "f32 linear",
            &[cpl.result.distance[0] as f64],
            &[r.linear],
            1e-4,
        );
        let obj = cpl.result.objective.as_ref().unwrap()[0] as f64;
        assert_close("f32 objective", &[obj], &[r.objective], 1e-4);
    }
}

#[test]
fn convenience_function_takes_pot_reg_m() {
    let r = &SCALAR;
    let (a, b, c) = problem(r.n, r.m, r.k);
    let w = logot::wasserstein_unbalanced(a.view(), b.view(), c.view(), r.eps, 0.5).unwrap();
    assert!(w.convergence.converged);
    // Default tolerance 1e-9 of the mass.
    assert_close("distance", &[w.distance[0]], &[r.linear], 1e-7);
    let r = &SEMI_MU;
    let (a, b, c) = problem(r.n, r.m, r.k);
    let w =
        logot::wasserstein_unbalanced(a.view(), b.view(), c.view(), r.eps, (f64::INFINITY, 1.0))
            .unwrap();
    assert_close("distance", &[w.distance[0]], &[r.linear], 1e-7);
}

/// As ρ → ∞ both marginals are enforced: ρ = 1e8 gives the balanced plan (the difference is
/// O(ε/ρ) in the exponents).
#[test]
fn large_rho_recovers_the_balanced_plan() {
    let (a, b, c) = problem(7, 5, 0);
    let (a, b) = (&a / a.sum(), &b / b.sum());
    let problem = Problem::new(a.view(), b.view(), c.view()).unwrap();
    let balanced = SinkhornSolver::new(
        CpuBackend,
        SinkhornParams::new(0.1).tol(1e-13).max_iters(100_000),
    )
    .coupling(&problem)
    .unwrap();
    // The split of mass between f and g converges at the rate 1 − O(ε/ρ) for large ρ (the
    // direction the balanced problem leaves free): a tolerance of 1e-8, not 1e-13, is met.
    let relaxed = solver(0.1, (1e8, 1e8), 1e-8).coupling(&problem).unwrap();
    assert!(
        balanced.result.convergence.converged,
        "{:?}",
        balanced.result.convergence
    );
    assert!(
        relaxed.result.convergence.converged,
        "{:?}",
        relaxed.result.convergence
    );
    let diff = (&balanced.plan - &relaxed.plan).mapv(f64::abs);
    assert!(
        diff.iter().all(|&d| d < 1e-7),
        "max diff {:e}",
        diff.fold(0.0, |m: f64, &d| m.max(d))
    );
    assert!((balanced.result.distance[0] - relaxed.result.distance[0]).abs() < 1e-7);
}

/// A constant cost `C ≡ c`: the plan is `t·a⊗b` with constant `f − ε log a = F`,
/// `g − ε log b = G`; the optimality conditions `t·Σb = exp(−F/ρ_a)`, `t·Σa = exp(−G/ρ_b)` and
/// `log t = (F + G − c)/ε` give `log t = −(c + ρ_a log Σb + ρ_b log Σa)/(ε + ρ_a + ρ_b)`
/// (`t = 1/Σb` for `ρ_a = ∞`). The plan's mass depends on `c`: the solver must not take a
/// constant out of an unbalanced cost.
#[test]
fn constant_cost_gives_the_closed_form_plan() {
    let (a, b, _) = problem(4, 3, 1);
    let (sa, sb) = (a.sum(), b.sum());
    let eps = 0.1;
    for rho in [(0.5, 2.0), (3.0, 3.0), (f64::INFINITY, 0.7)] {
        for c in [0.0, 0.3, 1.7, 25.0, 300.0] {
            let cost = Array2::from_elem((4, 3), c);
            // Within f64's reach: the exponents (f + g − C)/ε lose ulp(C)/ε.
            let tol = 1e-13f64.max(16.0 * f64::EPSILON * c / eps);
            let cpl = solver(eps, rho, tol)
                .coupling(&Problem::new(a.view(), b.view(), cost.view()).unwrap())
                .unwrap();
            assert!(
                cpl.result.convergence.converged,
                "rho {rho:?}, c = {c}: {:?}",
                cpl.result.convergence
            );
            let log_t = if rho.0.is_infinite() {
                -sb.ln()
            } else {
                -(c + rho.0 * sb.ln() + rho.1 * sa.ln()) / (eps + rho.0 + rho.1)
            };
            let t = log_t.exp();
            // The tolerance is relative to the plan's mass t·Σa·Σb however small (1e-5 of
            // the inputs' at c = 25, 1e-21 at c = 300), and so is the plan's error.
            let rel = 1e3 * tol;
            for ((i, j), &p) in cpl.plan.index_axis(Axis(0), 0).indexed_iter() {
                let want = t * a[i] * b[j];
                assert!(
                    (p - want).abs() <= rel * want,
                    "rho {rho:?}, c = {c}: P[{i},{j}] = {p:e}, closed form {want:e}"
                );
            }
            let distance = c * t * sa * sb;
            assert!((cpl.result.distance[0] - distance).abs() <= rel * distance);
        }
    }
}

/// The report's residual is the one of the returned potentials: recomputed here in f64 from
/// `f`, `g` and the cost, converged or not.
#[test]
fn report_residual_is_the_returned_potentials_one() {
    let (a, b, c) = problem(7, 5, 0);
    let (eps, rho) = (0.1, (0.5, 2.0));
    for iters in [1, 3, 10, 60] {
        let p = SinkhornParams::new(eps).fixed_iterations(iters);
        let res = SinkhornSolver::new(CpuBackend, p)
            .solve(
                &Problem::new(a.view(), b.view(), c.view())
                    .unwrap()
                    .relaxed(rho),
            )
            .unwrap();
        let (f, g) = (res.f.row(0), res.g.row(0));
        let plan = Array2::from_shape_fn((7, 5), |(i, j)| ((f[i] + g[j] - c[[i, j]]) / eps).exp());
        // One more relaxed half-step moves the marginal `r` to the geometric blend
        // `r^{1−φ}·w^φ` of `r` and the one the condition asks for, `w = a·exp(−(pot − ε log a)/ρ)`.
        let residual =
            |marginal: Array1<f64>, w: &Array1<f64>, pot: ndarray::ArrayView1<f64>, rho: f64| {
                let phi = rho / (rho + eps);
                (0..w.len())
                    .map(|k| {
                        let asked = w[k] * (-(pot[k] - eps * w[k].ln()) / rho).exp();
                        let next = marginal[k].powf(1.0 - phi) * asked.powf(phi);
                        (marginal[k] - next).abs()
                    })
                    .sum::<f64>()
            };
        let rows = residual(plan.sum_axis(Axis(1)), &a, f, rho.0);
        let cols = residual(plan.sum_axis(Axis(0)), &b, g, rho.1);
        let want = rows.max(cols);
        let got = res.convergence.marginal_error;
        assert!(
            (got - want).abs() <= 1e-9 * want + 1e-14,
            "{iters} iterations: reported {got:e}, recomputed {want:e}"
        );
        // The tolerance is relative to the plan's mass.
        let mass = plan.sum();
        let report = res.convergence.problems[0];
        assert!(
            (report.mass - mass).abs() <= 1e-12 * mass,
            "{report:?}, Σ P = {mass:e}"
        );
        assert_eq!(report.converged, want <= res.convergence.tol * report.mass);
        let cost: f64 = (&plan * &c).sum();
        assert!((res.distance[0] - cost).abs() <= 1e-12 * cost);
    }
}

/// Grid and point-cloud costs run the same unbalanced solver as the dense matrix.
#[test]
fn grid_and_point_cloud_sources_agree_with_dense() {
    let grid = GridCost::new(&[6, 5]).unwrap();
    let n = grid.len();
    let a = Array1::from_shape_fn(n, |i| 0.2 + (0.7 * i as f64).sin().powi(2));
    let b = Array1::from_shape_fn(n, |j| 0.1 + 0.5 * (0.4 * j as f64 + 1.0).cos().powi(2));
    let (a2, b2) = (
        a.clone().insert_axis(Axis(0)),
        b.clone().insert_axis(Axis(0)),
    );
    let solver = solver(0.05, (0.3, 1.5), 1e-12);
    let dense = solver
        .solve(&Problem::new(a.view(), b.view(), grid.to_dense::<f64>().view()).unwrap())
        .unwrap();
    let on_grid = solver
        .solve(&Problem::new(a2.view(), b2.view(), grid.clone()).unwrap())
        .unwrap();
    // The same points as a cloud in 2-D: squared Euclidean costs.
    let pts = Array2::from_shape_fn((n, 2), |(p, k)| {
        let idx = grid.unravel(p);
        GridCost::coordinate(grid.shape()[k], idx[k])
    });
    let cloud = PointCloudCost::new(pts.view(), pts.view()).unwrap();
    let on_cloud = solver
        .solve(&Problem::new(a2.view(), b2.view(), cloud).unwrap())
        .unwrap();
    for (name, r) in [("grid", &on_grid), ("point cloud", &on_cloud)] {
        assert!(r.convergence.converged, "{name}");
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y.abs().max(1.0);
        assert!(close(r.distance[0], dense.distance[0]), "{name} distance");
        assert!(
            close(
                r.objective.as_ref().unwrap()[0],
                dense.objective.as_ref().unwrap()[0]
            ),
            "{name} objective"
        );
        for (x, y) in r.f.iter().zip(&dense.f).chain(r.g.iter().zip(&dense.g)) {
            assert!(close(*x, *y), "{name} potentials: {x} vs {y}");
        }
    }
}

/// A zero-mass bin stays −∞ and takes no part: the solution is the one without the bin.
#[test]
fn zero_mass_bins_drop_out() {
    let (a, b, c) = problem(7, 5, 0);
    let mut a0 = a.clone();
    a0[3] = 0.0;
    let solver = solver(0.1, (0.5, 2.0), 1e-13);
    let with = solver
        .coupling(&Problem::new(a0.view(), b.view(), c.view()).unwrap())
        .unwrap();
    let keep: Vec<usize> = (0..7).filter(|&i| i != 3).collect();
    let a_less = a.select(Axis(0), &keep);
    let c_less = c.select(Axis(0), &keep);
    let without = solver
        .coupling(&Problem::new(a_less.view(), b.view(), c_less.view()).unwrap())
        .unwrap();
    assert!(with.result.f[[0, 3]] == f64::NEG_INFINITY);
    assert!(with.plan.slice(s![0, 3, ..]).iter().all(|&p| p == 0.0));
    let plan_less = with.plan.index_axis(Axis(0), 0).select(Axis(0), &keep);
    let diff = (&plan_less - &without.plan.index_axis(Axis(0), 0)).mapv(f64::abs);
    assert!(diff.iter().all(|&d| d < 1e-12));
    let (o1, o2) = (
        with.result.objective.unwrap()[0],
        without.result.objective.unwrap()[0],
    );
    assert!((o1 - o2).abs() < 1e-12, "{o1} vs {o2}");
}

#[test]
fn bad_rho_and_unequal_balanced_masses_are_errors() {
    let (a, b, c) = problem(7, 5, 0);
    let problem = Problem::new(a.view(), b.view(), c.view()).unwrap();
    for (rho, arg) in [
        ((0.0, 1.0), "relaxation.rho_mu"),
        ((-1.0, 1.0), "relaxation.rho_mu"),
        ((f64::NAN, 1.0), "relaxation.rho_mu"),
        ((1.0, 0.0), "relaxation.rho_nu"),
        ((1.0, f64::NAN), "relaxation.rho_nu"),
        ((1.0, f64::NEG_INFINITY), "relaxation.rho_nu"),
    ] {
        let err = solver(0.1, rho, 1e-9).solve(&problem).unwrap_err();
        assert!(
            matches!(&err, Error::Parameter { arg: a, .. } if a == arg),
            "{rho:?}: {err}"
        );
    }
    // Both sides infinite is the balanced problem: unequal masses are refused.
    for problem in [problem.clone(), problem.clone().relaxed(f64::INFINITY)] {
        let err = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1))
            .solve(&problem)
            .unwrap_err();
        assert!(matches!(err, Error::UnequalMass { .. }), "{err}");
    }
}

/// The offsets problem of `tests/data/make_pot_unbalanced_offsets.py`: `x = linspace(0, 1,
/// 30)`, `y = linspace(0, 1.5, 25)`, `a = 1/30`, `b = 1.5/25`, `C = (x_i − y_j)² + offset`.
fn offsets_problem(offset: f64) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let x = Array1::<f64>::linspace(0.0, 1.0, 30);
    let y = Array1::<f64>::linspace(0.0, 1.5, 25);
    let c = Array2::from_shape_fn((30, 25), |(i, j)| (x[i] - y[j]).powi(2) + offset);
    (
        Array1::from_elem(30, 1.0 / 30.0),
        Array1::from_elem(25, 1.5 / 25.0),
        c,
    )
}

/// One row of `tests/data/pot_unbalanced_offsets.npy`: `(offset, ε, (ρ_a, ρ_b), POT's
/// distance, POT's plan mass)`.
type OffsetCase = (f64, f64, (f64, f64), f64, f64);

fn offset_cases() -> Vec<OffsetCase> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let cases: Array2<f64> =
        ndarray_npy::read_npy(format!("{dir}/pot_unbalanced_offsets.npy")).unwrap();
    cases
        .rows()
        .into_iter()
        .map(|c| (c[0], c[1], (c[2], c[3]), c[4], c[5]))
        .collect()
}

/// The distance's relative error is at most this many times the reported relative error
/// (`marginal_error / mass`), beyond [`rounding_floor`]. Measured over these cases, the
/// ratio is at most 0.83 where the error is above f64's rounding.
const REPORT_FACTOR: f64 = 2.0;

/// f64's reach on a cost of size `max_cost`: the exponents `(f + g − C)/ε` lose
/// `ulp(max C)/ε` each (an unbalanced solve keeps the cost as given).
fn rounding_floor(max_cost: f64, eps: f64) -> f64 {
    16.0 * f64::EPSILON * max_cost.max(1.0) / eps
}

/// `reported` (marginal error, mass, converged) against the real relative error of
/// `distance`.
fn check_offset_report(
    what: &str,
    case: &OffsetCase,
    tol: f64,
    distance: f64,
    report: ProblemReport,
) {
    let (offset, eps, _, want, want_mass) = *case;
    check_report_against(
        what,
        (want, want_mass),
        offset + 2.25,
        eps,
        tol,
        distance,
        report,
    );
}

/// [`check_offset_report`] with POT's `(distance, mass)` on a cost of size `max_cost`.
fn check_report_against(
    what: &str,
    (want, want_mass): (f64, f64),
    max_cost: f64,
    eps: f64,
    tol: f64,
    distance: f64,
    report: ProblemReport,
) {
    let real = (distance - want).abs() / want;
    let rel = report.marginal_error / report.mass;
    assert!(report.converged, "{what}: {report:?}");
    assert!(
        rel <= tol,
        "{what}: relative error {rel:e} reported converged at tol {tol:e}"
    );
    // The mass the error is relative to is the plan's, not the inputs' (1 and 1.5).
    assert!(
        (report.mass - want_mass).abs() <= 1e-3 * want_mass,
        "{what}: mass {:e}, POT's plan {want_mass:e}",
        report.mass
    );
    let floor = rounding_floor(max_cost, eps);
    assert!(
        real <= REPORT_FACTOR * rel + floor,
        "{what}: distance {distance:e}, POT {want:e}: real relative error {real:e}, reported {rel:e}"
    );
}

/// A constant added to the cost shrinks an unbalanced plan's mass by `exp(−c/(ε+ρ_a+ρ_b))`:
/// the tolerance is relative to that mass, not the inputs', so at every offset the solve runs
/// until the reported relative error meets it, and the reported error bounds the distance's
/// real one against POT (`tests/data/make_pot_unbalanced_offsets.py`). `solve`, `coupling`
/// and the batch of all offsets report alike.
#[test]
fn reports_bound_the_distance_error_at_any_offset() {
    let cases = offset_cases();
    assert!(cases.len() >= 20);
    for case in &cases {
        let (offset, eps, rho, _, _) = *case;
        let (a, b, c) = offsets_problem(offset);
        let problem = Problem::new(a.view(), b.view(), c.view()).unwrap();
        // Tolerances within f64's reach on this cost.
        let tols = [1e-6, 1e-9, 1e-12];
        for tol in tols
            .into_iter()
            .filter(|&t| t >= rounding_floor(offset + 2.25, eps))
        {
            let solver = solver(eps, rho, tol);
            let what = format!("offset {offset}, eps {eps}, rho {rho:?}, tol {tol:e}");
            let r = solver.solve(&problem).unwrap();
            check_offset_report(&what, case, tol, r.distance[0], r.convergence.problems[0]);
            let cpl = solver.coupling(&problem).unwrap();
            let conv = &cpl.result.convergence;
            check_offset_report(
                &format!("{what} (coupling)"),
                case,
                tol,
                cpl.result.distance[0],
                conv.problems[0],
            );
            // The coupling's report is the array's: its mass is the array's sum.
            let sum = cpl.plan.sum();
            assert!(
                (conv.problems[0].mass - sum).abs() <= 1e-12 * sum,
                "{what}: {conv:?}, Σ P = {sum:e}"
            );
        }
    }
    // One batch per (ε, ρ): every offset a problem with its own cost.
    let mut groups: Vec<Vec<OffsetCase>> = Vec::new();
    for case in cases {
        match groups
            .iter_mut()
            .find(|g| (g[0].1, g[0].2) == (case.1, case.2))
        {
            Some(g) => g.push(case),
            None => groups.push(vec![case]),
        }
    }
    for group in &groups {
        let (eps, rho) = (group[0].1, group[0].2);
        let (a, b, _) = offsets_problem(0.0);
        let mu = Array2::from_shape_fn((group.len(), 30), |(_, i)| a[i]);
        let nu = Array2::from_shape_fn((group.len(), 25), |(_, j)| b[j]);
        let mut costs = Array3::zeros((group.len(), 30, 25));
        for (k, case) in group.iter().enumerate() {
            costs
                .index_axis_mut(Axis(0), k)
                .assign(&offsets_problem(case.0).2);
        }
        let r = solver(eps, rho, 1e-10)
            .solve(&Problem::new(mu.view(), nu.view(), costs.view()).unwrap())
            .unwrap();
        for (k, case) in group.iter().enumerate() {
            let what = format!(
                "batch problem {k}: offset {}, eps {eps}, rho {rho:?}",
                case.0
            );
            check_offset_report(&what, case, 1e-10, r.distance[k], r.convergence.problems[k]);
        }
    }
}

/// Point clouds far apart carry large costs too (`(x − y − shift)²`, one dimension): the
/// report bounds the distance's error against POT there as on a dense cost
/// (`tests/data/make_pot_unbalanced_offsets.py`, `pot_unbalanced_far_clouds.npy`).
#[test]
fn reports_bound_the_distance_error_for_far_point_clouds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let cases: Array2<f64> =
        ndarray_npy::read_npy(format!("{dir}/pot_unbalanced_far_clouds.npy")).unwrap();
    assert!(cases.nrows() >= 12);
    let (a, b, _) = offsets_problem(0.0);
    let (a2, b2) = (a.insert_axis(Axis(0)), b.insert_axis(Axis(0)));
    for case in cases.rows() {
        let (shift, eps, rho, want, want_mass) =
            (case[0], case[1], (case[2], case[3]), case[4], case[5]);
        let x = Array2::from_shape_fn((30, 1), |(i, _)| i as f64 / 29.0);
        let y = Array2::from_shape_fn((25, 1), |(j, _)| 1.5 * j as f64 / 24.0 + shift);
        let cloud = PointCloudCost::new(x.view(), y.view()).unwrap();
        let max_cost = (shift + 1.5f64).powi(2);
        let problem = Problem::new(a2.view(), b2.view(), cloud).unwrap();
        for tol in [1e-6, 1e-9]
            .into_iter()
            .filter(|&t| t >= rounding_floor(max_cost, eps))
        {
            let r = solver(eps, rho, tol).solve(&problem).unwrap();
            let what = format!("clouds shifted by {shift}, eps {eps}, rho {rho:?}, tol {tol:e}");
            check_report_against(
                &what,
                (want, want_mass),
                max_cost,
                eps,
                tol,
                r.distance[0],
                r.convergence.problems[0],
            );
        }
    }
}

/// The optimal plan in f64 computed in the potentials relative to the marginals,
/// `u = f − ε log a`, `v = g − ε log b`, which for `ρ ≪ ε` are tiny (no cancellation against
/// `ε log a`): `u_i = −φ_a·ε·LSE_j(log b_j + (v_j − C_ij)/ε)`, alike for `v`, from zero until
/// the potentials stop changing; `P_ij = a_i b_j exp((u_i + v_j − C_ij)/ε)`.
fn relative_potentials_plan(
    a: &Array1<f64>,
    b: &Array1<f64>,
    c: &Array2<f64>,
    eps: f64,
    rho: (f64, f64),
) -> Array2<f64> {
    let phi = |r: f64| if r.is_infinite() { 1.0 } else { r / (r + eps) };
    let (n, m) = c.dim();
    let lse = |x: &mut dyn Iterator<Item = f64>| {
        let v: Vec<f64> = x.collect();
        let top = v.iter().fold(f64::NEG_INFINITY, |s, &t| s.max(t));
        top + v.iter().map(|t| (t - top).exp()).sum::<f64>().ln()
    };
    let (mut u, mut v) = (Array1::<f64>::zeros(n), Array1::<f64>::zeros(m));
    for _ in 0..100_000 {
        let u_new = Array1::from_shape_fn(n, |i| {
            -phi(rho.0) * eps * lse(&mut (0..m).map(|j| b[j].ln() + (v[j] - c[[i, j]]) / eps))
        });
        let v_new = Array1::from_shape_fn(m, |j| {
            -phi(rho.1) * eps * lse(&mut (0..n).map(|i| a[i].ln() + (u_new[i] - c[[i, j]]) / eps))
        });
        let change = (&u_new - &u)
            .iter()
            .chain((&v_new - &v).iter())
            .fold(0.0f64, |s, d| s.max(d.abs()));
        (u, v) = (u_new, v_new);
        if change <= 1e-17 * eps {
            break;
        }
    }
    Array2::from_shape_fn((n, m), |(i, j)| {
        a[i] * b[j] * ((u[i] + v[j] - c[[i, j]]) / eps).exp()
    })
}

/// With `ρ ≪ ε` the plan is `a⊗b·exp(−C/ε)` up to `O(ρ/ε)`, and the relaxed half-steps reach
/// it at once. The report's residual is evaluated without magnifying the rounding of the
/// potentials by `1/ρ`, so the solve stops converged within a few checks and its plan agrees
/// with [`relative_potentials_plan`] to f64's rounding (semi-relaxed sides and float32 too).
#[test]
fn tiny_rho_converges_at_once() {
    let inf = f64::INFINITY;
    let (a, b, c) = problem(7, 5, 0);
    for (eps, rho) in [
        (0.1, (1e-9, 1e-9)),
        (1.0, (1e-9, 1e-9)),
        (1.0, (1e-12, 1e-12)),
        (0.1, (inf, 1e-9)),
        (0.1, (1e-9, 0.5)),
        (0.01, (1e-11, 1e-11)),
    ] {
        let want = relative_potentials_plan(&a, &b, &c, eps, rho);
        let problem = Problem::new(a.view(), b.view(), c.view()).unwrap();
        for tol in [1e-9, 1e-13] {
            let cpl = solver(eps, rho, tol).coupling(&problem).unwrap();
            let report = cpl.result.convergence.problems[0];
            let what = format!("eps {eps}, rho {rho:?}, tol {tol:e}");
            assert!(
                report.converged && report.iterations <= 50,
                "{what}: {report:?}"
            );
            let plan = cpl.plan.index_axis(Axis(0), 0);
            let err = plan
                .iter()
                .zip(&want)
                .fold(0.0f64, |s, (p, w)| s.max((p - w).abs() / w));
            assert!(err <= 1e-12, "{what}: plan entries off by {err:e} relative");
            // The distance's error within the reported relative error (and f64's rounding).
            let d_want = (&want * &c).sum();
            let d_err = (cpl.result.distance[0] - d_want).abs() / d_want;
            let rel = report.marginal_error / report.mass;
            assert!(
                d_err <= 2.0 * rel + 1e-13,
                "{what}: distance off by {d_err:e}, reported {rel:e}"
            );
        }
        // float32: converged at its default tolerance, the plan within float32's rounding.
        let (a32, b32, c32) = (
            a.mapv(|x| x as f32),
            b.mapv(|x| x as f32),
            c.mapv(|x| x as f32),
        );
        let p32 = params(eps, 0.0).tol(None);
        let cpl = Relaxed::new(SinkhornSolver::new(CpuBackend, p32), rho)
            .coupling(&Problem::new(a32.view(), b32.view(), c32.view()).unwrap())
            .unwrap();
        let report = cpl.result.convergence.problems[0];
        assert!(
            report.converged && report.iterations <= 50,
            "f32 eps {eps}, rho {rho:?}: {report:?}"
        );
        // Entries below float32's normal range (exp(−C/ε) at ε = 0.01) are compared to it.
        let tiny = f32::MIN_POSITIVE as f64;
        let err = cpl.plan.iter().zip(&want).fold(0.0f64, |s, (&p, w)| {
            s.max((p as f64 - w).abs() / w.max(tiny))
        });
        assert!(
            err <= 1e-4,
            "f32 eps {eps}, rho {rho:?}: plan entries off by {err:e}"
        );
    }
}
