"""Shell completion (typer's --install-completion / --show-completion: bash, zsh and fish): the
shell runs attnwalk with _ATTNWALK_COMPLETE set, and these callbacks name the candidates.

They import what they read only when called, so `attnwalk --help` still imports neither numpy nor
yaml. Nothing matching leaves the shell to complete file names: a scenario may be a .yaml path.
"""

import typer


def lang(incomplete: str) -> list[str]:
    return [code for code in ("en", "zh") if code.startswith(incomplete)]


def lesson(incomplete: str) -> list[str]:
    from attnwalk.scenario.builtins import builtin_names

    return [name for name in builtin_names() if name.startswith(incomplete)]


def saved(incomplete: str) -> list[str]:
    """The scenarios the progress file holds (built-in names, files' paths): what reset can forget."""
    from attnwalk.tutor.progress import Progress

    names = Progress(warn=lambda message: None).load()  # a damaged file is `progress`'s to report
    return [name for name in sorted(names) if name.startswith(incomplete)]


def stage(ctx: typer.Context, incomplete: str) -> list[str]:
    """Stage keys (QK^T, S+M, ...), only those the scenario already typed has when it can be read."""
    from attnwalk.features import file_stages

    stages = tuple(s for s in file_stages() if s.shown)
    try:
        from attnwalk.scenario.load import load_scenario

        scenario = load_scenario(ctx.params["scenario"])
        stages = tuple(s for s in scenario.graph if s.shown)
    except Exception:  # no scenario typed yet, or one that cannot be read: offer every stage
        pass
    return [s.key for s in stages if s.key.startswith(incomplete)]
