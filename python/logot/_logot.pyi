"""Type stubs of ``logot._logot``, the compiled module under the Python package (the PyO3
bindings in ``python/src/``). The functions take arrays already checked and converted by
the Python layer (float32 or float64, one dtype per call); the public API is ``logot``.
Kept by hand beside ``python/src/``; ``python/tests/test_stubs.py`` checks that every
function and class of the module is declared here with the same parameters."""

from typing import Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.floating]
# (eps, max_iters, tol or None, check_every, eps_scaling: None, True or (start, factor, iters_per_stage))
SinkhornParams = Tuple[float, int, Optional[float], int, Union[None, bool, Tuple[float, float, int]]]
# A dense n×m or B×n×m array, ("grid", shape) or ("points", x, y, metric, precision).
CostArg = Union[Array, Tuple[str, Tuple[int, ...]], Tuple[str, Array, Array, str, Optional[str]]]
WarmStart = Optional[Tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]

__version__: str

# --- Results ------------------------------------------------------------------------------

class ConvergenceReport:
    @property
    def iterations(self) -> int: ...
    @property
    def marginal_error(self) -> float: ...
    @property
    def tol(self) -> float: ...
    @property
    def converged(self) -> bool: ...
    @property
    def marginal_errors(self) -> list[float]: ...
    @property
    def converged_each(self) -> list[bool]: ...
    @property
    def iterations_each(self) -> list[int]: ...

class CgSummary:
    @property
    def problems(self) -> int: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def max_residual(self) -> float: ...
    @property
    def unconverged(self) -> int: ...
    @property
    def first_unconverged(self) -> Optional[int]: ...
    @property
    def tol(self) -> float: ...

class SinkhornOutput:
    @property
    def distance(self) -> Array: ...
    @property
    def f(self) -> Array: ...
    @property
    def g(self) -> Array: ...
    @property
    def convergence(self) -> ConvergenceReport: ...
    @property
    def objective(self) -> Optional[Array]: ...

class DistanceOutput:
    @property
    def distance(self) -> Array: ...
    @property
    def converged(self) -> bool: ...
    @property
    def marginal_error(self) -> float: ...
    @property
    def tol(self) -> float: ...
    @property
    def iterations(self) -> int: ...

class CouplingOutput:
    @property
    def plan(self) -> Array: ...
    @property
    def result(self) -> SinkhornOutput: ...

class OtGradientsOutput:
    @property
    def cost(self) -> Array: ...
    @property
    def mu(self) -> Array: ...
    @property
    def nu(self) -> Array: ...
    @property
    def cg(self) -> CgSummary: ...
    @property
    def result(self) -> SinkhornOutput: ...

class PlanGradientsOutput:
    @property
    def cost(self) -> Array: ...
    @property
    def mu(self) -> Array: ...
    @property
    def nu(self) -> Array: ...
    @property
    def cg(self) -> CgSummary: ...

class PointGradientsOutput:
    @property
    def value(self) -> Array: ...
    @property
    def x(self) -> Array: ...
    @property
    def y(self) -> Array: ...
    @property
    def result(self) -> SinkhornOutput: ...

class DivergenceOutput:
    @property
    def value(self) -> Union[float, Array]: ...
    @property
    def grad_x(self) -> Optional[Array]: ...
    @property
    def grad_y(self) -> Optional[Array]: ...
    @property
    def terms(self) -> Union[Tuple[float, float, float], Array]: ...
    @property
    def convergence(
        self,
    ) -> Union[
        Tuple[ConvergenceReport, ConvergenceReport, ConvergenceReport],
        list[Tuple[ConvergenceReport, ConvergenceReport, ConvergenceReport]],
    ]: ...

class BarycenterOutput:
    @property
    def histograms(self) -> Array: ...
    @property
    def iterations(self) -> int: ...
    @property
    def errors(self) -> list[float]: ...
    @property
    def converged(self) -> list[bool]: ...

