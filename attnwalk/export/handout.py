"""Handouts of a walk for notes and slides: Markdown, LaTeX and CSV.

Every screen of the walk (render.screens.walk_steps), in order: its title, formula and shape, its matrix with
row and column labels, and its explanation (what, why, the common mistake, and what this
scenario does differently) in the chosen language. Q, K, V and O are preceded by the weight
they are made with (W_Q, W_K, W_V, W_O), labelled by dimension index.

- markdown: a heading per stage, the formula in backticks, one pipe table per matrix.
- latex: a document that compiles on its own: each matrix as a labelled `tabular` and as a
  `bmatrix` to paste into slides. Chinese text needs xelatex (ctex chooses the fonts; the file
  says so in its first lines); a handout in plain ASCII compiles with pdflatex too.
- csv: one row per cell, long format: stage,head,row,row_label,col,col_label,value. head, row
  and col are 0-based array indices, as in the JSON export's lists (stages.heads[head][stage]
  [row][col]; head is empty for stages shared by every head and 0 in a one-head walk);
  row_label and col_label are the tokens or dimension indices the screens show. The weights
  come before the stage they make, as stages W_Q, W_K, W_V, W_O (head empty: every head's
  columns side by side, as in the JSON's weights). Every value is at full float64 precision
  (-inf for masked scores), so a spreadsheet or script can pivot it. A label a spreadsheet would
  run as a formula (=, +, -, @, tab or CR first) gets a leading ' (layer/safe.spreadsheet_cell).
"""

from __future__ import annotations

import math

import numpy as np

from attnwalk.export.latex import document, latex_text, math_text, matrix_env, tabular
from attnwalk.layer.axes import axes, dim_labels
from attnwalk.layer.modes import BASELINE
from attnwalk.layer.safe import escaped, spreadsheet_cell
from attnwalk.layer.stages import TOKENS, Stage
from attnwalk.layer.graph import param_symbol
from attnwalk.layer.walk import Walk
from attnwalk.render.heatmap import GAP, shown_indices
from attnwalk.render.lesson import notice_label
from attnwalk.render.options import ViewOptions
from attnwalk.render.screens import shape_text, walk_steps
from attnwalk.render.style import number
from attnwalk.text import pick, stage_notes, stage_text, text
from attnwalk.numbering import shown as person

FORMATS = ("markdown", "latex", "csv")


class Weight:
    """A weight matrix (W_Q, W_K, W_V, W_O, a feature's: the FFN's W_1), rows and columns labelled
    by dimension index."""

    def __init__(self, walk: Walk, stage: Stage, opts: ViewOptions) -> None:
        scn = walk.scenario
        self.name, names = stage.weight, [stage.weight_rows, stage.cols]
        if scn.heads > 1:  # every head's block side by side: h·d_k columns (W_O: h·d_v rows)
            per = "g" if stage.shared and scn.groups < scn.heads else "h"  # W_K, W_V: g K/V heads
            names = [f"{per}·{name}" if name in ("d_k", "d_v") else name for name in names]  # not d_ff
        self.matrix = scn.param(self.name)
        rows, cols = self.matrix.shape
        self.shape = f"{rows} × {cols} = {names[0]} × {names[1]}"
        self.row_shown = shown_indices(rows, opts.max_rows)
        self.col_shown = shown_indices(cols, opts.max_cols)
        labels = dim_labels(max(rows, cols))
        self.rows = [labels[i] if i is not GAP else None for i in self.row_shown]
        self.cols = [labels[j] if j is not GAP else None for j in self.col_shown]
        tx = text(opts.lang)
        self.corner = tx.t("handout.dim")
        self.caption = tx.t("handout.weight", name=param_symbol((stage,), self.name), shape=self.shape)  # W_Q⁽²⁾


def _weight(walk: Walk, stage: Stage, opts: ViewOptions) -> Weight | None:
    if stage.weight is None or walk.scenario.param(stage.weight) is None:
        return None
    return Weight(walk, stage, opts)


