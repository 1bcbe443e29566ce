"""Every link between the README, CONTRIBUTING.md, ARCHITECTURE.md and the guide
(docs/src/*.md) leads somewhere: a relative link names a file or folder of the repository,
and a `#fragment` names a heading of the page it points at (GitHub's and mdBook's rule:
lower case, punctuation dropped, spaces as hyphens). Links to other sites are not fetched
(the tests have no network)."""

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / n for n in ("README.md", "CONTRIBUTING.md", "ARCHITECTURE.md")]
PAGES += sorted((ROOT / "docs/src").glob("*.md"))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```\s*$", re.S | re.M)


def slug(heading):
    text = re.sub(r"[`*_]", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@functools.cache
def anchors(page):
    text = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def links(page):
    return LINK.findall(FENCE.sub("", page.read_text()))


def broken_links(page, root=ROOT):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or root not in (dest, *dest.parents):
            broken.append(f"{target}: no such file in the repository")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading #{frag}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_internal_links_lead_somewhere(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_guide_lists_every_chapter():
    summary = (ROOT / "docs/src/SUMMARY.md").read_text()
    listed = set(re.findall(r"\]\(([^)]+\.md)\)", summary))
    pages = {p.name for p in (ROOT / "docs/src").glob("*.md")} - {"SUMMARY.md"}
    assert listed == pages, (sorted(pages - listed), sorted(listed - pages))


def test_the_check_catches_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    (tmp_path / "q.md").write_text("# A `code` heading, with: marks\n")
    page.write_text("# Top\n\n[ok](#top) [bad](#nowhere) [gone](missing.md) [up](../x.md)\n"
                    "[fine](q.md#a-code-heading-with-marks) [off](q.md#a) [web](https://x.y/#z)\n")
    assert broken_links(page, tmp_path.resolve()) == [
        "#nowhere: p.md has no heading #nowhere", "missing.md: no such file in the repository",
        "../x.md: no such file in the repository", "q.md#a: q.md has no heading #a"]
