"""The packages import only what their __init__ docstrings say they may (read from the source, so a
lazy import inside a function counts too)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "attnwalk"

# package -> what it must never import: attnwalk packages, and third-party libraries
FORBIDDEN = {
    "layer": {"text", "render", "terminal", "tutor", "export", "commands", "cli", "rich", "yaml",
              "typer", "app", "textual", "atomic", "features"},  # the core does no I/O
    # one module per feature: the layer's math and the scenario's reading primitives, no I/O
    "features": {"text", "render", "terminal", "tutor", "export", "commands", "cli", "rich", "yaml",
                 "typer", "app", "textual", "atomic", "models"},
    "scenario": {"text", "render", "terminal", "tutor", "export", "commands", "cli", "rich", "typer",
                 "app", "textual"},
    "text": {"render", "terminal", "tutor", "export", "commands", "cli", "rich", "yaml", "typer", "app",
             "textual"},
    "render": {"terminal", "tutor", "export", "commands", "cli", "typer", "app", "textual"},
    "export": {"terminal", "tutor", "commands", "cli", "typer", "app", "textual"},
    "terminal": {"tutor", "export", "commands", "cli", "typer", "app", "textual"},
    "tutor": {"terminal", "export", "commands", "cli", "typer", "app", "textual"},
    # the Textual walk and quiz: given the quiz's loop and the predictions by the commands
    "app": {"terminal", "tutor", "export", "commands", "cli", "typer", "yaml", "scenario"},
    # the command bodies and completion callbacks sit under the CLI (typer); Textual only through app/
    "commands": {"cli", "textual", "api"},
    # the Python API (import attnwalk): the commands' steps without printing, beside the CLI; no
    # Textual app, no server, no typer
    "api": {"cli", "typer", "app", "textual", "serve"},
    # attnwalk serve: above the commands (it runs the apps and the quiz's loop), under the CLI
    "serve": {"cli", "typer"},
    # real checkpoints: numpy, the layer's ops, safetensors and tokenizers (lazily); never torch
    "models": {"scenario", "text", "render", "terminal", "tutor", "export", "commands", "cli", "rich",
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


def test_the_layer_imports_the_scenario_only_for_types() -> None:
    # The numeric core is given a Scenario; it never reads files (the scenario package does).
    for path in (PACKAGE / "layer").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level, outside `if TYPE_CHECKING:`
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("attnwalk.scenario"):
                pytest.fail(f"{path.name} imports {node.module} at run time")


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
