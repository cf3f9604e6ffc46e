"""The induction lesson's training: Adam's update (layer/train.py) against a reference written
here; `sequences:` (features/sequences.py), its draws and its refusals; the built-in `induction`
trained from its fixed seed, whose heads' scores cross the thresholds the lesson's text quotes."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from attnwalk.layer.train import descend
from attnwalk.scenario.load import load_scenario, scenario_from_text

BACKPROP_ADAM = re.sub(r"train: \{[^}]*\}", "train: {steps: 4, lr: 0.05, optimizer: adam}",
                       open(load_scenario("backprop").path, encoding="utf-8").read())


def _adam_reference(W0, grads, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """Kingma & Ba's Algorithm 1 (torch.optim.Adam's defaults), written out: the weights after
    each of the gradients given, in order."""
    W, m, v, out = W0.copy(), np.zeros_like(W0), np.zeros_like(W0), []
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g ** 2
        W = W - lr * (m / (1 - beta1 ** t)) / (np.sqrt(v / (1 - beta2 ** t)) + eps)
        out.append(W.copy())
    return out


def test_adam_moves_each_weight_as_kingma_and_ba_write_it():
    scn = scenario_from_text(BACKPROP_ADAM, "backprop_adam.yaml")
    steps = list(descend(scn, "scaled", 4, 0.05, "adam"))
    for name in ("W_Q", "W_K"):
        grads = [s.grads.params[name] for s in steps[:-1]]
        expected = _adam_reference(np.asarray(scn.param(name)), grads, 0.05)
        for step, W in zip(steps[1:], expected):
            np.testing.assert_allclose(step.walk.scenario.param(name), W, rtol=1e-12, atol=1e-15)
    # the first step is ±η on every weight whose gradient is not 0 (m̂/√v̂ = g/|g|, but for ε)
    g0 = steps[0].grads.params["W_Q"]
    moved = np.asarray(steps[1].walk.scenario.W_Q) - np.asarray(scn.W_Q)
    np.testing.assert_allclose(moved[g0 != 0], -0.05 * np.sign(g0[g0 != 0]), rtol=1e-5)


def test_plain_descent_is_unchanged_by_the_optimizer_key():
    gd = scenario_from_text(BACKPROP_ADAM.replace("optimizer: adam", "optimizer: gd"), "gd.yaml")
    first, second = list(descend(gd, "scaled", 1, 0.05, "gd"))
    W = np.asarray(gd.W_Q) - 0.05 * first.grads.params["W_Q"]
    np.testing.assert_allclose(second.walk.scenario.W_Q, W, rtol=0, atol=1e-15)


def test_an_unknown_optimizer_is_one_line_naming_the_field():
    from attnwalk.errors import ScenarioError

    with pytest.raises(ScenarioError) as info:
        scenario_from_text(BACKPROP_ADAM.replace("optimizer: adam", "optimizer: sgd"), "x.yaml")
    message = str(info.value)
    assert "x.yaml:" in message and "train.optimizer" in message and "adam" in message
    assert "\n" not in message


# -- the built-in's first steps against numpy written apart (tests/induction_reference.py) --------------


def test_the_first_steps_match_numpy_written_apart():
    """L, L_rep and every head's scores at steps 0 … 3: attnwalk's walk per sequence and backward
    over the graph against the reference's batched einsum and hand-written gradients."""
    from induction_reference import Model

    from attnwalk.layer.train import descend

    scn = load_scenario("induction")
    ours = list(descend(scn, "scaled", 3, 0.01, "adam"))
    theirs = Model(scn.path).train(3)
    for step, (L, L_rep, heads) in zip(ours, theirs):
        assert step.loss == pytest.approx(L, rel=1e-10)
        assert step.numbers["loss_repeat"] == pytest.approx(L_rep, rel=1e-10)
        assert [(h["layer"], h["head"]) for h in step.numbers["heads"]] == [(1, 1), (1, 2), (2, 1), (2, 2)]
        for got, want in zip(step.numbers["heads"], heads):
            assert got["previous_token"] == pytest.approx(want["previous_token"], rel=1e-9)
            assert got["induction"] == pytest.approx(want["induction"], rel=1e-9)


