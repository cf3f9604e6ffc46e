"""The interactive walk and quiz as Textual apps (walk.py, quiz.py): the matrix with a cell cursor
(grid.py, and gridfit.py: what fits in its room), the panes built from the render package's
renderables (panes.py; kept.py keeps what a pane drew), m and h (changes.py), the work done in
Textual thread workers (offloop.py), the help (help.py); the backward walk in the walk's app
(gradwalk.py) and the live training view (train.py); here, the frame rate Textual draws at, and
collect_again: the garbage collector back on once an app is mounted.

May import the layer, text and render packages, Textual and Rich (the quiz's loop and the
predictions are handed in by the commands); only the commands import it, and only for a terminal:
the piped walk never loads Textual.
"""

import gc
import os

# Textual draws at most TEXTUAL_FPS frames a second on a fixed grid of ticks: after each frame its
# update timer sleeps one to two periods before it can draw again, so a key that came in the
# sleep waited for it (up to 33 ms at the default 60). At 120, app_bench's n/b went from a median
# of 47-52 ms to 29-31 ms on this 2-CPU machine (benchmarks/README.md). Set before Textual is
# imported (textual.constants reads it once); a learner's own TEXTUAL_FPS wins.
os.environ.setdefault("TEXTUAL_FPS", "120")


def collect_again() -> None:
    """The console script starts with the garbage collector off (cli.run: it would only rescan
    the start's imports); an app, which may run for an hour, turns it back on once mounted.
    What the start made is frozen first, so no collection scans it again. Off only there: in
    tests, or wherever the collector is already on, this does nothing."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
