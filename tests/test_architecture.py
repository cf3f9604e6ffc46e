"""The packages import only what their __init__ docstrings say they may (read from the source, so a
lazy import inside a function counts too)."""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attnwalk"

# package -> what it must never import: attnwalk packages, and third-party libraries
FORBIDDEN = {
    # the YAML reader, its syntax errors and the field checks: below the scenario and the features
    "reading": {"layer", "features", "scenario", "text", "render", "terminal", "tutor", "export",
                "commands", "cli", "rich", "typer", "app", "textual", "atomic", "models", "serve"},
    "layer": {"text", "render", "terminal", "tutor", "export", "commands", "cli", "rich", "yaml",
              "typer", "app", "textual", "atomic", "features", "reading"},  # the core does no I/O
    # one module per feature: the layer's math and the reading primitives, no I/O (the scenario
    # package above them for types only: test_the_lower_packages_import_the_scenario_only_for_types)
    "features": {"text", "render", "terminal", "tutor", "export", "commands", "cli", "rich", "yaml",
                 "typer", "app", "textual", "atomic", "models"},
    "scenario": {"text", "render", "terminal", "tutor", "export", "commands", "cli", "rich", "typer",
                 "app", "textual"},
    "text": {"render", "terminal", "tutor", "export", "commands", "cli", "rich", "yaml", "typer", "app",
             "textual", "reading"},
    "render": {"terminal", "tutor", "export", "commands", "cli", "typer", "app", "textual"},
    "export": {"terminal", "tutor", "commands", "cli", "typer", "app", "textual"},
    "terminal": {"tutor", "export", "commands", "cli", "typer", "app", "textual"},
    "tutor": {"terminal", "export", "commands", "cli", "typer", "app", "textual"},
    # the Textual walk and quiz: given the quiz's loop and the predictions by the commands
    "app": {"terminal", "tutor", "export", "commands", "cli", "typer", "yaml", "scenario", "reading"},
    # the command bodies and completion callbacks sit under the CLI (typer); Textual only through app/
    "commands": {"cli", "textual", "api"},
    # the Python API (import attnwalk): the commands' steps without printing, beside the CLI; no
    # Textual app, no server, no typer
    "api": {"cli", "typer", "app", "textual", "serve"},
    # attnwalk serve: above the commands (it runs the apps and the quiz's loop), under the CLI
    "serve": {"cli", "typer"},
    # real checkpoints: numpy, the layer's ops, safetensors and tokenizers (lazily); never torch
    "models": {"scenario", "reading", "text", "render", "terminal", "tutor", "export", "commands", "cli", "rich",
               "yaml", "typer", "app", "textual", "torch", "transformers", "huggingface_hub",
               "sentence_transformers"},
}


def imports(path: Path) -> set[str]:
    """attnwalk's packages and the libraries a module imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            found.add(parts[1] if parts[0] == "attnwalk" and len(parts) > 1 else parts[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_each_package_imports_only_what_it_may(package: str) -> None:
    modules = sorted((PACKAGE / package).rglob("*.py"))
    assert modules, package
    wrong = {path.name: sorted(imports(path) & FORBIDDEN[package]) for path in modules}
    assert {name: bad for name, bad in wrong.items() if bad} == {}


def runtime_imports(path: Path) -> dict[str, list[int]]:
    """attnwalk's packages (and top-level modules) that `path` imports when it runs, each with the
    lines: module level and inside functions alike, but not under `if TYPE_CHECKING:`, whose
    imports serve annotations only and are never executed."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(inner) for stmt in node.body for inner in ast.walk(stmt)}
    here = path.relative_to(PACKAGE.parent).with_suffix("").parts  # ("attnwalk", "layer", "walk")
    found: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package this module is in
                base = ".".join([*here[:len(here) - node.level], *([base] if base else [])])
            # `from attnwalk import numbering` names a module; `from attnwalk.layer import ops`, a package's
            names = [f"{base}.{alias.name}" for alias in node.names] if base == "attnwalk" else [base]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "attnwalk" and len(parts) > 1:
                found.setdefault(parts[1], []).append(node.lineno)
    return found


def package_of(path: Path) -> str:
    """The package a module belongs to (attnwalk/layer/walk.py: layer), or the top-level module."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def import_graph() -> dict[str, dict[str, list[str]]]:
    """package -> package it imports at run time -> where ("layer/walk.py:12")."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        own = package_of(path)
        for other, lines in runtime_imports(path).items():
            if other != own:
                where = [f"{path.relative_to(PACKAGE).as_posix()}:{line}" for line in lines]
                graph.setdefault(own, {}).setdefault(other, []).extend(where)
    return graph


@pytest.mark.parametrize("package", ["layer", "features"])
def test_the_lower_packages_import_the_scenario_only_for_types(package: str) -> None:
    # The numeric core and the features are given a Scenario (or a Draft); they never read files
    # and never call up into the loader: what they need of it is handed in (Draft.sequence).
    wrong = [f"{path.relative_to(PACKAGE).as_posix()}:{line}"
             for path in sorted((PACKAGE / package).rglob("*.py"))
             for line in runtime_imports(path).get("scenario", [])]
    assert wrong == []


