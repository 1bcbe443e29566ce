"""What a newcomer reads first stays short, and folders show the architecture:

- README.md at most 200 lines, with the install commands and the first example in its
  first 60;
- ARCHITECTURE.md at most 250 lines, naming no path outside the repository;
- at most 20 source files in any one folder of a crate's `src/` or of the Python package
  (tests not counted: `tests.rs`, `*_tests.rs`), so that prefixes such as `store_*` become
  folders instead of growing.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = (".rs", ".py", ".pyi")


def test_the_readme_is_one_page_with_install_first():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, len(lines)
    head = "\n".join(lines[:60])
    assert "cargo install --path crates/tensorsmith-cli" in head
    assert "pip install" in head and "```sh example" in head


def test_architecture_is_short_and_stays_in_the_repository():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert len(text.splitlines()) <= 250, len(text.splitlines())
    outside = re.findall(r"(?<![\w.])\.\./[\w./-]+", text)
    assert not outside, outside


def source_counts():
    roots = [p for p in (ROOT / "crates").glob("*/src")]
    roots += [ROOT / "crates/tensorsmith-py/python/tensorsmith"]
    for root in roots:
        for folder in [root, *[d for d in root.rglob("*") if d.is_dir()]]:
            if "__pycache__" in folder.parts:
                continue
            files = [f for f in folder.iterdir() if f.is_file() and f.suffix in SOURCE
                     and f.name != "tests.rs" and not f.name.endswith("_tests.rs")]
            yield folder.relative_to(ROOT), len(files)


def test_no_folder_holds_more_than_twenty_source_files():
    crowded = {str(f): n for f, n in source_counts() if n > 20}
    assert not crowded, crowded
