"""What the lessons say is true, in both languages, and the Chinese holds one set of terms (issue 26).

The five statements the issue found false, each checked where a learner reads it (the scenario's
text, the stage's text as the walk prints it, the worked cell), against what the papers say:
Press et al. (ALiBi), Dao et al. (FlashAttention: queries tiled too), Vaswani et al. 2017 §3.2.1
(why dot products), and the KV cache's exactness resting on the causal mask.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.scenario.builtins import builtin_names, builtin_path

runner = CliRunner()
TEXT = Path(__file__).resolve().parent.parent / "attnwalk" / "text"


def strings(lang: str) -> dict[str, str]:
    """Every string of text/<lang>.toml by its dotted key."""
    def walk(node, path=""):
        for key, value in node.items():
            if isinstance(value, dict):
                yield from walk(value, f"{path}{key}.")
            else:
                yield f"{path}{key}", value
    return dict(walk(tomllib.loads((TEXT / f"{lang}.toml").read_text(encoding="utf-8"))))


def lesson_texts(lang: str) -> dict[str, str]:
    """Every title, description and note of the built-ins in `lang`, by "name: field"."""
    out = {}
    for name in builtin_names():
        doc = yaml.safe_load(builtin_path(name).read_text(encoding="utf-8"))
        fields = {"title": doc.get("title"), "description": doc.get("description"),
                  **{f"notes.{k}": v for k, v in (doc.get("notes") or {}).items()}}
        for field, value in fields.items():
            text = value.get(lang) if isinstance(value, dict) else value
            if isinstance(text, str):
                out[f"{name}: {field}"] = text
    return out


def walked(*args: str) -> str:
    result = runner.invoke(app, [*args, "--no-pause"] if args[0] == "run" else list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.split())


# -- the five statements --------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_rope_numbers_its_pairs_as_the_formula_and_its_dimensions_as_the_tables(lang):
    """1. "pair 0 on dimensions 0 and 2" beside a worked cell's "pair i = 0, dimensions (1, 3)"."""
    out = walked("run", "rope", "--lang", lang)
    assert "pair 0" not in out and "第 0 对" not in out and "第 0 维" not in out
    if lang == "en":
        assert "i = 0 (dimensions 1 and 3" in out and "i = 1 (dimensions 2 and 4)" in out
    else:
        assert "第 1 维和第 3 维" in out and "第 2 维和第 4 维" in out
    cell = walked("explain", "rope", "Q_rot", "mat", "1", "--lang", lang)
    said = ("dimensions counted from 1, as the table's columns" if lang == "en" else "维度和表格的列一样从 1 数起")
    assert said in cell and ("i = 0" in cell)
    girl = lesson_texts("zh")["girl_bangs: notes.P"]  # seed 002 counts 女生's dimensions from 0
    assert "第 2 维" not in girl and "第二个分量" in girl


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_alibi_says_a_longer_text_does_bring_new_distances(lang):
    """2. Press et al.: the penalty is a fixed line; a longer text brings unseen distances, pushed
    down more, and no position embeddings that were never trained."""
    out = walked("run", "alibi", "--lang", lang)
    for false in ("meets nothing new", "brings no offset", "没见过的偏移量", "遇不到没见过的东西", "定死"):
        assert false not in out
    assert ("distances never seen in training" in out) if lang == "en" else ("训练时没见过的距离" in out)
    assert "2^(-8/H)" in strings(lang)["stage.B.mistake"]  # H heads, h one of them


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_tiled_form_tiles_the_queries_too(lang):
    """3. FlashAttention holds blocks of B_r × B_c scores, not n × B (524,288 at n = 4096)."""
    out = walked("run", "online_softmax", "--lang", lang)
    assert "only one block of n × B scores" not in out and "一块 n × B 的分数" not in out
    assert "B_r × B_c" in out and "16,384" in out and "524,288" not in out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_additive_scores_cost_about_as_much_and_are_not_divided(lang):
    """4. Vaswani et al. §3.2.1: the dot product won for its matrix multiplication, not for fewer
    operations; the additive lesson's cost panel does not divide S by √d_k."""
    out = walked("run", "additive_score", "--lang", lang)
    assert "instead of one multiply-add, which is why" not in out and "而点积只要一串乘加" not in out
    assert "Vaswani" in out
    assert ("S: nothing, since S = QKᵀ here" in out) if lang == "en" else ("S：不用算，这里 S = QKᵀ" in out)
    assert "one multiply by 1/√d_k" not in out and "每个分数乘一次 1/√d_k" not in out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_kv_cache_is_exact_because_of_the_causal_mask(lang):
    """5. k_j depends on token j alone only in the first layer; the mask is what makes it exact."""
    out = walked("decode", "kv_cache", "--no-pause", "--lang", lang) + walked("run", "kv_cache", "--lang", lang)
    for false in ("v_j = x_j · W_V depend on token j alone", "Row j of K and V depends on token j alone",
                  "K 和 V 的第 j 行只取决于第 j 个 token 自己", "v_j = x_j · W_V 只取决于第 j 个 token 自己",
                  "和别的 token 都没有关系"):
        assert false not in out
    assert ("only in the first layer" in out) if lang == "en" else ("只有在第一层" in out)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_other_statements(lang):
    """QK-norm's screen no longer says a long key scores high; its single scale is QKNorm's
    (Henry et al.), Qwen3's is a per-dimension RMSNorm weight with 1/√d_k kept; heads are not
    assigned their roles (seed 003 §11)."""
    qk = walked("explain", "qk_norm", "QK^T", "1", "2", "--lang", lang)  # the stage's why is in run
    run = walked("run", "qk_norm", "--lang", lang)
    assert "So a long key scores high with many queries" not in run
    assert "Henry" in run and "Qwen3" in run and qk
    gqa = walked("run", "grouped_query", "--lang", lang)
    assert ("no one assigns a head its question" in gqa) if lang == "en" else ("没有人给头分派问题" in gqa)


