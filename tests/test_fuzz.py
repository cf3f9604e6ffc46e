"""Fuzzing the loader and the CLI: whatever the input, a valid walk or the loader's own error.

Raw text, raw bytes, structured junk dumped as YAML and mutated valid scenarios go through
`scenario_from_text` (and a sample through `attnwalk export`). The only outcomes allowed are a
ScenarioError (one line, naming the file), or a Scenario that `compute` runs in every mode (or
refuses with a one-line ComputeError) and that exports as JSON. Anything else is a bug.

CI runs a modest number of examples; a longer run:
    ATTNWALK_FUZZ_EXAMPLES=10000 python -m pytest tests/test_fuzz.py
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.errors import ComputeError, ScenarioError
from attnwalk.export.data import to_json, walk_data
from attnwalk.layer.walk import compute
from attnwalk.features.cross import SOURCE_KEYS
from attnwalk.scenario.load import keys, scenario_from_text
from attnwalk.scenario.files import decode

EXAMPLES = int(os.environ.get("ATTNWALK_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
MODES = ("scaled", "unscaled", "uniform", "hard")
FILE = "fuzz.yaml"
runner = CliRunner()


def outcome(text: str) -> str:
    """Load and walk `text`; returns 'refused', 'overflow' or 'walked', asserting what each
    promises. Any other exception escapes and fails the test."""
    try:
        scn = scenario_from_text(text, FILE)
    except ScenarioError as exc:
        message = str(exc)
        assert message.startswith(FILE) and message.isprintable(), message  # one line
        assert len(message) < 400, message
        return "refused"
    result = "walked"
    for mode in MODES:
        try:
            walk = compute(scn, mode)
        except ComputeError as exc:
            assert "overflows float64" in str(exc) and str(exc).isprintable()
            result = "overflow"
            continue
        A = walk.heads[0].mats["A"]
        assert np.all(np.isfinite(A)) and np.all(A >= 0), mode
        assert np.all(A.sum(axis=1) <= 1.0 + 1e-12), mode
        if walk.stage("A").extra_logit is None or not (walk.mode.reads_scores and walk.mode.smooth):
            assert np.allclose(A.sum(axis=1), 1.0), mode  # a sink's share is the only thing missing
        assert np.all(A[~scn.allowed] == 0), mode
        assert np.all(np.isfinite(walk.heads[-1].mats["Z"]))
        json.loads(to_json(walk_data(walk)))  # allow_nan=False: a NaN anywhere would raise
    return result


# -- raw text and bytes ------------------------------------------------------------------------

YAMLISH = st.lists(st.sampled_from(list("[]{}:-,#&*!|>'\"%@`?~\t\n  \r0123456789.eE+_abxyzWQKVO")
                                   + ["tokens", "embeddings", "W_Q", "W_K", "W_V", "mask",
                                      "heads", "source", "yes", ".nan", "1e400", "\ufeff",
                                      "\x00", "\x85", "\u2028", "\ud800"]),
                   max_size=120).map("".join)


@FUZZ
@given(st.one_of(st.text(max_size=400), YAMLISH))
def test_raw_text(text):
    outcome(text)


@FUZZ
@given(st.binary(max_size=400))
def test_raw_bytes_through_the_decoder(data):
    try:
        text = decode(data, FILE)
    except ScenarioError as exc:
        assert "\n" not in str(exc)
        return
    outcome(text)


# -- structured junk ---------------------------------------------------------------------------

NAMES = st.sampled_from(keys() + ("W_q", "embedding", "file", "key", "en", "zh", "Heads", ""))
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-10, max_value=10), st.integers(), st.integers(min_value=10 ** 300,
                                                                         max_value=10 ** 400),
    st.floats(), st.floats(min_value=-10, max_value=10),
    st.text(max_size=12), st.sampled_from(["none", "causal", "sinusoidal", "dot", "additive",
                                           "yes", "no", "1e-3", ".inf"]),
)
JUNK = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=5),
    st.dictionaries(st.one_of(NAMES, st.text(max_size=8)), inner, max_size=5)), max_leaves=40)


@FUZZ
@given(st.dictionaries(st.one_of(NAMES, st.text(max_size=8)), JUNK, max_size=12), st.data())
def test_structured_junk(document, data):
    flow = data.draw(st.sampled_from([None, True, False]))
    event(outcome(yaml.safe_dump(document, default_flow_style=flow,
                                 allow_unicode=data.draw(st.booleans()))))


@FUZZ
@given(JUNK)
def test_any_yaml_value_as_the_whole_document(value):
    outcome(yaml.safe_dump(value))


# -- valid scenarios, and mutations of them ----------------------------------------------------

NUMBER = st.one_of(st.integers(-3, 3), st.floats(-4, 4, allow_nan=False, allow_infinity=False))


@st.composite
def valid_scenarios(draw) -> dict:
    """A scenario dict whose shapes all agree (so it must load)."""
    n = draw(st.integers(1, 5))
    d_model = draw(st.integers(1, 4))
    heads = draw(st.integers(1, 3))
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))

    def matrix(rows, cols):
        return draw(st.lists(st.lists(NUMBER, min_size=cols, max_size=cols), min_size=rows,
                             max_size=rows))

    tokens = draw(st.lists(st.text(min_size=1, max_size=6), min_size=n, max_size=n))
    scn = {"name": "fuzzed", "tokens": tokens, "embeddings": matrix(n, d_model),
           "W_Q": matrix(d_model, heads * d_k), "W_K": matrix(d_model, heads * d_k),
           "W_V": matrix(d_model, heads * d_v), "heads": heads}
    m = n
    if draw(st.booleans()):
        m = draw(st.integers(1, 4))
        scn["source"] = {"tokens": [f"s{i}" for i in range(m)], "embeddings": matrix(m, d_model)}
    if draw(st.booleans()):
        scn["positional"] = draw(st.sampled_from(["none", "sinusoidal", matrix(n, d_model)]))
    if draw(st.booleans()):
        scn["W_O"] = matrix(heads * d_v, d_model)
    choice = draw(st.sampled_from(["none", "causal", "explicit", "absent"]))
    if choice == "causal" and "source" not in scn:
        scn["mask"] = "causal"
    elif choice == "explicit":
        rows = draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m), min_size=n,
                             max_size=n))
        scn["mask"] = [row if any(row) else [True] + row[1:] for row in rows]
    elif choice == "none":
        scn["mask"] = "none"
    if draw(st.booleans()):
        scn["score"] = "additive"
        scn["w_a"] = draw(st.lists(NUMBER, min_size=d_k, max_size=d_k))
    if draw(st.booleans()):
        scn["qk_norm"] = True
        if draw(st.booleans()):
            scn["qk_scale"] = draw(st.floats(0.1, 10))
    if draw(st.booleans()):
        scn["focus"] = draw(st.sampled_from([draw(st.integers(1, n)), tokens[0]]))
    if draw(st.booleans()):
        scn["ids"] = draw(st.lists(st.integers(0, 50000), min_size=n, max_size=n))
    return scn


def builtin_scenarios() -> list[dict]:
    return [yaml.safe_load(p.read_text("utf-8")) for p in sorted(SCENARIOS.glob("*.yaml"))]


@FUZZ
@given(valid_scenarios())
def test_valid_scenarios_load_and_walk(scn):
    assert outcome(yaml.safe_dump(scn, allow_unicode=True)) in ("walked", "overflow")


POISON = st.one_of(st.none(), st.booleans(), st.text(max_size=6),
                   st.sampled_from([1e300, -1e300, 1e308, 10 ** 400, float("nan"), float("inf"),
                                    0, -1, 2.5, [], {}, [[]], {"file": "x.npy"}, "causal"]))


def _paths(value, prefix=()):
    """Every path into a nested dict/list: (key, index, ...)."""
    yield prefix
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from _paths(sub, prefix + (key,))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _paths(sub, prefix + (i,))


def _mutate(scn, data) -> None:
    """One structural change at a random place: delete, replace, duplicate, grow or shrink."""
    paths = [p for p in _paths(scn) if p]
    path = data.draw(st.sampled_from(paths))
    parent = scn
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    action = data.draw(st.sampled_from(["delete", "replace", "duplicate", "wrap", "rename"]))
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = data.draw(POISON)
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, json.loads(json.dumps(parent[last])) if parent[last] is not None
                      else None)
    elif action == "wrap":
        parent[last] = [parent[last]]
    elif action == "rename" and isinstance(parent, dict):
        parent[data.draw(NAMES)] = parent.pop(last)


@FUZZ
@given(st.one_of(valid_scenarios(), st.sampled_from(builtin_scenarios())), st.data())
def test_mutated_valid_scenarios(scn, data):
    scn = json.loads(json.dumps(scn, allow_nan=True))  # a private copy to mutate
    for _ in range(data.draw(st.integers(1, 4))):
        if scn and isinstance(scn, dict):
            _mutate(scn, data)
    event(outcome(yaml.safe_dump(scn, allow_unicode=True)))


@FUZZ
@given(st.one_of(valid_scenarios(), st.sampled_from(builtin_scenarios())), st.data())
def test_text_mutations_of_valid_scenarios(scn, data):
    """Edits a person makes by accident: a deleted or stray character, a duplicated or dropped
    line, a tab for spaces."""
    lines = yaml.safe_dump(scn, allow_unicode=True, width=60).splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        edit = data.draw(st.sampled_from(["drop", "duplicate", "tab", "char", "delete_char"]))
        if edit == "drop" and len(lines) > 1:
            del lines[i]
        elif edit == "duplicate":
            lines.insert(i, lines[i])
        elif edit == "tab":
            lines[i] = lines[i].replace("  ", "\t", 1)
        elif edit == "char":
            at = data.draw(st.integers(0, len(lines[i])))
            stray = data.draw(st.sampled_from(list("[]{}:-,#&*!|>'\"%@` \t") + ["yes", "1e999"]))
            lines[i] = lines[i][:at] + stray + lines[i][at:]
        elif edit == "delete_char" and lines[i]:
            at = data.draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:at] + lines[i][at + 1:]
    event(outcome("".join(lines)))


# -- through the command line ------------------------------------------------------------------

CLI = settings(FUZZ, max_examples=max(20, EXAMPLES // 10))


@CLI
@given(st.one_of(
    YAMLISH.map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.binary(max_size=200),
    valid_scenarios().map(lambda s: yaml.safe_dump(s, allow_unicode=True).encode()),
    st.builds(lambda s: yaml.safe_dump(s).encode(), st.dictionaries(NAMES, JUNK, max_size=8)),
))
def test_export_exits_0_with_json_or_2_with_one_line(data):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.yaml"
        path.write_bytes(data)
        result = runner.invoke(app, ["export", str(path), "--format", "json"])
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        json.loads(result.stdout)
        return
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("attnwalk: ")
