"""--tiles B: a scenario with the tiled (online) softmax stage added, or its block size changed.

The scenario key `tiles: B` does the same from a file; the option, when given, wins. Any command
that loads a scenario (run, step, export, and model walks) passes its --tiles through here.
"""

from __future__ import annotations

import dataclasses

from attnwalk.errors import UsageError
from attnwalk.scenario.model import Scenario


def with_tiles(scn: Scenario, tiles: int | None) -> Scenario:
    """`scn` with B = `tiles` keys a block (None: as the scenario says)."""
    if tiles is None:
        return scn
    if tiles < 1:  # typer checks min=1; a caller that is not the CLI gets the same message
        raise UsageError(f"--tiles {tiles}: give a block size of at least 1 key")
    return dataclasses.replace(scn, tiles=int(tiles))
