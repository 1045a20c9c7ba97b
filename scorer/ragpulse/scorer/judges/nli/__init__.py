"""The NLI judge: a small NLI / hallucination cross-encoder (ONNX) run on this machine.

``NliJudge`` scores statement support (faithfulness) and context utilization with an ONNX
sequence-classification model run by onnxruntime, its ``tokenizer.json`` read by ``tokenizers``
(onnxruntime and tokenizers, core dependencies; no torch, no download at run time), and
delegates every other fact to a :class:`~ragpulse.scorer.judges.local.LocalJudge`.
``docs/judges.md`` says how to get a model onto the machine. :func:`canonical` (``values``)
rewrites values into one form before the model reads them (``canonical_values``).

Importing this package does not import onnxruntime or tokenizers: the model does, when built.
"""

from .blend import Blend, BlendError
from .judge import NliJudge
from .onnx_model import NliModel, NliModelError
from .settings import NliJudgeSettings
from .values import canonical

__all__ = ["Blend", "BlendError", "NliJudge", "NliJudgeSettings", "NliModel", "NliModelError",
           "canonical"]
