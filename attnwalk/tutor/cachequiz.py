"""Quiz questions on the KV cache, for a scenario `attnwalk decode` can run (a causal mask).

- kv_reuse: at the step where token t arrives, what comes from the cache: the keys and values of
  tokens 1 … t − 1 (not their queries; and nothing needs recomputing).
- kv_scores (mask: causal): how many query–key scores one head computes at that step without a
  cache, the layer rerun on tokens 1 … t: the t(t + 1)/2 pairs the mask allows, against t with
  the cache and t² for every pair.

Both are choice questions worded with the scenario's own tokens; each wrong option is a mistake
learners make about the cache, with why it is wrong.
"""

from __future__ import annotations

import random

import numpy as np

from attnwalk.layer.axes import token_labels
from attnwalk.layer.kvcache import refusal
from attnwalk.layer.masks import causal
from attnwalk.layer.walk import Walk
from attnwalk.text import Text
from attnwalk.tutor.quiz import CHOICE, Question

PREFIX_SHOWN = 6  # a longer prefix is named by its first and last tokens


def cache_questions(walk: Walk, tx: Text, pick: random.Random | None = None) -> list[Question]:
    """The cache questions for `walk`'s scenario, none when it cannot be decoded or has fewer than
    three tokens (the step asked about needs two earlier tokens, so no two options coincide). Without
    `pick` they ask about the last token; with it, about a random one from the third on."""
    scn = walk.scenario
    if refusal(scn) is not None or scn.n < 3:
        return []
    t = pick.randrange(3, scn.n + 1) if pick else scn.n  # 1-based
    tokens = token_labels(scn.tokens)
    sep = tx.t("ui.list_sep")
    values = {"token": tokens[t - 1], "t": t, "prefix": _listed(tokens[:t], sep),
              "cached": _listed(tokens[:t - 1], sep)}
    out = [_choice(tx, "kv_reuse", values, t)]
    # the answer's 1 + 2 + … + t holds where the layer's mask is the causal triangle (a window, or
    # a mask written out, allows other pairs): read from the mask itself, whichever feature made it
    if np.array_equal(scn.allowed, causal(scn.n)):
        values.update(pairs=int(scn.allowed[:t, :t].sum()), square=t * t)
        out.append(_choice(tx, "kv_scores", values, t))
    return out


def _listed(tokens: tuple[str, ...], sep: str) -> str:
    if len(tokens) > PREFIX_SHOWN:
        tokens = (*tokens[:3], "…", *tokens[-2:])
    return sep.join(tokens)


def _choice(tx: Text, topic: str, values: dict, t: int) -> Question:
    """Options in the text's order (answer, wrong_a, wrong_b); the quiz spreads the letters."""
    field = lambda name: tx.t(f"quiz.{topic}.{name}", **values)  # noqa: E731
    return Question(topic, CHOICE, field("question"), field("hint"), 0, field("answer"), (),
                    choices=(field("answer"), field("wrong_a"), field("wrong_b")),
                    why=("", field("why_a"), field("why_b")), qid=f"{topic}:{t}")
