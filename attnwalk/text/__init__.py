"""Which language attnwalk speaks, and its strings from attnwalk/text/<lang>.toml: the UI, and each
stage's title, what, why and common mistake with the variants a scenario or mode calls for.

May import attnwalk.errors, attnwalk.atomic (to write its cache) and the layer's definitions
(modes at start; the stages only when a note is filled in); never numpy at import, rich or
rendering, so the CLI starts without them.
"""

from __future__ import annotations

import functools
import marshal
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from attnwalk.errors import UsageError
from attnwalk.layer.modes import BASELINE  # no numpy: the CLI starts without it

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
    """The parsed text file of one language, read once per run.

    tomllib parses it; the result is kept beside it in __pycache__, as Python keeps a module's
    bytecode, and read back with marshal while the file's size and modification time are
    unchanged. Measured (benchmarks/README.md): importing tomllib and parsing en.toml (51 KB) cost
    every walk ~5 ms, the startup ratio 1.39 against its 1.3 target; the cached table loads in
    ~0.2 ms. Where __pycache__ cannot be written, every run parses, as before."""
    path = TEXT_DIR / f"{lang}.toml"
    source = path.stat()
    stamp = (source.st_mtime_ns, source.st_size)
    cache = TEXT_DIR / "__pycache__" / f"{lang}.toml.{sys.implementation.cache_tag}.marshal"
    try:
        cached_stamp, table = marshal.loads(cache.read_bytes())
        if tuple(cached_stamp) == stamp and isinstance(table, dict):
            return table
    except (OSError, ValueError, EOFError, TypeError):  # no cache yet, or an unreadable one
        pass
    import tomllib  # only when a string is needed: `attnwalk --help` reads none

    table = tomllib.loads(path.read_text(encoding="utf-8"))
    _write_cache(cache, marshal.dumps((stamp, table)))
    return table


def _write_cache(cache: Path, data: bytes) -> None:
    """Write the cache whole, or not at all: two walks starting at once never read half of one."""
    from attnwalk.atomic import write_whole  # only when the cache is stale

    try:
        cache.parent.mkdir(exist_ok=True)
        write_whole(cache, data)
    except OSError:  # a read-only install: parse every time
        pass


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


class MissingTextError(KeyError):
    """A key no text file holds: a bug in attnwalk (tests render every screen in both languages)."""


class Text:
    """The strings of one language. Both files hold the same keys (a test checks), so a key is never
    looked up in another language, and a missing one is an error rather than stale English."""

    def __init__(self, lang: str) -> None:
        if lang not in LANGS:
            raise ValueError(f"no text for language {lang!r}; known: {', '.join(LANGS)}")
        self.lang = lang
        self._found: dict[tuple[str, ...], str | None] = {}  # a screen asks for the same keys again

    def _template(self, parts: list[str]) -> str | None:
        key = tuple(parts)
        if key not in self._found:
            self._found[key] = _find(_table(self.lang), parts)
        return self._found[key]

    def has(self, key: str) -> bool:
        """True when the key exists (for optional fields such as a stage's text variants)."""
        return self._template(key.split(".")) is not None

    def t(self, key: str, **values: object) -> str:
        """The string at a dotted key ("ui.footer", "stage.QK^T.what"), with {placeholders} filled."""
        template = self._template(key.split("."))
        if template is None:
            raise MissingTextError(f"no text {key!r} in {self.lang}.toml")
        return template.format(**values)

    def stage(self, key: str, field: str, **values: object) -> str:
        """A field of one stage's text: stage("S+M", "mistake")."""
        return self.t(f"stage.{key}.{field}", **values)


@functools.lru_cache(maxsize=None)
def text(lang: str) -> Text:
    """The strings of `lang` (one of LANGS)."""
    return Text(lang)


def stage_text(lang: str, stage, scn=None, mode=BASELINE, field: str = "title") -> str:
    """A field of a stage's text (title, what, why, mistake) in `lang`, as `scn` computes it under
    `mode`: the variant's own field where the text file has one ([stage."S".unscaled]), else the
    stage's. Beside Stage.formula_in, the one place a stage's words vary; every screen,
    explanation and handout that names or explains a stage reads this."""
    tx = text(lang)
    for variant in stage.text_variants(scn, mode):
        key = f"stage.{stage.text_key}.{variant}.{field}"
        if tx.has(key):
            return tx.t(key)
    return tx.stage(stage.text_key, field)


def stage_notes(lang: str, stage, scn, mode) -> list[str]:
    """What this scenario and mode add at this stage (stage.notes), as sentences in `lang`."""
    from attnwalk.features import note_values  # text is read without numpy: only here

    tx = text(lang)
    return [tx.t(note, **note_values(scn, note)) for note in stage.notes_in(scn, mode) if tx.has(note)]


def pick(value: object, lang: str) -> str:
    """A scenario title or description given as a string or as {en: ..., zh: ...}, in `lang`."""
    if isinstance(value, Mapping):
        for choice in (value.get(lang), value.get(DEFAULT_LANG), *value.values()):
            if isinstance(choice, str) and choice:
                return choice
        return ""
    return "" if value is None else str(value)
