"""The type stubs of the compiled module (``logot/_logot.pyi``) declare every function and
class it has, with the same parameters (names, order, defaults) and fields, and the package
is marked typed (``py.typed``)."""

import ast
import inspect
import pathlib

import logot
from logot import _logot

PACKAGE = pathlib.Path(logot.__file__).parent


def _stub():
    tree = ast.parse((PACKAGE / "_logot.pyi").read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    classes = {
        n.name: {f.name for f in n.body if isinstance(f, ast.FunctionDef)} for n in tree.body if isinstance(n, ast.ClassDef)
    }
    return functions, classes


def test_py_typed_and_the_stub_are_in_the_package():
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "_logot.pyi").is_file()


def test_every_function_is_declared_with_its_parameters():
    functions, _ = _stub()
    compiled = {k for k, v in vars(_logot).items() if callable(v) and not isinstance(v, type)}
    assert compiled == set(functions), (compiled ^ set(functions))
    for name in compiled:
        actual = inspect.signature(getattr(_logot, name))
        node = functions[name]
        args = node.args.args
        declared = [a.arg for a in args]
        assert declared == list(actual.parameters), name
        # Defaults: the last len(defaults) parameters, compared as source text.
        defaults = dict(zip(declared[len(args) - len(node.args.defaults):], node.args.defaults))
        for p in actual.parameters.values():
            if p.default is inspect.Parameter.empty:
                assert p.name not in defaults, (name, p.name)
            else:
                assert ast.literal_eval(defaults[p.name]) == p.default, (name, p.name)


def test_every_class_is_declared_with_its_fields():
    _, classes = _stub()
    compiled = {k: v for k, v in vars(_logot).items() if isinstance(v, type)}
    assert set(compiled) == set(classes), (set(compiled) ^ set(classes))
    for name, cls in compiled.items():
        fields = {k for k, v in vars(cls).items() if not k.startswith("_") and inspect.isdatadescriptor(v)}
        assert fields == classes[name], (name, fields ^ classes[name])


def test_results_are_frozen_classes_read_by_name():
    """The compiled module hands back frozen objects with named fields (no positional
    tuples): the public result is built from those fields, and they cannot be reassigned."""
    import numpy as np
    import pytest

    mu, nu = np.array([[0.5, 0.5]]), np.array([[0.25, 0.75]])
    cost = np.array([[0.0, 1.0], [1.0, 0.0]])
    out = _logot.coupling(mu, nu, cost, (0.1, 1000, None, 10, None))
    assert type(out).__name__ == "CouplingOutput" and type(out.result.convergence).__name__ == "ConvergenceReport"
    public = logot.coupling(mu[0], nu[0], cost, 0.1)
    assert np.array_equal(out.plan[0], public.plan) and out.result.distance[0] == public.distance
    assert out.result.convergence.iterations == public.convergence.iterations
    with pytest.raises(AttributeError):
        out.plan = None
    with pytest.raises(AttributeError):
        out.result.convergence.converged = False
