"""attnwalk: a terminal tutor for the self-attention mechanism of Transformers, and a library.

    >>> import attnwalk
    >>> w = attnwalk.walk("river_bank")
    >>> w["A"].shape
    (4, 4)

The library's calls (`walk`, `model`, `grad`, `train`, `quiz`; attnwalk/api/) are imported the
first time one is used, so `import attnwalk` and `attnwalk --help` load neither numpy nor PyYAML.
Every error a user can cause is an `AttnwalkError`, with the message the CLI prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnwalk.errors import AttnwalkError, ComputeError, OutputError, ScenarioError, UsageError

__version__ = "0.1.0"

__all__ = ["walk", "model", "grad", "train", "quiz", "heads", "AttnwalkError", "ScenarioError", "ComputeError",
           "UsageError", "OutputError", "__version__"]

if TYPE_CHECKING:
    from attnwalk.api.calls import grad, heads, model, quiz, train, walk

_CALLS = ("walk", "model", "grad", "train", "quiz", "heads")


def __getattr__(name: str) -> Any:
    if name in _CALLS:
        from attnwalk.api import calls

        return getattr(calls, name)
    raise AttributeError(f"module 'attnwalk' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CALLS))
