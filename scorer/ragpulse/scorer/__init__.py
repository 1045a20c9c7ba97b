"""ragpulse.scorer: the metric engine (metrics, judges, evaluator) and the live scorer."""

from .evaluator import Evaluator, SampleResult
from .judges.base import Judge, Needs
from .judges.factory import JudgeChoice, build_judge
from .judges.registry import (
    DEFAULT_JUDGE,
    FAITHFULNESS_LEVELS,
    JUDGE_ALIASES,
    JUDGE_NAMES,
    JUDGES,
    SAMPLES_PER_S,
    judge_help,
    resolve_judge,
    stored_judge_sql,
)
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
    Unsupported,
)

__all__ = [
    "BUILTIN_CRITERIA",
    "DEFAULT_JUDGE",
    "DEFAULT_METRICS",
    "FAITHFULNESS_LEVELS",
    "JUDGES",
    "JUDGE_ALIASES",
    "JUDGE_NAMES",
    "METRICS",
    "SAMPLES_PER_S",
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
    "Unsupported",
    "build_judge",
    "judge_help",
    "resolve_judge",
    "resolve_metrics",
    "stored_judge_sql",
]
