# Reference values for tests/unbalanced_barycenter.rs
# (`error_is_relative_to_the_couplings_mass_at_any_offset`): unbalanced barycenters of POT
# 0.9.7's `ot.unbalanced.barycenter_unbalanced(A.T, M + offset, reg=eps, reg_m=rho,
# weights=w, method="sinkhorn")` on a cost lifted by a constant, which shrinks the
# couplings' mass (and the barycenter's) by many orders of magnitude.
#
# Inputs: K = 3 histograms on n = 20 points of linspace(0, 1, n), masses 1, 1.7, 2.4 (the
# formula of make_pot_unbalanced_barycenter.py), weights (0.2, 0.3, 0.5); M the squared
# distance. POT's stopping threshold is scaled by the barycenter's size (its test is
# relative to max(max q, 1)). Each barycenter is cross-checked against an independent
# float64 log-domain iteration of the same fixed point (scipy's logsumexp), which must
# agree to 1e-9.
#
# Output: pot_unbalanced_barycenter_offsets.npy, one row per case,
# [offset, eps, rho, q_0 … q_{n-1}]; pot_unbalanced_barycenter_offsets_inputs.npy, A (K×n).
# Run: python3 tests/data/make_pot_unbalanced_barycenter_offsets.py
import os
import warnings

import numpy as np
import ot
from scipy.special import logsumexp

warnings.filterwarnings("error")  # a POT warning (non-convergence, numerical error) aborts

n, K = 20, 3
t = np.linspace(0, 1, n)
i = np.arange(n)
A = []
for k in range(K):
    c = 0.15 + 0.7 * k / (K - 1)
    h = 0.05 + np.exp(-(((t - c) / 0.12) ** 2)) + 0.3 * np.sin(2.1 * i + k) ** 2
    A.append((1 + 0.7 * k) * h / h.sum())
A = np.array(A)
w = np.array([0.2, 0.3, 0.5])
M0 = (t[:, None] - t[None, :]) ** 2


def log_reference(M, eps, rho, tol):
    fi = rho / (rho + eps)
    logA = np.log(A)
    g = np.zeros((K, n))
    logq = np.zeros(n)
    s = 1.0 / (rho + eps)
    for it in range(2_000_000):
        f = fi * eps * (logA - logsumexp((g[:, None, :] - M[None]) / eps, axis=2))
        x = eps * logsumexp((f[:, :, None] - M[None]) / eps, axis=1)
        new = logsumexp(np.log(w)[:, None] + s * x, axis=0) / s
        g = fi * (new[None, :] - x)
        if it > 10 and np.max(np.abs(new - logq)) < tol * eps:
            return np.exp(new / eps)
        logq = new
    raise RuntimeError("log reference did not converge")


rows = []
for eps, rho in [(0.5, 1.0), (0.1, 0.5), (1.0, 10.0)]:
    for offset in [0.0, 10.0, 50.0, 100.0, 300.0]:
        M = M0 + offset
        if M.max() / eps > 600:
            continue  # exp(-M/eps) leaves f64's normal range: POT's plain iteration fails
        thr = max(1e-15, 2e-15 * M.max() / eps)
        ref = log_reference(M, eps, rho, thr)
        # POT's stopping test is relative to max(max q, 1): scaled here to a barycenter far
        # below 1 (else it stops at once).
        q = ot.unbalanced.barycenter_unbalanced(
            A.T, M, eps, rho, weights=w, method="sinkhorn", numItermax=1_000_000,
            stopThr=thr * min(1.0, ref.max())
        )
        rel = np.max(np.abs(q - ref)) / np.max(ref)
        if rel > 1e-9:
            raise RuntimeError(f"offset {offset} eps {eps} rho {rho}: POT vs log reference {rel:e}")
        rows.append([offset, eps, rho, *q])
        print(f"offset {offset:5.0f} eps {eps} rho {rho}: mass {q.sum():.3e}, POT vs log {rel:.1e}")

here = os.path.dirname(os.path.abspath(__file__))
np.save(os.path.join(here, "pot_unbalanced_barycenter_offsets.npy"), np.array(rows))
np.save(os.path.join(here, "pot_unbalanced_barycenter_offsets_inputs.npy"), A)
