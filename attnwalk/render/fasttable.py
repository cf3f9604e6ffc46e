"""rich.table.Table with the same output, drawn without Rich's per-cell layout passes.

Rich draws each cell through its general machinery: measure it, wrap it in a Padding, render that
to lines, crop and pad them, shape the row. For the tables attnwalk draws (matrices, label/value
grids, bar charts: one-line text cells) that is most of a walk's drawing time, ~0.5 ms a table.
FastTable keeps Table's API and output: when every cell is text on one line and the columns fit,
or only one column has to wrap (as Rich would then narrow that column alone), it lays the rows
out itself with the Text methods Rich uses; anything else is drawn by Table itself.
tests/test_fasttable.py holds both to the same characters and styles.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Column, Table
from rich.text import Text

_Line = list[Segment]


class _Layout:
    """Column widths (padding included) and every cell as Text, for the fast path."""

    def __init__(self, widths: list[int], pads: list[tuple[int, int]], cells: list[list[Text]],
                 lengths: list[list[int]]) -> None:
        self.widths = widths
        self.pads = pads  # (left, right) padding of each column
        self.cells = cells  # cells[column][row], the header first when shown
        self.lengths = lengths  # the cells' widths in terminal cells, likewise

    def naturals(self) -> list[int]:
        """Each column's widest cell, padding included."""
        return [max(lengths) + sum(pad) for lengths, pad in zip(self.lengths, self.pads)]

    def minimums(self, console: Console, options: ConsoleOptions) -> list[int]:
        """Each column's narrowest width: its longest word (a cell without one: its width), or
        what a Text subclass's own measure says (render/wrap.py's Prose breaks Chinese)."""
        def narrowest(text: Text, length: int) -> int:
            if type(text).__rich_measure__ is not Text.__rich_measure__:
                return Measurement.get(console, options, text).minimum
            return max((cell_len(word) for word in text.plain.split()), default=length)

        return [max(narrowest(text, length) for text, length in zip(texts, lengths)) + sum(pad)
                for texts, lengths, pad in zip(self.cells, self.lengths, self.pads)]


