"""Issue 16, the input side: scenarios refused by what they cost, file references that cannot
hang or flood, and messages that point where the mistake was typed.

Every refusal runs the real program in a subprocess under a 1 GB address-space limit and a
timeout; its peak resident memory (os.wait4) must stay under the issue's 300 MB, and it must end
in exit 2 with one line on stderr naming the file (and the line where there is one). The fixtures that need a FIFO, a link to /dev/zero, a sparse file or a zip bomb
are made here, in tmp_path; the static ones are in fixtures/broken/ (EXPECTED.tsv).
"""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bounded import attnwalk, benchmark_layer, refused

from attnwalk.reading import fields
from attnwalk.scenario import limits
from attnwalk.scenario.load import load_scenario, scenario_from_text

BROKEN = Path(__file__).resolve().parent / "fixtures" / "broken"
WEIGHTS = "W_Q: [[1, 0], [0, 1]]\nW_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n"


def tokens_file(path: Path, n: int, embeddings: str, extra: str = WEIGHTS) -> Path:
    path.write_text(f"name: many\ntokens: [{', '.join(f't{i}' for i in range(n))}]\n"
                    f"embeddings: {embeddings}\n{extra}", "utf-8")
    return path


# -- limits by cost ----------------------------------------------------------------------------

def test_66000_one_number_tokens_are_refused_on_the_tokens_line(tmp_path):
    # ~1 MB of YAML, under the 16 MB and 200,000-value limits, but 66,000² scores: 35 GB
    path = tokens_file(tmp_path / "t.yaml", 66_000,
                       "[" + ", ".join(f"[{i % 7}.5]" for i in range(66_000)) + "]",
                       "W_Q: [[1]]\nW_K: [[1]]\nW_V: [[1]]\n")
    assert path.stat().st_size > 900_000
    message = refused("export", str(path), where=f"{path}:2: tokens: ")
    assert "66,000 tokens" in message and f"{66_000 ** 2:,} attention scores" in message
    assert f"{limits.MAX_SCORES:,}" in message


def test_20000_tokens_from_random_are_refused(tmp_path):
    path = tokens_file(tmp_path / "r.yaml", 20_000,
                       "{random: {seed: 1, rows: 20000, cols: 4}}",
                       "".join(f"W_{k}: {{random: {{seed: 2, rows: 4, cols: 4}}}}\n" for k in "QKV"))
    message = refused("run", "--scenario", str(path), "--no-pause", where=f"{path}:2: tokens: ")
    assert f"{20_000 ** 2:,} attention scores" in message


def test_190000_tokens_are_refused_with_the_line_not_as_too_large_or_deeply_nested(tmp_path):
    path = tokens_file(tmp_path / "h.yaml", 190_000, "{random: {seed: 1, rows: 190000, cols: 1}}",
                       "W_Q: [[1]]\nW_K: [[1]]\nW_V: [[1]]\n")
    message = refused("export", str(path), where=f"{path}:2: tokens: ")
    assert "190,000 tokens" in message and "deeply nested" not in message


def test_heads_count_in_the_cost():
    # 600 × 600 = 360,000 scores a head: 11 heads fit (3,960,000), 12 do not (4,320,000)
    def text(heads: int) -> str:
        return (f"tokens: [{', '.join(f't{i}' for i in range(600))}]\n"
                f"embeddings: {{random: {{seed: 1, rows: 600, cols: {heads}}}}}\nheads: {heads}\n"
                + "".join(f"W_{k}: {{random: {{seed: 2, rows: {heads}, cols: {heads}}}}}\n"
                          for k in "QKV"))
    assert scenario_from_text(text(11), "ok.yaml").heads == 11
    with pytest.raises(Exception) as info:
        scenario_from_text(text(12), "big.yaml")
    assert str(info.value).startswith("big.yaml:1: tokens: 600 tokens attending to each other "
                                      "with 12 heads make 4,320,000 attention scores")


