"""A quiz as a teacher's worksheet: `quiz NAME --seed N --format json` or `--format markdown`.

The same questions `questions(walk, lang, seed)` asks on the terminal, with their answers, and for
each number what the known mistakes would have answered (to recognise them when marking). Pure
text out; the same seed gives the same sheet.

The JSON is also what `attnwalk grade` marks a class's answers against: it carries everything the
quiz's own judging (tutor/quiz.check, tutor/mistakes.diagnose) reads from a question, and
`question_from_item` turns an item back into that Question, so grade judges as the quiz does.
VERSION changes whenever an item's fields change meaning; grade refuses another version.
"""

from __future__ import annotations

import json
import math

from attnwalk.layer.safe import escaped, json_escaped
from attnwalk.text import text
from attnwalk.tutor.quiz import (CHOICE, LETTERS, NUMBER, SHAPE, TOKEN, Question, number_text,
                                 parse_shape, tolerance_text)

VERSION = 1
KINDS = (NUMBER, TOKEN, SHAPE, CHOICE)


def _answer(q: Question) -> object:
    """The letter for a choice, the number, the token, or rows x columns."""
    if q.kind == CHOICE:
        return LETTERS[q.answer]
    if q.kind == NUMBER:
        return float(q.answer)
    if q.kind == TOKEN:
        return q.tokens[q.answer]
    return "{}x{}".format(*q.answer) if q.kind == SHAPE else q.shown


def as_json(qs: list[Question], lang: str, name: str = "", seed: int | None = None) -> str:
    tx = text(lang)
    out = []
    for number, q in enumerate(qs, 1):
        item: dict[str, object] = {"number": number, "id": q.qid, "kind": q.kind, "topic": q.topic,
                                   "prompt": q.text}
        if q.given:
            item["given"] = q.given
        if q.kind == CHOICE:
            item["options"] = list(q.choices)
        if q.kind == TOKEN:  # as typed ("the"), and as labelled where a token repeats ("the#4")
            item["tokens"], item["labels"] = list(q.token_text), list(q.tokens)
        item["answer"] = _answer(q)
        item["tolerance"] = q.tolerance
        if q.kind == NUMBER:
            item["mistakes"] = [{"name": name, "label": tx.t(f"quiz.mistake_name.{name}"), "value": value}
                                for name, value in q.mistakes]
        if q.covers:  # what a wrong option shows (the quiz records these for a wrong choice)
            item["covers"] = [{"name": name, "label": tx.t(f"quiz.mistake_name.{name}")}
                              for name in q.covers]
        out.append(item)
    sheet = {"version": VERSION, "scenario": name, "seed": seed, "lang": lang, "questions": out}
    return json_escaped(json.dumps(sheet, ensure_ascii=False, indent=2))


class ItemError(ValueError):
    """A worksheet item that cannot be a question: `field` names the field, str() what was expected."""

    def __init__(self, field: str, expected: str) -> None:
        super().__init__(expected)
        self.field = field


def question_from_item(item: object) -> Question:
    """The Question an item of as_json's "questions" was written from, as far as judging an
    answer reads it: kind, answer, tolerance, options, tokens, mistakes and covers."""
    if not isinstance(item, dict):
        raise ItemError("", "expected an object {\"kind\", \"answer\", ...}")
    kind = _field(item, "kind", str, "a string")
    if kind not in KINDS:
        raise ItemError("kind", f"expected one of {', '.join(KINDS)}")
    tolerance = float(_field(item, "tolerance", (int, float), "a number", 0.0))
    prompt = _field(item, "prompt", str, "a string", "")
    covers = tuple(_name(entry, "covers") for entry in _field(item, "covers", list, "a list", []))
    raw = item.get("answer")
    fields: dict[str, object] = {}
    if kind == NUMBER:
        answer = _field(item, "answer", (int, float), "a number")
        fields["mistakes"] = tuple((_name(m, "mistakes"), _value(m)) for m in
                                   _field(item, "mistakes", list, "a list", []))
        shown = number_text(answer)
    elif kind == CHOICE:
        options = tuple(_strings(item, "options"))
        letters = LETTERS[:len(options)]
        if not isinstance(raw, str) or raw not in letters or not letters:
            raise ItemError("answer", f"expected one of the options' letters ({'/'.join(letters)})")
        answer, fields["choices"], shown = letters.index(raw), options, raw
    elif kind == TOKEN:
        tokens, labels = _strings(item, "tokens"), _strings(item, "labels")
        if len(labels) != len(tokens) or raw not in labels:
            raise ItemError("answer", "expected one of the labels, as many labels as tokens")
        answer, fields["tokens"], fields["token_text"], shown = labels.index(raw), tuple(labels), tuple(tokens), raw
    else:
        answer = parse_shape(raw) if isinstance(raw, str) else None
        if answer is None:
            raise ItemError("answer", "expected rows x columns, like \"4x4\"")
        shown = raw
    return Question(_field(item, "topic", str, "a string", ""), kind, prompt, "", answer, shown,
                    covers=covers, tolerance=tolerance, qid=_field(item, "id", str, "a string", ""),
                    **fields)


_MISSING = object()


def _field(item: dict, key: str, types, expected: str, default: object = _MISSING):
    value = item.get(key, default)
    if value is _MISSING:
        raise ItemError(key, f"missing; expected {expected}")
    if not isinstance(value, types) or isinstance(value, bool):
        raise ItemError(key, f"expected {expected}")
    if isinstance(value, float) and not math.isfinite(value):  # 1e999 reads as infinity
        raise ItemError(key, f"expected {expected}, not {value}")
    return value


def _strings(item: dict, key: str) -> list[str]:
    values = _field(item, key, list, "a list of strings")
    if not values or not all(isinstance(v, str) for v in values):
        raise ItemError(key, "expected a list of strings")
    return values


def _name(entry: object, key: str) -> str:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ItemError(key, "expected a list of {\"name\", ...}")
    return entry["name"]


def _value(entry: dict) -> float:
    value = entry.get("value")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise ItemError("mistakes", "expected each mistake's value as a number")
    return float(value)


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
            answer = f"{number_text(float(q.answer))} ({tolerance_text(tx, q.tolerance)})"  # or "exactly"
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
