"""The text files agree with each other and with the stages; the language is chosen in the right order."""

from __future__ import annotations

import re
import string
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from attnwalk import text as i18n
from attnwalk.errors import UsageError
from attnwalk.text import LANGS, detect_lang, pick, text
from attnwalk.layer.modes import MODES
from attnwalk.features import catalog

STAGES = catalog()  # every stage any layer can have
from attnwalk.render.screens import walk_steps
from attnwalk.text import stage_text

TEXT_DIR = Path(__file__).resolve().parents[1] / "attnwalk" / "text"


def load(lang: str) -> dict:
    return tomllib.loads((TEXT_DIR / f"{lang}.toml").read_text(encoding="utf-8"))


def flatten(table: dict, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    """Every leaf of a nested table, keyed by its path."""
    leaves = {}
    for name, value in table.items():
        if isinstance(value, dict):
            leaves.update(flatten(value, prefix + (name,)))
        else:
            leaves[prefix + (name,)] = value
    return leaves


def placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


@pytest.fixture(scope="module")
def tables() -> dict[str, dict[tuple[str, ...], object]]:
    return {lang: flatten(load(lang)) for lang in LANGS}


def test_both_languages_have_the_same_keys(tables):
    en, zh = tables["en"], tables["zh"]
    assert sorted(set(en) - set(zh)) == []
    assert sorted(set(zh) - set(en)) == []


def test_every_value_is_a_non_empty_string(tables):
    for lang, leaves in tables.items():
        for path, value in leaves.items():
            assert isinstance(value, str) and value.strip(), f"{lang}: {'.'.join(path)}"


def test_each_key_has_the_same_placeholders_in_both_languages(tables):
    for path, template in tables["en"].items():
        assert placeholders(template) == placeholders(tables["zh"][path]), ".".join(path)


def test_placeholders_are_named(tables):
    # str.format with keyword values only: "{}" or "{0}" could never be filled.
    for lang, leaves in tables.items():
        for path, template in leaves.items():
            for field in placeholders(template):
                assert field.isidentifier(), f"{lang}: {'.'.join(path)} has {{{field}}}"


def gradient_stages():
    """Every screen of a backward walk (attnwalk grad): the loss and each gradient, over scenarios
    with every feature (the gradient tests' random cases, and the lessons with a target)."""
    import json

    from attnwalk.layer.gradwalk import grad_stages
    from attnwalk.scenario.load import load_scenario, scenario_from_text

    cases = json.loads((Path(__file__).resolve().parent / "reference" / "grad_reference.json").read_text())
    scenarios = [scenario_from_text(case["yaml"], "case.yaml") for case in cases["cases"]]
    from attnwalk.scenario.builtins import builtin_names

    lessons = [load_scenario(name) for name in builtin_names()]  # every lesson with a target
    scenarios += [scn for scn in lessons if any(hasattr(feature, "loss") for feature in scn.features)]
    rms = (Path(__file__).resolve().parents[1] / "scenarios" / "layer_norm.yaml").read_text(encoding="utf-8")
    scenarios.append(scenario_from_text(rms.replace("\nnorm: layer\n", "\nnorm: rms\n"), "rms.yaml"))
    # the block lesson with a target, its FFN as SwiGLU and with LayerNorm: every FFN gradient's screen
    block = (Path(__file__).resolve().parents[1] / "scenarios" / "block.yaml").read_text(encoding="utf-8")
    block += "target: {output: [[0, 0, 1, 0], [0, 1, 0, 0], [0, 1, 0, 0], [0, 1, 1, 1]]}\n"
    swiglu = block.replace("ffn: relu", "ffn: swiglu").replace("norm: rms", "norm: layer") + (
        "W_gate: [[1, 0], [0, 1], [1, 0], [0, 1]]\nb_2: [0, 0, 0, 0.1]\n")
    scenarios += [scenario_from_text(block, "block.yaml"), scenario_from_text(swiglu, "swiglu.yaml")]
    tied = (Path(__file__).resolve().parents[1] / "scenarios" / "next_token.yaml").read_text(encoding="utf-8")
    W_U = load_scenario("next_token").param("vocab_embeddings").T.tolist()  # the lesson untied: its own W_U
    scenarios.append(scenario_from_text(tied.replace("\ntie_embeddings: true\n", f"\nW_U: {W_U}\n"), "untied.yaml"))
    scenarios.append(two_blocks())
    return {stage.text_key: stage for scn in scenarios for stage in grad_stages(scn)}


def two_blocks():
    """Two blocks with a target (features/blocks.py): a later block's stages and gradients are
    block 1's text, and its input X⁽²⁾ has its own."""
    from attnwalk.scenario.load import scenario_from_text

    eye = "[[1, 0], [0, 1]]"
    block = f"{{W_Q: {eye}, W_K: {eye}, W_V: {eye}, W_O: {eye}}}"
    return scenario_from_text(f"tokens: [a, b]\nembeddings: {eye}\nblocks: [{block}, {block}]\n"
                              f"target: {{output: {eye}}}\n", "two.yaml")


@pytest.mark.parametrize("lang", LANGS)
def test_every_stage_has_its_text_and_no_other_stage_does(lang):
    stages = load(lang)["stage"]
    gradients = gradient_stages()
    later = {stage.text_key for stage in two_blocks().graph if stage.shown}  # X⁽²⁾'s own
    assert set(stages) == {stage.key for stage in STAGES} | set(gradients) | later
    for stage in [*STAGES, *gradients.values()]:
        for field in ("title", "what", "why", "mistake"):
            assert stages[stage.text_key].get(field, "").strip(), f"{lang}: stage.{stage.text_key}.{field}"


@pytest.mark.parametrize("lang", LANGS)
def test_every_mode_has_a_name_and_an_explanation(lang):
    modes = load(lang)["mode"]
    for mode in (m.name for m in MODES):
        assert modes[mode]["name"] and modes[mode]["explain"]


def test_titles_leave_the_symbol_out():
    # The renderer prints the symbol beside the title; "QKᵀ" in the title would show it twice.
    for lang in LANGS:
        for stage in STAGES:
            if len(stage.symbol) > 1 and not stage.symbol.islower():  # not a word like "concat"
                assert stage.symbol not in load(lang)["stage"][stage.key]["title"]


# --- Text ------------------------------------------------------------------------------------


def test_t_reads_dotted_keys_and_fills_placeholders():
    en = text("en")
    assert en.t("ui.stage_header", index=3, count=14) == "Stage 3 / 14"
    assert en.t("quiz.score", score=2, total=5) == "Score: 2 / 5"
    assert en.t("stage.QK^T.title") == "Raw scores"
    assert text("zh").t("lang.name") == "中文"


def test_stage_helper_reads_keys_with_symbols():
    assert text("en").stage("S+M", "title") == "Masked scores"
    assert text("en").stage("QK^T", "title") == text("en").t("stage.QK^T.title")
    assert text("zh").stage("A", "title") == "注意力权重"


def test_a_missing_key_is_an_error_not_english(monkeypatch):
    # A key only English has is a bug for a test to find, not English to show in a Chinese walk.
    tables = {"en": {"ui": {"only_en": "English {n}"}, "stage": {"S+M": {"title": "Masked"}}},
              "zh": {"ui": {"here": "中文 {n}"}}}
    monkeypatch.setattr(i18n, "_table", tables.__getitem__)
    zh = i18n.Text("zh")
    assert zh.t("ui.here", n=1) == "中文 1"
    with pytest.raises(i18n.MissingTextError, match="ui.only_en"):
        zh.t("ui.only_en", n=1)
    with pytest.raises(i18n.MissingTextError, match="stage.S\\+M.title"):
        zh.stage("S+M", "title")
    assert zh.has("ui.here") and not zh.has("ui.only_en") and not zh.has("ui.nowhere")


def test_optional_stage_fields_are_detectable():
    assert text("en").has("stage.S+M.none")  # an extra note
    assert text("en").has("stage.P.none.what")  # a variant: a table of the stage's fields
    assert not text("en").has("stage.P.none") and not text("en").has("stage.Q.none")


def test_text_is_loaded_once_per_language():
    assert text("zh") is text("zh")
    with pytest.raises(ValueError):
        i18n.Text("fr")


def test_import_is_light():
    # `attnwalk --help` should not pay for numpy or rich.
    code = "import sys, attnwalk.text; print(sorted({'numpy', 'rich', 'yaml'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


# --- detect_lang -----------------------------------------------------------------------------

EVERYTHING = {"ATTNWALK_LANG": "zh", "LANGUAGE": "en_GB:zh", "LC_ALL": "zh_CN.UTF-8",
              "LC_MESSAGES": "C", "LANG": "zh_TW.UTF-8"}


@pytest.mark.parametrize(("cli", "drop", "expected"), [
    ("en", (), "en"),  # --lang beats ATTNWALK_LANG
    (None, (), "zh"),  # ATTNWALK_LANG beats LANGUAGE
    (None, ("ATTNWALK_LANG",), "en"),  # LANGUAGE's first entry beats LC_ALL
    (None, ("ATTNWALK_LANG", "LANGUAGE"), "zh"),  # LC_ALL beats LC_MESSAGES
    (None, ("ATTNWALK_LANG", "LANGUAGE", "LC_ALL"), "en"),  # LC_MESSAGES beats LANG
    (None, ("ATTNWALK_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"), "zh"),  # LANG last
    (None, tuple(EVERYTHING), "en"),  # nothing set
])
def test_detect_lang_precedence(cli, drop, expected):
    environ = {name: value for name, value in EVERYTHING.items() if name not in drop}
    assert detect_lang(cli, environ) == expected


@pytest.mark.parametrize(("locale", "expected"), [
    ("zh_CN.UTF-8", "zh"), ("zh_TW", "zh"), ("zh", "zh"), ("zh_CN.GB18030@stroke", "zh"),
    ("en_US.UTF-8", "en"), ("C", "en"), ("C.UTF-8", "en"), ("POSIX", "en"), ("fr_FR.UTF-8", "en"),
])
def test_detect_lang_reads_locales(locale, expected):
    assert detect_lang(None, {"LANG": locale}) == expected


def test_empty_locale_variables_are_skipped():
    assert detect_lang(None, {"LANGUAGE": "", "LC_ALL": "", "LC_MESSAGES": "zh_CN.UTF-8", "LANG": "C"}) == "zh"
    assert detect_lang(None, {"LANGUAGE": ":zh:en", "LANG": "C"}) == "zh"


def test_invalid_attnwalk_lang_falls_through_to_the_locale():
    assert detect_lang(None, {"ATTNWALK_LANG": "fr", "LANG": "zh_CN.UTF-8"}) == "zh"
    assert detect_lang(None, {"ATTNWALK_LANG": " ZH "}) == "zh"


def test_invalid_cli_lang_is_a_usage_error():
    with pytest.raises(UsageError, match=r"^unknown language 'xx'; choose en or zh$"):
        detect_lang("xx", {"ATTNWALK_LANG": "zh"})
    assert detect_lang("ZH", {}) == "zh"


def test_detect_lang_reads_os_environ_by_default(monkeypatch):
    for name in ("ATTNWALK_LANG", "LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert detect_lang() == "zh"


# --- pick ------------------------------------------------------------------------------------


def test_pick():
    both = {"en": "The girl", "zh": "女生"}
    assert pick(both, "zh") == "女生"
    assert pick(both, "en") == "The girl"
    assert pick({"en": "Only English"}, "zh") == "Only English"
    assert pick({"fr": "Seulement"}, "zh") == "Seulement"
    assert pick("Plain", "zh") == "Plain"
    assert pick({}, "en") == ""
    assert pick(None, "en") == ""


# --- every screen in Chinese ------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parents[1] / "attnwalk"

# say(opts, "ui.x", …), c.say("ui.x", …), tx.t("quiz.x", …), self.t('ui.x'): a literal dotted key.
KEY_CALL = re.compile(r"""(?:\bsay|\bt)\(\s*(?:[A-Za-z_][\w.]*\s*,\s*)?(['"])([a-z_]+(?:\.[\w^+]+)+)\1""")

# Keys the code builds at run time, so the scan above cannot see them.
BUILT_KEYS = ([f"ui.{field}" for field in ("what", "why", "mistake")]
              + [f"list.{column}" for column in ("name", "scenario_title", "shape", "mask")]
              + [f"list.mask_{kind}" for kind in ("none", "causal", "explicit")])


def keys_in_source() -> dict[str, list[str]]:
    """Every literal key passed to say()/t() in the package, with where it is used."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for m in KEY_CALL.finditer(source):
            line = source.count("\n", 0, m.start()) + 1
            found.setdefault(m.group(2), []).append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    return found


def test_every_key_the_code_asks_for_is_in_the_text_files():
    used = keys_in_source()
    assert len(used) > 80  # the scan still finds the calls (say, .t) it is meant to find
    en = text("en")
    missing = {key: where for key, where in used.items() if not i18n._find(i18n._table("en"), key.split("."))}
    assert missing == {}, "keys used in the code but missing from en.toml (zh.toml must match)"
    for key in BUILT_KEYS:
        assert en.has(key), key


def squeeze(s: str) -> str:
    """Text with box-drawing characters and all whitespace removed, so wrapped lines join up."""
    return re.sub(r"[\s\u2500-\u257f]", "", s)


def run_walk(name: str, tmp_path: Path, args: list[str], env: dict[str, str | None]) -> str:
    from typer.testing import CliRunner

    from attnwalk.cli import app

    env = {"XDG_STATE_HOME": str(tmp_path), "COLUMNS": "100", "NO_COLOR": "1", "ATTNWALK_LANG": None,
           "LANGUAGE": None, "LC_ALL": None, "LC_MESSAGES": None, **env}
    result = CliRunner().invoke(app, ["run", name, "--no-pause", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


def builtin_walks():
    from attnwalk.scenario.builtins import builtin_names

    return builtin_names()


ENGLISH_LABELS = ("ui.what", "ui.why", "ui.mistake", "ui.worked_cell", "ui.formula", "ui.shape", "ui.mode",
                  "ui.bars_heading")


@pytest.mark.parametrize("how", ["--lang zh", "LANG=zh_CN.UTF-8"])
@pytest.mark.parametrize("name", builtin_walks())
def test_every_built_in_walk_is_chinese_from_start_to_end(name, how, tmp_path):
    from attnwalk.layer.walk import compute
    from attnwalk.scenario.load import load_scenario

    if how == "--lang zh":
        out = run_walk(name, tmp_path, ["--lang", "zh"], {"LANG": "C.UTF-8"})
    else:
        out = run_walk(name, tmp_path, [], {"LANG": "zh_CN.UTF-8"})
    zh, en = text("zh"), text("en")
    flat = squeeze(out)
    scn = load_scenario(name)
    steps = walk_steps(compute(scn))
    assert out.count(zh.t("ui.stage_header", index=1, count=len(steps))) == 1
    for stage, _head in steps:
        assert stage_text("zh", stage, scn) in out, stage.key
        assert squeeze(stage_text("zh", stage, scn, field="what")) in flat, stage.key
    for key in ENGLISH_LABELS:  # no English label or note is left in the Chinese walk
        assert not re.search(rf"(?<!\w){re.escape(en.t(key))}(?!\w)", out), en.t(key)
    assert "Stage " not in out


@pytest.mark.parametrize("lang", LANGS)
def test_text_files_are_read_with_tomllib(lang):
    source = (TEXT_DIR / f"{lang}.toml").read_text(encoding="utf-8")
    assert i18n._table(lang) == tomllib.loads(source)


def test_a_parsed_text_file_is_cached_until_it_changes(tmp_path, monkeypatch):
    (tmp_path / "en.toml").write_text('[ui]\ncolon = ": "\n', encoding="utf-8")
    monkeypatch.setattr(i18n, "TEXT_DIR", tmp_path)
    parse = i18n._table.__wrapped__
    assert parse("en") == {"ui": {"colon": ": "}}
    cached = list((tmp_path / "__pycache__").iterdir())
    assert len(cached) == 1 and cached[0].name.startswith("en.toml.")  # no temporary file left
    # a cache for other contents is not believed: only its own file's size and time count
    (tmp_path / "en.toml").write_text('[ui]\ncolon = "："\nx = "y"\n', encoding="utf-8")
    assert parse("en") == {"ui": {"colon": "：", "x": "y"}}
    cached[0].write_bytes(b"not marshal")
    assert parse("en") == {"ui": {"colon": "：", "x": "y"}}


def test_a_text_file_is_parsed_where_no_cache_can_be_written(tmp_path, monkeypatch):
    (tmp_path / "en.toml").write_text('[ui]\ncolon = ": "\n', encoding="utf-8")
    (tmp_path / "__pycache__").write_text("a file where the folder would be", encoding="utf-8")
    monkeypatch.setattr(i18n, "TEXT_DIR", tmp_path)
    assert i18n._table.__wrapped__("en") == {"ui": {"colon": ": "}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__pycache__", "en.toml"]