def test_a_computed_matrix_too_big_is_refused_on_its_weights_line():
    # 3,000 queries against 2 source keys: few scores, but Q = 3,000 × 2,000 = 6,000,000 numbers
    text = (f"tokens: [{', '.join(f't{i}' for i in range(3000))}]\n"
            "embeddings: {random: {seed: 1, rows: 3000, cols: 2}}\n"
            "W_Q: {random: {seed: 2, rows: 2, cols: 2000}}\n"
            "W_K: {random: {seed: 3, rows: 2, cols: 2000}}\nW_V: [[1, 0], [0, 1]]\n"
            "source:\n  tokens: [a, b]\n  embeddings: [[1, 0], [0, 1]]\n")
    with pytest.raises(Exception) as info:
        scenario_from_text(text, "wide.yaml")
    assert str(info.value) == ("wide.yaml:3: W_Q: Q would be 3,000 × 2,000 = 6,000,000 numbers "
                               "(n × heads·d_k), more than the 4,194,304 one matrix may hold; use "
                               "fewer tokens or narrower weights")


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    return benchmark_layer(tmp_path_factory.mktemp("large"))


def test_the_benchmark_layer_stays_allowed_and_quick_to_load(large):
    start = time.process_time()  # CPU time: its own work, whatever else the machine runs
    scn = load_scenario(large)
    assert time.process_time() - start < 1.0
    assert (scn.n, scn.d_model, scn.heads) == (512, 768, 12)
    assert scn.n * scn.m * scn.heads == 3_145_728 <= limits.MAX_SCORES
    out, _ = attnwalk("run", "--scenario", str(large), "--no-pause")
    assert out.returncode == 0 and out.stderr == ""


def test_an_export_too_big_to_write_is_refused_before_building_it(large):
    # every number of the benchmark layer (it took 20 s, 1.4 GB), counted from its shapes: n 512,
    # d_model 768, 12 heads of 64, W_O, a causal mask (S+M is not exported: the mask is)
    n, d, h, k = 512, 768, 12, 64
    written = (3 * n * d  # E, P, X
               + 3 * n * d + 3 * h * n * k  # Q, K, V whole, and each head's block of them
               + 3 * h * n * n + h * n * k  # QK^T, S, A and Z of every head
               + 2 * n * d  # concat, O
               + 4 * d * d + n * n)  # W_Q, W_K, W_V, W_O, the mask
    for fmt in ("json", "csv"):
        message = refused("export", str(large), "--format", fmt, where=f"{large}:4: tokens: ")
        assert f"a {fmt.upper()} export of this layer holds {written:,} numbers" in message
    out, _ = attnwalk("export", str(large), "--format", "markdown")  # corners only: allowed
    assert out.returncode == 0 and len(out.stdout) < 2_000_000


# -- file references ---------------------------------------------------------------------------

def scenario_with(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: {spec}\n"
                    "W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n", "utf-8")
    return path


@pytest.mark.parametrize("suffix", [".npy", ".csv", ".npz"])
def test_a_fifo_as_a_matrix_file_is_refused_at_once(tmp_path, suffix):
    os.mkfifo(tmp_path / f"w{suffix}")
    path = scenario_with(tmp_path, f"{{file: w{suffix}}}")
    message = refused("export", str(path), where=f"{path}:3: W_Q.file: ")
    assert "named pipe (FIFO)" in message and "regular files" in message


@pytest.mark.parametrize("device, name", [("/dev/zero", "zero.csv"), ("/dev/urandom", "noise.npy"),
                                          ("/dev/zero", "zero.npz")])
def test_a_link_to_an_endless_device_is_refused(tmp_path, device, name):
    os.symlink(device, tmp_path / name)
    path = scenario_with(tmp_path, f"{{file: {name}}}")
    assert "a device" in refused("export", str(path), where=f"{path}:3: W_Q.file: ")


def test_a_fifo_or_a_device_as_the_scenario_path_is_refused(tmp_path):
    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    message = refused("export", str(fifo), where=f"{fifo}: is a named pipe (FIFO)")
    assert "cat my.yaml | attnwalk run -" in message
    os.symlink("/dev/zero", tmp_path / "zero.yaml")
    refused("run", "--scenario", str(tmp_path / "zero.yaml"), where=f"{tmp_path / 'zero.yaml'}: is a device")


def test_a_scenario_piped_into_stdin_is_read_with_dash():
    from attnwalk.scenario.builtins import builtin_path

    with open(builtin_path("girl_bangs"), "rb") as handle:
        out, _ = attnwalk("export", "-", stdin=handle)
    assert out.returncode == 0, out.stderr
    assert '"tokens": ["女生", "撩", "刘海"]' in out.stdout
    with open(BROKEN / "W_Q_wrong_rows.yaml", "rb") as handle:  # messages name it <stdin>
        out, _ = attnwalk("export", "-", stdin=handle)
    assert out.returncode == 2 and out.stderr.startswith("attnwalk: <stdin>:")


