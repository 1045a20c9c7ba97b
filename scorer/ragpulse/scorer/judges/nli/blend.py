"""The ``model`` judge's blend with the lexical detector: per statement,

    P = sigmoid(intercept + lexical * logit(P_lexical) + model * logit(P_model))

where ``P_lexical`` is ``support-lr@5``'s P(supported) and ``P_model`` the cross-encoder's. The
two read different things (the lexical detector: novel words, numbers and names; the model:
meaning, negation, rewording), so a statement both doubt is the one to doubt. The weights are
fitted by ``bench/blend_faithfulness.py`` on the per-statement probabilities of both detectors
over the labeled sets (each set counted equally; the fit's objective is the sample's mean P,
which is what faithfulness reports) and stored as ``blend.json`` beside the model, with the two
versions they were fitted for: a blend is only valid for that pair, so a judge whose lexical
weights or model differ refuses the file (:class:`BlendError`) rather than mixing stale weights.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BLEND_FILE", "Blend", "BlendError"]

BLEND_FILE = "blend.json"
_EPS = 1e-4


class BlendError(ValueError):
    """``blend.json`` is unreadable, malformed, or was fitted for other detector versions."""


def _logit(p: float) -> float:
    p = min(max(p, _EPS), 1.0 - _EPS)
    return math.log(p / (1.0 - p))


@dataclass(frozen=True)
class Blend:
    """Weights of the per-statement logistic blend and the detector versions they fit."""

    intercept: float
    lexical: float
    model: float
    lexical_version: str
    model_version: str

    @property
    def tag(self) -> str:
        """Short, stable name of these weights for the score's version string."""
        return f"blend({self.intercept:+.3f},{self.lexical:.3f},{self.model:.3f})"

    def combine(self, lexical: Sequence[float], model: Sequence[float]) -> list[float]:
        """The blended P(supported) per statement; the two lists are aligned."""
        if len(lexical) != len(model):
            raise ValueError(f"blend: {len(lexical)} lexical and {len(model)} model probabilities")
        out = []
        for pl, pm in zip(lexical, model, strict=True):
            z = self.intercept + self.lexical * _logit(pl) + self.model * _logit(pm)
            out.append(1.0 / (1.0 + math.exp(-max(min(z, 60.0), -60.0))))
        return out

    def check(self, lexical_version: str, model_version: str) -> None:
        """Raise :class:`BlendError` unless the weights were fitted for these two detectors."""
        if (lexical_version, model_version) != (self.lexical_version, self.model_version):
            raise BlendError(
                f"blend weights fitted for {self.lexical_version} + {self.model_version}, "
                f"the judge runs {lexical_version} + {model_version}: refit with "
                f"bench/blend_faithfulness.py (or set the nli judge's blend to 'off')")

    def to_json(self, extra: dict[str, Any] | None = None) -> str:
        body = {"intercept": self.intercept, "lexical": self.lexical, "model": self.model,
                "lexical_version": self.lexical_version, "model_version": self.model_version}
        return json.dumps({**body, **(extra or {})}, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def load(cls, path: Path) -> Blend:
        """Read ``path``; :class:`BlendError` names what is wrong with it."""
        try:
            raw = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BlendError(f"{path}: unreadable blend weights: {e}") from e
        try:
            vals = {k: float(raw[k]) for k in ("intercept", "lexical", "model")}
            versions = {k: str(raw[k]) for k in ("lexical_version", "model_version")}
        except (KeyError, TypeError, ValueError) as e:
            raise BlendError(f"{path}: blend weights need intercept, lexical, model, "
                             f"lexical_version, model_version: {e}") from e
        if not all(math.isfinite(v) for v in vals.values()):
            raise BlendError(f"{path}: blend weights must be finite numbers")
        return cls(**vals, **versions)
