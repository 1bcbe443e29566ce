"""The tagged code blocks of the README and the guide (`docs/src/*.md`), for the tests that
run them: `test_guide_examples.py` (```sh example```, ```python example```, ```sh synopsis```)
and `with_torch/test_guide_torch_examples.py` (```python torch```, ```python gpu```).
CONTRIBUTING.md lists the tags and what is done with each."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The README first, then the guide's chapters in SUMMARY.md's order, then any other page.
_summary = (ROOT / "docs/src/SUMMARY.md").read_text()
_chapters = re.findall(r"\]\(([^)]+\.md)\)", _summary)
PAGES = [ROOT / "README.md"] + [ROOT / "docs/src" / c for c in _chapters]
PAGES += sorted(p for p in (ROOT / "docs/src").glob("*.md") if p not in PAGES)
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(tag):
    """[(id, body)] of every block tagged exactly `tag`, id = "PAGE#N" (N counts per page)."""
    found = []
    for page in PAGES:
        bodies = [b for t, b in FENCE.findall(page.read_text()) if t.strip() == tag]
        name = page.relative_to(ROOT)
        found += [(f"{name}#{i}", b) for i, b in enumerate(bodies)]
    return found
