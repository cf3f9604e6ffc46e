"""What `attnwalk.grad` and `attnwalk.train` return: the backward walk (every gradient by its key,
`g["dW_Q"]`, shown as `attnwalk grad` prints it) and a training run (each step's loss and A,
shown as a loss curve where matplotlib is installed, as train's table where not)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from attnwalk.api.result import WalkResult

if TYPE_CHECKING:
    from attnwalk.layer.backward import Grads
    from attnwalk.layer.gradwalk import GradWalk
    from attnwalk.layer.train import Step
    from attnwalk.layer.walk import Walk


def _grad_data(walk: Walk, head: int) -> dict[str, Any]:
    from attnwalk.export.graddata import grad_data

    return grad_data(_grads(walk))


def _grads(walk: Walk) -> Grads:
    grads = cast("GradWalk", walk).grads
    assert grads is not None, "a GradWalk is made from its gradients"
    return grads


class GradResult(WalkResult):
    """The backward walk from the loss L back to the weights: `g["dA"]`, `g["dW_Q"]`, `g.loss`;
    `g.export()` is what `attnwalk grad SCENARIO --format json` prints."""

    def __init__(self, walk: GradWalk, head: int = 0, *, lang: str | None = None,
                 exporter=_grad_data) -> None:
        super().__init__(walk, head, lang=lang, exporter=exporter)

    @property
    def loss(self) -> float:
        return float(_grads(self.walk).loss)

    @property
    def forward(self) -> WalkResult:
        """The forward walk the gradients are of."""
        return WalkResult(_grads(self.walk).walk, self._head, lang=self._lang)

    def in_mode(self, mode: str) -> GradResult:
        from attnwalk.layer.gradwalk import in_mode

        return GradResult(in_mode(cast("GradWalk", self.walk), mode), self._head, lang=self._lang)

    def __repr__(self) -> str:
        return f"<attnwalk gradients of {self.name!r} ({self.mode}): L = {self.loss:.6g}, {' '.join(self.stages)}>"


class TrainRun:
    """Gradient descent on W_Q, W_K, W_V (and W_O): `t.losses`, `t.A(step)` (the watched head's
    weights after that many updates), `t.steps`; `t.export()` is what `attnwalk train SCENARIO
    --format json` prints (with compare, each mode's run under "modes")."""

    def __init__(self, runs: dict[str, list[Step]], lr: float, head: int, lang: str | None = None) -> None:
        self.runs, self.lr, self.head, self._lang = runs, lr, head, lang

    @property
    def modes(self) -> list[str]:
        return list(self.runs)

    @property
    def steps(self) -> int:
        """How many updates were made (step 0 is the layer as the scenario gives it)."""
        return len(next(iter(self.runs.values()))) - 1

    def _run(self, mode: str | None) -> list[Step]:
        from attnwalk.errors import UsageError

        if mode is None:
            return next(iter(self.runs.values()))
        if mode not in self.runs:
            raise UsageError(f"this run trained {', '.join(self.runs)}, not {mode}")
        return self.runs[mode]

    def losses(self, mode: str | None = None) -> np.ndarray:
        """The loss before any update, then after each one (the first mode's, unless named)."""
        return np.array([step.loss for step in self._run(mode)], dtype=np.float64)

    def A(self, step: int = -1, mode: str | None = None) -> np.ndarray:
        """The watched head's weights A after `step` updates (the last by default)."""
        return self._run(mode)[step].walk.matrix("A", self.head)

    def walk(self, step: int = -1, mode: str | None = None) -> WalkResult:
        """The whole layer after `step` updates, as attnwalk.walk gives it."""
        return WalkResult(self._run(mode)[step].walk, self.head, lang=self._lang)

    def export(self) -> dict[str, Any]:
        import json

        from attnwalk.export.data import to_json
        from attnwalk.export.graddata import runs_data

        return json.loads(to_json(runs_data(self.runs, self.head, self.lr)))

    def _repr_html_(self) -> str:
        from attnwalk.api.display import html_of, options
        from attnwalk.render.trainview import every_default, train_report

        opts = options(self._lang)
        table = html_of([train_report(self.runs, self.lr, self.head, every_default(self.steps), opts)], opts)
        curve = loss_plot(self)
        return table if curve is None else curve + table

    def __repr__(self) -> str:
        name = self._run(None)[0].walk.scenario.name
        ends = ", ".join(f"{m}: L {run[0].loss:.4g} → {run[-1].loss:.4g}" for m, run in self.runs.items())
        return f"<attnwalk training of {name!r}, {self.steps} steps, η = {self.lr:g}: {ends}>"


def loss_plot(run: TrainRun) -> str | None:
    """The loss curve of each mode as an inline SVG image, or None without matplotlib."""
    try:  # a Figure drawn straight into SVG: no pyplot, so the notebook's backend is left alone
        from matplotlib.figure import Figure
    except ImportError:
        return None
    import io

    figure = Figure(figsize=(6, 3))
    axes = figure.subplots()
    for mode in run.modes:
        axes.plot(range(run.steps + 1), run.losses(mode), marker=".", label=mode)
    axes.set_xlabel("step")
    axes.set_ylabel("loss L")
    axes.legend()
    figure.tight_layout()
    svg = io.StringIO()
    figure.savefig(svg, format="svg")
    drawn = svg.getvalue()
    return f'<div class="attnwalk-loss">{drawn[drawn.index("<svg"):]}</div>'
