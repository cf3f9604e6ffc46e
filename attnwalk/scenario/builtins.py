"""Where the built-in scenarios live: inside the installed package, or beside it in a checkout."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # attnwalk/


@lru_cache(maxsize=1)
def scenarios_dir() -> Path:
    """The folder of built-in scenario files.

    A wheel carries them as attnwalk/scenarios (hatchling force-include); an editable install or a
    plain checkout reads the top-level scenarios/ folder beside the package.
    """
    for candidate in (_PACKAGE / "scenarios", _PACKAGE.parent / "scenarios"):
        if candidate.is_dir():
            return candidate
    return _PACKAGE / "scenarios"


def builtin_names() -> list[str]:
    """Names of the built-in scenarios, sorted."""
    folder = scenarios_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def builtin_path(name: str) -> Path | None:
    """The file of built-in scenario `name`, or None when there is no such built-in."""
    path = scenarios_dir() / f"{name}.yaml"
    return path if name and "/" not in name and "\\" not in name and path.is_file() else None


# The lessons in the order they teach (README's table): each builds on the one before it. The end
# of a walk names the lesson after it.
COURSE = ("girl_bangs", "word_order", "causal_mask", "river_bank", "savings_bank", "yellow_dog", "yellow_dog_length",
          "qk_norm", "additive_score", "cross_attention", "rope", "shapes", "alibi", "sliding_window",
          "grouped_query", "online_softmax", "layer_norm", "quantized", "backprop", "saturation", "kv_cache")


def course() -> tuple[str, ...]:
    """Every built-in lesson in the order a learner takes them: COURSE, with each feature's own
    lessons put where the feature says (its COURSE_AFTER: lesson -> the lesson it follows)."""
    from attnwalk.features import FEATURES

    out = list(COURSE)
    for feature in FEATURES:
        for lesson, after in getattr(feature, "COURSE_AFTER", {}).items():
            out.insert(out.index(after) + 1, lesson)
    return tuple(out)


def next_lesson(name: str) -> str | None:
    """The built-in lesson that follows `name` in the course; None after the last or for another name."""
    order = course()
    if name not in order[:-1]:
        return None
    return order[order.index(name) + 1]


def course_order() -> list[str]:
    """The built-ins in the order they teach (the course), then any other built-in by name: what
    `attnwalk list` and serve's picker show, the first marked as where to start."""
    names = builtin_names()
    return [name for name in course() if name in names] + [name for name in names if name not in course()]
