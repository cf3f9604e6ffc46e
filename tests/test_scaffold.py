"""`attnwalk init`: the commented template, copies of built-ins, and writing without overwriting."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from attnwalk import atomic
from attnwalk.scenario.builtins import builtin_names, builtin_path
from attnwalk.errors import UsageError
from attnwalk.scenario.scaffold import TEMPLATE, scenario_text, write_new_file

KEYS = ("name", "title", "description", "tokens", "ids", "embeddings", "positional",
        "W_Q", "W_K", "W_V", "mask")


def test_template_parses_and_has_every_key() -> None:
    doc = yaml.safe_load(TEMPLATE)
    assert isinstance(doc, dict)
    assert set(KEYS) <= set(doc)
    assert set(doc["title"]) == {"en", "zh"} and set(doc["description"]) == {"en", "zh"}


def test_template_shapes_agree() -> None:
    doc = yaml.safe_load(TEMPLATE)
    n, d_model = len(doc["tokens"]), len(doc["embeddings"][0])
    assert len(doc["embeddings"]) == len(doc["ids"]) == n
    assert all(len(row) == d_model for row in doc["embeddings"])
    for key in ("W_Q", "W_K", "W_V"):
        assert len(doc[key]) == d_model, key
    assert len(doc["W_Q"][0]) == len(doc["W_K"][0])


@pytest.mark.parametrize("key", KEYS)
def test_template_explains_every_key_in_a_comment(key: str) -> None:
    assert re.search(rf"^# .*\b{re.escape(key)}\b", TEMPLATE, re.MULTILINE), key


def test_template_comments_show_the_three_forms() -> None:
    comments = "\n".join(line for line in TEMPLATE.splitlines() if line.lstrip().startswith("#"))
    for word in ("none", "sinusoidal", "causal", "true/false", "n × d_model", "d_model rows × d_k",
                 "d_model rows × d_v"):
        assert word in comments, word
    # the commented examples of the matrix forms are valid YAML too
    for key in ("positional", "mask"):
        block = re.search(rf"^#\s+({key}:\n(?:#\s+- \[.*\]\n)+)", TEMPLATE, re.MULTILINE)
        assert block, key
        example = yaml.safe_load(re.sub(r"^#\s{10,}", "", block.group(1), flags=re.MULTILINE))
        assert len(example[key]) == 3


def test_template_says_as_many_forms_as_it_lists() -> None:
    """"One of three forms" once headed four (issue 28): each count is the forms listed under it,
    a form's line indented three spaces, its continuation lines more."""
    counts = {"two": 2, "three": 3, "four": 4, "five": 5}
    blocks = re.findall(r"^# (\w+):.*One of (\w+) forms:\n((?:#   .*\n)+)", TEMPLATE, re.MULTILINE)
    assert {key for key, _, _ in blocks} == {"positional", "mask"}
    for key, said, listed in blocks:
        forms = re.findall(r"^#   \S", listed, re.MULTILINE)
        assert counts[said] == len(forms), (key, said, len(forms))


def test_template_is_a_valid_scenario(tmp_path: Path) -> None:
    from attnwalk.scenario.load import load_scenario

    path = tmp_path / "custom.yaml"
    path.write_text(TEMPLATE, encoding="utf-8")
    scn = load_scenario(path)
    assert scn.tokens == ("猫", "追", "球")
    assert (scn.n, scn.d_model, scn.d_k, scn.d_v) == (3, 2, 2, 2)


def test_template_without_a_name_is_named_after_its_file(tmp_path: Path) -> None:
    from attnwalk.scenario.load import load_scenario

    path = tmp_path / "mine.yaml"
    path.write_text(TEMPLATE.replace("name: my_scenario\n", ""), encoding="utf-8")
    assert load_scenario(path).name == "mine"


@pytest.mark.parametrize("name", builtin_names())
def test_from_builtin_copies_the_file_under_a_header(name: str, tmp_path: Path) -> None:
    from attnwalk.scenario.load import load_scenario

    text = scenario_text(name)
    original = builtin_path(name).read_text(encoding="utf-8")
    assert text.startswith(f"# Copied from the built-in scenario {name}; edit freely.")
    assert text.endswith(original)
    assert yaml.safe_load(text) == yaml.safe_load(original)
    path = tmp_path / "copy.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_scenario(path).tokens == load_scenario(name).tokens


def test_no_name_gives_the_template() -> None:
    assert scenario_text(None) == TEMPLATE


def test_unknown_builtin_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no-such-lesson"):
        scenario_text("no-such-lesson")


# -- writing ------------------------------------------------------------------------------------------


def test_writes_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "custom.yaml"
    write_new_file(path, TEMPLATE)
    assert path.read_text(encoding="utf-8") == TEMPLATE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom.yaml"]  # no temporary file left


def test_new_file_is_readable_by_others_as_umask_allows(tmp_path: Path) -> None:
    path = tmp_path / "custom.yaml"
    old = os.umask(0o022)
    try:
        write_new_file(path, "x: 1\n")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_refuses_to_overwrite_and_leaves_the_file_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "custom.yaml"
    path.write_text("mine\n", encoding="utf-8")
    with pytest.raises(UsageError, match="already exists; choose another name or delete it first"):
        write_new_file(path, TEMPLATE)
    assert path.read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom.yaml"]


def test_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "custom.yaml"
    link.symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(UsageError, match="already exists"):
        write_new_file(link, TEMPLATE)
    assert not (tmp_path / "elsewhere.yaml").exists()


def test_a_file_that_appears_during_the_write_is_not_overwritten(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "custom.yaml"
    real_link = os.link

    def racing_link(src: str, dst: os.PathLike) -> None:
        Path(dst).write_text("theirs\n", encoding="utf-8")  # someone else wins the race
        real_link(src, dst)

    monkeypatch.setattr(atomic.os, "link", racing_link)
    with pytest.raises(UsageError, match="already exists"):
        write_new_file(path, TEMPLATE)
    assert path.read_text(encoding="utf-8") == "theirs\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom.yaml"]


def test_without_hard_links_an_exclusive_create_is_used(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: str, dst: os.PathLike) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "link", no_links)
    path = tmp_path / "custom.yaml"
    write_new_file(path, TEMPLATE)
    assert path.read_text(encoding="utf-8") == TEMPLATE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom.yaml"]
    with pytest.raises(UsageError, match="already exists"):
        write_new_file(path, "other\n")
    assert path.read_text(encoding="utf-8") == TEMPLATE


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    with pytest.raises(UsageError, match="No space left on device"):
        write_new_file(tmp_path / "custom.yaml", TEMPLATE)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        write_new_file(tmp_path / "nope" / "custom.yaml", TEMPLATE)


# -- through the CLI ---------------------------------------------------------------------------------


def test_init_command_writes_the_template(tmp_path: Path) -> None:
    from attnwalk.cli import app

    path = tmp_path / "custom.yaml"
    result = CliRunner().invoke(app, ["init", str(path)])
    assert result.exit_code == 0, result.output
    assert path.read_text(encoding="utf-8") == TEMPLATE


def test_init_command_refuses_an_existing_file(tmp_path: Path) -> None:
    from attnwalk.cli import app

    path = tmp_path / "custom.yaml"
    path.write_text("mine\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["init", str(path), "--from", "girl_bangs"])
    assert result.exit_code == 2
    assert "already exists" in result.output
    assert path.read_text(encoding="utf-8") == "mine\n"
