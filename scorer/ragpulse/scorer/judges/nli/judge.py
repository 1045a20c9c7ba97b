"""The NLI judge: a local cross-encoder decides statement support; the local judge does the rest.

Facts and how they are computed:

=======================  ====================================================================
STATEMENT_SUPPORT        per answer statement (``segment.split_statements``, as the local
                         judge's STATEMENTS): the model's P(supported) with hypothesis = the
                         statement and premise = a context chunk (``premise="chunks"``, best
                         over the candidate chunks of every context) or its best sentences,
                         each alone or packed, or the mean of both views
                         (``sentences``/``packed``/``auto``/``views``, see the settings);
                         verdict at ``threshold``. Probabilities in ``Finding.extra``,
                         flagged ``expected_share`` by default (faithfulness = their mean, the
                         Wilson interval at sum(P) of n, see ``metrics.EXPECTED_SHARE``).
                         With a blend (``blend.json`` beside the model, settings ``blend``),
                         each P is the logistic blend of the model's and the lexical
                         detector's (``support-lr@5``) P; both are kept in ``Finding.extra``
                         (only for samples with at most ``blend_max_contexts`` contexts)
CONTEXT_USED             per context: some answer statement (the answer itself when it has no
                         statement) draws on it: as the local judge decides it (the context
                         whose sentence the statement matches best, if the match reaches its
                         ``used_threshold``: ``local.analysis.drawn_from``), with the model's
                         P(supported) against each context added to the match, so the model
                         decides between contexts that match alike. The same pairs as
                         STATEMENT_SUPPORT: asking for both runs the model once
CONTEXT_USEFUL           with a model that has an answerability head (``train/answerability.py``;
                         the bundled model has none yet): per context, the
                         head's P(holds the answer or part of it) >= its ``useful`` cut, the
                         question as hypothesis and the context's windows as premises (the best
                         window decides). Otherwise the local judge's (topic similarity)
CONTEXT_RATINGS          with the head: two 0/1/2 ratings of the contexts, each the best over
                         them: (a) 2 when P(answers) >= the ``answers`` cut and P(part or
                         answers) >= ``partly``, 1 when only the latter, else 0; (b) the
                         expected rating P(part) + 2 P(answers), rounded. Otherwise the local
                         judge's (lexical coverage and USE similarity)
REFERENCE_ATTRIBUTION,   the local judge's computation with this model as its support detector
CORRECTNESS
everything else          the local judge (USE embeddings, lexical views), unchanged
=======================  ====================================================================
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ...embeddings import Embedder
from ...metrics import EVIDENCE, EXPECTED_SHARE
from ...model import Fact, Finding, Reason, Sample
from ...segment import split_statements
from ..base import BlockingWorkers, Needs
from ..local import LocalJudge, LocalJudgeSettings
from ..local.analysis import SampleAnalysis, drawn_from
from .blend import BLEND_FILE, Blend, BlendError
from .onnx_model import Closest, NliModel, PairsTooMany
from .settings import NliJudgeSettings, passages

__all__ = ["NliJudge", "claims", "lexical_identity", "model_identity"]

log = logging.getLogger(__name__)

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


def _terse(statement: str) -> bool:
    cjk = len(_CJK.findall(statement))
    return cjk <= 8 if cjk >= 3 else len(statement.split()) <= 4


def model_identity(nli: NliModel) -> str:
    """The model's name and a fingerprint of its graph file, after the scoring version (how its
    pairs are run): what blend weights are fitted for."""
    return f"{nli.pair_version}:{nli.name}#{_digest(Path(nli.onnx_path))}"


def lexical_identity(detector: Any) -> str:
    """The lexical detector's version and a fingerprint of its weights file."""
    return f"{detector.version}#{_digest(Path(detector.weights_path))}"


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def claims(question: str, statements: list[str]) -> tuple[list[str], list[int]]:
    """Hypotheses for ``statements`` under ``terse_claims="with-question"``, and for each
    statement the index of the hypothesis that judges it: a terse statement followed by another
    is joined to it ("No." + "The Basic plan ..."); a lone terse one is prefixed with the
    question ("Which magazine started first? Arthur's Magazine")."""
    hyps: list[str] = []
    owner: list[int] = []
    q = question.strip()
    i = 0
    while i < len(statements):
        s = statements[i]
        if _terse(s) and i + 1 < len(statements):
            hyps.append(f"{s} {statements[i + 1]}")
            owner += [len(hyps) - 1, len(hyps) - 1]
            i += 2
            continue
        hyps.append(f"{q} {s}" if _terse(s) and q else s)
        owner.append(len(hyps) - 1)
        i += 1
    return hyps, owner

