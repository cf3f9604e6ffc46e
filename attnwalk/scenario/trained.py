"""The trained layer as a scenario file (`attnwalk train NAME -o trained.yaml`): the file it was
read from, with every trained parameter (layer.graph.trained: W_Q, W_K, W_V, W_O, sinks, …)
replaced by its trained values, written with every digit float64 has, so that `run`, `grad`,
`export` and `train` of the new file walk the trained layer bit for bit.

The original text is edited in place (yamledit.py), not re-emitted: PyYAML keeps no comments, so a
dump of the loaded values would lose every comment of a lesson. Only these spans are rewritten:

- each trained parameter, at the place `param_place` gives for its name (a row per line);
- every matrix read from a file (`{file: wq.npy}`) or made from a seed (`{random: …}`): written
  out, so the file stands alone;
- `name` and `title`, marked as trained; `description`, with a paragraph saying what was trained;
- `notes`: left out (each speaks of the numbers before training);
- a key a feature writes otherwise for trained weights (its `trained_keys(scn)`: quantize: none,
  since the trained weights are floats off the quantization grid).

What is lost: the comments inside a replaced value (a row's comment on W_Q's old numbers), and the
notes. A header comment says what the layer was trained from, how, and the final loss.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from attnwalk.errors import ScenarioError
from attnwalk.layer.graph import param_symbol, trained
from attnwalk.scenario.yamledit import Edits, FileRef

if TYPE_CHECKING:
    from attnwalk.scenario.scenario import Scenario

DROPPED = ("notes",)  # keys left out: they speak of the numbers before training
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


@dataclass(frozen=True)
class Trained:
    """How the layer was trained, for the file's header and its description."""

    source: str  # the scenario as the command named it (a built-in's name, a path)
    steps: int  # the updates made
    lr: float
    mode: str
    first_loss: float  # L before any update
    loss: float  # L after the last update
    optimizer: str = "gd"  # "gd" | "adam" (the lesson's train.optimizer)
    drawn: bool = False  # L is the mean over each step's drawn sequences (features/sequences.py)

    @property
    def rule_en(self) -> str:
        return "Adam" if self.optimizer == "adam" else "gradient descent"


def param_place(name: str, scn: Scenario | None = None) -> tuple[str | int, ...]:
    """Where learned parameter `name` lives in a scenario file: a top-level key of the same name
    (W_Q, sinks, W_1, W_U), unless a feature of `scn` keeps it elsewhere (several blocks: block
    b's W_Q in the b-th mapping of `blocks:`, features/blocks.py's `param_place`)."""
    for feature in scn.features if scn is not None else ():
        if hasattr(feature, "param_place"):
            place = feature.param_place(scn, name)
            if place is not None:
                return place
    return (name,)


@dataclass(frozen=True)
class TrainedFile:
    """What `train -o` writes: the scenario's text, and the matrices too large to write inline,
    each by its file name beside it (relative to the scenario's folder)."""

    text: str
    beside: dict[str, np.ndarray]


