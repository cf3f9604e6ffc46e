"""The body of `attnwalk init PATH [--from NAME]`: a commented scenario file to edit, never
written over an existing one."""

from __future__ import annotations

from pathlib import Path

from attnwalk.errors import AttnwalkError


def init_command(*, path: Path, from_: str | None) -> int:
    from attnwalk.scenario.scaffold import scenario_text, write_new_file

    if from_ is not None:
        from attnwalk.scenario.builtins import builtin_names, builtin_path

        if builtin_path(from_) is None:
            raise AttnwalkError(f"--from: no built-in scenario '{from_}'; built-ins: {', '.join(builtin_names())}")
    from attnwalk.layer.safe import escaped

    write_new_file(path, scenario_text(from_))
    print(escaped(f"wrote {path}; edit it, then: attnwalk step --scenario {path}"))
    return 0
