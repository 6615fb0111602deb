"""Result classes: plain attribute holders with a readable repr."""

from __future__ import annotations

import numpy as np

__all__ = [
    "Result",
    "Convergence",
    "CgReport",
    "SinkhornResult",
    "Coupling",
    "OtGradients",
    "PlanGradients",
    "PointGradients",
    "SinkhornDivergence",
    "Barycenter",
    "BistochasticResult",
    "BistochasticGradient",
    "Svd3",
    "Certificate",
    "ExactResult",
    "SlicedResult",
    "GromovReport",
    "GromovGradients",
    "GromovResult",
    "PointGromovResult",
    "ConvergenceWarning",
]


class ConvergenceWarning(UserWarning):
    """A solver stopped at its iteration limit before meeting its tolerance (raised by the
    functions that return bare numbers, which cannot carry the report)."""


def _short(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            return np.array2string(value, precision=6, separator=", ")
        return f"<{value.dtype} array {value.shape}>"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return repr(value)


class Result:
    """Named fields as attributes; the repr shows scalars and small arrays in full and
    larger arrays by dtype and shape."""

    _fields: tuple = ()

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)
        self._fields = tuple(fields)

    def _repr_fields(self):
        return self._fields

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={_short(getattr(self, k))}" for k in self._repr_fields())
        return f"{type(self).__name__}({body})"

    def __eq__(self, other):
        if type(other) is not type(self) or other._fields != self._fields:
            return NotImplemented
        return all(np.array_equal(getattr(self, k), getattr(other, k)) for k in self._fields)

    __hash__ = None


class Convergence(Result):
    """How a solver ended: ``iterations`` run, ``marginal_error`` of the returned plan
    (``max_b ‖P_bᵀ1 − ν_b‖₁``), the ``tol`` asked for, and ``converged``
    (``marginal_error ≤ tol`` with ``tol > 0``)."""


class CgReport(Result):
    """How the conjugate-gradient solve of an implicit backward ended over a batch:
    ``problems``, ``max_iterations``, ``max_residual`` (relative), ``unconverged`` (count),
    ``first_unconverged`` (index or None), ``tol``."""

    @property
    def converged(self) -> bool:
        """Every problem of the batch converged."""
        return self.unconverged == 0


class SinkhornResult(Result):
    """A solved problem (or batch): ``distance`` = ⟨P, C⟩ (a float, or one per problem),
    potentials ``f`` (n or B×n) and ``g`` (m or B×m) with ``P = exp((f ⊕ g − C)/ε)``,
    ``eps``, the ``convergence`` report and, for unbalanced problems (``reg_m``), the
    ``objective`` ⟨P,C⟩ + ε·KL(P ‖ μ⊗ν) + ρ_μ·KL(P1 ‖ μ) + ρ_ν·KL(Pᵀ1 ‖ ν) (generalized KL;
    None for balanced ones)."""

    def _repr_fields(self):
        fields = ("distance", "f", "g", "eps", "convergence")
        return fields if getattr(self, "objective", None) is None else fields + ("objective",)

    @property
    def converged(self) -> bool:
        return self.convergence.converged


class Coupling(SinkhornResult):
    """A :class:`SinkhornResult` with its ``plan`` (n×m, or B×n×m)."""

    def _repr_fields(self):
        return ("plan",) + super()._repr_fields()


class OtGradients(Result):
    """Exact gradients of ⟨P, C⟩ (implicit differentiation): ``cost`` (∂/∂C), ``mu``
    (∂/∂μ, zero-mean representative), ``nu`` (∂/∂ν, same representative), the solved
    ``result`` (:class:`SinkhornResult`) and the ``cg`` report (:class:`CgReport`)."""

    @property
    def distance(self):
        return self.result.distance


class PlanGradients(Result):
    """Exact gradients of a loss of the plan: ``cost``, ``mu``, ``nu`` and ``cg``."""


