"""--head is checked once (layer/axes.pick_head), with one message, by every command that takes it:
run, step, explain, compare (one scenario and two), decode (screens and JSON) and model (walk,
export, compare, decode). Heads count from 1; `all` only where every head can be shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnwalk.cli import app

TINY_BERT = str(Path(__file__).resolve().parent / "fixtures" / "models" / "tiny-bert")
runner = CliRunner()

# every command with --head, on a scenario of 8 heads (shapes) or 4 (tiny-bert), and whether it
# takes `all`
COMMANDS = {
    "run": (["run", "shapes", "--no-pause"], "shapes has 8 heads", True),
    "step": (["step", "shapes", "--no-pause"], "shapes has 8 heads", True),
    "explain": (["explain", "shapes", "A", "1", "1"], "shapes has 8 heads", False),
    "compare": (["compare", "shapes"], "shapes has 8 heads", False),
    "compare-two": (["compare", "shapes", "shapes"], "shapes has 8 heads", False),
    "compare-json": (["compare", "shapes", "-f", "json"], "shapes has 8 heads", False),
    "decode": (["decode", "kv_cache", "--no-pause"], "kv_cache has 2 heads", True),
    "decode-json": (["decode", "kv_cache", "-f", "json"], "kv_cache has 2 heads", True),
    "model": (["model", "the river bank", "--model", TINY_BERT, "--no-pause"], "tiny-bert L1 has 4 heads", True),
    "model-json": (["model", "the river bank", "--model", TINY_BERT, "-f", "json"], "tiny-bert L1 has 4 heads", False),
    "model-compare": (["model", "the river bank", "--model", TINY_BERT, "--compare"], "tiny-bert L1 has 4 heads", False),
}


def refusal(args: list[str]) -> str:
    result = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.stderr
    return lines[0]


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("value", ["0", "9", "two", "-1", "1.5"])
def test_a_head_out_of_range_or_not_a_number_gets_the_one_message(name: str, value: str) -> None:
    args, has, every = COMMANDS[name]
    heads = int(has.split(" has ")[1].split()[0])
    line = refusal([*args, "--head", value])
    expected = f"attnwalk: --head {value}: {has}, numbered from 1: give 1 to {heads}" + (", or all" if every else "")
    assert line == expected


@pytest.mark.parametrize("name", [name for name, (_, _, every) in COMMANDS.items() if not every])
def test_all_is_refused_where_one_head_is_shown(name: str) -> None:
    args, has, _ = COMMANDS[name]
    assert refusal([*args, "--head", "all"]).startswith(f"attnwalk: --head all: {has}")


def test_one_head_says_so() -> None:
    assert refusal(["explain", "girl_bangs", "A", "1", "1", "--head", "2"]) == \
        "attnwalk: --head 2: girl_bangs has 1 head: give 1"


@pytest.mark.parametrize("args", [["explain", "shapes", "A", "1", "1", "--head", "8"],
                                  ["compare", "shapes", "--head", "8", "-f", "json"],
                                  ["decode", "kv_cache", "--head", "2", "-f", "json"]])
def test_the_last_head_is_accepted(args: list[str]) -> None:
    assert runner.invoke(app, args).exit_code == 0
