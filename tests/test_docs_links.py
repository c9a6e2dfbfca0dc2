"""The docs stay true: every relative link and anchor of README.md and docs/*.md resolves, and every repository
path that the docs, the run scripts and the sources of verl_ext/, benchmarks/ and data_prep/ cite exists.

The rule for a cited path: a token (in backticks, a link target, or anywhere in a script's or module's text) that
starts with one of the repository's top-level folders (``verl_ext/``, ``benchmarks/``, ``data_prep/``, ``docs/``,
``tests/``, ``run_scripts/``, ``recipe/``, ``.ci/``) and holds only path characters. A token holding a placeholder
(``<name>``, ``*``, ``{...}``, ``$VAR``, ``...``) is a pattern, not a path, and is not checked. Paths a run creates
(under ``outputs/``, ``data/``, a temporary folder) do not start with those folders; the few that do are in
``CREATED_AT_RUN_TIME``. Anchors are GitHub's: a heading lowercased, its punctuation dropped (hyphens and
underscores kept), spaces made hyphens, a repeated heading numbered ``-1``, ``-2``.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from verl_ext import data_sources

REPO = Path(__file__).resolve().parents[1]
TOP_FOLDERS = ("verl_ext", "benchmarks", "data_prep", "docs", "tests", "run_scripts", "recipe", ".ci")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[A-Za-z0-9_./+-]*)" % "|".join(re.escape(folder) for folder in TOP_FOLDERS))
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.|…")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")

# Paths under the top-level folders that only exist once something has run (the allow-list of the rule above),
# and names spelled like paths that are not paths: the data_source values (``verl_ext/tiny_count``).
CREATED_AT_RUN_TIME: set[str] = {
    "benchmarks/results/bench_gpu.json",  # bench_gpu.py's results file: written by its first run on a GPU lease
}
NOT_PATHS = {value for value in vars(data_sources).values() if isinstance(value, str) and "/" in value}


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def source_files() -> list[Path]:
    files = sorted((REPO / "run_scripts").rglob("*.sh"))
    for folder in ("verl_ext", "benchmarks", "data_prep"):
        files += sorted(path for path in (REPO / folder).rglob("*.py") if "__pycache__" not in path.parts)
    return files


def without_code_blocks(text: str) -> list[tuple[int, str]]:
    """(number, line) of the lines of a markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lowercased, punctuation removed, spaces made hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "").strip().lower()
    kept = []
    for char in text:
        if char in " -_" or unicodedata.category(char)[0] in "LN":
            kept.append("-" if char == " " else char)
    return "".join(kept)


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for _, line in without_code_blocks(path.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def broken_links(path: Path) -> list[str]:
    """Every relative link of a markdown file whose file or anchor does not exist, as 'file:line: target (why)'."""
    problems = []
    for number, line in without_code_blocks(path.read_text(encoding="utf-8")):
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(REPO)}:{number}: {target}"
            if not linked.exists():
                problems.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                problems.append(f"{where} (no heading with the anchor #{anchor} in {linked.relative_to(REPO)})")
    return problems


def cited_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of every repository path a text cites, placeholders left out."""
    cited = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in PATH.finditer(line):
            end = match.end()
            if PLACEHOLDER.match(line[end:end + 3]) or (end < len(line) and line[end] in "<{*$"):
                continue  # the path goes on with a placeholder: a pattern
            token = match.group(1).rstrip(".,:;)")
            if not PLACEHOLDER.search(token):
                cited.append((number, token))
    return cited


def missing_paths(path: Path) -> list[str]:
    problems = []
    for number, token in cited_paths(path.read_text(encoding="utf-8")):
        if token.rstrip("/") in CREATED_AT_RUN_TIME | NOT_PATHS or (REPO / token).exists():
            continue
        problems.append(f"{path.relative_to(REPO)}:{number}: {token}")
    return problems


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(path):
    assert broken_links(path) == []


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_repository_path_the_docs_cite_exists(path):
    assert missing_paths(path) == []


def test_every_repository_path_the_scripts_and_sources_cite_exists():
    problems = [problem for path in source_files() for problem in missing_paths(path)]
    assert problems == []


def test_a_broken_link_a_missing_anchor_and_a_missing_path_are_found(tmp_path, monkeypatch):
    """The checks themselves: a link to a missing file, to a missing anchor and a cited path that does not exist
    are each reported; the same text with good targets reports nothing."""
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "verl_ext").mkdir()
    (tmp_path / "verl_ext" / "real.py").write_text("")
    (tmp_path / "docs" / "guide.md").write_text("# A guide\n\n## The π_old trap, and `delayed_sync`\n\n## Same\n\n## Same\n")
    good = tmp_path / "README.md"
    good.write_text("[g](docs/guide.md#the-π_old-trap-and-delayed_sync) [s](docs/guide.md#same-1) [h](https://x.org/y)\n"
                    "`verl_ext/real.py` `verl_ext/algorithms/<algorithm>.py` [here](#top)\n\n# Top\n"
                    "```\n[not a link](nowhere.md)\n```\n")
    assert broken_links(good) == [] and missing_paths(good) == []
    bad = tmp_path / "bad.md"
    bad.write_text("[a](docs/missing.md) [b](docs/guide.md#no-such-heading)\n`verl_ext/gone.py`, cited\n")
    assert broken_links(bad) == ["bad.md:1: docs/missing.md (no such file)",
                                 "bad.md:1: docs/guide.md#no-such-heading (no heading with the anchor "
                                 "#no-such-heading in docs/guide.md)"]
    assert missing_paths(bad) == ["bad.md:1: docs/missing.md", "bad.md:2: verl_ext/gone.py"]


def test_github_anchors():
    assert github_slug("The engine on its own pool (the explorer/trainer split)") == \
        "the-engine-on-its-own-pool-the-explorertrainer-split"
    assert github_slug("Benchmark: `benchmarks/bench_gpu.py`") == "benchmark-benchmarksbench_gpupy"
    assert github_slug("Off-policy GRPO needs π_k and α") == "off-policy-grpo-needs-π_k-and-α"
    assert github_slug("verl's own losses under delayed_sync") == "verls-own-losses-under-delayed_sync"