def test_each_step_draws_its_own_repeated_sequences_the_same_every_time():
    from attnwalk.features.sequences import drawn, samples

    scn = load_scenario("induction")
    first, again, other = drawn(scn, 7), drawn(scn, 7), drawn(scn, 8)
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(first, again))
    assert not all(np.array_equal(a, b) for (a, _), (b, _) in zip(first, other))
    lengths = set()
    for ids, layout in first + other:
        assert len(ids) == scn.n and ids[0] == 0 and 0 not in ids[1:]  # <s> begins it, and only there
        R = layout.repeat
        lengths.add(R)
        assert 6 <= R <= 8 and layout.first + 2 * R == scn.n
        assert list(ids[layout.first:layout.first + R]) == list(ids[layout.first + R:])
    assert len(lengths) > 1  # R changes from sequence to sequence
    sample = samples(scn, 7)[0]
    ids = first[0][0]
    assert sample.tokens == tuple(sample.setting("unembed").vocab[i] for i in ids)
    np.testing.assert_array_equal(sample.main.E, np.asarray(scn.param("vocab_embeddings"))[ids])
    assert sample.setting("target").pairs == tuple((i, int(ids[i + 1])) for i in range(scn.n - 1))


# -- the whole run: the heads the lesson names, and every number its text quotes -----------------------


@pytest.fixture(scope="module")
def trained():
    """The built-in's 500 steps (about 20 s of one CPU): the steps the text quotes, and the end."""
    from attnwalk.layer.train import descend

    scn = load_scenario("induction")
    kept, last = {}, None
    for step in descend(scn, "scaled", 500, 0.01, "adam"):
        if step.step in (0, 150, 200, 500):
            kept[step.step] = step
        last = step
    return scn, kept, last


def _score(step, layer, head, kind):
    return next(h[kind] for h in step.numbers["heads"] if (h["layer"], h["head"]) == (layer, head))


def test_layer_1_forms_a_previous_token_head_and_layer_2_an_induction_head(trained):
    scn, kept, last = trained
    assert _score(kept[0], 1, 2, "previous_token") < 0.2 and _score(kept[0], 2, 2, "induction") < 0.1
    assert _score(last, 1, 2, "previous_token") > 0.5  # one token back, on average over every query
    assert _score(last, 2, 2, "induction") > 0.7  # the token after the earlier occurrence
    assert max(h["previous_token"] for h in last.numbers["heads"] if h["layer"] == 2) < 0.1
    # the loss on the second copies falls sharply: it halves in the 50 steps after step 150
    assert kept[200].numbers["loss_repeat"] < 0.6 * kept[150].numbers["loss_repeat"]
    assert last.numbers["loss_repeat"] < 0.5 < 2.5 < kept[0].numbers["loss_repeat"]


def _ablated_repeat_loss(scn, without: int | None) -> float:
    """L_rep on the next step's sequences, with layer 1's head `without` (from 0) removed: its
    rows of W_O set to 0."""
    import dataclasses

    from attnwalk.features import sequences
    from attnwalk.layer.walk import compute

    if without is not None:
        W_O = np.array(scn.W_O)
        W_O[without * scn.d_v:(without + 1) * scn.d_v] = 0
        scn = dataclasses.replace(scn, W_O=W_O)
    walks = [compute(s, "scaled") for s in sequences.samples(scn, 501)]
    return sequences.measured(compute(scn, "scaled"), walks)["loss_repeat"]


def test_the_lessons_text_quotes_the_run(trained):
    from attnwalk.layer import roles
    from attnwalk.layer.axes import token_labels

    scn, kept, last = trained
    end = last.walk.scenario
    labels = token_labels(scn.tokens)
    A = last.walk.matrix(roles.softmaxes(last.walk.graph)[1].key, 1)
    query, key = labels.index("tree#12"), labels.index("book#5")
    numbers = [kept[0].loss, kept[0].numbers["loss_repeat"], kept[150].numbers["loss_repeat"],
               kept[200].numbers["loss_repeat"], last.numbers["loss_repeat"], last.loss, np.log(16),
               _score(last, 1, 2, "previous_token"), _score(kept[0], 1, 2, "previous_token"),
               _score(last, 2, 2, "induction"), _score(kept[0], 2, 2, "induction"), A[query, key],
               _ablated_repeat_loss(end, None), _ablated_repeat_loss(end, 1)]
    quoted = [f"{x:.2f}" for x in numbers]
    assert quoted == ["3.18", "3.11", "2.03", "1.03", "0.34", "1.90", "2.77", "0.57", "0.14", "0.78", "0.08",
                      "0.99", "0.53", "1.81"]
    for lang in ("en", "zh"):
        text = scn.description[lang]
        for number in quoted:
            assert number in text, (lang, number)
    assert _ablated_repeat_loss(end, 0) < 0.6  # layer 1's other head is not part of it


