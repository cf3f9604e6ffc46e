"""The errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""

from __future__ import annotations


class AttnwalkError(Exception):
    """A mistake the user can fix; its message is shown as it is, without a traceback."""

    exit_code = 2


class ScenarioError(AttnwalkError):
    """A scenario file that cannot be used: names the file, the field, the line and what was expected."""

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None,
                 line: int | None = None) -> None:
        self.file, self.field, self.line, self.detail = file, field, line, message
        super().__init__(self.format())

    def format(self) -> str:
        where = self.file or "<scenario>"
        if self.line is not None:
            where += f":{self.line}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.detail}"


class ComputeError(AttnwalkError):
    """Numbers that cannot be carried through a stage (overflow to ±inf); `stage` names it."""

    def __init__(self, message: str, stage: str | None = None) -> None:
        super().__init__(message)
        self.stage = stage


class UsageError(AttnwalkError):
    """A command-line request that cannot be met (unknown stage, bad row, file exists)."""


class OutputError(AttnwalkError):
    """An output file (-o, --save) that could not be written: a full disk, a device that refuses,
    a FIFO no one reads. Exit 1, as for output to stdout that cannot be written."""

    exit_code = 1
