"""Issue 27, point 5: every label escaped, names, file stems and paths included, in every format
and message; zero-width and the other invisible format characters shown as \\u escapes.

The oracle is unicodedata (category Cc, Cf), apart from attnwalk's own list in layer/safe.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from attnwalk.layer.safe import escaped, json_escaped

ROOT = Path(__file__).resolve().parent.parent
ESC_NAME = "inj\x1b[5m"
OSC52 = "zz\x1b]52;c;eA==\x07"  # asks the terminal to put "x" on the clipboard


def hidden(text: str) -> list[str]:
    """Characters a terminal obeys or does not show: controls but the line break, format characters."""
    return [f"U+{ord(ch):04X}" for ch in text
            if unicodedata.category(ch) == "Cf" or (unicodedata.category(ch) == "Cc" and ch != "\n")]


def attnwalk(*args: str, stdin: bytes = b"", **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), COLUMNS="100", **env)
    return subprocess.run([sys.executable, "-m", "attnwalk", *args], input=stdin, capture_output=True,
                          env=environ, timeout=120)


def scenario(tmp_path: Path, name: str = ESC_NAME, tokens: str = '[river, "ba\\u200bnk", "\\u2060x"]') -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f'name: "{name.encode("unicode_escape").decode()}"\ntokens: {tokens}\n'
                    "embeddings: [[1, 0], [0, 1], [1, 1]]\nW_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0.5], [0, 1]]\n"
                    "W_V: [[1, 0], [0, 1]]\n", encoding="utf-8")
    return path


def test_every_format_and_control_character_is_escaped_and_nothing_else() -> None:
    for code in range(0x110000):
        ch = chr(code)
        if unicodedata.category(ch) == "Cs":  # surrogates are not characters of a str from a file
            continue
        must = unicodedata.category(ch) in ("Cc", "Cf") or ch in "\u2028\u2029"
        if must:
            assert escaped(ch) != ch, f"U+{code:04X}"
        else:  # a later Unicode's format characters (U+13439-U+1343F) are unassigned in an older one
            assert escaped(ch) == ch or unicodedata.category(ch) == "Cn", f"U+{code:04X}"
    assert escaped("ba\u200bnk") == "ba\\u200bnk" and escaped("\U000e0041") == "\\U000e0041"
    assert json.loads(json_escaped(json.dumps(["ba\u200bnk"], ensure_ascii=False))) == ["ba\u200bnk"]
    assert "\u200b" not in json_escaped(json.dumps(["ba\u200bnk"], ensure_ascii=False))


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_the_quiz_worksheet_shows_the_name_and_tokens_escaped(tmp_path: Path, fmt: str) -> None:
    out = attnwalk("quiz", "-s", str(scenario(tmp_path)), "--format", fmt)
    text = out.stdout.decode("utf-8")
    assert out.returncode == 0 and hidden(text) == []
    if fmt == "markdown":
        assert text.startswith("# Quiz: inj\\x1b[5m")


def test_a_saved_svgs_title_shows_the_name_escaped(tmp_path: Path) -> None:
    saved = tmp_path / "walk.svg"
    out = attnwalk("run", "-s", str(scenario(tmp_path)), "--no-pause", "--save", str(saved))
    assert out.returncode == 0
    svg = saved.read_text(encoding="utf-8")
    assert hidden(svg) == [] and "inj\\x1b[5m" in svg


def test_reset_never_writes_a_names_escape_codes(tmp_path: Path) -> None:
    for args in (["reset", OSC52, "--yes"], ["reset", OSC52]):
        out = attnwalk(*args)
        assert out.returncode == 0 and hidden(out.stdout.decode()) == [] and hidden(out.stderr.decode()) == []
        assert "zz\\x1b]52;c;eA==\\x07" in out.stdout.decode()


def test_a_zero_width_character_in_a_token_is_shown_and_can_be_named(tmp_path: Path) -> None:
    path = scenario(tmp_path, name="zw")
    out = attnwalk("explain", str(path), "A", "bank", "1")  # "bank" is not the token "ba\u200bnk"
    line = out.stderr.decode("utf-8")
    assert out.returncode == 2 and hidden(line) == []
    assert "one of the tokens: river, ba\\u200bnk, \\u2060x" in line
    walk = attnwalk("run", "-s", str(path), "--no-pause").stdout.decode("utf-8")
    assert hidden(walk) == [] and "ba\\u200bnk" in walk
    exported = attnwalk("export", str(path)).stdout.decode("utf-8")
    assert hidden(exported) == [] and json.loads(exported)["tokens"] == ["river", "ba\u200bnk", "\u2060x"]


def test_paths_in_messages_and_warnings_are_escaped(tmp_path: Path) -> None:
    odd = tmp_path / "a\x1b[2Jb"
    odd.mkdir()
    out = attnwalk("init", str(odd / "new.yaml"))
    assert out.returncode == 0 and hidden(out.stdout.decode()) == [] and "a\\x1b[2Jb" in out.stdout.decode()
    state = odd / "state"
    (state / "attnwalk").mkdir(parents=True)
    (state / "attnwalk" / "progress.json").write_text("{", encoding="utf-8")
    out = attnwalk("quiz", "girl_bangs", "-n", "1", stdin=b"4.514\n", XDG_STATE_HOME=str(state))
    warning = out.stderr.decode()
    assert out.returncode == 0 and "damaged" in warning and hidden(warning) == []
