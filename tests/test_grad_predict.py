"""`attnwalk grad --predict` (issue 37): a wrong count of ∂L/∂S's zeros is explained, never a
traceback; the introduction is the backward walk's own (it asks before ∂L/∂S and ∂L/∂W_Q).

The counts are worked out here from the scenarios' definitions, not read from attnwalk: backprop's
target asks about one row of four tokens and has no mask (the other 3 rows × 4 keys are 0);
saturation has a causal mask on 5 tokens (10 masked cells) and row 1 has a single key, whose weight
is 1 whatever its score (1 more cell).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
ZEROS = {"backprop": (16, 0, 12), "saturation": (25, 10, 1)}  # cells, masked, rows passing nothing


def predicted(name: str, lang: str, typed: str) -> str:
    result = CliRunner().invoke(app, ["grad", name, "--predict", "--no-pause", "--lang", lang],
                                input=typed, env=ENV)
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    return result.stdout


@pytest.mark.parametrize("name", sorted(ZEROS))
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("typed", ["15", "0", "1e9"])
def test_a_wrong_count_of_zeros_is_explained(name, lang, typed):
    cells, masked, rows = ZEROS[name]
    out = predicted(name, lang, typed + "\n\n")
    zeros = masked + rows
    if lang == "en":
        assert f"Of the {cells} cells of ∂L/∂S, how many will be exactly 0?" in out
        assert f"Your prediction: {typed} · the walk: {zeros} · wrong" in out
        assert f"{zeros} cells are exactly 0: {masked} masked cells" in out
        assert f"and {rows} more in rows the softmax passes nothing back through" in out
    else:
        assert f"你的预测：{typed} · 实际：{zeros} · 不对" in out
        assert f"恰好为 0 的格子有 {zeros} 个：{masked} 个被屏蔽的格子" in out
        assert f"另有 {rows} 个格子" in out


@pytest.mark.parametrize("name", sorted(ZEROS))
def test_the_right_count_is_right(name):
    cells, masked, rows = ZEROS[name]
    out = predicted(name, "en", f"{masked + rows}\n\n")
    assert f"Your prediction: {masked + rows} · the walk: {masked + rows} · right" in out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_introduction_names_the_backward_walks_predictions(lang):
    out = predicted("backprop", lang, "\n\n")
    if lang == "en":
        assert "before ∂L/∂S and ∂L/∂W_Q" in out and "before P, QKᵀ" not in out
    else:
        assert "∂L/∂S 和 ∂L/∂W_Q" in out and "在 P、QKᵀ" not in out
