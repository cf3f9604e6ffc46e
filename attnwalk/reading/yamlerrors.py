"""YAML syntax errors in plain words: where, and what a person writing a scenario got wrong.

PyYAML and libyaml describe a problem in parser terms ("found character that cannot start any
token", "did not find expected key"); a student needs "tabs are not allowed for indentation in
YAML; use spaces" and the line and column.
"""

from __future__ import annotations

import yaml

from attnwalk.errors import ScenarioError
from attnwalk.numbering import shown as person

TABS = "tabs are not allowed for indentation in YAML; use spaces"

# (a piece of PyYAML's or libyaml's problem text, what it means to someone writing a scenario)
_PLAIN = (
    ("tab character", TABS),
    ("did not find expected ',' or ']'", "a '[' list is not closed here: expected ',' or ']'"),
    ("expected ',' or ']'", "a '[' list is not closed here: expected ',' or ']'"),
    ("did not find expected ',' or '}'", "a '{' mapping is not closed here: expected ',' or '}'"),
    ("expected ',' or '}'", "a '{' mapping is not closed here: expected ',' or '}'"),
    ("mapping values are not allowed", "unexpected ':' — a 'key: value' cannot start here; check "
     "the indentation, and quote text that contains ': '"),
    ("sequence entries are not allowed", "a '- ' list item cannot start here; put the list on the "
     "lines below its key, indented"),
    ("did not find expected key", "this line does not line up with the keys above it; check the "
     "indentation and any brackets or quotes left open or closed twice"),
    ("expected <block end>", "this line does not line up with the lines above it; check the "
     "indentation and any brackets or quotes left open or closed twice"),
    ("did not find expected '-' indicator", "this line does not line up with the '- ' items "
     "above it; check the indentation"),
    ("unexpected end of stream", "the file ends inside an open quote or bracket; close it"),
    ("unknown escape character", "unknown backslash escape in double-quoted text; use single "
     "quotes, or write \\\\ for a backslash"),
    ("could not find expected ':'", "expected ':' after a key (each line of a mapping is "
     "'key: value')"),
    ("maximum nesting depth", "the file nests lists and mappings over a thousand levels deep; a "
     "scenario needs at most 3"),
    ("tag handle", "YAML tags (!...) are not allowed in a scenario; write plain numbers, text and "
     "lists"),
    ("directive", "a line starting with '%' is a YAML directive, which a scenario does not use; "
     "quote text that starts with %"),
    ("alphabetic or numeric character", "'&' and '*' start YAML anchors and aliases, which a "
     "scenario does not use; quote text that starts with them"),
    ("<document start>", "unexpected text after the scenario; check the indentation of this line"),
    ("expected a comment or a line break", "unexpected text after a value on this line; check "
     "the quotes"),
    ("expected <block mapping key>", "this line does not line up with the keys above it; check "
     "the indentation"),
)


# Punctuation a Chinese input method types in place of YAML's: what it is, and what YAML needs.
FULLWIDTH = {"，": ("a full-width comma", ","), "、": ("an ideographic comma", ","),
             "：": ("a full-width colon", ":"), "［": ("a full-width bracket", "["),
             "］": ("a full-width bracket", "]"), "｛": ("a full-width brace", "{"),
             "｝": ("a full-width brace", "}"), "\u3000": ("a full-width space", " ")}


def fullwidth_fix(text: str) -> str:
    """"'，' is a full-width comma (...): YAML needs the ASCII ','" for the first such character
    in `text`, else ""."""
    char = next((c for c in text if c in FULLWIDTH), None)
    if char is None:
        return ""
    name, ascii = FULLWIDTH[char]
    shown = "U+3000" if char == "\u3000" else f"'{char}'"
    return f"{shown} is {name} from a Chinese input method: YAML needs the ASCII '{ascii}'"


def _fullwidth_line(text: str, line: int | None) -> tuple[int, int, str] | None:
    """(line, column, char) of full-width punctuation outside quotes and comments on the error's
    line or the line of content before it, where a slip such as `tokens： [...]` is typed (the
    parser only notices on the next line)."""
    if not line:
        return None
    for number in range(line, max(line - 3, 0), -1):
        content = _line_of(text, number)
        code = content.split("#", 1)[0]
        if number != line and not code.strip():
            continue
        quote = None
        for column, char in enumerate(code, start=1):
            if char in "'\"" and quote in (None, char):
                quote = None if quote else char
            elif quote is None and char in FULLWIDTH and (char != "\u3000"  # in the indentation
                                                          or not code[:column - 1].strip(" \u3000")):
                return number, column, char
        if number != line:
            break
    return None


def syntax_error(exc: yaml.MarkedYAMLError, text: str, file: str) -> ScenarioError:
    """A parser's error as one line: where, and what is wrong in plain words."""
    mark = exc.problem_mark or exc.context_mark
    line, column = (person(mark.line), person(mark.column)) if mark is not None else (None, None)
    slip = _fullwidth_line(text, line)
    if slip is not None:  # the cause, where it was typed, rather than where the parser tripped
        number, at, char = slip
        return ScenarioError(f"YAML syntax error at column {at}: {fullwidth_fix(char)}",
                             file=file, line=number)
    problem = exc.problem or exc.context or "invalid YAML"
    source_line = _line_of(text, line)
    char = source_line[column - 1] if line and column and 0 < column <= len(source_line) else ""
    indent = source_line[: len(source_line) - len(source_line.lstrip(" \t"))]
    if char == "\t" or "\t" in indent:
        plain = TABS
    elif "cannot start any token" in problem:
        shown = f"the character {char!r}" if char else "this character"
        plain = f"{shown} cannot start a value in YAML; put the text in quotes"
    else:
        plain = next((words for piece, words in _PLAIN if piece in problem),
                     " ".join(problem.split()))
    opened = exc.context_mark
    if opened is not None and opened is not mark and opened.line + 1 != line and exc.context \
            and ("quoted" in exc.context or "flow" in exc.context):
        plain += f" (it was opened on line {person(opened.line)})"
    at = f" at column {column}" if column else ""
    return ScenarioError(f"YAML syntax error{at}: {plain}", file=file, line=line)


def _line_of(text: str, line: int | None) -> str:
    if not line:
        return ""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]
