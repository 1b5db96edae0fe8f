"""Every relative link in README.md and docs/*.md points to a file that exists (and, with a #fragment into
a Markdown file, to a heading or an explicit anchor there), so moving or renaming a file cannot leave
the docs pointing nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# docs/config.md is generated from the config registries by its own command and checked for staleness by
# its own test; until that generator's branch is merged it may be absent here. Any other target must exist.
GENERATED = {REPO / "docs" / "config.md"}

# [text](target) and [text](target "title"); images too. Inline code and fenced blocks are removed first.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def strip_code(text: str) -> str:
    return CODE.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    return LINK.findall(strip_code(text))


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("//")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(md: Path) -> set[str]:
    text = md.read_text()
    return {slug(h) for h in HEADING.findall(FENCE.sub("", text))} | set(ANCHOR.findall(text))


def broken_links(doc: Path, root: Path = REPO) -> list[str]:
    """One line per relative link of ``doc`` whose file (or heading) does not exist, paths shown relative to
    ``root``."""
    bad = []
    for target in links(doc.read_text()):
        if not is_relative(target):
            continue
        path_part, _, fragment = target.partition("#")
        dest = (doc.parent / path_part).resolve() if path_part else doc
        if dest in GENERATED and not dest.exists():
            continue
        if not dest.exists():
            bad.append(f"{target}: no such file {dest.relative_to(root) if dest.is_relative_to(root) else dest}")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            bad.append(f"{target}: no heading or anchor #{fragment} in {dest.relative_to(root)}")
    return bad


def test_the_checker_finds_links_and_ignores_code():
    text = 'see [a](docs/a.md) and ![b](img.png "t"), not `[c](c.md)` nor\n```\n[d](d.md)\n```\n[e](https://x.org)'
    assert links(text) == ["docs/a.md", "img.png", "https://x.org"]
    assert not is_relative("https://x.org") and is_relative("../results/x/README.md")
    assert (
        slug("Reports, leaderboards and paper tables (`gnnq-report`)")
        == "reports-leaderboards-and-paper-tables-gnnq-report"
    )


def test_the_checker_reports_a_missing_file_and_heading(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md#a-heading) [gone](missing.md) [nohead](there.md#other)")
    bad = broken_links(doc, root=tmp_path.resolve())
    assert len(bad) == 2 and "missing.md" in bad[0] and "#other" in bad[1]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_to_existing_files(doc):
    assert broken_links(doc) == []


def test_the_readme_links_every_doc():
    readme = REPO / "README.md"
    linked = {(readme.parent / t.partition("#")[0]).resolve() for t in links(readme.read_text()) if is_relative(t)}
    missing = [str(p.relative_to(REPO)) for p in DOCS[1:] if p not in linked]
    assert missing == [], f"docs not linked from README.md: {missing}"


def test_the_readme_stays_short():
    assert len((REPO / "README.md").read_bytes()) <= 12 * 1024
