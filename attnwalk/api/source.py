"""The scenario a notebook names, in any of the forms a person has at hand: a built-in name, a
path, YAML text, a dict of the scenario file's keys, or a Scenario already loaded."""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike, fspath
from typing import Any, Union

from attnwalk.errors import ScenarioError
from attnwalk.scenario.scenario import Scenario

ScenarioLike = Union[str, "PathLike[str]", Mapping[str, Any], Scenario]


def scenario_of(scenario: ScenarioLike) -> Scenario:
    """The Scenario `scenario` means. A string with a line break, or one that starts as a YAML
    mapping does (`tokens: …`) and names no file, is YAML text; any other string a built-in name
    or a path, as `attnwalk run` reads its argument. Errors are the loader's ScenarioErrors."""
    from attnwalk.scenario.load import load_scenario, scenario_from_text

    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Mapping):  # its messages name the key; a line of YAML it never had, not
        try:
            return scenario_from_text(_yaml_of(scenario), "<dict>", default_name="scenario")
        except ScenarioError as exc:
            raise ScenarioError(exc.detail, file="<dict>", field=exc.field) from None
    if isinstance(scenario, str) and _is_yaml_text(scenario):
        return scenario_from_text(scenario, "<yaml>", default_name="scenario")
    if isinstance(scenario, (str, PathLike)):
        return load_scenario(fspath(scenario))
    from attnwalk.errors import UsageError

    raise UsageError(f"a scenario is a built-in name, a path, YAML text or a dict of its keys, "
                     f"not {type(scenario).__name__}")


def _is_yaml_text(text: str) -> bool:
    if "\n" in text:
        return True
    from pathlib import Path

    head = text.lstrip()
    return (head.startswith("{") or ": " in head) and not Path(text).exists()


def _yaml_of(keys: Mapping[str, Any]) -> str:
    """The dict as the YAML file it stands for (numpy arrays as nested lists), so the loader checks
    it as it checks a file, and its messages name the dict's keys."""
    import yaml

    return yaml.safe_dump(_plain(keys), allow_unicode=True, sort_keys=False)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):  # a numpy array or scalar
        return value.tolist()
    return value
