#!/usr/bin/env python3
"""Check `logot svd3` and `logot newton-schulz` against NumPy on random and edge-case inputs.

    cargo build --release && python3 scripts/linalg-vs-numpy.py [path/to/logot]

svd3 is compared on S, on the reconstruction U·diag(S)·Vᵀ, on the orthonormality of U and
V, and on U, V column by column up to sign (where the singular values are separated);
Newton–Schulz against the NumPy iteration below (float64 and float32). Prints one JSON line
per case with the worst errors, and exits non-zero if a tolerance is exceeded.
"""
import json, os, subprocess, sys, tempfile
import numpy as np

LOGOT = sys.argv[1] if len(sys.argv) > 1 else "target/release/logot"


def ns(G, steps=5):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G / np.linalg.norm(G)
    tall = X.shape[0] > X.shape[1]
    if tall:
        X = X.T
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * A @ A
        X = a * X + B @ X
    return X.T if tall else X


def run(args):
    out = subprocess.run([LOGOT] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"logot {' '.join(args)} failed: {out.stderr}")
    return json.loads(out.stdout)


def check_svd3(name, A, d, tol):
    np.save(f"{d}/a.npy", A)
    run(["svd3", "--a", f"{d}/a.npy", "--out-u", f"{d}/u.npy", "--out-s", f"{d}/s.npy", "--out-vh", f"{d}/vh.npy"])
    U, S, Vh = (np.load(f"{d}/{f}.npy").astype(np.float64) for f in ("u", "s", "vh"))
    A64 = A.astype(np.float64)
    Ur, Sr, Vhr = np.linalg.svd(A64, full_matrices=False)
    m = A.shape[-2]
    if m < 3:  # NumPy returns min(M, 3) values; logot pads with zeros
        pad = [(0, 0)] * (Sr.ndim - 1) + [(0, 3 - m)]
        Sr = np.pad(Sr, pad)
    smax = np.maximum(Sr[..., :1], np.finfo(np.float64).tiny)
    s_err = np.max(np.abs(S - Sr) / smax)
    rec = np.max(np.abs(A64 - np.einsum("...ik,...k,...kj->...ij", U, S, Vh)) / smax[..., None])
    eye = np.eye(3)
    ou = np.max(np.abs(np.swapaxes(U, -1, -2) @ U - eye)) if m >= 3 else 0.0
    ov = np.max(np.abs(Vh @ np.swapaxes(Vh, -1, -2) - eye))
    # Vectors up to sign, where the gaps are clear.
    sep = (Sr[..., :2] - Sr[..., 1:]) / smax > 1e-2
    k = min(m, 3)
    vdot = np.abs(np.einsum("...ki,...ki->...k", Vh[..., :k, :], Vhr[..., :k, :]))
    v_err = np.max(np.where(np.concatenate([sep, sep[..., -1:]], -1)[..., :k], 1 - vdot, 0.0))
    r = {"case": name, "dtype": str(A.dtype), "shape": list(A.shape), "S_rel": s_err, "recon_rel": rec,
         "U_orth": ou, "V_orth": ov, "V_vs_numpy": v_err}
    print(json.dumps(r))
    return max(s_err, rec, ou, ov, v_err) <= tol


def check_ns(name, X, d, tol):
    np.save(f"{d}/x.npy", X)
    run(["newton-schulz", "--x", f"{d}/x.npy", "--out", f"{d}/y.npy"])
    Y = np.load(f"{d}/y.npy").astype(np.float64)
    ref = ns(X.astype(np.float64))
    err = np.max(np.abs(Y - ref))
    sv = np.linalg.svd(Y, compute_uv=False)
    print(json.dumps({"case": name, "dtype": str(X.dtype), "shape": list(X.shape), "max_abs_err": err,
                      "sv_min": float(sv.min()), "sv_max": float(sv.max())}))
    return err <= tol


def main():
    rng = np.random.default_rng(0)
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for dt, tol in ((np.float64, 1e-12), (np.float32, 2e-5)):
            ok &= check_svd3("gaussian B=256 M=1024", rng.standard_normal((256, 1024, 3)).astype(dt), d, tol)
            ok &= check_svd3("gaussian M=5", rng.standard_normal((5, 3)).astype(dt), d, tol)
            ok &= check_svd3("M=3", rng.standard_normal((64, 3, 3)).astype(dt), d, tol)
            scaled = rng.standard_normal((64, 200, 3)) * np.array([1e3, 1.0, 1e-3])
            ok &= check_svd3("columns scaled 1e3,1,1e-3", scaled.astype(dt), d, tol)
            rd = rng.standard_normal((32, 100, 3))
            rd[..., 2] = rd[..., 0] + rd[..., 1]
            ok &= check_svd3("rank 2", rd.astype(dt), d, tol)
            ok &= check_svd3("zeros", np.zeros((4, 10, 3), dt), d, tol)
            ok &= check_svd3("M=2", rng.standard_normal((8, 2, 3)).astype(dt), d, tol)
            nt = 1e-12 if dt == np.float64 else 5e-5
            ok &= check_ns("gaussian 64x128", rng.standard_normal((64, 128)).astype(dt), d, nt)
            ok &= check_ns("gaussian 300x40 (tall)", rng.standard_normal((300, 40)).astype(dt), d, nt)
            ok &= check_ns("square 256", rng.standard_normal((256, 256)).astype(dt), d, nt * 4)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
