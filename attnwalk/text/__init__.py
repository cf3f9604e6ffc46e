"""Which language attnwalk speaks, and its strings from attnwalk/text/<lang>.toml.

Stdlib only, so the CLI can start without loading numpy or rich.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from attnwalk.text import simpletoml
from attnwalk.errors import UsageError

# The text files sit beside this module in a wheel and in a checkout alike; a plain path is all
# that is needed (importlib.resources costs a walk ~4 ms of imports on every start).
TEXT_DIR = Path(__file__).resolve().parent

LANGS = ("en", "zh")
DEFAULT_LANG = "en"

# Where a POSIX program finds the user's language, most specific first (gettext's order).
_LOCALE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def _locale_lang(value: str) -> str:
    """The language of a locale setting: 'zh_CN.UTF-8', 'zh_TW' and 'zh' are zh, anything else en."""
    code = value.split(".")[0].split("@")[0].replace("-", "_").split("_")[0].lower()
    return code if code in LANGS else DEFAULT_LANG  # "C", "POSIX", and languages we lack


def detect_lang(cli_lang: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """--lang, else ATTNWALK_LANG (when valid), else the first locale variable set, else en."""
    if cli_lang is not None:
        lang = cli_lang.strip().lower()
        if lang not in LANGS:
            raise UsageError(f"unknown language {cli_lang!r}; choose en or zh")
        return lang
    lang = environ.get("ATTNWALK_LANG", "").strip().lower()
    if lang in LANGS:
        return lang
    for var in _LOCALE_VARS:
        # LANGUAGE is a colon-separated list of preferences; the first one counts.
        value = next((part for part in environ.get(var, "").split(":") if part.strip()), "")
        if value:
            return _locale_lang(value.strip())
    return DEFAULT_LANG


@functools.lru_cache(maxsize=None)
def _table(lang: str) -> dict:
    """The parsed text file of one language, read once."""
    source = (TEXT_DIR / f"{lang}.toml").read_text(encoding="utf-8")
    try:
        return simpletoml.loads(source)  # the forms the text files use, without tomllib's cost
    except ValueError:
        import tomllib

        return tomllib.loads(source)


def _find(table: Mapping, parts: list[str]) -> str | None:
    """The string at a dotted path; a part may itself hold dots, so the longest name present wins."""
    node: object = table
    i = 0
    while i < len(parts):
        if not isinstance(node, Mapping):
            return None
        for j in range(len(parts), i, -1):
            name = ".".join(parts[i:j])
            if name in node:
                node, i = node[name], j
                break
        else:
            return None
    return node if isinstance(node, str) else None


class Text:
    """The strings of one language; a key it lacks comes from English, else is shown as itself."""

    def __init__(self, lang: str) -> None:
        if lang not in LANGS:
            raise ValueError(f"no text for language {lang!r}; known: {', '.join(LANGS)}")
        self.lang = lang
        self._found: dict[tuple[str, ...], str | None] = {}  # a screen asks for the same keys again

    def _template(self, parts: list[str]) -> str | None:
        key = tuple(parts)
        if key not in self._found:
            self._found[key] = None
            for lang in dict.fromkeys((self.lang, DEFAULT_LANG)):
                found = _find(_table(lang), parts)
                if found is not None:
                    self._found[key] = found
                    break
        return self._found[key]

    def has(self, key: str) -> bool:
        """True when the key exists in this language or in English (for optional fields)."""
        return self._template(key.split(".")) is not None

    def t(self, key: str, **values: object) -> str:
        """The string at a dotted key ("ui.footer", "stage.QK^T.what"), with {placeholders} filled."""
        template = self._template(key.split("."))
        return key if template is None else template.format(**values)

    def stage(self, key: str, field: str, **values: object) -> str:
        """A field of one stage's text: stage("S+M", "mistake")."""
        template = self._template(["stage", key, field])
        return f"stage.{key}.{field}" if template is None else template.format(**values)


@functools.lru_cache(maxsize=None)
def text(lang: str) -> Text:
    """The strings of `lang` (one of LANGS)."""
    return Text(lang)


def pick(value: object, lang: str) -> str:
    """A scenario title or description given as a string or as {en: ..., zh: ...}, in `lang`."""
    if isinstance(value, Mapping):
        for choice in (value.get(lang), value.get(DEFAULT_LANG), *value.values()):
            if isinstance(choice, str) and choice:
                return choice
        return ""
    return "" if value is None else str(value)
