"""Driving the Textual apps in tests: App.run_test and its pilot, and the screen read back as text
(what a learner sees, without colours), as Textual's own snapshot tests read it."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from attnwalk.app.walk import WalkApp
from attnwalk.layer.walk import compute
from attnwalk.render.options import ViewOptions
from attnwalk.scenario.load import load_scenario


def screen_text(app) -> str:
    """The whole screen as lines of text (the compositor's last frame, as export_screenshot reads it)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system=None, record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def typed(text: str) -> list[str]:
    """The key presses that type `text` and Enter into a prompt."""
    return [*text, "enter"]


class Driven:
    """An app after its keys: the app (its state stays readable after it exits), the screens seen
    after each key (None once the app had exited) and the return code."""

    def __init__(self, app, screens: list[str | None]) -> None:
        self.app, self.screens = app, screens

    @property
    def screen(self) -> str:
        return next(s for s in reversed(self.screens) if s is not None)

    @property
    def code(self) -> int | None:
        return self.app.return_code


def drive(name: str, keys=(), *, size=(100, 40), opts: ViewOptions = ViewOptions(), mode: str = "scaled",
          predictor=None, start: int = 0, app=None) -> Driven:
    """Start the walk of scenario `name` (a built-in or a path), press `keys` one by one, and keep
    the screen after each."""

    async def run() -> Driven:
        nonlocal app
        if app is None:
            app = WalkApp(compute(load_scenario(name), mode), opts, start=start, predictor=predictor)
        screens: list[str | None] = []
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            screens.append(screen_text(app))
            for key in keys:
                if app.is_running:
                    await pilot.press(key)
                    await pilot.pause()
                screens.append(screen_text(app) if app.is_running and app.return_code is None else None)
        return Driven(app, screens)

    return asyncio.run(run())
