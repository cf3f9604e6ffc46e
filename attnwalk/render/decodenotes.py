"""What a decode step computes and why, as this scenario decodes: the formulas of a step and the
explanation panel (what a KV cache is, why it is exact, the mistakes), with a note for each
variant the scenario has (several heads or grouped-query heads, positions, RoPE, ALiBi, a sliding
window, a real model's layer). Used by render/decodeview.py's screens.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.panel import Panel
from rich.text import Text

from attnwalk.layer.kvcache import Decode, cache_numbers, ungrouped_numbers, window_rows
from attnwalk.render import style
from attnwalk.render.fasttable import FastTable
from attnwalk.render.options import ViewOptions
from attnwalk.render.wrap import Prose


def formulas(dec: Decode) -> list[str]:
    """A step's arithmetic as this scenario does it under this mode (math: every language)."""
    scn, mode = dec.scenario, dec.mode
    hat = "\u0302" if scn.qk_norm else ""
    q, k = f"q{hat}_t", f"k{hat}_j"
    score = f"tanh({q} + {k}) · w_a" if scn.score == "additive" else f"{q} · {k}"
    if scn.qk_norm and scn.qk_scale != 1.0:
        score = f"{scn.qk_scale:g} × ({score})"
    if mode.scales(scn.scorer):
        score = f"({score}) / √d_k" if scn.score == "additive" else f"{score} / √d_k"
    if scn.bias == "alibi":
        score = f"{score} − m_h · (t − j)"
    if not mode.reads_scores:
        weights = "a_t[j] = 1 / (keys token t may read)"
    elif not mode.smooth:
        weights = f"a_t = onehot(argmax_j {score})"
    else:
        weights = f"a_t[j] = softmax_j({score})"
    if scn.model is not None:
        x = "x_t = X[t]"  # the layer's input, made by the norm (and the layers below)
    else:
        x = "x_t = e_t + p_t" if scn.main.positional not in ("none", "rope") else "x_t = e_t"
    if scn.rope is not None:  # turned at position t − 1 (from 0), once, when made
        project = "q_t = R(t−1) · x_t · W_Q,  k_t = R(t−1) · x_t · W_K,  v_t = x_t · W_V"
    else:
        project = "q_t = x_t · W_Q,  k_t = x_t · W_K,  v_t = x_t · W_V"
    cache = "K_cache ← [K_cache; k_t],  V_cache ← [V_cache; v_t]"
    if scn.groups < scn.heads:  # one cache per K/V head g, read by the query heads of its group
        cache = f"K_cache_g ← [K_cache_g; k_t,g],  V_cache_g ← [V_cache_g; v_t,g]  (g = 1 … {scn.groups})"
    keys = "j = 1 … t" if scn.window is None else f"j = max(1, t − {scn.window - 1}) … t"
    return [f"{x};  {project}", cache, f"{weights}  ({keys});  z_t = a_t · V_cache"]


def explanation(dec: Decode, opts: ViewOptions) -> RenderableType:
    """What a KV cache is, why it is exact, and the mistake learners make about it."""
    scn = dec.scenario
    grid = FastTable.grid(padding=(0, 2))
    grid.add_column(style=style.LABEL, no_wrap=True)
    grid.add_column(overflow="fold")
    for field in ("what", "why", "mistake"):
        grid.add_row(Text(style.say(opts, f"ui.{field}")), Prose(style.say(opts, f"decode.{field}")))
    n = len(dec.steps)
    if scn.rope is not None:
        grid.add_row(Text(""), Prose(style.say(opts, "decode.variant.mistake_rope")))
    notes = []
    if scn.groups < scn.heads:
        notes.append(style.say(opts, "decode.variant.note_gqa", heads=scn.heads, kv_heads=scn.groups, n=n,
                               numbers=_count(cache_numbers(scn, n)), full=_count(ungrouped_numbers(scn, n))))
    elif scn.heads > 1:
        notes.append(style.say(opts, "decode.note_heads", heads=scn.heads))
    if scn.model is not None:
        notes.append(style.say(opts, "decode.variant.note_model"))
    elif scn.main.positional not in ("none", "rope"):
        notes.append(style.say(opts, "decode.note_positions"))
    if scn.rope is not None:
        notes.append(style.say(opts, "decode.variant.note_rope"))
    if scn.bias == "alibi":
        notes.append(style.say(opts, "decode.variant.note_alibi"))
    if scn.window is not None:
        notes.append(style.say(opts, "decode.variant.note_window", w=scn.window, n=n,
                               kept=_count(cache_numbers(scn, window_rows(scn, n))),
                               numbers=_count(cache_numbers(scn, n))))
    if scn.mask_kind == "explicit":
        notes.append(style.say(opts, "decode.note_mask"))
    label = style.say(opts, "ui.note")
    for note in notes:
        grid.add_row(Text(label), Prose(note))
        label = ""
    return Panel(grid, box=style.panel_box(opts), border_style=style.PANEL_BORDER,
                 title=Text(style.say(opts, "decode.title")), title_align="left")


def _count(n: int) -> str:
    return f"{n:,}"