class Section:
    """One screen of the walk, in words and numbers, ready to be written in any format."""

    def __init__(self, walk: Walk, stage: Stage, head: int, index: int, opts: ViewOptions) -> None:
        tx = text(opts.lang)
        scn = walk.scenario
        self.stage, self.head, self.index = stage, head, index
        self.title = stage_text(opts.lang, stage, scn, walk.mode)
        self.symbol = "" if stage.kind == TOKENS else stage.symbol
        self.formula = stage.formula_in(scn, walk.mode)
        self.per_head = stage.per_head and scn.heads > 1
        self.head_text = tx.t("ui.head", head=person(head), heads=scn.heads) if self.per_head else ""
        self.shape = "" if stage.kind == TOKENS else shape_text(walk.view(head), stage, opts)
        self.weight = _weight(walk, stage, opts)
        self.caption = tx.t("handout.activation", symbol=self.symbol) if self.weight else ""
        self.corner = tx.t("ui.token")
        # Big matrices keep their first and last rows and columns, as on screen; CSV has them all.
        if stage.kind == TOKENS:
            from attnwalk.features import token_ids

            ids = token_ids(scn)
            self.matrix = None
            # as the walk's tokens table: the row number from 1 (what explain takes), the
            # position from 0 (what the positional formula takes), the token, its id
            self.cols = [tx.t(f"ui.{key}") for key in ("row_col", "position_col", "token", "id")]
            self.row_shown = shown_indices(scn.n, opts.max_rows)
            self.col_shown = list(range(len(self.cols)))
            self.cells = [[str(person(i)), str(i), escaped(scn.tokens[i]), str(ids[i]) if ids else "-"]
                          if i is not GAP else None for i in self.row_shown]
        else:
            self.matrix = walk.matrix(stage.key, head)
            rows, cols = axes(walk, stage, head, opts.lang)
            self.row_shown = shown_indices(self.matrix.shape[0], opts.max_rows)
            self.col_shown = shown_indices(self.matrix.shape[1], opts.max_cols)
            self.rows = [rows[i] if i is not GAP else None for i in self.row_shown]
            self.cols = [cols[j] if j is not GAP else None for j in self.col_shown]
        self.explained = [(tx.t(f"ui.{field}"), stage_text(opts.lang, stage, scn, walk.mode, field))
                          for field in ("what", "why", "mistake")]
        notice = pick(scn.notes.get(stage.key), opts.lang)  # the lesson's own point comes first
        if notice:
            self.explained.insert(0, (notice_label(walk, opts.lang), escaped(notice)))
        self.notes = stage_notes(opts.lang, stage, scn, walk.mode)
        if stage.kind == TOKENS:
            self.notes.insert(0, tx.t("numbering.rows_legend", row=self.cols[0], pos=self.cols[1]))

    @property
    def heading(self) -> str:
        head = f" ({self.head_text})" if self.head_text else ""
        return f"{self.index}. {self.symbol + ' — ' if self.symbol else ''}{self.title}{head}"


def sections(walk: Walk, opts: ViewOptions) -> list[Section]:
    return [Section(walk, stage, head, i, opts) for i, (stage, head) in enumerate(walk_steps(walk), 1)]


def _facts(walk: Walk, lang: str) -> tuple[str, str, str, str, str]:
    """Title, description, the settings line (which names the mode), a note on the description
    when the mode is not the default and the mode's explanation, in `lang`."""
    tx = text(lang)
    scn = walk.scenario
    dims = f"n = {scn.n}, d_model = {scn.d_model}, d_k = {scn.d_k}, d_v = {scn.d_v}"
    if scn.source is not None:
        dims += f", m = {scn.m}"
    if scn.heads > 1:
        dims += f", h = {scn.heads}"
    mode = tx.t(f"mode.{walk.mode.name}.name")
    settings = f"{escaped(scn.name)} · {tx.t('ui.mode')}{tx.t('ui.colon')}{mode} · {dims}"
    description = escaped(pick(scn.description, lang), keep_newlines=True)  # shown, never obeyed
    names = scn.dimension_names("d_model", lang)
    if names:
        listed = " · ".join(tx.t("lesson.dimension", index=person(i), name=escaped(name))
                            for i, name in enumerate(names))
        description = "\n".join(filter(None, (description, tx.t("lesson.dimensions") + tx.t("ui.colon") + listed)))
    # A scenario's description is written for the default mode and quotes its numbers; in any
    # other mode the tables differ from them, so say which numbers are which.
    note = (tx.t("handout.mode_note", mode=mode, default=tx.t(f"mode.{BASELINE.name}.name"))
            if description and walk.mode != BASELINE else "")
    return (escaped(pick(scn.title, lang) or scn.name), description, settings, note,
            tx.t(f"mode.{walk.mode.name}.explain"))


