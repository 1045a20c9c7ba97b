"""ragpulse.scorer: the metric engine (metrics, judges, evaluator) and the live scorer."""

from .evaluator import Evaluator, SampleResult
from .judges.base import Judge, Needs
from .judges.factory import JudgeChoice, build_judge
from .metrics import DEFAULT_METRICS, METRICS, Metric, resolve_metrics
from .model import (
    BUILTIN_CRITERIA,
    Cost,
    Criterion,
    Fact,
    Finding,
    Interval,
    Reason,
    Sample,
    Score,
)

__all__ = [
    "BUILTIN_CRITERIA",
    "DEFAULT_METRICS",
    "METRICS",
    "Cost",
    "Criterion",
    "Evaluator",
    "Fact",
    "Finding",
    "Interval",
    "Judge",
    "JudgeChoice",
    "Metric",
    "Needs",
    "Reason",
    "Sample",
    "SampleResult",
    "Score",
    "build_judge",
    "resolve_metrics",
]