class BistochasticOutput:
    @property
    def r(self) -> Array: ...
    @property
    def convergence(self) -> ConvergenceReport: ...

class BistochasticGradientOutput:
    @property
    def dx(self) -> Array: ...
    @property
    def cg(self) -> CgSummary: ...

class Svd3Output:
    @property
    def u(self) -> Array: ...
    @property
    def s(self) -> Array: ...
    @property
    def vt(self) -> Array: ...

class DeviceSolveOutput:
    @property
    def distance(self) -> list[float]: ...
    @property
    def convergence(self) -> ConvergenceReport: ...
    @property
    def cg(self) -> Optional[CgSummary]: ...

class DevicePointOutput:
    @property
    def value(self) -> list[float]: ...
    @property
    def distance(self) -> list[float]: ...
    @property
    def convergence(self) -> ConvergenceReport: ...

class DeviceDivergenceOutput:
    @property
    def value(self) -> list[float]: ...
    @property
    def terms(self) -> list[Tuple[float, float, float]]: ...
    @property
    def convergence(self) -> Tuple[ConvergenceReport, ConvergenceReport, ConvergenceReport]: ...

class CertificateOutput:
    @property
    def primal(self) -> float: ...
    @property
    def dual(self) -> float: ...
    @property
    def duality_gap(self) -> float: ...
    @property
    def relative_gap(self) -> float: ...
    @property
    def max_violation(self) -> float: ...
    @property
    def max_slack_on_support(self) -> float: ...
    @property
    def marginal_error_a(self) -> float: ...
    @property
    def marginal_error_b(self) -> float: ...
    @property
    def mass(self) -> float: ...
    @property
    def max_abs_cost(self) -> float: ...