def trained_file(text: str, given: Scenario, layer: Scenario, how: Trained, output: str | Path) -> TrainedFile:
    """The scenario file `text` (read as `given`) rewritten to hold `layer`, the trained layer, for
    writing to `output`. Matrices are written inline, smallest first, up to INLINE numbers (a
    scenario's YAML holds at most yamltree.MAX_VALUES values); a larger trained one goes to an .npy
    file beside `output`, a larger seeded one keeps its seed (the same numbers) and a larger file
    is named from `output`'s folder."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)  # the loader has refused anchors, tags, …
    edits = Edits(text)
    names = trained(layer.graph)
    places = {param_place(name, layer): np.asarray(layer.param(name), dtype=np.float64) for name in names}
    found = _matrices(root, text, given, skip=set(places) | {(key,) for key in DROPPED})
    inline = _inline(list(places.values()) + [m.value for m in found])
    out = Path(output)
    beside: dict[str, np.ndarray] = {}
    for name, (place, value) in zip(names, places.items()):
        if id(value) not in inline:
            file = f"{out.stem}.{name}.npy"
            beside[file] = value
            value = FileRef(file)
        edits.put(root, place, value)
    for m in found:
        if id(m.value) in inline:
            edits.value(m.node, m.value)
        elif m.path is not None:  # a file: named from the new file's folder
            edits.value(m.node, FileRef(_relative(m.path, out), m.key))
    changed = _feature_keys(layer)
    for key, value in changed.items():
        edits.put(root, (key,), value)
    for key in DROPPED:
        edits.drop(root, key, "they speak of the numbers before training")
    edits.put(root, ("name",), f"{given.name}_trained")
    edits.put(root, ("title",), _title(given))
    edits.put(root, ("description",), _description(given, how))
    symbols = tuple(param_symbol(layer.graph, name) for name in names)  # W_Q⁽²⁾, as the walk writes it
    return TrainedFile(_header(given, how, symbols, changed, sorted(beside)) + edits.applied(), beside)


INLINE = 100_000  # numbers written inline at most: half of what a scenario's YAML may hold


def _inline(values: list[np.ndarray]) -> set[int]:
    """The matrices written inline (by id): the smallest first, while they fit in INLINE numbers."""
    chosen, total = set(), 0
    for value in sorted(values, key=lambda v: v.size):
        total += value.size
        if total > INLINE:
            break
        chosen.add(id(value))
    return chosen


def _relative(path: Path, output: Path) -> str:
    import os

    folder = Path(os.path.realpath(output)).parent
    try:
        return os.path.relpath(os.path.realpath(path), folder)
    except ValueError:  # another drive (Windows)
        return str(Path(path).absolute())


@dataclass(frozen=True)
class _Found:
    """A matrix the file gives as `{file: …}` or `{random: …}`, as the loader reads it."""

    node: yaml.Node
    value: np.ndarray
    path: Path | None = None  # a file's, as the loader resolved it
    key: str | None = None


def _matrices(root: yaml.Node, text: str, given: Scenario, skip: set) -> list[_Found]:
    """Every `{file: …}` and `{random: …}` matrix of the file outside `skip`, read as the loader
    reads it (its own readers, on its own nodes)."""
    from attnwalk.reading.fields import Fields
    from attnwalk.reading.yamltree import parse
    from attnwalk.scenario import matrixfile
    from attnwalk.scenario.randommatrix import random_matrix

    fields = Fields(given.label, str(Path(given.path).parent) if given.path else None)
    found: list[_Found] = []

    def visit(node: yaml.Node, mine: Any, place: tuple) -> None:
        if place in skip:
            return
        if isinstance(node, yaml.MappingNode):
            keys = {k.value for k, _ in node.value}
            field = ".".join(str(p) for p in place)
            if keys and keys <= {"file", "key"}:
                value = matrixfile.load_matrix_file(fields, mine, field, boolean=place[-1] == "mask")
                key = mine.value.get("key")
                found.append(_Found(node, value, matrixfile.resolve(fields, mine.value["file"].value),
                                    None if key is None else str(key.value)))
            elif keys == {"random"}:
                found.append(_Found(node, random_matrix(fields, mine, field)))
            else:
                for k, v in node.value:
                    visit(v, mine.value[k.value], place + (k.value,))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                visit(v, mine.value[i], place + (i,))

    visit(root, parse(text, given.label), ())
    return found


# -- what the file says about itself ---------------------------------------------------------------------


def _feature_keys(layer: Scenario) -> dict[str, Any]:
    """The keys a feature writes otherwise for a trained layer (its trained_keys(scn))."""
    out: dict[str, Any] = {}
    for feature in layer.features:
        out.update(getattr(feature, "trained_keys", lambda scn: {})(layer))
    return out


def _title(given: Scenario) -> str | dict[str, str]:
    title = given.title
    if not title:
        return {"en": f"{given.name}, trained", "zh": f"{given.name}（训练后）"}
    if isinstance(title, dict):
        return {lang: _marked(text, lang == "zh") for lang, text in title.items()}
    return _marked(title, bool(_CJK.search(title)))


def _marked(title: str, chinese: bool) -> str:
    return f"{title}（训练后）" if chinese else f"{title} (trained)"


def _description(given: Scenario, how: Trained) -> str | dict[str, str]:
    """A paragraph on what was trained, before the original description (whose numbers are from
    before training, and which says so)."""
    first, last = loss_text(how.first_loss), loss_text(how.loss)
    en = (f"Trained: {given.name}'s layer after {how.steps} steps of {how.rule_en} on its target "
          f"(η = {how.lr:g}, {how.mode} mode); the loss L went from {first} to {last}.")
    rule_zh = " Adam" if how.optimizer == "adam" else "梯度下降"
    zh = (f"训练后：{given.name} 这一层在它的目标上做了 {how.steps} 步{rule_zh}（η = {how.lr:g}，"
          f"{how.mode} 模式），损失 L 从 {first} 变为 {last}。")
    old = given.description
    if not old:
        return {"en": en, "zh": zh}
    # a lesson's description may tell of the untrained layer, of training it, or both: say only that
    en += (f" What follows is {given.name}'s own description, written about the layer before this "
           "training (and, where it tells of training it, about a run of its own steps and η); walk "
           "this file for the numbers it holds now.")
    zh += (f"下面是 {given.name} 原来的说明，写的是这次训练之前的那一层（讲到训练的地方，讲的是按它自己的步数和 η 训练的那一次）；"
           "这个文件现在的数，请走一遍这个文件来看。")
    if isinstance(old, dict):
        return {lang: (zh if lang == "zh" else en) + "\n" + text for lang, text in old.items()}
    return (zh if _CJK.search(old) else en) + "\n" + old


def loss_text(loss: float) -> str:
    """A loss as the file's prose gives it: 4 decimals (1.8998, 3.1801), a tiny one in 4 digits."""
    return f"{loss:.4f}" if loss == 0 or abs(loss) >= 1e-3 else f"{loss:.4g}"


