"""A real (if tiny) Judge implementation for engine tests: it answers from a table of facts."""

from __future__ import annotations

from typing import Any

from ragpulse.scorer.judges.base import Needs
from ragpulse.scorer.model import Cost, Fact, Finding, Reason, Sample


class TableJudge:
    name = "table"
    model = "table-v1"

    def __init__(self, facts: dict[Fact, Any], cost: Cost | None = None) -> None:
        self.facts = facts
        self.cost = cost or Cost()
        self.calls: list[tuple[str, frozenset[Fact]]] = []

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        self.calls.append((sample.id, needs.facts))
        out: dict[Fact, Finding] = {}
        share = self.cost.scaled(1.0 / max(1, len(needs.facts)))
        for f in needs.facts:
            v = self.facts.get(f)
            if isinstance(v, Reason):
                out[f] = Finding(f, None, v, prompt_version="t@1", cost=share)
            elif v is None:
                out[f] = Finding(f, None, Reason.UNSUPPORTED_BY_JUDGE, cost=share)
            else:
                out[f] = Finding(f, v, prompt_version="t@1", cost=share)
        return out

    async def aclose(self) -> None:
        return None