def _evidence(probs: list[float], cut: float, best: list[int],
              closest: list[Closest]) -> list[tuple[int, str] | None]:
    """``Finding.extra[EVIDENCE]`` of the statements below ``cut``: the premise that scored best
    for each, as ``(context, text)``: the context is the statement's best context when the
    premise drew on it (a packed premise draws on several), else the premise's first."""
    out: list[tuple[int, str] | None] = []
    for p, j, (_, text, ctxs) in zip(probs, best, closest, strict=True):
        if p >= cut or not ctxs:
            out.append(None)
        else:
            out.append((j if j in ctxs else ctxs[0], text))
    return out


_MODEL_FACTS = frozenset({Fact.STATEMENT_SUPPORT, Fact.CONTEXT_USED})
_ANSWER_FACTS = frozenset({Fact.CONTEXT_USEFUL, Fact.CONTEXT_RATINGS})
_DETECTOR_FACTS = frozenset({Fact.REFERENCE_ATTRIBUTION, Fact.CORRECTNESS})


class NliJudge:
    """Implements :class:`~ragpulse.scorer.judges.base.Judge` with an ONNX NLI model for the
    statement-versus-context facts and a :class:`LocalJudge` (sharing ``embedder``, with this
    model as its support detector) for every other fact.

    Construction loads the model and raises ``ValueError`` (:class:`NliModelError`) with a
    user-facing message for a missing or malformed model directory, unknown labels or missing
    packages, so a bad setup fails at start-up, never on the first sample. ``model`` may be a
    ready :class:`NliModel` (tests, sharing one between judges).

    ``gather`` never blocks the event loop: the model's work runs in a bounded thread pool
    (``settings.workers`` threads, at most ``settings.max_pending`` samples admitted at once),
    concurrently with the local judge's own pool. It never raises for model trouble (a failing
    fact becomes ``judge_error`` with a ``detail``; too many pairs ``input_too_large``);
    ``gather`` after ``aclose`` raises ``RuntimeError``. Use from one event loop; the model and
    the embedder are thread-safe.
    """

    name: str

    def __init__(
        self,
        settings: NliJudgeSettings,
        *,
        embedder: Embedder | None = None,
        local_settings: LocalJudgeSettings | None = None,
        model: NliModel | None = None,
        name: str = "nli",
    ) -> None:
        self.name = name  # "model" for the bundled model, "nli" for a user's own (registry)
        self.settings = settings
        self.nli = model if model is not None else NliModel(settings)
        self.model = self.nli.name
        self.local = LocalJudge(local_settings or LocalJudgeSettings(threads=settings.threads),
                                embedder=embedder, detector=self.nli)
        self.blend, self._lexical = self._load_blend()
        # the facts this judge computes itself: the answerability ones only with the head
        self._own = _MODEL_FACTS | (_ANSWER_FACTS if self.nli.answerability else frozenset())
        self._workers = BlockingWorkers(settings.workers, settings.max_pending,
                                        "ragpulse-nli-judge")
        self._count_lock = threading.Lock()
        self.samples = 0
        self.errors = 0
        self.too_large = 0
        self.pairs = 0

    def _load_blend(self) -> tuple[Blend | None, Any]:
        """The blend weights and the lexical detector they need, per ``settings.blend``.
        Raises :class:`BlendError` when they are required and missing, unreadable, or were
        fitted for another model or other lexical weights."""
        mode, d = self.settings.blend, self.settings.model_dir
        path = Path(d).expanduser() / BLEND_FILE if d is not None else None
        if mode == "off" or path is None or (mode == "auto" and not path.is_file()):
            return None, None
        if not path.is_file():
            raise BlendError(f"blend 'on' needs {path}: fit it with bench/blend_faithfulness.py")
        from ..local.support_detector import SupportDetector

        blend = Blend.load(path)
        lexical = SupportDetector(embedder=self.local.embedder,
                                  weights_path=self.local.settings.support_weights_path)
        blend.check(lexical_identity(lexical), model_identity(self.nli))
        return blend, lexical

    def warm(self) -> NliJudge:
        """Blocking: load the local judge's embedding model now (the NLI model is loaded)."""
        self.local.warm()
        return self

    async def aclose(self) -> None:
        """Stop both judges' worker threads (waiting for running samples). Idempotent."""
        if self._workers.closed:
            return
        await self.local.aclose()
        await self._workers.aclose()

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        if self._workers.closed:
            raise RuntimeError("NliJudge.gather after aclose")
        own = needs.facts & self._own
        if not sample.question.strip():  # no question to read the contexts against
            own -= _ANSWER_FACTS
        rest = needs.facts - own
        parts: list[Any] = []
        if rest:
            parts.append(self.local.gather(sample, Needs(rest, needs.criteria)))
        if own:
            parts.append(self._workers.run_findings(self.judge, sample, own))
        out: dict[Fact, Finding] = {}
        for part in await asyncio.gather(*parts):
            out.update(part)
        for fact in _DETECTOR_FACTS & out.keys():  # computed by this model, say so
            out[fact] = dataclasses.replace(out[fact], model=self.model)
        return out

    # ------------------------------------------------------------------ blocking core

    def judge(self, sample: Sample, facts: frozenset[Fact]) -> dict[Fact, Finding]:
        """Blocking, thread-safe: the model's facts (STATEMENT_SUPPORT, CONTEXT_USED and, with
        an answerability head, CONTEXT_USEFUL and CONTEXT_RATINGS among ``facts``) for
        ``sample``. Never raises for model or input trouble."""
        self._count("samples")
        facts = facts & self._own
        if (detail := self.local.settings.too_large(sample)) is not None:
            return self._too_large(facts, detail)
        out: dict[Fact, Finding] = {}
        if facts & _MODEL_FACTS:
            out.update(self._support_facts(sample, facts & _MODEL_FACTS))
        if facts & _ANSWER_FACTS:
            out.update(self._answer_facts(sample, facts & _ANSWER_FACTS))
        return out

    def _answer_facts(self, sample: Sample, facts: frozenset[Fact]) -> dict[Fact, Finding]:
        """CONTEXT_USEFUL and CONTEXT_RATINGS from the answerability head (see the module doc)."""
        head = self.nli.answerability
        assert head is not None  # _own has these facts only with a head
        try:
            probs = self.nli.answerability_matrix(sample.question.strip(), list(sample.contexts))
        except Exception as e:
            self._count("errors")
            log.warning("nli judge: answerability failed on sample %s", sample.id, exc_info=True)
            return {f: Finding(f, None, Reason.JUDGE_ERROR, model=self.model,
                               detail=f"{type(e).__name__}: {e}") for f in facts}
        reach = probs[:, 1] + probs[:, 2]
        extra: dict[str, Any] = {
            "answerability": [[round(float(v), 4) for v in row] for row in probs],
            "thresholds": {"useful": head.useful, "partly": head.partly,
                           "answers": head.answers}}
        out: dict[Fact, Finding] = {}
        if Fact.CONTEXT_USEFUL in facts:
            out[Fact.CONTEXT_USEFUL] = Finding(
                Fact.CONTEXT_USEFUL, [int(r >= head.useful) for r in reach],
                prompt_version=f"{head.version}/context-useful@1", model=self.model, extra=extra)
        if Fact.CONTEXT_RATINGS in facts:
            cut = [2 if p2 >= head.answers and r >= head.partly else int(r >= head.partly)
                   for p2, r in zip(probs[:, 2], reach, strict=True)]
            expected = [int(np.clip(np.floor(p1 + 2 * p2 + 0.5), 0, 2))
                        for p1, p2 in zip(probs[:, 1], probs[:, 2], strict=True)]
            out[Fact.CONTEXT_RATINGS] = Finding(
                Fact.CONTEXT_RATINGS, [max(cut, default=0), max(expected, default=0)],
                prompt_version=f"{head.version}/context-ratings@1", model=self.model,
                extra={**extra, "cut_ratings": cut, "expected_ratings": expected})
        return out

    def _support_facts(self, sample: Sample, facts: frozenset[Fact]) -> dict[Fact, Finding]:
        """STATEMENT_SUPPORT and CONTEXT_USED among ``facts``."""
        answer = sample.answer.strip()
        try:
            statements = split_statements(answer)
            said = statements or ([answer] if answer and Fact.CONTEXT_USED in facts else [])
            hyps, owner = said, list(range(len(said)))
            if self.settings.terse_claims == "with-question" and hyps:
                hyps, owner = claims(sample.question or "", hyps)
            quotes = [" ".join(t for t, k in zip(said, owner) if k == i)
                      for i in range(len(hyps))]  # a claim's statements, without the question
            closest: list[Closest] = []
            matrix, pairs = self.nli.support_matrix(hyps, list(sample.contexts), closest=closest,
                                                    quotes=quotes)
            matrix = matrix[owner]  # one row per statement again
            closest = [closest[k] for k in owner]
            lexical = (self._lexical.predict(statements, list(sample.contexts))
                       if self._blends(sample) and statements
                       and Fact.STATEMENT_SUPPORT in facts else None)
        except PairsTooMany as e:
            return self._too_large(facts, str(e))
        except Exception as e:
            self._count("errors")
            log.warning("nli judge: inference failed on sample %s", sample.id, exc_info=True)
            return {f: Finding(f, None, Reason.JUDGE_ERROR, model=self.model,
                               detail=f"{type(e).__name__}: {e}") for f in facts}
        self._count("pairs", pairs)
        cut = self.settings.threshold
        out: dict[Fact, Finding] = {}
        if Fact.STATEMENT_SUPPORT in facts:
            n = len(statements)
            probs = [float(p) for p in matrix[:n].max(axis=1)] if matrix.shape[1] else [0.0] * n
            best = [int(i) for i in matrix[:n].argmax(axis=1)] if matrix.shape[1] else [-1] * n
            extra: dict[str, Any] = {"threshold": cut, "best_context": best,
                                     "label": self.nli.positive_label}
            version = self.nli.version
            if lexical is not None and self.blend is not None:
                extra["model_probabilities"] = [round(p, 4) for p in probs]
                extra["lexical_probabilities"] = [round(p, 4) for p in lexical]
                probs = self.blend.combine(lexical, probs)
                version += f"+{self._lexical.version}/{self.blend.tag}"
            extra["probabilities"] = [round(p, 4) for p in probs]
            if any(p < cut for p in probs):
                extra[EVIDENCE] = _evidence(probs, cut, best, closest)
            if self.settings.faithfulness_value == "expected":
                extra[EXPECTED_SHARE] = True
                version += "/expected"
            out[Fact.STATEMENT_SUPPORT] = Finding(
                Fact.STATEMENT_SUPPORT, [int(p >= cut) for p in probs], prompt_version=version,
                model=self.model, extra=extra)
        if Fact.CONTEXT_USED in facts:
            try:
                out[Fact.CONTEXT_USED] = self._context_used(sample, matrix if len(hyps) else None)
            except Exception as e:  # the local match (embedder, hostile text): this fact only
                self._count("errors")
                log.warning("nli judge: context used failed on sample %s", sample.id,
                            exc_info=True)
                out[Fact.CONTEXT_USED] = Finding(Fact.CONTEXT_USED, None, Reason.JUDGE_ERROR,
                                                 model=self.model,
                                                 detail=f"{type(e).__name__}: {e}")
        return out

    def _context_used(self, sample: Sample, matrix: Any) -> Finding:
        """CONTEXT_USED from the local judge's statement-to-context match and the model's
        statements x contexts P (``None`` when the answer is empty)."""
        local = self.local.settings
        match = SampleAnalysis(sample, local, self.local.embedder).statement_match
        n = len(sample.contexts)
        if matrix is None:  # an empty answer: no statement, no P
            matrix = np.zeros(match.shape)
        used = drawn_from(match, local.used_threshold, evidence=matrix)
        extra = {"entailment": [round(float(v), 4) for v in matrix.max(axis=0)] if len(matrix)
                 else [0.0] * n,
                 "alignment": [round(float(v), 4) for v in match.max(axis=0)] if len(match)
                 else [0.0] * n,
                 "threshold": local.used_threshold}
        return Finding(Fact.CONTEXT_USED, used, prompt_version=f"{self.nli.version}/context-used@2",
                       model=self.model, extra=extra)

    def _blends(self, sample: Sample) -> bool:
        """Whether ``sample``'s statement support is the blend (``blend_max_contexts``)."""
        if self.blend is None:
            return False
        cap = self.settings.blend_max_contexts
        return cap is None or passages(sample.contexts) <= cap

    def _too_large(self, facts: frozenset[Fact], detail: str) -> dict[Fact, Finding]:
        self._count("too_large")
        return {f: Finding(f, None, Reason.INPUT_TOO_LARGE, model=self.model, detail=detail)
                for f in facts}

    def _count(self, name: str, n: int = 1) -> None:
        with self._count_lock:
            setattr(self, name, getattr(self, name) + n)
