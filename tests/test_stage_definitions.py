"""A stage is defined in one place: the base layer's in layer/stages.py, a feature's in its module.

Two checks: every definition is computed for some built-in lesson, walked, exported in every
format, explained by `attnwalk explain` and has its text in both languages; and a feature defined
here, in the test, in one place (plus its text), is computed, walked, explained and exported with
no other change to attnwalk.
"""

from __future__ import annotations

import copy
import csv
import functools
import io
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import attnwalk.features as features
from attnwalk import text as i18n
from attnwalk.cli import app
from attnwalk.layer.axes import default_cell, token_labels
from attnwalk.layer.graph import SIGNED, Stage, insert_after
from attnwalk.layer.walk import compute
from attnwalk.render.screens import walk_steps
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario
from modelwalk_layers import random_layer

runner = CliRunner()
FIELDS = ("title", "what", "why", "mistake")
ENV = {"COLUMNS": "120", "NO_COLOR": "1", "ATTNWALK_LANG": None, "LANG": "C.UTF-8", "LANGUAGE": None,
       "LC_ALL": None, "LC_MESSAGES": None}


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


@functools.cache
def builtin_output(*args: str) -> str:
    """`invoke` for a built-in lesson with attnwalk as installed, kept: eleven stages are first in
    additive_score, and its walk and exports are made once for them all (not for the test below
    that defines a stage of its own: it calls invoke)."""
    return invoke(*args)


def model_scenarios() -> list:
    """A BERT-like and a GPT-2-like real layer, first and later, and the tiny Llama fixture's first
    layer (attnwalk model's scenarios)."""
    from pathlib import Path

    from attnwalk.commands.model import load_layer, scenario_from_model

    llama = Path(__file__).resolve().parent / "fixtures" / "models" / "tiny-llama"
    tiny = load_layer("I sat by the river bank", str(llama), 1)
    return [scenario_from_model(random_layer(family, layer=layer))
            for family in ("bert", "gpt2") for layer in (0, 1)] + [
        scenario_from_model(tiny), scenario_from_model(gemma_like(tiny))] + next_scenarios(llama)


def next_scenarios(llama) -> list:
    """`attnwalk model --next` on the tiny Llama, and as Gemma 3 walks it (GeGLU, a norm after F)."""
    from dataclasses import replace

    import numpy as np

    from attnwalk.commands.model import load_next, scenario_with_next
    from attnwalk.models.blocks import rms_norm

    found = load_next("I sat by the river bank", str(llama), 1)
    post = rms_norm(found.mlp.F, np.linspace(0.8, 1.2, found.mlp.F.shape[1]), 1e-6)
    gemma = replace(found, layer=gemma_like(found.layer), mlp=replace(found.mlp, kind="geglu", post_norm=post))
    return [scenario_with_next(found), scenario_with_next(gemma)]


def gemma_like(layer):
    """The tiny Llama layer with Gemma 3's QK-norm and norm after attention (models/gemma3.py's
    fields; the real file's layers are checked in tests/test_gemma3.py)."""
    from dataclasses import replace

    import numpy as np

    d, width = layer.info.d_head, layer.info.d_model
    return replace(layer, info=replace(layer.info, family="gemma3", model_type="gemma3"),
                   q_norm=(np.linspace(0.5, 1.5, d), 1e-6), k_norm=(np.linspace(1.5, 0.5, d), 1e-6),
                   post_norm=(np.linspace(0.8, 1.2, width), 1e-6), scale=d ** 0.5, kind="global",
                   gemma=(6, 10000.0, ()))


STAGES = features.catalog()  # every stage a layer can have
# The stages only a real model's layer has: checked the same way in tests/test_model_walk.py
BUILTIN_STAGES = features.file_stages()


def has(scn, stage: Stage) -> bool:
    return any(s.key == stage.key and s.shown for s in scn.graph)


def first_builtin_with(stage: Stage) -> str:
    """The first built-in lesson whose scenario has `stage` (shapes, the slowest, last)."""
    names = sorted(builtin_names(), key=lambda name: name == "shapes")
    return next(name for name in names if has(load_scenario(name), stage))


# -- 1. every definition is complete ---------------------------------------------------------------


@pytest.mark.parametrize("stage", BUILTIN_STAGES, ids=lambda s: s.key)
def test_every_stage_is_computed_walked_exported_and_explained(stage: Stage) -> None:
    name = first_builtin_with(stage)
    walk = compute(load_scenario(name))
    stage = walk.stage(stage.key)  # as this layer's features made it
    assert stage in walk.stages
    assert stage in [s for s, _ in walk_steps(walk)]
    walked = builtin_output("run", name, "--no-pause")
    assert i18n.stage_text("en", stage, walk.scenario, walk.mode) in walked
    if stage.compute is None:  # the tokens: a table of tokens, no matrix and no cells
        assert stage.worked is None
        return
    M = walk.matrix(stage.key)
    assert M.dtype == np.float64 and M.shape[0] in (walk.scenario.n, walk.scenario.m)

    data = json.loads(builtin_output("export", name, "--format", "json"))["stages"]
    if stage.exported:
        where = data["heads"][0] if stage.per_head and walk.scenario.heads > 1 else data
        np.testing.assert_array_equal(np.array(where[stage.key]), M)
    rows = list(csv.DictReader(io.StringIO(builtin_output("export", name, "--format", "csv"))))
    values = [float(r["value"]) for r in rows if r["stage"] == stage.key and r["head"] in ("", "0")]
    np.testing.assert_array_equal(np.array(values).reshape(M.shape), M)
    title = i18n.stage_text("en", stage, walk.scenario, walk.mode)
    markdown = builtin_output("export", name, "--format", "markdown")
    assert title in markdown and stage.formula_in(walk.scenario, walk.mode) in markdown
    assert title in builtin_output("export", name, "--format", "latex")

    row, col = default_cell(walk, stage.key)
    # rows and dimension columns are typed counted from 1, as the tables label them
    col_name = token_labels(walk.scenario.key_tokens)[col] if stage.square else str(col + 1)
    explained = invoke("explain", name, stage.key, str(row + 1), col_name)
    assert f"= {M[row, col]:.4f}" in explained.replace("-0.0000", "0.0000")


