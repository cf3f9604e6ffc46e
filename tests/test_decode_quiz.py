"""The quiz's questions on the KV cache: asked where `attnwalk decode` runs (a causal mask), worded
with the scenario's tokens, and answered from counts made here (1 + 2 + … + t scores without the
cache, lesson 003 §8's mask: token i reads tokens 1 … i)."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.walk import compute
from attnwalk.scenario.load import load_scenario, scenario_from_text
from attnwalk.tutor.cachequiz import cache_questions
from attnwalk.tutor.questions import questions
from attnwalk.tutor.quiz import CHOICE, LETTERS, check
from attnwalk.text import text

runner = CliRunner()


def cache_qs(walk, lang="en", seed=None):
    return {q.topic: q for q in questions(walk, lang, seed=seed) if q.topic.startswith("kv_")}


def test_causal_mask_asks_what_the_last_step_reuses_and_how_many_scores_it_saves() -> None:
    qs = cache_qs(compute(load_scenario("causal_mask")))
    reuse, scores = qs["kv_reuse"], qs["kv_scores"]
    assert reuse.kind == scores.kind == CHOICE
    assert "At the step where T3 arrives" in reuse.text
    right = reuse.choices[reuse.answer]
    assert right.startswith("The keys and values of T1, T2;") and "T3's q, k, v" in right
    assert any("queries" in c and "T1, T2" in c for c in reuse.choices if c != right)  # caching Q
    assert scores.choices[scores.answer].startswith(f"{1 + 2 + 3}:")
    assert {c.split(":")[0] for c in scores.choices} == {"6", "3", "9"}  # the rerun, the cache, t × t
    for q in (reuse, scores):
        assert check(q, LETTERS[q.answer]) and not check(q, LETTERS[(q.answer + 1) % 3])
        assert q.why[q.answer] == "" and all(q.why[i] for i in range(3) if i != q.answer)


@pytest.mark.parametrize("seed", range(8))
def test_a_seed_asks_about_another_step_with_the_right_count(seed) -> None:
    walk = compute(load_scenario("kv_cache"))
    qs = cache_questions(walk, text("en"), random.Random(seed))
    reuse, scores = qs
    t = int(reuse.qid.split(":")[1])
    assert 3 <= t <= 6 and scores.qid == f"kv_scores:{t}"
    tokens = walk.scenario.tokens
    assert f"where {tokens[t - 1]} arrives" in reuse.text
    assert reuse.choices[0].startswith("The keys and values of " + ", ".join(tokens[:t - 1]) + ";")
    assert scores.choices[0].startswith(f"{sum(range(1, t + 1))}:")
    assert scores.choices[1].startswith(f"{t}:") and scores.choices[2].startswith(f"{t * t}:")


def test_no_cache_questions_without_a_causal_mask_or_with_too_few_tokens() -> None:
    for name in ("river_bank", "cross_attention", "girl_bangs"):
        assert cache_qs(compute(load_scenario(name))) == {}
    two = "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\n" \
          "W_V: [[1, 0], [0, 1]]\nmask: causal\n"
    assert cache_qs(compute(scenario_from_text(two, "two.yaml"))) == {}


def test_a_window_mask_asks_what_is_reused_but_not_the_causal_count() -> None:
    window = ("tokens: [a, b, c]\nembeddings: [[1, 0], [0, 1], [1, 1]]\nW_Q: [[1, 0], [0, 1]]\n"
              "W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n"
              "mask: [[true, false, false], [true, true, false], [false, true, true]]\n")
    assert set(cache_qs(compute(scenario_from_text(window, "w.yaml")))) == {"kv_reuse"}


def test_the_cache_questions_speak_chinese_and_reach_the_worksheet() -> None:
    qs = cache_qs(compute(load_scenario("kv_cache")), "zh")
    right = qs["kv_reuse"].choices[qs["kv_reuse"].answer]
    assert right.startswith("小猫、饿、了、想、吃 的键和值") and "鱼 进来的这一步" in qs["kv_reuse"].text
    assert qs["kv_scores"].choices[qs["kv_scores"].answer].startswith("21：")
    result = runner.invoke(app, ["quiz", "kv_cache", "--format", "json"])
    assert result.exit_code == 0, result.output
    sheet = {q["topic"]: q for q in json.loads(result.stdout)["questions"]}
    assert sheet["kv_scores"]["options"][LETTERS.index(sheet["kv_scores"]["answer"])].startswith("21:")


def test_a_piped_quiz_scores_the_cache_questions() -> None:
    qs = questions(compute(load_scenario("causal_mask")))
    answers = [LETTERS[q.answer] if q.topic.startswith("kv_") else "q" for q in qs]
    first = next(i for i, q in enumerate(qs) if q.topic.startswith("kv_"))
    script = ["" for _ in range(first)] + answers[first:first + 2] + ["q"]
    result = runner.invoke(app, ["quiz", "causal_mask"], input="\n".join(script) + "\n")
    assert result.exit_code == 0, result.output
    assert f"Score: 2 / {first + 2}" in result.stdout
