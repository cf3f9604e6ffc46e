"""A quiz as a teacher's worksheet: `quiz NAME --seed N --format json` or `--format markdown`.

The same questions `questions(walk, lang, seed)` asks on the terminal, with their answers, and for
each number what the known mistakes would have answered (to recognise them when marking). Pure
text out; the same seed gives the same sheet.
"""

from __future__ import annotations

import json

from attnwalk.layer.safe import escaped, json_escaped
from attnwalk.text import text
from attnwalk.tutor.quiz import CHOICE, LETTERS, NUMBER, SHAPE, TOKEN, Question, number_text


def _answer(q: Question) -> object:
    """The letter for a choice, the number, the token, or rows x columns."""
    if q.kind == CHOICE:
        return LETTERS[q.answer]
    if q.kind == NUMBER:
        return float(q.answer)
    if q.kind == TOKEN:
        return q.tokens[q.answer]
    return "{}x{}".format(*q.answer) if q.kind == SHAPE else q.shown


def as_json(qs: list[Question], lang: str) -> str:
    tx = text(lang)
    out = []
    for q in qs:
        item: dict[str, object] = {"id": q.qid, "kind": q.kind, "topic": q.topic, "prompt": q.text}
        if q.given:
            item["given"] = q.given
        if q.kind == CHOICE:
            item["options"] = list(q.choices)
        item["answer"] = _answer(q)
        item["tolerance"] = q.tolerance
        if q.kind == NUMBER:
            item["mistakes"] = [{"name": name, "label": tx.t(f"quiz.mistake_name.{name}"), "value": value}
                                for name, value in q.mistakes]
        out.append(item)
    return json_escaped(json.dumps({"questions": out}, ensure_ascii=False, indent=2))


def as_markdown(qs: list[Question], lang: str, name: str, seed: int | None) -> str:
    """The questions with room to answer, then the answer key with the mistakes' answers."""
    tx = text(lang)
    lines = [f"# {tx.t('quiz.worksheet.title', name=name)}", ""]
    if seed is not None:
        lines += [tx.t("quiz.worksheet.seed", seed=seed), ""]
    for i, q in enumerate(qs, 1):
        lines.append(f"{i}. {q.text}")
        if q.given:
            lines.append(f"   {q.given}")
        for letter, option in zip(LETTERS, q.choices):
            lines.append(f"   {letter}) {option}")
        lines += ["", f"   {tx.t('quiz.worksheet.your_answer')}", ""]
    lines += [f"## {tx.t('quiz.worksheet.key')}", ""]
    for i, q in enumerate(qs, 1):
        answer = _answer(q)
        if q.kind == NUMBER:
            answer = f"{number_text(float(q.answer))} (±{q.tolerance:g})"
        elif q.kind in (CHOICE, SHAPE):
            answer = q.shown
        lines.append(f"{i}. {answer}")
        if q.kind == NUMBER and q.mistakes:
            wrong = tx.t("ui.list_sep").join(
                tx.t("quiz.worksheet.item", value=number_text(value), name=tx.t(f"quiz.mistake_name.{name}"))
                for name, value in q.mistakes)
            lines.append(f"   {tx.t('quiz.worksheet.mistakes', answers=wrong)}")
    # the scenario's name and tokens are shown, never obeyed: escaped as the handouts are
    return escaped("\n".join(lines), keep_newlines=True) + "\n"
