"""docs/instrumentation.md's source matrix is the extractor's source tables, row for row."""

from __future__ import annotations

import re
from pathlib import Path

from ragpulse.scorer.traces.extract import source_matrix

DOC = Path(__file__).resolve().parents[3] / "docs" / "instrumentation.md"
BLOCK = re.compile(r"<!-- source-matrix:[^>]*-->\n(.*?)<!-- /source-matrix -->", re.DOTALL)


def test_docs_matrix_equals_the_source_tables() -> None:
    found = BLOCK.search(DOC.read_text())
    assert found is not None, "docs/instrumentation.md lost its source-matrix block"
    assert found.group(1) == source_matrix(), (
        "docs/instrumentation.md §5 differs from the source tables; paste "
        "ragpulse.scorer.traces.extract.source_matrix() between the markers"
    )