# -- Markdown ---------------------------------------------------------------------------------


def _md_cell(s: str) -> str:
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_matrix(s: Section | Weight, opts: ViewOptions) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a matrix's table as text, "⋮" and "…" where rows or columns are left out."""
    def cell(i: int | None, j: int | None) -> str:
        if i is GAP:
            return "⋮" if j is not GAP else "⋱"
        return "…" if j is GAP else number(float(s.matrix[i, j]), opts)

    if s.matrix is None:
        return s.cols, [row if row is not None else ["⋮"] * len(s.cols) for row in s.cells]
    header = [s.corner, *(c if c is not None else "…" for c in s.cols)]
    rows = [[label if label is not None else "⋮", *(cell(i, j) for j in s.col_shown)]
            for i, label in zip(s.row_shown, s.rows)]
    return header, rows


def _md_table(header: list[str], rows: list[list[str]], left: int = 0) -> list[str]:
    """A pipe table: numbers right-aligned, column `left` (the labels) left-aligned."""
    align = [":---" if i == left else "---:" for i in range(len(header))]
    out = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out


def markdown(walk: Walk, opts: ViewOptions) -> str:
    tx = text(opts.lang)
    colon = tx.t("ui.colon")  # ": ", in Chinese "："
    title, description, settings, note, mode = _facts(walk, opts.lang)
    lines = [f"# {title}", "", settings, ""]
    if description:
        lines += [description.replace("\n", "\n\n"), ""]
    if note:
        lines += [f"> {note}", ""]
    lines += [f"*{mode}*", ""]
    for s in sections(walk, opts):
        lines += [f"## {s.heading}", "", f"{tx.t('ui.formula')}{colon}`{s.formula}`"
                  + (f" · {tx.t('ui.shape')}{colon}{s.shape}" if s.shape else ""), ""]
        if s.weight:
            lines += [s.weight.caption, "", *_md_table(*_md_matrix(s.weight, opts)), "", s.caption, ""]
        lines += _md_table(*_md_matrix(s, opts), left=2 if s.matrix is None else 0)  # tokens: the token
        lines.append("")
        lines += [f"- **{label}**{colon}{body}" for label, body in s.explained]
        lines += [f"- {note}" for note in s.notes]
        lines.append("")
    return "\n".join(lines)


# -- LaTeX ------------------------------------------------------------------------------------


def latex(walk: Walk, opts: ViewOptions) -> str:
    tx = text(opts.lang)
    colon = latex_text(tx.t("ui.colon"))
    title, description, settings, note, mode = _facts(walk, opts.lang)
    body = [f"\\section*{{{latex_text(title, math=False)}}}",
            f"\\noindent {latex_text(settings, math=False)}", ""]
    if description:
        body += [latex_text(description, math=False).replace("\n", "\n\n"), ""]
    if note:
        body += [f"\\textbf{{{latex_text(note)}}}", ""]
    body += [f"\\emph{{{latex_text(mode)}}}", ""]
    widest = 1
    for s in sections(walk, opts):
        symbol = f"${math_text(s.symbol)}$ --- " if s.symbol else ""
        head = f" ({latex_text(s.head_text)})" if s.head_text else ""
        body += [f"\\subsection*{{{s.index}. {symbol}{latex_text(s.title)}{head}}}",
                 f"\\noindent {latex_text(tx.t('ui.formula'))}{colon}${math_text(s.formula)}$"
                 + (f"\\\\\n{latex_text(tx.t('ui.shape'))}{colon}${math_text(s.shape)}$" if s.shape else ""),
                 ""]
        if s.weight:
            body += [f"\\noindent {latex_text(s.weight.caption)}", "",
                     *_tex_matrix(s.weight, s.weight.name, opts), "", f"\\noindent {latex_text(s.caption)}", ""]
            widest = max(widest, len(s.weight.cols))
        if s.matrix is None:
            body += tabular([latex_text(c, math=False) for c in s.cols],
                            [[latex_text(c, math=False) for c in row] if row is not None
                             else [r"$\vdots$"] * len(s.cols) for row in s.cells], spec="rrlr")
        else:
            body += _tex_matrix(s, s.symbol, opts)
            widest = max(widest, len(s.cols))
        body += ["", "\\begin{description}"]
        body += [f"  \\item[{latex_text(label)}] {latex_text(text_)}" for label, text_ in s.explained]
        body += [f"  \\item[] {latex_text(note)}" for note in s.notes]
        body += ["\\end{description}", ""]
    return document(body, max_cols=widest)