class PointGradients(Result):
    """``value`` = OT_ε = ⟨f, μ⟩ + ⟨g, ν⟩ − ε ΣP (regularised objective) and its gradients
    with respect to the points ``x`` (n×d) and ``y`` (m×d), with the solved ``result``
    (for a batch of pairs: ``value`` B, ``x`` B×n×d, ``y`` B×m×d)."""


class SinkhornDivergence(Result):
    """``value`` = S_ε(μ, ν), its gradients ``grad_x`` and ``grad_y`` (None where not
    computed), the three ``terms`` (μν, μμ, νν), their ``convergence`` reports and the
    ``convention`` ("objective" or "linear"). For a batch of pairs: ``value`` B, gradients
    B×n×d and B×m×d, ``terms`` B×3 and one triple of reports per problem."""

    @property
    def converged(self) -> bool:
        """Every solve met its tolerance (all three terms, of every problem of a batch)."""
        return all(c.converged if isinstance(c, Convergence) else all(t.converged for t in c)
                   for c in self.convergence)


class Barycenter(Result):
    """``histogram`` (m bins, an image for grids, or one row per problem for a batch),
    ``iterations``, POT's spread ``error`` and ``converged`` (``error < tol``)."""


class BistochasticResult(Result):
    """``r`` (B×n×n or n×n), rows summing to 1 and columns within
    ``convergence.marginal_error``."""


class BistochasticGradient(Result):
    """``dx`` = ∂L/∂X and the ``cg`` report."""


class Svd3(Result):
    """Thin SVD ``A = U·diag(s)·Vt`` (``u`` M×3, ``s`` 3 descending, ``vt`` 3×3, or
    batched)."""


class Certificate(Result):
    """How far an exact plan and its potentials are from proving each other optimal,
    measured on what is returned: ``primal`` = ⟨P, C⟩, ``dual`` = ⟨a, f⟩ + ⟨b, g⟩,
    ``duality_gap`` = |primal − dual| (``relative_gap`` over |primal|), ``max_violation`` =
    max(0, max_ij f_i + g_j − C_ij) over every pair, ``max_slack_on_support`` = max |C_ij −
    f_i − g_j| where P_ij > 0, the relative marginal errors ``marginal_error_a`` and
    ``marginal_error_b``, the ``mass`` and ``max_abs_cost`` (the scales of the tolerance)."""


class ExactResult(Result):
    """An exact OT result: ``cost`` = ⟨P, C⟩ (POT's ``emd2``), the plan's nonzero entries
    ``P[rows[k], cols[k]] = mass[k]`` (at most n + m − 1 for a basic plan; :attr:`plan` is
    the dense n×m matrix, POT's ``emd``), potentials ``f`` (n) and ``g`` (m) with
    f_i + g_j ≤ C_ij and equality on the plan (centred: ⟨a, f⟩ = ⟨b, g⟩), the
    ``certificate``, ``iterations``, ``converged`` (False when an iteration or time limit
    stopped the solver: the plan is then feasible, not optimal), ``exact`` (converged and
    the certificate within its tolerance) and the ``method``."""

    def _repr_fields(self):
        return ("cost", "exact", "converged", "iterations", "method", "shape", "nonzeros")

    @property
    def shape(self):
        return (self.n, self.m)

    @property
    def nonzeros(self) -> int:
        return int(self.mass.size)

    @property
    def plan(self) -> np.ndarray:
        """The dense n×m plan (float64)."""
        p = np.zeros((self.n, self.m))
        np.add.at(p, (self.rows, self.cols), self.mass)
        return p


class SlicedResult(Result):
    """A sliced (or max-sliced) distance: ``distance``, ``projected`` = W_p^p along each
    direction (POT's ``log["projected_emds"]``), the ``projections`` (d×L) used, for
    max-sliced the best ``direction`` and the ascent ``steps`` kept, and the gradients
    ``grad_x_s`` (n×d), ``grad_x_t`` (m×d) of ``distance`` with respect to the points (None
    unless asked for)."""


