"""The repository explains itself: no file points at a document the repository does not hold, and every link to a
section of docs/architecture.md names a section that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Written in two pieces so that this file does not name them itself.
OUTSIDE_DOCUMENTS = ("DESIGN" + ".md", "SPEC" + ".md")


def repository_files() -> list[Path]:
    """Every file of the working tree but the virtualenv, caches and dot-folders (.git, .ci's tools are read too)."""
    skipped = {".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".tox", "node_modules"}
    found = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if any(part in skipped or part.endswith(".egg-info") for part in parts) or not path.is_file():
            continue
        found.append(path)
    return found


def test_no_file_names_a_document_outside_the_repository() -> None:
    files = repository_files()
    assert len(files) > 100 and ROOT / "docs" / "architecture.md" in files
    naming = [f"{path.relative_to(ROOT)}: {name}" for path in files for name in OUTSIDE_DOCUMENTS
              if name.encode() in path.read_bytes()]
    assert naming == [], "cite docs/architecture.md or https://github.com/coinbase/x402/tree/main/specs instead"


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lowercased, punctuation but hyphens dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_to_a_section_of_the_architecture_page_finds_it() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    anchors = {anchor(line.lstrip("#")) for line in page.splitlines() if line.startswith("#")}
    assert "decisions-where-the-x402-specification-is-open" in anchors
    linked = {(str(path.relative_to(ROOT)), match) for path in repository_files()
              if path.suffix in {".py", ".md", ".html", ".cfg"}
              for match in re.findall(r"architecture\.md#([\w-]+)", path.read_text(errors="replace"))}
    assert linked, "the code cites the architecture page's sections"
    assert [(path, name) for path, name in sorted(linked) if name not in anchors] == []
