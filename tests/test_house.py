"""The house rules, kept by CI: layers that read bottom-up (import-linter's contracts in
``pyproject.toml``), no import circles, small units (files, functions), a short README,
and every parameter declared once (the public signatures take its declared default)."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "napari_varblur"
#: The folders whose Python files the size rules cover.
CODE = ("src", "tests", "benchmarks", "docs")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_README_LINES = 150


def python_files():
    for folder in CODE:
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_import_contracts_hold():
    """``lint-imports`` with the contracts in ``pyproject.toml``: the layers, backends
    reached only through the engine, Qt and napari only in gui/ and app/."""
    script = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(script), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def import_graph():
    import grimp

    return grimp.build_graph("napari_varblur", cache_dir=None)


def cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(module, counter=[0]):  # noqa: B006 - a counter shared by the recursion
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on.add(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = []
            while True:
                top = stack.pop()
                on.discard(top)
                part.append(top)
                if top == module:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_in_a_circle_lazy_imports_included():
    assert cycles(import_graph()) == []


def test_nothing_inside_imports_the_public_facades():
    """The package's ``__init__`` and ``napari_varblur.jax`` are for users: a module of
    the package that reached through them would hide where it depends."""
    graph = import_graph()
    for facade in ("napari_varblur", "napari_varblur.jax"):
        importers = graph.find_modules_that_directly_import(facade) - {"napari_varblur"}
        assert not importers, (facade, importers)


@pytest.mark.parametrize("path", list(python_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_files_are_at_most_600_lines(path):
    count = len(path.read_text().splitlines())
    assert count <= MAX_FILE_LINES, f"{path.relative_to(ROOT)}: {count} lines"


def code_lines(lines: list[str], node: ast.AST) -> int:
    """A function's lines of code: neither blank, nor comments, nor its docstring."""
    body = node.body
    skip = set()
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            skip = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1
        for i in range(node.lineno, node.end_lineno + 1)
        if i not in skip and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#")
    )


def test_functions_are_at_most_60_lines_of_code():
    long = []
    for path in python_files():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = code_lines(lines, node)
                if count > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {count}")
    assert not long, long


def test_readme_is_a_front_page():
    count = len((ROOT / "README.md").read_text().splitlines())
    assert count <= MAX_README_LINES, f"README.md: {count} lines"


def public_functions():
    from napari_varblur import fit_sigma_map, gaussian_blur, sigma_map_from_beads
    from napari_varblur.fit import fit_sigma_map_steps  # noqa: F401 - keywords checked below
    from napari_varblur.jax import gaussian_blur as jax_blur

    found = [gaussian_blur, jax_blur, fit_sigma_map, sigma_map_from_beads]
    try:
        from napari_varblur import blur_layer

        found.append(blur_layer)
    except ImportError:  # pragma: no cover - napari is a test dependency
        pass
    return found


def test_public_signatures_take_the_declared_defaults_and_docs():
    """Each keyword of the public functions that is a declared parameter defaults to
    the declaration's default, and its docstring was filled (no ``%(name)s`` left)."""
    from napari_varblur.core.bead_params import BEAD_PARAMS
    from napari_varblur.core.params import FIT_PARAMS, PARAMS

    #: blur_layer's ``axes`` is a layer's choice ("2d", "3d", "all"), not the library's.
    own = {"blur_layer": {"axes"}}
    for function in public_functions():
        declared = FIT_PARAMS if function.__name__.startswith("fit") else PARAMS
        declared = BEAD_PARAMS if function.__name__.endswith("beads") else declared
        for name, parameter in inspect.signature(function).parameters.items():
            if name in own.get(function.__name__, ()):
                continue
            if name in declared and not declared[name].required:
                default = declared[name].default
                assert parameter.default == default, (function.__qualname__, name)
        assert "%(" not in function.__doc__, function.__qualname__


def test_the_performance_tables_are_generated_from_the_results():
    """``docs/performance.md`` and ``docs/gpu.md`` show what ``benchmarks/results/``
    holds: ``benchmarks/tables.py`` regenerates them."""
    script = ROOT / "benchmarks" / "tables.py"
    out = subprocess.run([sys.executable, str(script), "--check"], cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
