"""Every documentation reference the code makes names a page and a heading that exist.

Code comments, docstrings, help texts, the state schema's descriptions, the tests and the benches cite the
documentation as ``docs/<page>.md#<heading-anchor>``; the README links its pages the same way. A page that
is renamed or a heading that is reworded must take its citations along, so this test reads every citation
and checks the page exists and has a heading whose anchor (as MkDocs makes it) is the one cited. The old
style, ``README "Section"``, is refused unless the README still has that section. ``mkdocs build --strict``
(in .ci/run) checks the links between the pages themselves.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# docs/<page>.md, optionally #anchor; stops at whitespace, quotes, brackets and closing punctuation
REF = re.compile(r"docs/((?:[\w.-]+/)*[\w.-]+\.md)(?:#([\w-]*))?")
# README "Section" / README 'Section' (a line break may sit between the two, inside a comment)
README_REF = re.compile(r"README(?:\.md)?\s+(?:#\s*)?[\"']([^\"'\n]{2,80})[\"']")
# another repository's docs folder: "google/adk-docs ``docs/…``" is not one of our pages
OTHER_REPO = re.compile(r"[\w.-]+/[\w.-]+\s+`{0,2}$")


def slugify(text: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc extension) gives a heading: markup dropped, lower case,
    punctuation removed, runs of spaces and hyphens made one hyphen."""
    text = re.sub(r"`([^`]*)`", r"\1", text)  # inline code keeps its text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            found.add(slugify(m.group(1)))
    return found


def sources() -> list[Path]:
    files = [p for p in (ROOT / "ctxcompact").rglob("*") if p.suffix in {".py", ".json"}]
    # every test folder (tests/cli, tests/state, ...), not the fixtures in tests/data
    files += [p for p in (ROOT / "tests").rglob("*.py") if "data" not in p.relative_to(ROOT / "tests").parts]
    files += [p for p in (ROOT / "bench").glob("*.py")]
    files += [ROOT / "README.md", ROOT / ".ci" / "run", ROOT / "pyproject.toml"]
    return sorted(p for p in files if p.is_file())


def refs(path: Path) -> list[tuple[int, str, str | None]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    out = []
    for m in REF.finditer(text):
        before = text[max(0, m.start() - 1):m.start()]
        if before and (before.isalnum() or before in "_-/"):
            continue  # part of a longer path (site/docs/…, tests/data/docs/…)
        if OTHER_REPO.search(text[text.rfind("\n", 0, m.start()) + 1:m.start()]):
            continue
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, m.group(1), m.group(2)))
    return out


def test_slugify_matches_mkdocs_anchors() -> None:
    assert slugify("What `run` does") == "what-run-does"
    assert slugify("`ctxcompact state show|reset PATH`") == "ctxcompact-state-showreset-path"
    assert slugify("Calibration: from what the log holds to what the provider bills") == (
        "calibration-from-what-the-log-holds-to-what-the-provider-bills")
    assert slugify("A hook's call: small inputs and a growing transcript") == (
        "a-hooks-call-small-inputs-and-a-growing-transcript")
    assert slugify("Worked example: θ = 3, ω = 1") == "worked-example-3-1"


def test_the_check_sees_a_bad_reference(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text('# see docs/concepts/state.md#no-such-heading and docs/nowhere.md\n', encoding="utf-8")
    assert refs(bad) == [(1, "concepts/state.md", "no-such-heading"), (1, "nowhere.md", None)]
    assert "no-such-heading" not in anchors(DOCS / "concepts" / "state.md")


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_doc_reference_names_a_page_and_heading_that_exist(path: Path) -> None:
    if path == Path(__file__).resolve():
        return  # its own examples of bad references
    problems = []
    for line, page, anchor in refs(path):
        target = DOCS / page
        if not target.is_file():
            problems.append(f"{path.relative_to(ROOT)}:{line}: docs/{page} does not exist")
        elif anchor is not None and anchor not in anchors(target):
            problems.append(f"{path.relative_to(ROOT)}:{line}: docs/{page} has no heading #{anchor}")
    assert not problems, "\n".join(problems)


def test_no_citation_of_a_readme_section_that_is_gone() -> None:
    readme = anchors(ROOT / "README.md")
    problems = []
    for path in sources():
        if path.name == "README.md" or path == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in README_REF.finditer(text):
            if slugify(m.group(1)) not in readme:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: README has no section {m.group(1)!r}: "
                                "cite docs/<page>.md#<heading>")
    assert not problems, "\n".join(problems)



# tests/<folder>/test_x.py: a test file the docs, the code or the benches name (not the tests themselves:
# their fixtures hold made-up paths such as tests/test_auth.py inside transcripts)
TEST_FILE = re.compile(r"(?<![\w/.-])tests/(?:[\w-]+/)*[\w-]+\.py")


def test_every_cited_test_file_exists() -> None:
    """A moved or renamed test file takes its citations along (tests/ mirrors the package: a test that moves
    to the folder of what it tests leaves no stale path in the docs)."""
    cited = [p for p in (ROOT / "ctxcompact").rglob("*") if p.suffix in {".py", ".json"}]
    cited += [*DOCS.rglob("*.md"), *(ROOT / "bench").glob("*.py"), *(ROOT / "bench").glob("*.md")]
    cited += [ROOT / "README.md", ROOT / ".ci" / "run", ROOT / "pyproject.toml"]
    problems = []
    for path in sorted(p for p in cited if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in TEST_FILE.finditer(text):
            if not (ROOT / m.group(0)).is_file():
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)} does not exist")
    assert not problems, "\n".join(problems)
    # the pattern sees a test path, not one inside a longer path
    assert TEST_FILE.findall("tests/state/test_resume.py, data/tests/x.py") == ["tests/state/test_resume.py"]