def _npy_header(shape: tuple[int, ...], dtype: str = "<f8") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False,
                                                  "shape": shape})
    return buffer.getvalue()


def test_a_large_npy_is_refused_from_its_header_without_reading_the_data(tmp_path):
    # 288 MB on paper, nothing on disk: the header says 6,000 × 6,000 float64
    header = _npy_header((6000, 6000))
    with open(tmp_path / "big.npy", "wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + 6000 * 6000 * 8)
    path = scenario_with(tmp_path, "{file: big.npy}")
    message = refused("export", str(path), where=f"{path}:3: W_Q.file: ")
    assert "'big.npy' holds 6,000 × 6,000 = 36,000,000 numbers" in message


def test_an_npy_of_the_wrong_rank_or_dtype_is_refused_from_its_header(tmp_path):
    for name, header in (("cube.npy", _npy_header((200, 200, 200))),
                         ("text.npy", _npy_header((2, 2), "<U10"))):
        with open(tmp_path / name, "wb") as handle:
            handle.write(header)
            handle.truncate(len(header) + 64_000_000)  # sparse: never read
        path = scenario_with(tmp_path, f"{{file: {name}}}")
        message = refused("export", str(path), where=f"{path}:3: W_Q.file: ")
        assert ("3-D, shape (200, 200, 200)" if name == "cube.npy" else "holds text") in message


def test_an_npz_bomb_is_refused_by_its_declared_size(tmp_path):
    # 48 MB of zeros in one member, a few dozen KB on disk: refused before it expands
    archive = tmp_path / "bomb.npz"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("W_Q.npy", "w", force_zip64=True) as member:
            member.write(_npy_header((6000, 1000)))
            zeros = bytes(1 << 20)
            for _ in range(48):
                member.write(zeros)
    assert archive.stat().st_size < 1_000_000
    path = scenario_with(tmp_path, "{file: bomb.npz}")
    message = refused("export", str(path), where=f"{path}:3: W_Q.file: ")
    assert "would expand to 48 MB" in message


def test_a_small_npz_member_is_still_read(tmp_path):
    np.savez_compressed(tmp_path / "w.npz", W_Q=np.array([[2.0, 0.0], [0.0, 3.0]]),
                        other=np.zeros((3, 3)))
    scn = load_scenario(scenario_with(tmp_path, "{file: w.npz, key: W_Q}"))
    assert scn.W_Q.tolist() == [[2.0, 0.0], [0.0, 3.0]]


def test_a_fortran_order_npy_reads_as_saved(tmp_path):
    W = np.asfortranarray(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    np.save(tmp_path / "w.npy", W)  # its header says fortran_order: True
    (tmp_path / "s.yaml").write_text("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n"
                                     "W_Q: {file: w.npy}\nW_K: {file: w.npy}\n"
                                     "W_V: [[1, 0], [0, 1]]\n", "utf-8")
    scn = load_scenario(tmp_path / "s.yaml")
    assert scn.W_Q.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_a_csv_larger_than_its_bound_is_refused_unread(tmp_path):
    with open(tmp_path / "w.csv", "wb") as handle:
        handle.write(b"1,0\n0,1\n")
        handle.truncate(200 * 1024 * 1024)  # sparse
    path = scenario_with(tmp_path, "{file: w.csv}")
    message = refused("export", str(path), where=f"{path}:3: W_Q.file: ")
    assert "'w.csv' is 200 MB, more than the 16 MB allowed" in message


def test_a_pickle_named_npy_says_it_is_a_pickle(tmp_path):
    import pickle

    (tmp_path / "w.npy").write_bytes(pickle.dumps([[1.0, 0.0], [0.0, 1.0]]))
    path = scenario_with(tmp_path, "{file: w.npy}")
    assert "is a Python pickle, not a .npy file" in refused("export", str(path),
                                                            where=f"{path}:3: W_Q.file: ")


# -- messages on the spot ----------------------------------------------------------------------

def test_fullwidth_commas_in_tokens_are_blamed_on_their_line_not_on_the_embeddings():
    message = refused("export", str(BROKEN / "fullwidth_comma_tokens.yaml"),
                      where=f"{BROKEN / 'fullwidth_comma_tokens.yaml'}:2: tokens item 1: ")
    assert "write [女生, 撩, 刘海]" in message and "embeddings" not in message


def test_a_quoted_token_with_a_fullwidth_comma_is_one_token():
    text = "tokens: ['女生，撩', 刘海]\nembeddings: [[1, 0], [0, 1]]\n" + WEIGHTS
    assert scenario_from_text(text, "q.yaml").tokens == ("女生，撩", "刘海")
    text = "tokens: [我, ，, 你]\nembeddings: [[1, 0], [0, 1], [1, 1]]\n" + WEIGHTS
    assert scenario_from_text(text, "p.yaml").tokens[1] == "，"  # punctuation as a token


@pytest.mark.parametrize("line, text", [
    (3, "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q： [[1, 0], [0, 1]]\n"
        "W_K: [[1, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n"),
    (6, "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n" + WEIGHTS + "title： hello\n"),
])
def test_a_fullwidth_colon_is_reported_on_its_own_line(line, text):
    with pytest.raises(Exception) as info:
        scenario_from_text(text, "c.yaml")
    assert str(info.value).startswith(f"c.yaml:{line}: YAML syntax error at column ")
    assert "'：' is a full-width colon" in str(info.value)


def test_a_fullwidth_colon_inside_text_is_fine():
    text = "title: 注意力：一个例子\ntokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n" + WEIGHTS
    assert scenario_from_text(text, "t.yaml").title == "注意力：一个例子"


def test_a_number_typed_with_a_fullwidth_comma_says_which_character():
    text = "tokens: [a, b]\nembeddings: [[1，0], [0, 1]]\n" + WEIGHTS
    with pytest.raises(Exception) as info:
        scenario_from_text(text, "n.yaml")
    assert str(info.value).startswith("n.yaml:2: embeddings row 1, value 1: ")
    assert "'，' is a full-width comma" in str(info.value)


def test_language_maps_accept_en_and_zh_only():
    assert fields.LANGUAGES == ("en", "zh")
    from attnwalk.text import LANGS

    assert set(fields.LANGUAGES) == set(LANGS)  # the scenario's list is the text package's
    base = "tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\n" + WEIGHTS
    scn = scenario_from_text(base + "title: {en: Bank, zh: 银行}\n", "ok.yaml")
    assert scn.title == {"en": "Bank", "zh": "银行"}
    for key, bad in (("description", "{de: Bank}"), ("notes", "{A: {EN: look}}")):
        with pytest.raises(Exception) as info:
            scenario_from_text(base + f"{key}: {bad}\n", "l.yaml")
        assert str(info.value).startswith("l.yaml:6: ") and "unknown language" in str(info.value)


@pytest.mark.parametrize("args, words", [
    (["run", "girl_bangs", "--no-pause", "--save", ""], "--save needs a file name"),
    (["run", "girl_bangs", "--no-pause", "--save", "DIR.svg/"], "that names a folder"),
    (["run", "girl_bangs", "--no-pause", "--save", "DIR.svg"], "that is a folder"),
    (["export", "girl_bangs", "-o", ""], "--output needs a file name"),
    (["export", "girl_bangs", "-o", "DIR.svg/"], "that names a folder"),
    (["export", "girl_bangs", "-o", "."], "that names a folder"),
])
def test_save_and_output_refuse_folders_and_empty_paths_in_plain_words(tmp_path, args, words):
    (tmp_path / "dir.svg").mkdir()
    args = [a.replace("DIR", "dir") for a in args]
    message = refused(*args, where="", cwd=tmp_path)
    assert words in message and "busy" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.svg"]  # nothing written
    assert list((tmp_path / "dir.svg").iterdir()) == []


def test_overflow_names_the_input_to_make_smaller():
    for name, stage, line, field in (("overflow_Q.yaml", "Q", 4, "embeddings"),
                                     ("overflow_X.yaml", "X", 4, "embeddings")):
        scn = load_scenario(BROKEN / name)
        assert scn.overflow_where(stage) == f"{BROKEN / name}:{line}: {field}"
    text = ("tokens: [a, b]\nembeddings: [[1, 0], [0, 1]]\nW_Q: [[1, 0], [0, 1]]\n"
            "W_K: [[1e200, 0], [0, 1]]\nW_V: [[1, 0], [0, 1]]\n")
    scn = scenario_from_text(text, "k.yaml")
    assert scn.overflow_where("QK^T") == "k.yaml:4: W_K"  # the largest input, not the first
    assert scn.overflow_where("K") == "k.yaml:4: W_K"
    assert scn.overflow_where("S") == "k.yaml"  # S overflows only through --amplify
