"""What the scenario itself says to the learner: the lesson that opens the walk (title, description,
what each embedding dimension means), the note on what to notice at a stage, and what to try
when the walk ends."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer.modes import BASELINE
from attnwalk.layer.stages import Stage
from attnwalk.layer.walk import Walk
from attnwalk.render import style
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose
from attnwalk.text import pick, text
from attnwalk.numbering import shown as person


def lesson_panel(walk: Walk, opts: ViewOptions) -> RenderableType | None:
    """The lesson as the walk opens: its title, its description and the names of E's columns;
    None for a scenario that gives none of them."""
    scn = walk.scenario
    title = style.plain(pick(scn.title, opts.lang), opts)
    description = style.plain(pick(scn.description, opts.lang), opts)
    names = scn.dimension_names("d_model", opts.lang)
    if not (title or description or names):  # a real model's layer says none: the model instead
        from attnwalk.render.modelintro import model_opening

        return model_opening(walk, opts)
    body: list[RenderableType] = []
    paragraphs = [p.strip() for p in description.split("\n") if p.strip()]  # the file's blank lines
    if opts.predicting and len(paragraphs) > 1:  # "what to notice" names numbers asked later
        paragraphs = [paragraphs[0]]
        held = style.say(opts, "lesson.held_back", name=scn.name)
    else:
        held = ""
    for paragraph in paragraphs:
        body += [Prose(paragraph), Text()]
    if held:
        body += [Prose(held, style=style.NOTE), Text()]
    if names:
        dot = f" {style.markers(opts).dot} "
        listed = dot.join(style.say(opts, "lesson.dimension", index=person(i), name=name)
                          for i, name in enumerate(names))
        body.append(Prose(style.say(opts, "lesson.dimensions") + style.say(opts, "ui.colon")
                          + style.plain(listed, opts), style=style.NOTE))
    while body and isinstance(body[-1], Text) and not body[-1].plain:
        body.pop()
    return Panel(Group(*body), title=Text(title or scn.name, style=style.SCREEN_TITLE),
                 title_align="left", box=style.panel_box(opts), border_style=style.PANEL_BORDER)


def notice(walk: Walk, stage: Stage, opts: ViewOptions) -> RenderableType | None:
    """The scenario's note on what to notice at this stage, or None."""
    note = pick(walk.scenario.notes.get(stage.key), opts.lang)  # a text or {en: ..., zh: ...}
    if not note:
        return None
    label = notice_label(walk, opts.lang)
    line = Prose(label + style.say(opts, "ui.colon") + style.plain(note, opts))
    line.stylize(style.LABEL, 0, len(label))
    return line


def notice_label(walk: Walk, lang: str) -> str:
    """"What to notice"; in another mode or amplified, it says the note's numbers are the default
    mode's (a lesson's notes quote the numbers it was written for)."""
    tx = text(lang)
    if walk.mode == BASELINE and walk.amplify == 1.0:
        return tx.t("lesson.notice")
    return tx.t("lesson.notice_other_mode", mode=tx.t(f"mode.{BASELINE.name}.name"))


def walk_end(walk: Walk, opts: ViewOptions, following: tuple[str, str] | None = None) -> list[str]:
    """What to try after the last stage, one line each: the quiz on this scenario, compare's modes
    side by side, decode where the mask is causal, and `following`, the lesson after this one
    (its name and title). A scenario read from a pipe has no name to type again: only the lesson."""
    from shlex import quote

    from attnwalk.layer.kvcache import refusal

    scn = walk.scenario
    lines = [style.say(opts, "end.next")]
    # a feature may say what to try in its own words (`attnwalk model` takes them as its options)
    offered = [step for feature in scn.features if hasattr(feature, "next_steps") for step in feature.next_steps(scn)]
    if offered:
        lines += [style.say(opts, key, **values) for key, values in offered]
    elif scn.builtin or (scn.path and scn.path != "-"):
        name = scn.name if scn.builtin else quote(scn.path)
        quiz = f"attnwalk quiz {name}" if scn.builtin else f"attnwalk quiz --scenario {name}"
        lines += [style.say(opts, "end.quiz", command=quiz),
                  style.say(opts, "end.compare", command=f"attnwalk compare {name}")]
        if refusal(scn) is None:
            lines.append(style.say(opts, "end.decode", command=f"attnwalk decode {name}"))
    if following is not None:
        lines.append(style.say(opts, "end.lesson", command=f"attnwalk run {following[0]}",
                               title=style.plain(following[1], opts)))
    elif scn.builtin:  # the last lesson: a layer of a real model, on a sentence of one's own
        lines.append(style.say(opts, "end.model"))
    return lines
