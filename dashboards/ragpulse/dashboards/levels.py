"""Default absolute faithfulness alert levels per judge, derived from measured score
distributions (issue 22).

Rule: per labeled set (the hand-written RAG dev set, QAGS-CNNDM, HaluEval, FaithBench, JNLI
valid), the 1st percentile of the mean of 20 faithfulness scores (the absolute rule's
``faithfulness_min_samples``) drawn from the set's faithful answers; the level is the lowest of
these, rounded down to 0.05: on none of the sets do more than 1 % of windows of wholly faithful
traffic fall under it. Regenerate (after a retrained model or new weights) with
``make judge-figures`` (``bench/faithfulness_distributions.py ... --write-levels``)
(docs/benchmarks.md, "Faithfulness score distributions (local judges)", which also shows what
each level means on the other sets).

Keys are the ``judge`` column of the score rows: ``local`` is support-lr@5; ``nli`` is every NLI
judge, and its level is the one measured for ``--judge local-model`` (ragpulse's bundled model):
an ``--judge nli`` with a model of your own should set its own level. The LLM judge has none:
its scores stay under ``AlertSettings.faithfulness_min``.
"""

from __future__ import annotations

__all__ = ["FAITHFULNESS_LEVELS", "JUDGE_NAMES"]

JUDGE_NAMES = ("local", "nli", "llm")
"""The values the ``judge`` column takes (each judge's ``name``)."""

FAITHFULNESS_LEVELS: dict[str, float] = {"local": 0.35, "nli": 0.35}
"""Written by ``bench/faithfulness_distributions.py --write-levels``; each set's p1 and the judge
versions it was measured on are in the table that run writes to docs/benchmarks.md ("Faithfulness
score distributions (local judges)"), so they are not repeated here to go stale."""
