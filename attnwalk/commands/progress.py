"""The bodies of `attnwalk progress` (what the learner has done, as a table) and `attnwalk reset`
(forget it: one scenario, or every one after asking)."""

from __future__ import annotations

import sys

from attnwalk.errors import UsageError

MAX_LINE = 4096  # an answer to "forget everything?" is a word; a pasted flood is not read whole


def progress_command(*, lang: str | None) -> int:
    from attnwalk.terminal.console import make_console
    from attnwalk.text import detect_lang
    from attnwalk.tutor.progressview import progress_view

    make_console().print(progress_view(detect_lang(lang)), soft_wrap=True)  # the file's path is never cut
    return 0


def reset_command(*, name: str | None, yes: bool, lang: str | None) -> int:
    """Without NAME and --yes, ask first; where no one can be asked (stdin is not a terminal),
    refuse (exit 2) and change nothing."""
    from attnwalk.layer.safe import escaped  # the names are the learner's: shown, never obeyed
    from attnwalk.terminal.streams import stdin_is_terminal
    from attnwalk.text import detect_lang, text
    from attnwalk.tutor.progressview import confirmed, reset_progress, reset_question

    lang = detect_lang(lang)
    question = None if name is not None or yes else reset_question(lang)
    if question is not None:
        if not stdin_is_terminal():  # a script or a pipe: never erase everything unasked
            raise UsageError(text(lang).t("reset.refused"))
        sys.stderr.write(escaped(question))  # on stderr, as rm -i asks: stdout stays the command's result
        sys.stderr.flush()
        if not confirmed(sys.stdin.readline(MAX_LINE)):  # Enter or end of input (Ctrl-D) is no
            print(text(lang).t("reset.kept"))
            return 0
    print(escaped(reset_progress(name, lang)))
    return 0
