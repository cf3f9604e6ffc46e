"""Each built-in lesson's own questions: two or more concept questions about the point that lesson
makes, with its numbers, beside the general ones every quiz asks.

A question is a function of the walk that returns the numbers its text needs (lessons_core.py and
lessons_variants.py; None where the walk no longer shows the point: a lesson's questions are asked
of its built-in only; a feature's lesson has them in the feature's module, as QUESTIONS), and the
text table quiz.lesson.<lesson>.<topic> (question, answer, wrong_a,
wrong_b, why_a, why_b, hint), in both languages. The wrong options are misconceptions a learner
holds, worded as they believe them. A built-in without an entry in LESSONS has none, which
tests/test_judging.py does not allow.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnwalk.layer.walk import Walk
from attnwalk.text import Text
from attnwalk.tutor import lessons_core as core
from attnwalk.tutor import lessons_variants as variants
from attnwalk.tutor.quiz import CHOICE, Question

LESSONS: dict[str, dict[str, Callable[[Walk], dict | None]]] = {
    "girl_bangs": {"asymmetry": core.girl_asymmetry, "positions": core.girl_positions},
    "causal_mask": {"tie": core.causal_tie, "reversed": core.causal_reversed},
    "river_bank": {"match": core.river_match, "mix": core.river_mix},
    "savings_bank": {"same_a": core.savings_same_a, "decides": core.savings_decides},
    "yellow_dog": {"angle": core.dog_angle, "right_angle": core.dog_right_angle},
    "yellow_dog_length": {"long_key": core.length_key, "long_query": core.length_query},
    "qk_norm": {"left": core.norm_left, "long_key": core.norm_long_key},
    "additive_score": {"zero_query": core.additive_zero, "bound": core.additive_bound},
    "cross_attention": {"shape": core.cross_shape, "empty_value": core.cross_empty},
    "rope": {"offset": variants.rope_offset, "twins": variants.rope_twins},
    "alibi": {"far": variants.alibi_far, "heads": variants.alibi_heads},
    "sliding_window": {"dropped": variants.window_dropped, "later": variants.window_later},
    "grouped_query": {"same_kv": variants.gqa_same_kv, "saves": variants.gqa_saves},
    "online_softmax": {"alpha": variants.online_alpha, "steady": variants.online_steady},
    "kv_cache": {"saves": variants.cache_saves, "exact": variants.cache_exact},
    "shapes": {"scores": variants.shapes_scores, "concat": variants.shapes_concat},
    "word_order": {"same_vector": core.order_same_vector, "where": core.order_where},
}


def _lessons() -> dict[str, dict[str, Callable[[Walk], dict | None]]]:
    """LESSONS, and the lessons whose questions a feature's module holds (its QUESTIONS: the
    numbers its lesson's questions need, raw, written here as the lessons' prose writes them)."""
    from attnwalk.features import FEATURES

    out = dict(LESSONS)
    for feature in FEATURES:
        for lesson, topics in getattr(feature, "QUESTIONS", {}).items():
            out[lesson] = {topic: _written(values_of) for topic, values_of in topics.items()}
    return out


def _written(values_of: Callable[[Walk], dict | None]) -> Callable[[Walk], dict | None]:
    """A feature's numbers as the lessons write them: two decimals, vectors in brackets."""
    def values(walk: Walk) -> dict | None:
        raw = values_of(walk)
        if raw is None:
            return None
        return {key: core.vec(v) if isinstance(v, (list, tuple, np.ndarray)) else
                core.n2(v) if isinstance(v, float) else v for key, v in raw.items()}
    return values


def lesson_questions(walk: Walk, tx: Text) -> list[Question]:
    """The questions of `walk`'s built-in lesson, in the order LESSONS gives them."""
    scn = walk.scenario
    lessons = _lessons()
    if not scn.builtin or scn.name not in lessons:
        return []
    out = []
    for topic, values_of in lessons[scn.name].items():
        values = values_of(walk)
        if values is None:
            continue
        field = lambda name: tx.t(f"quiz.lesson.{scn.name}.{topic}.{name}", **values)  # noqa: E731
        out.append(Question(f"lesson:{topic}", CHOICE, field("question"), field("hint"), 0, field("answer"), (),
                            choices=(field("answer"), field("wrong_a"), field("wrong_b")),
                            why=("", field("why_a"), field("why_b")), qid=f"lesson:{scn.name}:{topic}"))
    return out