class FastTable(Table):
    """A rich Table (same constructor, columns and rows) drawn by a shortcut where it is simple."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        layout = self._layout(console, options.max_width - self._extra_width, options)
        if layout is None:
            yield from super().__rich_console__(console, options)
            return
        table_width = sum(layout.widths) + self._extra_width
        render_options = options.update(width=table_width, highlight=self.highlight, height=None)
        if self.title:
            yield from self._annotation(console, render_options, self.title, self.title_style,
                                        "table.title", self.title_justify)
        yield from self._fast_render(console, options, layout)
        if self.caption:
            yield from self._annotation(console, render_options, self.caption, self.caption_style,
                                        "table.caption", self.caption_justify)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        max_width = options.max_width
        layout = self._layout(console, max_width - self._extra_width, options) if max_width >= 0 else None
        if layout is None:
            return super().__rich_measure__(console, options)
        total = sum(layout.widths)
        columns = [(min(low, total), min(high, total)) for low, high in
                   zip(layout.minimums(console, options), layout.naturals())]
        for i, column in enumerate(self.columns):
            if column.min_width is not None:
                floor = max(0, column.min_width + sum(layout.pads[i]))
                columns[i] = (max(columns[i][0], floor), max(columns[i][1], floor))
        extra = self._extra_width
        return Measurement(sum(c[0] for c in columns) + extra, sum(c[1] for c in columns) + extra)

    # -- layout ----------------------------------------------------------------------------------

    def _simple(self) -> bool:
        """No feature the shortcut does not draw: fixed or expanding widths, row styles, footers,
        lines between rows, vertical padding."""
        top, _, bottom, _ = self.padding
        return (self.width is None and not self.expand and self.min_width is None
                and not self.row_styles and not self.show_footer and not self.show_lines
                and not self.leading and not top and not bottom
                and all(row.style is None and not row.end_section for row in self.rows)
                and all(c.width is None and c.max_width is None and c.ratio is None
                        and c.vertical == "top" for c in self.columns))

    def _layout(self, console: Console, available: int, options: ConsoleOptions) -> _Layout | None:
        """Widths as Table._calculate_column_widths finds them, or None where the shortcut does
        not apply (then Table draws it)."""
        if not self.columns or available < 1 or not self._simple():
            return None
        count = len(self.columns)
        top, right, bottom, left = self.padding
        widths, pads, cells, all_lengths = [], [], [], []
        for i, column in enumerate(self.columns):
            pad_left, pad_right = left, right
            if self.collapse_padding and i:
                pad_left = max(0, pad_left - pad_right)
            if not self.pad_edge:
                pad_left = 0 if i == 0 else pad_left
                pad_right = 0 if i == count - 1 else pad_right
            pad = pad_left + pad_right
            texts = []
            raw = ([column.header] if self.show_header else []) + list(column._cells)
            for cell in raw:
                text = _as_text(console, cell, column, options)
                if text is None:
                    return None
                texts.append(text)
            if not texts:
                return None
            lengths = [cell_len(t.plain) for t in texts]
            natural = max(lengths) + pad
            if natural > available:  # Rich caps a column at the width there is, then narrows it
                if column.no_wrap or column.min_width is not None:
                    return None
                natural = available
            if column.min_width is not None:
                natural = max(natural, column.min_width + pad)
            if natural > available or available - pad < 1:
                return None
            widths.append(natural or 1)
            pads.append((pad_left, pad_right))
            cells.append(texts)
            all_lengths.append(lengths)
        excess = sum(widths) - available
        if excess > 0:  # as Rich does: only a column that may wrap gives up width
            wrapping = [i for i, c in enumerate(self.columns) if not c.no_wrap]
            if len(wrapping) != 1:
                return None
            k = wrapping[0]
            if (widths[k] - excess - sum(pads[k]) < 1 or self.columns[k].min_width is not None
                    or 0 in (max(lengths) for lengths in all_lengths)):
                return None
            widths[k] -= excess
        return _Layout(widths, pads, cells, all_lengths)

    # -- drawing ---------------------------------------------------------------------------------

    def _annotation(self, console: Console, options: ConsoleOptions, text, style, default: str,
                    justify) -> RenderResult:
        if isinstance(text, str):
            text = console.render_str(text, style=Style.pick_first(style, default), highlight=False)
        return console.render(text, options=options.update(justify=justify))

    def _fast_render(self, console: Console, options: ConsoleOptions, layout: _Layout) -> RenderResult:
        get_style = console.get_style
        border_style = get_style(self.style or "") + get_style(self.border_style or "")
        box = (self.box.substitute(options, safe=self.safe_box if self.safe_box is not None
                                   else console.safe_box) if self.box else None)
        if box and not self.show_header:
            box = box.get_plain_headed_box()
        widths, edge = layout.widths, self.show_edge
        new_line = Segment.line()
        header_styles = [get_style(self.header_style or "") + get_style(c.header_style or "")
                         for c in self.columns]
        body_styles = [get_style(c.style or "") for c in self.columns]
        if box and edge:
            yield Segment(box.get_top(widths), border_style)
            yield new_line
        rows = len(layout.cells[0])
        for r in range(rows):
            header = self.show_header and r == 0
            cells = [self._cell(console, layout, i, r, (header_styles if header else body_styles)[i],
                                header) for i in range(len(self.columns))]
            height = max(len(c) for c in cells)
            for c, width, i in zip(cells, widths, range(len(cells))):
                style = (header_styles if header else body_styles)[i]
                blank = [Segment(" " * width, style)]
                while len(c) < height:  # a shorter cell: top-aligned, headers bottom-aligned
                    c.insert(0, blank) if header else c.append(blank)
                if not height:  # a row with nothing in it is still one (unstyled) line
                    c.append([Segment(" " * width)])
            height = max(height, 1)
            if box:
                first, last = r == 0, r == rows - 1
                row_kind = 0 if first else (2 if last else 1)
                left, right, divider = (
                    (box.head_left, box.head_right, box.head_vertical),
                    (box.mid_left, box.mid_right, box.mid_vertical),
                    (box.foot_left, box.foot_right, box.foot_vertical))[row_kind]
                left_seg, right_seg = Segment(left, border_style), Segment(right, border_style)
                divider_seg = Segment(divider, border_style if divider.strip()
                                      else Style.null().background_style + border_style)
                for line_no in range(height):
                    if edge:
                        yield left_seg
                    for i, cell in enumerate(cells):
                        yield from cell[line_no]
                        if i < len(cells) - 1:
                            yield divider_seg
                    if edge:
                        yield right_seg
                    yield new_line
                if header:
                    yield Segment(box.get_row(widths, "head", edge=edge), border_style)
                    yield new_line
            else:
                for line_no in range(height):
                    for cell in cells:
                        yield from cell[line_no]
                    yield new_line
        if box and edge:
            yield Segment(box.get_bottom(widths), border_style)
            yield new_line

    def _cell(self, console: Console, layout: _Layout, i: int, r: int, style: Style,
              header: bool) -> list[_Line]:
        """One cell's lines, each exactly its column's width, as Table's Padding would draw them."""
        column = self.columns[i]
        text, length = layout.cells[i][r], layout.lengths[i][r]
        pad_left, pad_right = layout.pads[i]
        inner = layout.widths[i] - pad_left - pad_right
        if inner < 1:
            return []  # Rich renders nothing at width 0; the row's shaping fills the cell
        justify = text.justify or column.justify
        overflow = text.overflow or column.overflow
        no_wrap = text.no_wrap if text.no_wrap is not None else column.no_wrap
        null = Style.null()
        rendered: Iterable[list[Segment]]
        plain = text.plain
        if not text.spans and justify in ("left", "right", "center") and length <= inner:
            # Fits on one line in one style: justified as Lines.justify does it (left pads the
            # text; right and center strip its trailing spaces first), in the text's style
            if justify == "left":
                body = plain + " " * (inner - length)
            else:
                body = plain.rstrip()
                gap = inner - cell_len(body)
                left = gap if justify == "right" else gap // 2
                body = " " * left + body + " " * (gap - left)
            rendered = [[Segment(body, console.get_style(text.style) if text.style else None)]]
            return [self._padded(line, pad_left, pad_right, style) for line in rendered]
        tab_size = console.tab_size if text.tab_size is None else text.tab_size
        wrapped = text.wrap(console, inner, justify=justify, overflow=overflow,
                            tab_size=tab_size or 8, no_wrap=no_wrap)
        line = wrapped[0]
        if len(wrapped) == 1 and not (line.spans and line.style):
            # One line whose style and spans cannot clash: what Text.__rich_console__ would give
            # (it carries the base style over as a span), without joining and splitting lines
            segments = ([Segment(line.plain, console.get_style(line.style) if line.style else None)]
                        if not line.spans else list(line.render(console)))
            rendered = [Segment.adjust_line_length(segments, inner, style=null)]
        elif not any(line.spans for line in wrapped):
            # Several lines, each in one style (a paragraph wrapped): each line as one segment,
            # as joining them, rendering and splitting again would give
            rendered = [Segment.adjust_line_length(
                [Segment(line.plain, console.get_style(line.style) if line.style else None)]
                if line.plain else [], inner, style=null) for line in wrapped]
        else:
            segments = Text("\n").join(wrapped).render(console, end=text.end)
            rendered = Segment.split_and_crop_lines(segments, inner, pad=True, style=null,
                                                    include_new_lines=False)
        return [self._padded(line, pad_left, pad_right, style) for line in rendered]

    @staticmethod
    def _padded(line: _Line, left: int, right: int, style: Style) -> _Line:
        """A cell's line between its padding, under the cell's style (the column's or header's)."""
        null = Style.null()
        out = [Segment(" " * left, null)] if left else []
        out += line
        if right:
            out.append(Segment(" " * right, null))
        return list(Segment.apply_style(out, style)) if style else out


def _as_text(console: Console, cell: object, column: Column, options: ConsoleOptions) -> Text | None:
    """A cell as the Text Table would render, or None when it is anything else or has several
    lines (Table draws those)."""
    if isinstance(cell, str):
        cell = console.render_str(cell, highlight=column.highlight, markup=options.markup)
    if not isinstance(cell, Text) or "\n" in cell.plain or "\t" in cell.plain:
        return None
    return cell
