"""Local judges: metrics computed on this machine, with no API and no download.

``LocalJudge`` computes every fact the reference-free and reference metrics need from the
multilingual USE embeddings, lexical views of the text and the statement-support detector
(``support_detector.py``). Aspect critiques are not supported locally (``unsupported_by_judge``).
"""

from .judge import LocalJudge
from .settings import LocalJudgeSettings

__all__ = ["LocalJudge", "LocalJudgeSettings"]