# -- the JSON, and what is refused ---------------------------------------------------------------------


def test_train_json_gives_every_step_its_losses_and_every_heads_scores():
    import json

    from typer.testing import CliRunner

    from attnwalk.cli import app

    result = CliRunner().invoke(app, ["train", "induction", "--steps", "2", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["step"] for s in data["steps"]] == [0, 1, 2]
    for step in data["steps"]:
        assert {"step", "loss", "loss_repeat", "heads"} <= set(step)
        assert [(h["layer"], h["head"]) for h in step["heads"]] == [(1, 1), (1, 2), (2, 1), (2, 2)]
        for h in step["heads"]:
            assert set(h) == {"layer", "head", "previous_token", "induction"}
            assert 0 <= h["previous_token"] <= 1 and 0 <= h["induction"] <= 1
    assert data["steps"][0]["loss"] == pytest.approx(3.1801, abs=1e-4)


INDUCTION = open(load_scenario("induction").path, encoding="utf-8").read()


@pytest.mark.parametrize(("old", "new", "field", "said"), [
    ("sequences: {repeat: [6, 8], batch: 16, seed: 6}", "sequences: {repeat: [6, 9], batch: 16, seed: 6}",
     "sequences.repeat", "HIGH ≤ 8"),
    ("sequences: {repeat: [6, 8], batch: 16, seed: 6}", "sequences: {repeat: [6, 8], batch: 65, seed: 6}",
     "sequences.batch", "at most 64"),
    ("sequences: {repeat: [6, 8], batch: 16, seed: 6}", "sequences: {repeat: 6, batch: 16, seed: 6}",
     "sequences.repeat", "[LOW, HIGH]"),
    ("target: next", "target: {next: sun}", "sequences", "target: next"),
    ("king, star, red, moon]\nvocab", "king, star, red, sun]\nvocab", "tokens", "the same R words again"),
    ("tokens: [<s>, ship", "tokens: [ship, ship", "tokens", "appears again"),
    ("vocab_embeddings: {random: {seed: 129,", "embeddings: {random: {seed: 129,", "sequences",
     "give vocab: [WORD, …] and vocab_embeddings"),
])
def test_bad_sequences_are_one_line_at_their_field(old, new, field, said):
    from attnwalk.errors import ScenarioError

    assert old in INDUCTION
    with pytest.raises(ScenarioError) as info:
        scenario_from_text(INDUCTION.replace(old, new), "bad.yaml")
    message = str(info.value)
    assert message.startswith("bad.yaml:") and f": {field}:" in message and said in message, message
    assert "\n" not in message


def test_the_notes_on_the_untrained_walk_say_what_it_shows():
    from attnwalk.layer.axes import token_labels
    from attnwalk.layer.walk import compute

    scn = load_scenario("induction")
    walk = compute(scn)
    row = token_labels(scn.tokens).index("tree#12")
    assert scn.focus == row
    A = walk.matrix("A", 0)[row]
    assert int(np.count_nonzero(A)) == 12 and f"{A.max():.2f}" == "0.16"
    for lang in ("en", "zh"):
        assert "0.16" in scn.notes["A"][lang] and "12" in scn.notes["A"][lang]


def test_a_later_blocks_weights_open_on_the_key_its_own_a_favours_in_the_focus_row():
    from attnwalk.layer.axes import default_cell, token_labels
    from attnwalk.layer.walk import compute

    scn = load_scenario("induction")
    walk = compute(scn)
    row = token_labels(scn.tokens).index("tree#12")
    for key in ("A.2", "S.2"):
        for head in (0, 1):
            own = walk.matrix("A.2", head)[row]
            assert default_cell(walk, key, head) == (row, int(np.argmax(own)))
            assert own[default_cell(walk, key, head)[1]] == own.max()


def test_jumping_to_a_later_blocks_a_puts_the_cursor_on_the_key_that_block_favours():
    from appdriver import drive, typed

    from attnwalk.layer.axes import token_labels
    from attnwalk.layer.walk import compute

    scn = load_scenario("induction")
    walk = compute(scn)
    labels = token_labels(scn.tokens)
    row = labels.index("tree#12")
    d = drive("induction", ["g", *typed("A2")])
    col = int(np.argmax(walk.matrix("A.2", 0)[row]))
    assert d.app.cursor == (row, col) and f"A⁽²⁾[tree#12, {labels[col]}]" in d.screen


def trained_live(steps: int, size: tuple[int, int]):
    """The live view of `steps` steps of the induction lesson, run to its end in a Textual pilot at
    `size`: (the app, its screen's text)."""
    import asyncio

    from appdriver import screen_text

    from attnwalk.app.train import TrainApp
    from attnwalk.commands.train import Plan
    from attnwalk.render.options import ViewOptions

    plan = Plan("induction", steps, None, "scaled", False, None)
    app = TrainApp(plan.runs(), plan.steps, plan.lr, plan.head, ViewOptions(), drawn=True)

    async def go():
        async with app.run_test(size=size) as pilot:
            for _ in range(300):
                await pilot.pause(0.1)
                if app.done:
                    break
            await pilot.pause(0.3)
            return screen_text(app)

    return app, asyncio.run(go())


def test_the_live_view_shows_both_losses_and_every_heads_map():
    app, screen = trained_live(3, (100, 50))
    assert app.done and len(app.losses["scaled"]) == len(app.repeats["scaled"]) == 4
    assert "3 steps of Adam" in screen and "step 3 / 3 · done" in screen
    assert "L_rep, the loss on the" in screen and "L_rep 3.1148 →" in screen
    for layer in (1, 2):
        for head in (1, 2):
            assert f"layer {layer} · head {head}" in screen
    assert screen.count("prev 0.") >= 4 and "induction head L" in screen


def test_the_live_view_at_80_by_24_shows_the_circuits_two_maps_and_only_the_keys_that_act():
    app, screen = trained_live(2, (80, 24))
    lines = screen.splitlines()
    assert app.done and len(lines) == 24
    heads = app.seen["scaled"][-1].numbers["heads"]
    for kind in ("previous_token", "induction"):  # the circuit's heads, each with its whole map in view
        best = max(heads, key=lambda h: h[kind])
        title = next(i for i, line in enumerate(lines) if f"layer {best['layer']} · head {best['head']}" in line)
        assert title + 18 < 23 and lines[title + 18].count("prev 0.") >= 1
    assert "both runs" not in screen and "to where it started" in screen
    footer = lines[-1]
    assert "j k scroll" in footer and "pause" not in footer and "n step" not in footer


def test_train_o_says_adam_and_the_drawn_sequences(tmp_path):
    from typer.testing import CliRunner

    from attnwalk.cli import app

    out = tmp_path / "trained.yaml"
    result = CliRunner().invoke(app, ["train", "induction", "--steps", "2", "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = out.read_text(encoding="utf-8")
    assert "2 steps of Adam" in written and "m / (sqrt(v) + eps)" in written and "gradient descent" not in written
    assert "mean loss on the sequences its last step drew" in written
    steps = json.loads(result.stdout)["steps"]
    # the header writes a later block's weights as the walk does; the losses in 4 decimals
    assert "W_Q⁽²⁾, W_K⁽²⁾" in written and "W_Q.2" not in written
    assert f"L went from {steps[0]['loss']:.4f} to {steps[-1]['loss']:.4f}" in " ".join(written.split())
    # nothing says the walk of this file is untrained, nor that the lesson's trained numbers are old
    assert "The walk shows it as it starts" not in written and "numbers are the old ones" not in written
    trained = load_scenario(str(out))
    assert trained.setting("sequences") is not None  # it trains on, drawing as before


def test_heads_scenario_scores_every_block_as_training_does():
    import json

    from typer.testing import CliRunner

    from attnwalk.cli import app
    from attnwalk.features.sequences import head_scores
    from attnwalk.layer.walk import compute

    result = CliRunner().invoke(app, ["heads", "--scenario", "induction", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["first"], data["repeat"]) == (1, 8)
    ours = head_scores(compute(load_scenario("induction")))
    assert [(h["layer"], h["head"]) for h in data["heads"]] == [(h["layer"], h["head"]) for h in ours]
    for got, want in zip(data["heads"], ours):
        assert got["previous_token"] == want["previous_token"] and got["induction"] == want["induction"]
