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

Keys are the judges' names (``ragpulse.scorer.JUDGES``, the ``judge`` column of the score rows;
rows stored under a judge's old name count as it): ``fast`` is support-lr@5, ``model`` the
bundled cross-encoder. A ``--judge nli`` with a model of your own has no level until you set one
(it never inherits the bundled model's), nor has the LLM judge: their scores stay under
``AlertSettings.faithfulness_min``. The levels themselves are declared with the judges, in
``ragpulse.scorer.judges.registry``.
"""

from __future__ import annotations

__all__ = ["FAITHFULNESS_LEVELS", "JUDGE_NAMES"]

from ragpulse.scorer import FAITHFULNESS_LEVELS, JUDGE_NAMES