class EmdOutput:
    @property
    def cost(self) -> float: ...
    @property
    def n(self) -> int: ...
    @property
    def m(self) -> int: ...
    @property
    def rows(self) -> npt.NDArray[np.int64]: ...
    @property
    def cols(self) -> npt.NDArray[np.int64]: ...
    @property
    def mass(self) -> npt.NDArray[np.float64]: ...
    @property
    def f(self) -> npt.NDArray[np.float64]: ...
    @property
    def g(self) -> npt.NDArray[np.float64]: ...
    @property
    def certificate(self) -> CertificateOutput: ...
    @property
    def iterations(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def exact(self) -> bool: ...
    @property
    def method(self) -> str: ...

class SlicedOutput:
    @property
    def distance(self) -> float: ...
    @property
    def projected(self) -> npt.NDArray[np.float64]: ...
    @property
    def direction(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def steps(self) -> int: ...
    @property
    def grad_x_s(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def grad_x_t(self) -> Optional[npt.NDArray[np.float64]]: ...

class GromovGradientsOutput:
    @property
    def c1(self) -> npt.NDArray[np.float64]: ...
    @property
    def c2(self) -> npt.NDArray[np.float64]: ...
    @property
    def p(self) -> npt.NDArray[np.float64]: ...
    @property
    def q(self) -> npt.NDArray[np.float64]: ...
    @property
    def m(self) -> Optional[npt.NDArray[np.float64]]: ...
    @property
    def alpha(self) -> Optional[float]: ...

class GromovOutput:
    @property
    def plan(self) -> Array: ...
    @property
    def value(self) -> float: ...
    @property
    def linear(self) -> float: ...
    @property
    def quadratic(self) -> float: ...
    @property
    def f(self) -> npt.NDArray[np.float64]: ...
    @property
    def g(self) -> npt.NDArray[np.float64]: ...
    @property
    def symmetric(self) -> bool: ...
    @property
    def iterations(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def marginal_error(self) -> float: ...
    @property
    def step(self) -> Optional[float]: ...
    @property
    def steps(self) -> list[float]: ...
    @property
    def stationarity(self) -> Optional[float]: ...
    @property
    def inner_iterations(self) -> int: ...
    @property
    def inner_unconverged(self) -> int: ...
    @property
    def newton_steps(self) -> int: ...
    @property
    def inner(self) -> Optional[ConvergenceReport]: ...
    @property
    def gap(self) -> Optional[float]: ...
    @property
    def losses(self) -> list[float]: ...
    @property
    def gradients(self) -> Optional[GromovGradientsOutput]: ...

class PointGromovOutput:
    @property
    def value(self) -> float: ...
    @property
    def f(self) -> Array: ...
    @property
    def g(self) -> Array: ...
    @property
    def x_tilde(self) -> Array: ...
    @property
    def y_tilde(self) -> Array: ...
    @property
    def moments(self) -> npt.NDArray[np.float64]: ...
    @property
    def iterations(self) -> int: ...
    @property
    def converged(self) -> bool: ...
    @property
    def step(self) -> float: ...
    @property
    def stationarity(self) -> float: ...
    @property
    def marginal_error(self) -> float: ...
    @property
    def inner_iterations(self) -> int: ...
    @property
    def inner_unconverged(self) -> int: ...
    @property
    def inner(self) -> ConvergenceReport: ...
    @property
    def plan(self) -> Optional[npt.NDArray[np.float64]]: ...

# --- Sinkhorn (core) ----------------------------------------------------------------------

def solve(
    mu: Array,
    nu: Array,
    cost: CostArg,
    params: SinkhornParams,
    warm_start: WarmStart = None,
    backend: str = "cpu",
    reg_m: Optional[Tuple[float, float]] = None,
) -> SinkhornOutput: ...
def wasserstein(
    mu: Array,
    nu: Array,
    cost: CostArg,
    params: SinkhornParams,
    warm_start: WarmStart = None,
    backend: str = "cpu",
    reg_m: Optional[Tuple[float, float]] = None,
) -> DistanceOutput: ...
def coupling(
    mu: Array,
    nu: Array,
    cost: CostArg,
    params: SinkhornParams,
    warm_start: WarmStart = None,
    backend: str = "cpu",
    reg_m: Optional[Tuple[float, float]] = None,
) -> CouplingOutput: ...
def wasserstein_gradients(
    mu: Array,
    nu: Array,
    cost: CostArg,
    params: SinkhornParams,
    warm_start: WarmStart = None,
    cg_tol: Optional[float] = None,
    cg_max_iters: int = 1000,
    backend: str = "cpu",
) -> OtGradientsOutput: ...
def plan_gradients(
    plan: Array,
    eps: float,
    upstream: Array,
    cg_tol: Optional[float] = None,
    cg_max_iters: int = 1000,
    backend: str = "cpu",
) -> PlanGradientsOutput: ...

# --- Exact OT -----------------------------------------------------------------------------

def emd(
    mu: Array,
    nu: Array,
    cost: Array,
    max_iters: Optional[int] = None,
    max_seconds: Optional[float] = None,
    method: str = "auto",
    certificate_tol: float = 1e-9,
    backend: str = "cpu",
) -> list[EmdOutput]: ...
def emd_gpu_refusal(
    mu: Optional[npt.NDArray[np.float64]],
    nu: Optional[npt.NDArray[np.float64]],
    n: int,
    m: int,
    points: bool = False,
    p: Optional[float] = None,
    method: str = "auto",
) -> Optional[str]: ...
def emd_points(
    mu: Optional[Array],
    nu: Optional[Array],
    x: Array,
    y: Array,
    p: Optional[float] = None,
    max_iters: Optional[int] = None,
    max_seconds: Optional[float] = None,
    method: str = "auto",
    certificate_tol: float = 1e-9,
    backend: str = "cpu",
) -> list[EmdOutput]: ...
def emd_1d(
    x_a: Array, x_b: Array, a: Optional[Array] = None, b: Optional[Array] = None, p: Optional[float] = None
) -> EmdOutput: ...
def emd2_1d(
    x_a: Array, x_b: Array, a: Optional[Array] = None, b: Optional[Array] = None, p: Optional[float] = None
) -> float: ...
def wasserstein_1d(
    u_values: Array,
    v_values: Array,
    u_weights: Optional[Array] = None,
    v_weights: Optional[Array] = None,
    p: float = 1.0,
) -> npt.NDArray[np.float64]: ...
def wasserstein_1d_grad(
    u_values: Array,
    v_values: Array,
    u_weights: Optional[Array] = None,
    v_weights: Optional[Array] = None,
    p: float = 1.0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def sliced_wasserstein_grad_batched(
    x_s: Array,
    x_t: Array,
    a: Optional[Array] = None,
    b: Optional[Array] = None,
    projections: Optional[npt.NDArray[np.float64]] = None,
    n_projections: int = 50,
    seed: int = 0,
    p: float = 2.0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def sliced_wasserstein(
    x_s: Array,
    x_t: Array,
    a: Optional[Array] = None,
    b: Optional[Array] = None,
    projections: Optional[npt.NDArray[np.float64]] = None,
    n_projections: int = 50,
    seed: int = 0,
    p: float = 2.0,
    gradients: bool = False,
) -> SlicedOutput: ...
def max_sliced_wasserstein(
    x_s: Array,
    x_t: Array,
    a: Optional[Array] = None,
    b: Optional[Array] = None,
    projections: Optional[npt.NDArray[np.float64]] = None,
    n_projections: int = 50,
    seed: int = 0,
    p: float = 2.0,
    ascent_steps: Optional[int] = None,
    step: float = 0.5,
    gradients: bool = False,
) -> SlicedOutput: ...

# --- Gromov–Wasserstein ------------------------------------------------------------------

def entropic_gromov(
    c1: Array,
    c2: Array,
    p: Array,
    q: Array,
    eps: float,
    m: Optional[Array] = None,
    alpha: float = 1.0,
    g0: Optional[Array] = None,
    loss: str = "square_loss",
    symmetric: Optional[bool] = None,
    max_iters: int = 1000,
    tol: float = 1e-9,
    check_every: int = 10,
    inner_max_iters: int = 1000,
    inner_tol: Optional[float] = None,
    inner_check_every: int = 10,
    backend: str = "cpu",
    gradients: bool = False,
) -> GromovOutput: ...
def exact_gromov(
    c1: Array,
    c2: Array,
    p: Array,
    q: Array,
    m: Optional[Array] = None,
    alpha: float = 1.0,
    g0: Optional[Array] = None,
    loss: str = "square_loss",
    symmetric: Optional[bool] = None,
    max_iters: int = 10000,
    tol_rel: float = 1e-9,
    tol_abs: float = 1e-9,
    backend: str = "cpu",
    gradients: bool = False,
) -> GromovOutput: ...
def point_gromov(
    x: Array,
    y: Array,
    p: Array,
    q: Array,
    eps: float,
    max_iters: int = 1000,
    tol: float = 1e-9,
    inner_max_iters: int = 1000,
    inner_tol: Optional[float] = None,
    inner_check_every: int = 10,
    backend: str = "cpu",
    plan: bool = False,
) -> PointGromovOutput: ...

# --- Point clouds -------------------------------------------------------------------------

def point_gradients(
    mu: Array,
    nu: Array,
    cost: CostArg,
    params: SinkhornParams,
    warm_start: WarmStart = None,
    backend: str = "cpu",
) -> PointGradientsOutput: ...
def sinkhorn_divergence(
    x: Array,
    y: Array,
    a: Array,
    b: Array,
    metric: str,
    precision: Optional[str],
    params: SinkhornParams,
    backend: str = "cpu",
    convention: str = "objective",
    reg_m: Optional[Tuple[float, float]] = None,
) -> DivergenceOutput: ...

# --- Barycenters --------------------------------------------------------------------------

def barycenter(
    histograms: Array,
    weights: Array,
    cost: CostArg,
    params: Tuple[float, Optional[int], float, int],
    backend: str = "cpu",
) -> BarycenterOutput: ...

# --- Bistochastic projection, linear algebra ---------------------------------------------

def bistochastic(x: Array, iters: int = 20, tol: float = 0.0, backend: str = "cpu") -> BistochasticOutput: ...
def bistochastic_backward(
    r: Array, g: Array, cg_tol: Optional[float] = None, cg_max_iters: int = 1000, backend: str = "cpu"
) -> BistochasticGradientOutput: ...
def svd3(a: Array, backend: str = "cpu") -> Svd3Output: ...
def newton_schulz(
    x: Array, steps: int, coefficients: Tuple[float, float, float], polish_steps: int, backend: str = "cpu"
) -> Array: ...

# --- Devices and timing -------------------------------------------------------------------

def cuda_device_name(ordinal: int = 0) -> str: ...
def _time_wasserstein(
    mu: npt.NDArray[np.float64],
    nu: npt.NDArray[np.float64],
    cost: npt.NDArray[np.float64],
    eps: float,
    repeats: int = 1000,
    on_pool: bool = False,
) -> list[float]: ...
def _last_compute_seconds() -> float: ...

# --- CUDA tensors in place (private to logot.torch; tensors through DLPack) ----------------

# A DLPack capsule ("dltensor": torch.utils.dlpack.to_dlpack(t)) or a tensor with __dlpack__
# (whose capsule the module takes on the call's stream): device, dtype, shape and address are
# read from it; one GPU and one float dtype per call; row-major contiguous.
Tensor = object
# (mu B×n, nu B×m, cost n×m or B×n×m)
DenseTensors = Tuple[Tensor, Tensor, Tensor]
# (x n×d or B×n×d, y m×d or B×m×d, a B×n, b B×m, metric, precision)
CloudTensors = Tuple[Tensor, Tensor, Tensor, Tensor, str, Optional[str]]
# (cg_tol, cg_max_iters)
CgOptions = Tuple[Optional[float], int]

def _dlpack_read(tensor: Tensor) -> Tuple[str, str, list[int]]: ...
def _wasserstein_cuda(
    problem: DenseTensors,
    grads: Optional[Tuple[Tensor, Tensor, Tensor]],
    params: SinkhornParams,
    cg: CgOptions,
    stream: int,
) -> DeviceSolveOutput: ...
def _coupling_cuda(problem: DenseTensors, plan: Tensor, params: SinkhornParams, stream: int) -> ConvergenceReport: ...
def _plan_gradients_cuda(
    plan: Tensor,
    upstream: Tensor,
    grads: Tuple[Tensor, Tensor, Tensor],
    eps: float,
    cg: CgOptions,
    stream: int,
) -> CgSummary: ...
def _point_gradients_cuda(
    clouds: CloudTensors,
    out: Tuple[Tensor, Tensor, Tensor, Tensor],
    params: SinkhornParams,
    stream: int,
) -> DevicePointOutput: ...
def _sinkhorn_divergence_cuda(
    clouds: CloudTensors,
    out: Tuple[Tensor, Tensor],
    params: SinkhornParams,
    stream: int,
) -> DeviceDivergenceOutput: ...

# (kind, statistics or None, error or None, tol, batch): "forward" statistics are
# (iterations, marginal_error, unconverged), "backward" ones a CgSummary.
DeferredReport = Tuple[str, Union[None, Tuple[int, float, int], CgSummary], Optional[str], Optional[float], int]

def _bistochastic_cuda(
    x: Tensor,
    out: Tuple[Tensor, Tensor],
    iters: int,
    tol: float,
    stream: int,
    report: bool,
) -> list[DeferredReport]: ...
def _bistochastic_backward_cuda(
    r: Tensor,
    g: Tensor,
    out: Tuple[Tensor, Tensor],
    cg: CgOptions,
    stream: int,
    report: bool,
) -> list[DeferredReport]: ...
def _bistochastic_words(batch: int, device: int) -> Tuple[int, int]: ...
def _bistochastic_reports(wait: bool) -> list[DeferredReport]: ...