class GromovReport(Result):
    """How a Gromov–Wasserstein solve ended, measured on the plan handed back:
    ``iterations`` (outer), ``converged``, ``marginal_error`` = max(‖T·1 − p‖₁, ‖Tᵀ·1 − q‖₁).
    Entropic solves: ``step`` = ‖T − T_prev‖_F of the last iteration, ``steps`` (those
    measured at the checks, POT's ``log["err"]``), ``stationarity`` = max |∇F(T) − G| with
    ``G`` the gradient whose Sinkhorn plan ``T`` is (0 at a fixed point, in the cost's
    units), ``inner_iterations``, ``inner_unconverged`` (inner solves that missed their
    tolerance), ``newton_steps`` (Newton steps on the dual that finished the inner solves
    Sinkhorn did not end: it stalls on nearly deterministic plans) and the last inner
    solve's ``inner`` :class:`Convergence`. Exact solves: the Frank–Wolfe ``gap``
    ⟨∇F(T), T − T_c⟩ (0 exactly at a stationary plan) and ``losses`` (the objective after
    each iteration, POT's ``log["loss"]``); the entropic fields are None or empty."""


class GromovGradients(Result):
    """Envelope gradients of a Gromov–Wasserstein value at the returned plan ``T``:
    ``c1`` = α·(f1'(C1)⊙rrᵀ − h1'(C1)⊙(T·h2(C2)·Tᵀ)) (n×n), ``c2`` likewise (m×m), ``p``
    and ``q`` (the potentials of the last linearised problem, zero-mean), and for fused
    problems ``m`` = (1 − α)·T and ``alpha`` = ⟨L⊗T, T⟩ − ⟨M, T⟩ (else None). Exact where
    the plan is a stationary point that moves smoothly with the inputs (entropic: of the
    regularised value; exact: at a vertex local minimum)."""


class GromovResult(Result):
    """A solved (fused) Gromov–Wasserstein problem: the ``plan`` T (n×m), ``value`` =
    F(T) = (1 − α)·⟨M, T⟩ + α·Σ L(C1_ik, C2_jl)·T_ij·T_kl without the entropy (POT's
    ``gw_dist`` / ``fgw_dist``) = ``linear`` + ``quadratic``, the potentials ``f`` (n),
    ``g`` (m) of the last linearised problem (POT's ``u``, ``v`` for exact solves), ``eps``
    (None for exact solves), ``loss``, ``symmetric`` (as treated), the ``report``
    (:class:`GromovReport`) and the ``gradients`` (:class:`GromovGradients`, None unless
    asked for)."""

    def _repr_fields(self):
        return ("value", "plan", "eps", "loss", "converged", "iterations")

    @property
    def converged(self) -> bool:
        return self.report.converged

    @property
    def iterations(self) -> int:
        return self.report.iterations


class PointGromovResult(Result):
    """Point-cloud Gromov–Wasserstein (squared-Euclidean structures, square loss) in linear
    memory: ``value`` (POT's ``gw_dist`` of the dense problem on the same clouds), the last
    inner solve's potentials ``f``, ``g`` on the transformed clouds ``x_tilde``,
    ``y_tilde`` (T_ij = exp((f_i + g_j − |x̃_i − ỹ_j|²)/ε)), the plan's ``moments``
    Φᵀ·T·Ψ, ``eps``, the ``report`` (:class:`GromovReport`; ``step`` is the moments'
    relative change, ``stationarity`` an upper bound) and the ``plan`` (n×m, float64; None
    unless asked for)."""

    def _repr_fields(self):
        return ("value", "eps", "converged", "iterations")

    @property
    def converged(self) -> bool:
        return self.report.converged

    @property
    def iterations(self) -> int:
        return self.report.iterations
