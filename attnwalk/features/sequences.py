"""Training on fresh sequences at every step (`sequences:`), the induction lesson's data:

    sequences: {repeat: [4, 8], batch: 16, seed: 1}

Each step of `attnwalk train` draws `batch` sequences as long as the scenario's tokens from its
vocabulary (features/unembed.py): the scenario's first token (the start token), random words, then
R random words twice, R drawn from the `repeat` range for each sequence: numpy's PCG64 seeded with
[seed, step], so a run is the same every time and a step's sequences do not depend on the steps
before it. The start token is never drawn again. Every word is embedded as the vocabulary's table
(`vocab_embeddings`) gives it, and the next-token target follows the new tokens.

The layer descends the mean of their losses (layer/train.py's `samples`), and what the batch says
about induction is measured here (`measured`): loss_repeat, the loss on the second copies alone,
where a model that copies what followed the same token the first time can be right. Because R
changes from sequence to sequence, "look R − 1 tokens back" is no rule: only reading the earlier
occurrence of the current token works.

The scenario's own tokens are the start token, R words and the same R again (as `attnwalk heads`
probes a head, layer/headscores.py): they are walked at each step, not trained on, and their A
gives each head its previous-token and induction scores (`head_scores`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attnwalk.layer import roles
from attnwalk.numbering import shown
from attnwalk.reading.fields import quoted, whole

if TYPE_CHECKING:
    from attnwalk.layer.headscores import Repeated
    from attnwalk.layer.graph import Stage
    from attnwalk.layer.walk import Walk
    from attnwalk.scenario.load import Draft
    from attnwalk.scenario.scenario import Scenario

NAME = "sequences"
KEYS = ("sequences",)
STAGES: tuple = ()  # no stage: it changes what each step trains on, not the layer
MAX_BATCH = 64
COURSE_AFTER = {"induction": "saturation"}  # its lesson: after the lessons that train a layer


class Sequences(NamedTuple):
    low: int  # R is drawn from low … high for each sequence
    high: int
    batch: int
    seed: int
    start: int  # the start token's id
    words: tuple[int, ...]  # the ids a drawn word may have: the vocabulary but the start token
    layout: Repeated | None = None  # of one drawn sequence (a sample's own setting): where its copies are


def active(scn: Scenario) -> bool:
    return scn.setting(NAME) is not None


def extend(stages: list[Stage], scn: Scenario) -> None:
    """Nothing: the layer is the same; only what it is trained on changes."""


def probe(scn: Scenario) -> Repeated:
    """Where the copies of the scenario's own tokens sit: the start token, R words, the same R."""
    from attnwalk.layer.headscores import Repeated  # only a lesson on drawn sequences pays for it

    return Repeated(1, (scn.n - 1) // 2)


def read(d: Draft) -> None:
    """`sequences: {repeat: [LOW, HIGH], batch: B, seed: S}`: checked against the tokens (a start
    token, R words, the same R words again), the vocabulary and its table, and a next-token target."""
    if "sequences" not in d.top:
        return
    f, node = d.f, d.top["sequences"]
    spec = f.mapping(node, "sequences", ("repeat", "batch", "seed"), ("repeat", "batch", "seed"))
    if d.source is not None:
        raise f.error("sequences", node, "drawn sequences replace a layer's own tokens; with a source "
                      "(cross-attention) the keys would stay the source's: remove one of them")
    vocab = _vocab(d)
    if vocab is None or "vocab_embeddings" not in d.params:
        raise f.error("sequences", node, "drawn sequences are embedded by the vocabulary's table: "
                      "give vocab: [WORD, …] and vocab_embeddings (one row per word)")
    tokens = d.main.tokens
    n = len(tokens)
    target = d.settings.get("target")
    if target is None or target.kind != "next" or len(target.pairs) != n - 1:
        raise f.error("sequences", node, "drawn sequences are trained to predict their next tokens, "
                      "each but the last (whose next word no one gives): use target: next")
    half = (n - 1) // 2
    if n < 3 or n % 2 == 0 or tokens[1:1 + half] != tokens[1 + half:]:
        raise f.error("tokens", d.top["tokens"], "with sequences, the tokens are what each head is "
                      "scored on: a start token, R words, then the same R words again (2R + 1 tokens)")
    start = tokens[0]
    if start in tokens[1:]:
        raise f.error("tokens", d.top["tokens"], f"the start token {quoted(start, 20)} appears again "
                      "after position 1; it begins the sequence only")
    repeat = spec["repeat"]
    low, high = _range(f, repeat, half)
    batch = f.integer(spec["batch"], "sequences.batch", minimum=1)
    if batch > MAX_BATCH:
        raise f.error("sequences.batch", spec["batch"], f"batch is {whole(batch)}; at most "
                      f"{MAX_BATCH} sequences a step (each is a forward and a backward walk)")
    seed = f.integer(spec["seed"], "sequences.seed", minimum=0)
    words = tuple(i for i, word in enumerate(vocab) if word != start)  # the tokens' words at least
    d.settings[NAME] = Sequences(low, high, batch, seed, vocab.index(start), words)


def _vocab(d: Draft) -> tuple[str, ...] | None:
    unembed = d.settings.get("unembed")
    return None if unembed is None else unembed.vocab


def _range(f, node, half: int) -> tuple[int, int]:
    values = node.value if isinstance(node.value, list) else None
    if values is None or len(values) != 2:
        raise f.error("sequences.repeat", node, "expected [LOW, HIGH]: R, the length of the repeated "
                      "run, is drawn from LOW to HIGH for each sequence")
    low = f.integer(values[0], "sequences.repeat", minimum=1)
    high = f.integer(values[1], "sequences.repeat", minimum=1)
    length = 2 * half + 1  # a count of tokens (the start token and two halves), not a position
    if not low <= high <= half:
        raise f.error("sequences.repeat", node, f"repeat is [{low}, {high}]; LOW ≤ HIGH ≤ {half}, as "
                      f"two copies of R words and the start token must fit in the {length} tokens")
    return low, high


# -- each step's sequences (layer/train.py asks) -------------------------------------------------------


def batch_size(scn: Scenario) -> int:
    return scn.setting(NAME).batch


def drawn(scn: Scenario, k: int) -> list[tuple[np.ndarray, Repeated]]:
    """Step `k`'s sequences as token ids, each with where its copies sit: the start token, random
    words, R random words, the same R again (R from the range, for each sequence)."""
    from attnwalk.layer.headscores import Repeated

    spec = scn.setting(NAME)
    rng = np.random.default_rng([spec.seed, k])
    words = np.asarray(spec.words)
    start = spec.start
    out = []
    for _ in range(spec.batch):
        R = int(rng.integers(spec.low, spec.high + 1))
        filler = scn.n - 1 - 2 * R
        before = words[rng.integers(0, len(words), filler)]
        run = words[rng.integers(0, len(words), R)]
        out.append((np.concatenate([[start], before, run, run]), Repeated(1 + filler, R)))
    return out


def samples(scn: Scenario, k: int) -> list[Scenario]:
    """Step `k`'s sequences as scenarios: `scn` with their tokens, embeddings and next tokens."""
    from attnwalk.features import target, unembed

    vocab = unembed.setting(scn).vocab
    table = np.asarray(scn.param("vocab_embeddings"))
    spec = scn.setting(NAME)
    out = []
    for ids, layout in drawn(scn, k):
        main = dataclasses.replace(scn.main, tokens=tuple(vocab[i] for i in ids), E=table[ids],
                                   ids=tuple(int(i) for i in ids))
        sample = dataclasses.replace(scn, main=main)
        sample = target.retargeted(sample).with_setting(NAME, spec._replace(layout=layout))
        out.append(sample)
    return out


def measured(walk: Walk, walks: list[Walk]) -> dict[str, object]:
    """What a step's numbers hold besides its loss: loss_repeat, the mean next-token loss over the
    batch's second copies (each position of a second copy whose next token is in it: the ones an
    induction head can predict), all the batch's together; and `heads`, every head scored on the
    scenario's own tokens (`walk`)."""
    from attnwalk.features import target

    total, count = 0.0, 0
    for drawn_walk in walks:
        layout = drawn_walk.scenario.setting(NAME).layout
        positions = range(layout.second.start, layout.second.stop - 1)
        total += target.next_token_loss(drawn_walk, positions) * len(positions)
        count += len(positions)
    return {"loss_repeat": total / count, "heads": head_scores(walk)}


def head_scores(walk: Walk) -> list[dict]:
    """Every head of every block scored on the scenario's own tokens as `attnwalk heads` scores a
    head (layer/headscores.py): [{"layer", "head", "previous_token", "induction"}], from 1."""
    layout = probe(walk.scenario)
    out = []
    for b, stage in enumerate(roles.softmaxes(walk.graph)):
        A = np.stack([walk.matrix(stage.key, h) for h in range(walk.scenario.heads)])  # (H, n, n)
        from attnwalk.layer import headscores

        scores = headscores.head_scores(A, layout)
        out += [{"layer": shown(b), "head": shown(h), "previous_token": float(scores["previous_token"][h]),
                 "induction": float(scores["induction"][h])} for h in range(walk.scenario.heads)]
    return out


def setting(scn: Scenario) -> Sequences:
    """What `sequences:` said (for the screens that describe a run: render/sequences.py)."""
    return scn.setting(NAME)


# -- the lesson's own questions: the numbers they need, from the scenario's tokens ---------------------


def _second_copy(walk: Walk) -> dict | None:
    """A query in the second copy, its word's earlier occurrence, the token after that, the token
    before the query: where an induction head, a duplicate-token head and a previous-token head look."""
    from attnwalk.layer.axes import token_labels

    scn = walk.scenario
    if not active(scn):
        return None
    layout = probe(scn)
    i = layout.second.start + min(2, layout.repeat - 1)  # a query well into the second copy
    j = i - layout.repeat  # the same word, the first time
    labels = token_labels(scn.tokens)
    spec = setting(scn)
    return {"token": labels[i], "word": scn.tokens[i], "earlier": labels[j], "after": labels[j + 1],
            "before": labels[i - 1], "repeat": layout.repeat, "low": spec.low, "high": spec.high}


def _first_copy(walk: Walk) -> dict | None:
    """The loss a model can reach on the first copy: its words are drawn uniformly."""
    scn = walk.scenario
    if not active(scn):
        return None
    count = len(setting(scn).words)
    return {"words": count, "uniform": float(np.log(count))}


QUESTIONS = {"induction": {"looks": _second_copy, "key": _second_copy, "first_copy": _first_copy}}