def _header(given: Scenario, how: Trained, symbols: tuple[str, ...], changed: dict[str, Any],
            beside: list[str]) -> str:
    where = f"the built-in {given.name}" if given.builtin else how.source
    settings = [f"# Set for the trained weights: {', '.join(f'{k}: {v}' for k, v in changed.items())} (the trained "
                "weights are used as they are)."] if changed else []
    return "\n".join([
        f"# Trained by attnwalk train from {where}: {how.steps} steps of {how.rule_en},",
        ("# W <- W - lr * m / (sqrt(v) + eps) (Adam)" if how.optimizer == "adam" else "# W <- W - lr * dL/dW")
        + f" with lr = {how.lr!r}, {how.mode} mode; the loss L went from",
        f"# {how.first_loss!r} to {how.loss!r} ("
        + ("the layer below's mean loss on the sequences its last step drew" if how.drawn else
           "the loss of the layer below")
        + (f", in {how.mode} mode: give --mode {how.mode} to go on)." if how.mode != "scaled" else ")."),
        f"# Trained parameters, written with every digit float64 holds: {', '.join(symbols)}.",
        *([f"# Too many numbers to write here, in .npy files beside this one: {', '.join(beside)}."]
          if beside else []),
        "# Matrices read from files or made from seeds are written out (all but the largest); the notes",
        "# are left out (they speak of the numbers before training), as are comments inside replaced values.",
        *settings, "", ""])


def check_trained(made: TrainedFile, layer: Scenario, output: str | Path) -> None:
    """Read the file back as if at `output` (its .npy files written beside it by now): each
    trained parameter must be the trained layer's, to the bit."""
    from attnwalk.scenario.load import scenario_from_text

    back = scenario_from_text(made.text, "<trained file>", path=str(output))
    for name in trained(layer.graph):
        if not np.array_equal(np.asarray(back.param(name)), np.asarray(layer.param(name))):
            raise ScenarioError(f"the trained {name} did not read back as written; the file was not written")