def test_the_chinese_phrasings():
    zh = " ".join(strings("zh").values()) + " ".join(lesson_texts("zh").values())
    for wrong in ("取舍", "还除着", "V 中 {col} 那一列", "学习信号变差", "不一定就此停止训练", "定死"):
        assert wrong not in zh
    assert "过早舍入" in zh and "学习信号变弱，但学习不一定因此停滞" in zh


# -- one set of terms --------------------------------------------------------------------------

# docs/lessons.md: the Chinese text writes 查询 / 键 / 值, as textbooks (d2l-zh) do; a parenthesised English
# word after its Chinese one, 查询（query）, is the one place the English may stand.
ENGLISH_TERM = re.compile(r"(?<![{_A-Za-z（(])(quer(?:y|ies)|keys?|values?)(?![}_A-Za-z）)])")


def test_the_chinese_text_holds_one_set_of_terms():
    bare = [f"{key}: {m.group()}" for key, text in {**strings("zh"), **lesson_texts("zh")}.items()
            for m in ENGLISH_TERM.finditer(re.sub(r"\{[^}]*\}", "", text))]
    assert bare == []


def test_a_walk_in_chinese_says_查询_not_query():
    for command, name in (("run", "river_bank"), ("run", "kv_cache"), ("run", "additive_score"),
                          ("grad", "backprop"), ("grad", "saturation")):
        args = (command, name, "--lang", "zh") + (("--no-pause",) if command == "grad" else ())
        out = walked(*args)
        assert not ENGLISH_TERM.search(re.sub(r"--?[a-z-]+|[A-Za-z_]+\.yaml", "", out)), name


# -- one minus sign -----------------------------------------------------------------------------


def test_a_negative_number_is_written_as_the_tables_write_it():
    """Notes wrote −0.4161 where the tables print -0.4161."""
    texts = {**strings("en"), **strings("zh"), **lesson_texts("en"), **lesson_texts("zh")}
    assert [key for key, text in texts.items() if re.search(r"−\d", text)] == []
