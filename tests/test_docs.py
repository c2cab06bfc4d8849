"""The documentation stays a user's: README within its length, one concise file per study
under docs/experiments (question, method, figures, decision; what is superseded lives in
git history), and no doc about the machines or time limits figures were made under."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [
    REPO / "README.md",
    REPO / "CHANGELOG.md",
    REPO / "benchmarks" / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
]
# how a diary speaks of the runs behind its figures
RUN_CONDITIONS = re.compile(
    r"\b(lease|session|sessions)\b|of the \d+ minutes|\d+-s limit|time ran out|time was spent",
    re.IGNORECASE,
)


def test_experiments_are_short_records_of_studies():
    studies = sorted((REPO / "docs" / "experiments").glob("*.md"))
    lengths = {path.name: len(path.read_text().splitlines()) for path in studies}
    assert sum(lengths.values()) < 1000, lengths
    assert all(length <= 300 for length in lengths.values()), lengths
    assert all(re.match(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md$", name) for name in lengths)


def test_no_doc_speaks_of_run_conditions():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in DOCS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if RUN_CONDITIONS.search(line)
    ]
    assert not found, "\n".join(found)


def test_readme_stays_within_its_length():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
