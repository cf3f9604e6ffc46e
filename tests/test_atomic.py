"""attnwalk.atomic: the one way attnwalk writes a file, whole or not at all, and its four users."""

from __future__ import annotations

import json
import marshal
import os
from pathlib import Path

import pytest

from attnwalk import atomic
from attnwalk.atomic import PRIVATE, write_whole
from attnwalk.text import _write_cache
from attnwalk.tutor.progress import Progress


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_writes_text_as_utf8_and_bytes_as_given_leaving_no_temporary_file(tmp_path: Path) -> None:
    write_whole(tmp_path / "a.txt", "女生撩刘海\n")
    write_whole(tmp_path / "b.bin", b"\x00\xff")
    assert (tmp_path / "a.txt").read_bytes() == "女生撩刘海\n".encode("utf-8")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\xff"
    assert names(tmp_path) == ["a.txt", "b.bin"]


def test_replaces_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "walk.txt"
    path.write_text("old\n", encoding="utf-8")
    write_whole(path, "new\n")
    assert path.read_text(encoding="utf-8") == "new\n" and names(tmp_path) == ["walk.txt"]


def test_a_failure_before_the_rename_keeps_the_old_file_and_removes_the_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "progress.json"
    path.write_text("old\n", encoding="utf-8")

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_whole(path, "new\n")
    assert path.read_text(encoding="utf-8") == "old\n" and names(tmp_path) == ["progress.json"]


def test_without_replace_an_existing_file_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("mine\n", encoding="utf-8")
    with pytest.raises(FileExistsError):
        write_whole(path, "theirs\n", replace=False)
    assert path.read_text(encoding="utf-8") == "mine\n" and names(tmp_path) == ["mine.yaml"]
    write_whole(tmp_path / "new.yaml", "x: 1\n", replace=False, sync=True)
    assert (tmp_path / "new.yaml").read_text(encoding="utf-8") == "x: 1\n"


def test_permissions_follow_the_umask_or_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_whole(tmp_path / "public", "x")
        write_whole(tmp_path / "private", "x", mode=PRIVATE)
    finally:
        os.umask(old)
    assert (tmp_path / "public").stat().st_mode & 0o777 == 0o644  # as open() would give
    assert (tmp_path / "private").stat().st_mode & 0o777 == 0o600


def test_the_progress_file_is_written_whole_and_private(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state" / "progress.json"
    store = Progress(path, warn=lambda message: None)
    assert store.update("girl_bangs", lambda record: record.update(furthest=3))
    assert json.loads(path.read_text(encoding="utf-8"))["scenarios"] == {"girl_bangs": {"furthest": 3}}
    assert path.stat().st_mode & 0o777 == 0o600
    assert names(path.parent) == ["progress.json", "progress.json.lock"]
    warned: list[str] = []
    monkeypatch.setattr(atomic.os, "replace", lambda src, dst: (_ for _ in ()).throw(OSError(28, "full")))
    assert not Progress(path, warn=warned.append).change(lambda scenarios: scenarios.clear())
    assert "cannot save progress" in warned[0] and names(path.parent) == ["progress.json", "progress.json.lock"]
    assert json.loads(path.read_text(encoding="utf-8"))["scenarios"] == {"girl_bangs": {"furthest": 3}}


def test_the_text_cache_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    cache = tmp_path / "__pycache__" / "en.toml.test.marshal"
    _write_cache(cache, marshal.dumps(((1, 2), {"ui": {}})))
    assert marshal.loads(cache.read_bytes()) == ((1, 2), {"ui": {}})
    assert names(cache.parent) == [cache.name]
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    _write_cache(blocked / "__pycache__" / "x.marshal", b"data")  # cannot be written: quietly not