def _tex_matrix(s: Section | Weight, symbol: str, opts: ViewOptions) -> list[str]:
    """A matrix as a labelled tabular and as `symbol = bmatrix`, to paste into slides."""
    cells = [[_tex_cell(s, i, j, opts) for j in s.col_shown] for i in s.row_shown]
    table = tabular(["", *(latex_text(c, math=False) if c is not None else r"$\cdots$" for c in s.cols)],
                    [[latex_text(r, math=False) if r is not None else r"$\vdots$",
                      *(f"${x}$" for x in row)] for r, row in zip(s.rows, cells)])
    return table + matrix_env(math_text(symbol), cells)


def _tex_cell(s: Section | Weight, i: int | None, j: int | None, opts: ViewOptions) -> str:
    """One entry of a matrix in math mode: a number, −∞, or dots where rows or columns are left out."""
    if i is GAP:
        return r"\vdots" if j is not GAP else r"\ddots"
    if j is GAP:
        return r"\cdots"
    x = float(s.matrix[i, j])
    if math.isinf(x):
        return "-\\infty" if x < 0 else "\\infty"
    mantissa, _, exponent = number(x, opts).partition("e")  # 1.0000e+300: 1.0000 \times 10^{300}
    return f"{mantissa} \\times 10^{{{int(exponent)}}}" if exponent else mantissa


# -- CSV --------------------------------------------------------------------------------------


CSV_HEADER = ("stage", "head", "row", "row_label", "col", "col_label", "value")


def csv_text(walk: Walk, opts: ViewOptions) -> str:
    out = [",".join(CSV_HEADER)]

    def cells(key: str, head: int | str, M: np.ndarray, rows, cols) -> None:
        # M[i, j] as a script indexes it, then the labels; repr keeps every digit of a float64.
        # Written line by line (the csv module's writer takes twice as long for a 512 × 512 W_Q).
        # Labels are text cells (spreadsheet_cell: '=SUM(A1)' is shown, not run); values stay
        # numbers, -0.25 and -inf too, never escaped.
        cols = [_csv_field(spreadsheet_cell(str(c))) for c in cols]
        for i, row in enumerate(np.asarray(M, dtype=float).tolist()):
            lead = f"{key},{head},{i},{_csv_field(spreadsheet_cell(str(rows[i])))},"
            out.extend(f"{lead}{j},{cols[j]},{x!r}" for j, x in enumerate(row))

    for stage, head in walk_steps(walk):
        if stage.kind == TOKENS:
            continue
        weight = _weight(walk, stage, opts)
        if weight is not None:  # before the stage it makes, shared by every head
            W = weight.matrix  # labelled as the handouts' weight tables are, from 1
            cells(weight.name, "", W, dim_labels(W.shape[0]), dim_labels(W.shape[1]))
        rows, cols = axes(walk, stage, head, opts.lang)
        cells(stage.key, head if stage.per_head else "", walk.matrix(stage.key, head), rows, cols)
    return "\n".join(out) + "\n"


def _csv_field(s: str) -> str:
    """A field as csv.writer(lineterminator="\\n") writes it: quoted when it holds , " or \\n."""
    return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\n') else s


def handout(walk: Walk, fmt: str, opts: ViewOptions) -> str:
    """The whole walk in format `fmt` (one of FORMATS), explained in opts.lang."""
    render = {"markdown": markdown, "latex": latex, "csv": csv_text}[fmt]
    # The scenario's own text is escaped where it goes in (labels in layer/axes.py, the rest
    # above; LaTeX's in latex.py, before its own escaping); this catches anything else.
    return escaped(render(walk, opts), keep_newlines=True)