def test_no_import_circle_between_packages() -> None:
    # One direction, from the commands down to the numeric core: scenario -> features -> layer,
    # reading below them. A circle, however lazy its imports, means two packages that can only
    # be understood (and changed) together.
    graph = import_graph()
    try:
        graphlib.TopologicalSorter({pkg: set(imported) for pkg, imported in graph.items()}).prepare()
    except graphlib.CycleError as error:
        cycle = error.args[1][::-1]  # [a, b, …, a]: each imports the one after it
        edges = [f"{a} -> {b}: {', '.join(graph[a][b][:6])}" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import circle " + " -> ".join(cycle) + "\n" + "\n".join(edges))


def test_the_import_graph_is_read_from_the_code() -> None:
    # what the circle test reads: a function-local import counts, a TYPE_CHECKING one does not
    graph = import_graph()
    assert "features" in graph["scenario"]  # scenario.py's graph, a function-local import
    assert "layer" in graph["features"] and "reading" in graph["features"]
    assert "scenario" not in graph["features"]  # only Draft and Scenario, for annotations
    assert "scenario" not in graph.get("reading", {})


def test_no_module_is_left_outside_a_package() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "atomic.py", "cli.py", "errors.py", "numbering.py"]
    assert imports(PACKAGE / "numbering.py") <= {"__future__", "collections"}  # any package may use it


def test_the_atomic_write_is_standard_library_only_and_written_once() -> None:
    # Every package that writes a file may use it: it imports no attnwalk package and no library
    # (not even tempfile, which startup would pay for), and no other module renames a temporary
    # file into place by hand.
    assert imports(PACKAGE / "atomic.py") <= {"__future__", "contextlib", "os", "pathlib", "stat"}
    by_hand = re.compile(r"\bos\.(replace|rename|link)\(|\btempfile\b|\bmkstemp\b")
    assert [path.relative_to(PACKAGE).as_posix() for path in sorted(PACKAGE.rglob("*.py"))
            if path.name != "atomic.py" and by_hand.search(path.read_text(encoding="utf-8"))] == []


def test_every_package_says_what_it_holds_and_may_import() -> None:
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert len(doc) > 100 and "import" in doc, init.parent.name


# -- no code outside features/ tests a feature's setting ------------------------------------------

SCENARIO = PACKAGE / "scenario" / "scenario.py"
# Scenario's members that read the settings but are not one feature's flag: `masked` says whether
# the layer has a mask M at all (every softmax reads Scenario.allowed), `scorer` is the score's
# arithmetic the layer calls, and the rest are how a feature module itself reads and sets its
# setting (`setting`, `with_setting`, `param`) or what the features make (`graph`, `features`).
NOT_A_FLAG = {"masked", "scorer", "param", "setting", "with_setting", "graph", "features"}
# Comparisons not yet moved to the graph or a feature's hook: (module under attnwalk/, the line
# stripped). Empty: every one has moved; a line here fails the test once it no longer matches.
NOT_YET: set[tuple[str, str]] = set()


def feature_flags() -> set[str]:
    """Scenario's properties that read a feature's setting (self.settings, self.params.get) or the
    score kind (self.scorer), read from scenario.py itself."""
    tree = ast.parse(SCENARIO.read_text(encoding="utf-8"))
    scenario = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Scenario")
    flags = set()
    for member in scenario.body:
        if (isinstance(member, ast.FunctionDef) and member.name not in NOT_A_FLAG
                and any(ast.unparse(d) == "property" for d in member.decorator_list)):
            body = ast.unparse(member)
            if "self.settings" in body or "self.params.get" in body or "self.scorer" in body:
                flags.add(member.name)
    return flags


def _scenario_like(node: ast.expr) -> bool:
    """`scn`, `scenario`, or anything's `.scenario` (walk.scenario): a Scenario by its name."""
    return (isinstance(node, ast.Name) and node.id in ("scn", "scenario")
            or isinstance(node, ast.Attribute) and node.attr == "scenario")


def setting_tests(flags: set[str]) -> set[tuple[str, str]]:
    """(module, line) of each comparison (==, !=, is, is not, in, not in) with a scenario's
    feature flag as an operand, and each `.setting(...)` asked of a scenario, outside features/."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith("features/") or path == SCENARIO:
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Compare):
                hit = any(isinstance(x, ast.Attribute) and x.attr in flags and _scenario_like(x.value)
                          for x in (node.left, *node.comparators))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                hit = node.func.attr == "setting" and _scenario_like(node.func.value)
            else:
                continue
            if hit:
                found.add((name, lines[node.lineno - 1].strip()))
    return found


def test_the_flags_are_read_from_the_scenario_class() -> None:
    # the test below reads what it looks for from the code: a few it must find, none it must not
    flags = feature_flags()
    assert {"bias", "rope", "window", "mask_kind", "score", "qk_norm", "model"} <= flags
    assert not flags & NOT_A_FLAG


def test_no_code_outside_features_compares_a_feature_setting() -> None:
    # A surface asks the graph (scn.graph: which stages there are, what each reads) or the
    # scenario's features for what they offer; `scn.bias == "alibi"` is a second definition of
    # what ALiBi changes, which a new feature would have to find by grep.
    found = setting_tests(feature_flags())
    assert sorted(found - NOT_YET) == []
    assert sorted(NOT_YET - found) == []  # moved or gone: take it off the list
