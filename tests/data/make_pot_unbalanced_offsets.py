# Reference values for tests/unbalanced.rs (`reports_bound_the_distance_error_at_any_offset`):
# the unbalanced distance <P, C> of POT 0.9.7's `ot.unbalanced.sinkhorn_unbalanced2` (f64,
# reg_type="kl", returnCost="linear", run to convergence) on a cost lifted by a constant.
#
# Problem: x = linspace(0, 1, 30), y = linspace(0, 1.5, 25), a = 1/30, b = 1.5/25,
# C = (x_i - y_j)^2 + offset. Adding c to the cost scales the optimal plan by
# s = exp(-c / (eps + rho_a + rho_b)) (s = 1 when a side is exact): the scaled plan
# still meets P = a⊗b·exp((f ⊕ g − C − c)/eps) with f, g moved by −rho·log s. Where
# exp(−C/eps) underflows (POT's plain Sinkhorn then returns 0), the reference is the
# offset-0 POT plan scaled by s; elsewhere it is POT's own value, checked against the
# scaled one here.
#
# Output: pot_unbalanced_offsets.npy (and pot_unbalanced_far_clouds.npy, below), one row
# per case:
# [offset, eps, rho_a, rho_b, distance, mass] (rho = inf for an exact side).
# Run: python3 tests/data/make_pot_unbalanced_offsets.py (from the repository root).
import os
import warnings

import numpy as np
import ot

warnings.simplefilter("ignore")
inf = float("inf")
x = np.linspace(0, 1, 30)
y = np.linspace(0, 1.5, 25)
a = np.full(30, 1 / 30)
b = np.full(25, 1.5 / 25)
C0 = (x[:, None] - y[None, :]) ** 2
kw = dict(reg_type="kl", numItermax=1_000_000, stopThr=1e-16)


def plan(C, eps, rho):
    return ot.unbalanced.sinkhorn_unbalanced(a, b, C, eps, rho, **kw)


rows = []
for eps, rho in [(1.0, (1.0, 1.0)), (0.1, (0.5, 2.0)), (0.05, (0.3, 0.3)),
                 (0.5, (10.0, 10.0)), (0.1, (inf, 1.0))]:
    P0 = plan(C0, eps, rho)
    d0, m0 = float((P0 * C0).sum()), float(P0.sum())
    for off in [0.0, 50.0, 100.0, 300.0, 1000.0]:
        log_s = 0.0 if inf in rho else -off / (eps + rho[0] + rho[1])
        if log_s < -400:
            continue  # the plan's entries fall below f64's normal range
        s = np.exp(log_s)
        want_d, want_m = s * (d0 + off * m0), s * m0
        if (C0.max() + off) / eps < 600:
            C = C0 + off
            d = float(ot.unbalanced.sinkhorn_unbalanced2(
                a, b, C, eps, rho, returnCost="linear", **kw))
            m = float(plan(C, eps, rho).sum())
            assert abs(d - want_d) <= 1e-11 * want_d, (eps, rho, off, d, want_d)
            assert abs(m - want_m) <= 1e-11 * want_m, (eps, rho, off, m, want_m)
        else:
            d, m = want_d, want_m
        d, m = float(d), float(m)
        rows.append([off, eps, rho[0], rho[1], d, m])
        print(f"offset {off:6.0f} eps {eps:5} rho {rho}: distance {d!r} mass {m!r}")

here = os.path.dirname(os.path.abspath(__file__))
np.save(os.path.join(here, "pot_unbalanced_offsets.npy"), np.array(rows))

# Point clouds far apart: x = linspace(0, 1, 30), y = linspace(0, 1.5, 25) + shift (one
# dimension), C = (x_i - y_j)^2: large costs from the geometry rather than a constant.
# Output: pot_unbalanced_far_clouds.npy, rows [shift, eps, rho_a, rho_b, distance, mass].
rows = []
for eps, rho in [(1.0, (1.0, 1.0)), (0.5, (10.0, 10.0)), (1.0, (inf, 2.0))]:
    for shift in [0.0, 7.0, 10.0, 15.0, 20.0]:
        C = (x[:, None] - (y[None, :] + shift)) ** 2
        if C.max() / eps > 600:
            continue  # exp(-C/eps) leaves f64's normal range: POT's plain Sinkhorn fails
        d = float(ot.unbalanced.sinkhorn_unbalanced2(a, b, C, eps, rho, returnCost="linear", **kw))
        m = float(plan(C, eps, rho).sum())
        rows.append([shift, eps, rho[0], rho[1], d, m])
        print(f"clouds shift {shift:4.0f} eps {eps:5} rho {rho}: distance {d!r} mass {m!r}")
np.save(os.path.join(here, "pot_unbalanced_far_clouds.npy"), np.array(rows))
