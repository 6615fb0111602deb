# Reference values for tests/pointcloud/solve.rs, computed with POT 0.9.7 and the explicit cost
# matrix ot.dist(X, Y) (squared Euclidean) or ot.dist(X, Y, "euclidean").
# Inputs come from the 64-bit LCG of the test (Knuth's constants), not from an RNG.
import numpy as np, ot

class Lcg:
    def __init__(self, seed): self.s = seed
    def next(self):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) % 2**64
        return (self.s >> 11) / float(1 << 53)

def cloud(seed, n, d, lo, hi):
    r = Lcg(seed)
    return np.array([[lo + (hi - lo) * r.next() for _ in range(d)] for _ in range(n)])

def weights(seed, n):
    r = Lcg(seed)
    w = np.array([r.next() + 0.1 for _ in range(n)])
    return w / w.sum()

def ot_eps(a, b, M, reg):
    # OT_eps = <f,a> + <g,b> - reg * sum(P) from POT's log-domain potentials.
    P, log = ot.sinkhorn(a, b, M, reg, method="sinkhorn_log", numItermax=5000, stopThr=1e-13, log=True)
    f, g = reg * log["log_u"], reg * log["log_v"]
    return a @ f + b @ g - reg * P.sum()

X = cloud(1, 40, 3, 0.0, 1.0)
Y = cloud(2, 55, 3, 0.2, 1.3)
a, b = weights(3, 40), weights(4, 55)
M2 = ot.dist(X, Y)                      # squared Euclidean
M1 = ot.dist(X, Y, metric="euclidean")
for name, M, reg in [("sq eps=0.05", M2, 0.05), ("sq eps=0.01", M2, 0.01), ("euclid eps=0.05", M1, 0.05)]:
    print(name, "sinkhorn2 =", repr(float(ot.sinkhorn2(a, b, M, reg))))
print("OT_eps sq eps=0.05 =", repr(float(ot_eps(a, b, M2, 0.05))))
S = ot_eps(a, b, M2, 0.05) - 0.5 * ot_eps(a, a, ot.dist(X, X), 0.05) - 0.5 * ot_eps(b, b, ot.dist(Y, Y), 0.05)
print("divergence sq eps=0.05 =", repr(float(S)))
