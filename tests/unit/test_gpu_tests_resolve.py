"""Every name that `tests/gpu` looks up resolves on the CPU, so GPU tests cannot rot unseen (CI never runs them):
a solution file per literal `evaluate(..., "NAME")` and per parametrized name of the evaluator tests, and a
problem (with the plan each test unpacks) per parametrized name of the offline-proposer tests. Two GPU tests
failed on the H100 with a KeyError before any kernel ran (2026-11-26: `conv1x1`, `matmul_deep`)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

GPU = Path(__file__).parent.parent / "gpu"


def _parametrized_names(tree: ast.Module) -> dict[str, list]:
    """Test function name -> the literal values of its `name` parameter (the first of a tuple of names)."""
    out: dict[str, list] = {}
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for dec in fn.decorator_list:
            if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"):
                continue
            first = dec.args[0]
            names = [first.value] if isinstance(first, ast.Constant) else [e.value for e in first.elts]
            if names[0] == "name":
                out[fn.name] = [dec.args[1]]  # an AST node: evaluated in the module's namespace below
    return out


def _module(path: Path):
    sys.path.insert(0, str(path.parent.parent))  # testpaths, offline_cases
    spec = importlib.util.spec_from_file_location(f"gpu_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _values(mod, node: ast.expr) -> list[str]:
    vals = eval(compile(ast.Expression(node), "<parametrize>", "eval"), vars(mod))  # noqa: S307 — our own tests
    return [v[0] if isinstance(v, tuple) else v for v in vals]


@pytest.mark.parametrize("path", sorted(p for p in GPU.glob("test_*.py") if p.name != "test_offline_gpu.py"),
                         ids=lambda p: p.stem)
def test_every_solution_a_gpu_evaluator_test_names_exists(path: Path) -> None:
    tree = ast.parse(path.read_text())
    mod = _module(path)
    names = {a.value for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "evaluate"
             for a in c.args[2:3] if isinstance(a, ast.Constant)}
    for nodes in _parametrized_names(tree).values():
        names.update(_values(mod, nodes[0]))
    missing = sorted(n for n in names if not (GPU / "solutions" / f"{n}.py").is_file())
    # ("problem", "name", …): a fixture problem and a candidate named by its path under tests/
    for node in _problem_and_path_cases(tree):
        for problem, name, *_ in eval(compile(ast.Expression(node), "<parametrize>", "eval"), vars(mod)):  # noqa: S307
            missing += [p for p in (GPU.parent / "fixtures" / "problems" / f"{problem}.py", GPU.parent / f"{name}.py")
                        if not p.is_file()]
    assert not missing, missing


def _problem_and_path_cases(tree: ast.Module) -> list[ast.expr]:
    out = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize" and \
                    isinstance(dec.args[0], ast.Tuple) and [e.value for e in dec.args[0].elts][:2] == ["problem", "name"]:
                out.append(dec.args[1])
    return out


def test_every_offline_gpu_case_resolves_to_a_problem_with_the_plan_its_test_unpacks() -> None:
    from kevolve.offline.generate import plan, plans

    path = GPU / "test_offline_gpu.py"
    mod = _module(path)
    by_test = {k: _values(mod, v[0]) for k, v in _parametrized_names(ast.parse(path.read_text())).items()}
    assert len(by_test) == 4, sorted(by_test)  # a new parametrized test: say here how its names resolve
    for test in ("test_generated_kernels_compute_what_the_module_computes_on_cuda",
                 "test_16_bit_kernels_compute_what_the_module_computes_on_cuda"):
        for name in by_test[test]:
            assert plan(mod._problem(name)) is not None, (test, name)
    for test, kind in (("test_triton_convolutions_compute_what_the_module_computes_in_each_precision", "tconv"),
                       ("test_triton_products_compute_what_the_module_computes_with_k_in_slices", "mm")):
        for name in by_test[test]:
            problem = mod._conv_problem(name) if "(" in name else mod._problem(name)
            tri = [p for p in plans(problem) if p.technique == "triton_mm"]
            assert len(tri) == 1 and kind in [f.group.kind for f in tri[0].fused], (test, name)