@pytest.mark.parametrize("lang", i18n.LANGS)
@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.key)
def test_every_stage_has_its_text_in_both_languages(stage: Stage, lang: str) -> None:
    for field in FIELDS:
        assert i18n.text(lang).stage(stage.key, field).strip()


def test_every_stage_applies_to_some_built_in_lesson_or_real_layer() -> None:
    lessons = [load_scenario(name) for name in builtin_names()]
    shown = {s.key for s in STAGES if s.shown}
    assert {s.key for s in BUILTIN_STAGES if s.shown} == {s.key for s in STAGES if any(has(x, s) for x in lessons)}
    models = model_scenarios()
    assert shown == {s.key for s in STAGES if any(has(x, s) for x in lessons + models)}


# -- 2. a stage defined in one place ---------------------------------------------------------------


def doubled(c) -> list:
    """The toy stage's worked cell: one line of arithmetic from X."""
    x = c.walk.matrix("X")[c.row, c.col]
    return [f"2 {c.mk.times} X[{c.rows[c.row]}, {c.cols[c.col]}] = 2 {c.mk.times} {c.num(x)} = {c.num(c.value)}"]


TOY = Stage("2X", "2X", "2X = 2 · X", "n", "d_model", lambda ctx, X: 2 * X, reads=("X",), kind=SIGNED,
            worked=doubled)


class Toy:
    """A feature of one stage, as a feature module would be: its stages, when it applies, and
    where it goes in the graph."""

    STAGES = (TOY,)

    @staticmethod
    def active(scn) -> bool:
        return True

    @staticmethod
    def extend(stages: list, scn) -> None:
        insert_after(stages, "X", TOY)
TOY_TEXT = {"en": {"title": "X doubled", "what": "Every entry of X times two.",
                   "why": "A toy stage, to show that a stage is one definition.",
                   "mistake": "Doubling X does not double the attention weights."},
            "zh": {"title": "X 的两倍", "what": "X 的每个元素乘以 2。", "why": "一个玩具阶段。",
                   "mistake": "X 翻倍，注意力权重并不会跟着翻倍。"}}


@pytest.fixture
def toy_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy feature among the features, and its text in both language files."""
    monkeypatch.setattr(features, "FEATURES", (*features.FEATURES, Toy))
    tables = {lang: copy.deepcopy(i18n._table(lang)) for lang in i18n.LANGS}
    for lang, fields in TOY_TEXT.items():
        tables[lang]["stage"]["2X"] = fields
    monkeypatch.setattr(i18n, "_table", tables.__getitem__)
    i18n.text.cache_clear()
    yield
    i18n.text.cache_clear()


def test_a_stage_defined_in_one_place_is_computed_walked_explained_and_exported(toy_stage) -> None:
    walk = compute(load_scenario("girl_bangs"))
    X = walk.matrix("X")
    np.testing.assert_array_equal(walk.matrix("2X"), 2 * X)
    assert [s.key for s, _ in walk_steps(walk)][3:6] == ["X", "2X", "Q"]

    walked = invoke("run", "girl_bangs", "--no-pause")
    assert "Stage 5 / 12   2X  X doubled" in walked
    assert "Every entry of X times two." in walked
    assert "Stage 12 / 12" in walked  # the stages after it move one on
    zh = runner.invoke(app, ["run", "girl_bangs", "--no-pause", "--lang", "zh"], env=ENV).stdout
    assert "X 的两倍" in zh

    explained = invoke("explain", "girl_bangs", "2X", "撩", "2")  # the second column, X[1, 1]
    assert f"2 × X[撩, 2] = 2 × {X[1, 1]:.4f} = {2 * X[1, 1]:.4f}" in explained
    assert f"2X[撩, 2] = {2 * X[1, 1]:.4f}" in explained

    data = json.loads(invoke("export", "girl_bangs", "--format", "json"))
    assert data["stages"]["2X"] == (2 * X).tolist()
    assert list(data["stages"])[:5] == ["E", "P", "X", "2X", "Q"]
    rows = [r for r in csv.DictReader(io.StringIO(invoke("export", "girl_bangs", "--format", "csv")))
            if r["stage"] == "2X"]
    assert [float(r["value"]) for r in rows] == (2 * X).ravel().tolist()
    assert "X doubled" in invoke("export", "girl_bangs", "--format", "markdown")
    assert "X doubled" in invoke("export", "girl_bangs", "--format", "latex")
