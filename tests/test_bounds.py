"""Issue 27, point 3: every command bounded like export, refused from the shapes before anything is
computed (exit 2, one line on the tokens' line, under 300 MB: tests/bounded.py): compare of one
scenario and of two, as JSON and on screen; the quiz and its worksheet; decode printed whole;
export. One answer line is capped at 4,096 characters, with a message.

The scenarios are made here: the largest the limits allow (2,048 tokens, d_model 2,048, from
seeded random matrices), the benchmark layer (benchmarks/make_large.py: 512 tokens, d_model 768,
12 heads), and 512 tokens with 16 heads for decode.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from bounded import ROOT, attnwalk, benchmark_layer, refused

from attnwalk.layer import cost
from attnwalk.layer.walk import compute
from attnwalk.scenario import limits
from attnwalk.scenario.builtins import builtin_names
from attnwalk.scenario.load import load_scenario
from attnwalk.features.tiles import with_tiles


def random_scenario(path: Path, n: int, d_model: int, heads: int = 1, mask: str = "none") -> Path:
    tokens = ", ".join(f"t{i}" for i in range(n))
    text = f"tokens: [{tokens}]\nembeddings: {{random: {{seed: 1, rows: {n}, cols: {d_model}}}}}\nheads: {heads}\n"
    for seed, name in enumerate(("W_Q", "W_K", "W_V"), 2):
        text += f"{name}: {{random: {{seed: {seed}, rows: {d_model}, cols: {d_model}, scale: {d_model ** -0.5}}}}}\n"
    path.write_text(text + f"mask: {mask}\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def largest(tmp_path_factory) -> Path:
    """Inside every documented limit: 2,048 × 2,048 = 4,194,304 scores, and no matrix larger."""
    return random_scenario(tmp_path_factory.mktemp("largest") / "big.yaml", 2048, 2048)


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    return benchmark_layer(tmp_path_factory.mktemp("large"))


# -- compare ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [[], ["--format", "json"]])
def test_comparing_two_of_the_largest_scenarios_is_refused_before_either_walk(largest: Path, fmt) -> None:
    # it grew to 7.6 GB and ended in a MemoryError traceback
    line = refused("compare", "-s", str(largest), "-s", str(largest), *fmt, where=f"{largest}:1: tokens: ")
    assert "comparing two scenarios computes both walks" in line and f"{limits.MAX_WORK:,}" in line


@pytest.mark.parametrize("fmt", [[], ["--format", "json"]])
def test_comparing_the_modes_of_the_largest_scenario_is_refused(largest: Path, fmt) -> None:
    line = refused("compare", str(largest), *fmt, where=f"{largest}:1: tokens: ")
    assert "comparing 3 modes computes the walk once a mode" in line


def test_the_json_of_two_benchmark_layers_is_refused_as_export_refuses_one(large: Path) -> None:
    # it wrote 256 MB
    line = refused("compare", str(large), str(large), "--format", "json", where=f"{large}:4: tokens: ")
    assert "the JSON of both walks side by side holds" in line and f"{limits.MAX_EXPORT:,}" in line


NEVER_COMPUTED = """
import sys
def never(*args, **kwargs):
    raise AssertionError("computed before the bound was checked")
import attnwalk.layer.walk, attnwalk.layer.compare, attnwalk.layer.pair, attnwalk.layer.kvcache
for module in (attnwalk.layer.walk, attnwalk.layer.compare, attnwalk.layer.pair):
    module.compute = never
