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