attnwalk.layer.kvcache.decode = never
sys.argv = ["attnwalk", *sys.argv[1:]]
from attnwalk.cli import _run
_run()
"""


def test_a_bound_is_checked_before_anything_is_computed(largest: Path) -> None:
    # in a process of its own: loaded here, the largest scenario would swell this one, and every
    # child forked from it would start with its memory counted (tests/bounded.py)
    import subprocess

    decode = random_scenario(largest.parent / "causal.yaml", 300, 8, heads=1, mask="causal")
    for args in (["compare", str(largest), str(largest)], ["compare", str(largest)],
                 ["quiz", "-s", str(largest), "--format", "json"], ["export", str(largest), "-f", "csv"],
                 ["decode", "-s", str(decode), "--no-pause"]):
        out = subprocess.run([sys.executable, "-c", NEVER_COMPUTED, *args], capture_output=True, text=True,
                             timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert out.returncode == 2 and "tokens: " in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)


# -- the quiz ------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["--format", "json"], ["--format", "markdown"], []])
def test_the_quiz_of_the_largest_scenario_is_refused(largest: Path, args) -> None:
    # the JSON worksheet took 1.1 GB and 13 s
    line = refused("quiz", "-s", str(largest), *args, where=f"{largest}:1: tokens: ")
    assert "the quiz computes the walk, and the layer again in another mode" in line


def test_the_quiz_computes_the_other_mode_once_not_once_a_question(monkeypatch) -> None:
    from attnwalk.layer import walk as walks
    from attnwalk.tutor import mistakes
    from attnwalk.tutor.questions import questions

    asked: list[str] = []
    real = walks.with_mode
    monkeypatch.setattr(mistakes, "with_mode", lambda walk, mode: asked.append(str(mode)) or real(walk, mode))
    assert len(questions(compute(load_scenario("shapes")), "en")) > 5
    assert len(asked) <= 1  # the bound counts the quiz as two walks: it must be no more


def test_the_benchmark_layer_stays_within_every_commands_work(large: Path) -> None:
    scn = load_scenario(large)
    limits.check_work(scn, 3, "compare")  # its modes side by side: allowed
    limits.check_work(scn, 2, "quiz")
    with pytest.raises(Exception, match="more than the"):
        limits.check_work(load_scenario(large), 4, "four walks")  # 4 × 18.5 M > 67 M


# -- decode ----------------------------------------------------------------------------------------


def test_decode_of_512_tokens_and_16_heads_printed_is_refused(tmp_path: Path) -> None:
    # it printed 49.5 MB over 5 min 29 s
    path = random_scenario(tmp_path / "d.yaml", 512, 1024, heads=16, mask="causal")
    line = refused("decode", "-s", str(path), "--no-pause", where=f"{path}:1: tokens: ")
    assert "512 tokens × 16 heads = 8,192 caches" in line and "--head N" in line
    line = refused("decode", "-s", str(path), "--no-pause", "--head", "3", where=f"{path}:1: tokens: ")
    assert "512 tokens × 1 head = 512 caches" in line
    saved = tmp_path / "steps.txt"
    refused("decode", "-s", str(path), "--save", str(saved), where=f"{path}:1: tokens: ")
    assert not saved.exists()


def test_a_decode_within_the_bound_prints_every_step(tmp_path: Path) -> None:
    path = random_scenario(tmp_path / "d.yaml", 16, 8, heads=2, mask="causal")  # 32 caches
    out, _ = attnwalk("decode", "-s", str(path), "--no-pause", timeout=60)
    assert out.returncode == 0 and out.stderr == ""
    assert "Step 16 / 17   token 16, t15, arrives" in out.stdout and "Step 17 / 17" in out.stdout


# -- export ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tiles", [None, 2, 3])
@pytest.mark.parametrize("name", builtin_names())
def test_the_count_from_the_shapes_is_the_count_the_json_writes(name: str, tiles) -> None:
    from attnwalk.export.data import walk_data

    def numbers(value) -> int:  # every number, boolean and null in the matrices and the tiled state
        if isinstance(value, dict):
            return sum(numbers(v) for v in value.values())
        if isinstance(value, list):
            return sum(numbers(v) for v in value)
        return 0 if isinstance(value, str) else 1  # a source's tokens are not numbers

    scn = with_tiles(load_scenario(name), tiles)
    data = walk_data(compute(scn))
    written = numbers({key: data[key] for key in ("stages", "weights", "mask", "source", "tiled") if key in data})
    assert cost.export_numbers(scn) == written


# -- one answer line -------------------------------------------------------------------------------


def _fed(size: int, rest: bytes) -> int:
    """A pipe that `size` bytes of one line, then `rest`, are written into from a thread."""
    read, write = os.pipe()

    def feed() -> None:
        chunk = b"1" * (1 << 20)
        try:
            for _ in range(size >> 20):
                os.write(write, chunk)
            os.write(write, b"\n" + rest)
        except BrokenPipeError:
            pass
        finally:
            os.close(write)

    threading.Thread(target=feed, daemon=True).start()
    return read


@pytest.mark.parametrize("megabytes", [30, 300])
def test_an_answer_line_of_megabytes_is_capped_and_said_so(megabytes: int) -> None:
    # 300 MB ended in a MemoryError traceback; 30 MB was echoed back whole
    stdin = _fed(megabytes << 20, b"3x3\n")
    try:
        out, _ = attnwalk("quiz", "girl_bangs", "-n", "2", stdin=stdin, timeout=60)
    finally:
        os.close(stdin)
    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "(a line of more than 4,096 characters: not read as an answer)" in out.stdout
    assert len(out.stdout) < 20_000  # the prompt shows its first 40 characters, not the line
    assert "Score: 1 / 2" in out.stdout  # the next line answers the next question


def test_a_line_of_4096_characters_is_still_read(tmp_path: Path) -> None:
    from io import StringIO

    from rich.console import Console

    from attnwalk.commands.quiz import MAX_ANSWER, LineAnswers

    console = Console(file=StringIO(), width=100)
    answers = LineAnswers(StringIO(" " * (MAX_ANSWER - 4) + "4.51\n" + "x" * (MAX_ANSWER + 1) + "\n7\n"), console)
    assert answers.ask("? ").strip() == "4.51"
    assert answers.ask("? ") == ""  # too long: not an answer
    assert answers.ask("? ") == "7"  # and the next line is the next answer


def test_the_export_refusal_offers_fewer_tokens_only_where_that_can_help(monkeypatch) -> None:
    from attnwalk.scenario import limits

    scn = load_scenario("river_bank")
    weights = cost.weight_numbers(scn, written=True)
    monkeypatch.setattr(limits, "MAX_EXPORT", weights + 1)  # the weights fit, the whole does not
    assert "fewer tokens" in limits.too_big_to_export(scn, "json")
    monkeypatch.setattr(limits, "MAX_EXPORT", weights - 1)  # the weights alone do not fit
    problem = limits.too_big_to_export(scn, "json")
    assert "fewer tokens" not in problem and "markdown or latex" in problem
