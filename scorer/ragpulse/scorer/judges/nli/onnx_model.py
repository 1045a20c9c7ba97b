"""An NLI / hallucination cross-encoder exported to ONNX, run with onnxruntime and ``tokenizers``.

:class:`NliModel` reads a model directory once (``model.onnx``, ``tokenizer.json``,
``config.json``), checks everything a sample would otherwise trip on (labels, inputs, output
width: one forward pass at construction) and then scores (premise, hypothesis) pairs:
premise = a context chunk, hypothesis = a statement. It has the statement-support detector
contract the local judge uses (``predict``, ``threshold``, ``version``), so the reference metrics
(context recall, answer correctness) run on it too.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...segment import split_sentences
from .quoted import quoted
from .settings import NliJudgeSettings, passages, premise_modes, settings_tag
from .values import canonical

__all__ = ["ANSWERABILITY_OUTPUT", "POSITIVE_LABELS", "Answerability", "Closest", "NliModel",
           "NliModelError", "PairsTooMany"]

POSITIVE_LABELS = frozenset({
    "entailment", "entailed", "entails", "entail", "supported", "support", "supports",
    "consistent", "faithful", "factual", "grounded", "true", "yes",
})
"""Label names (lower case, ``-``/space read as ``_``) taken to mean "supported"."""

_VERSION = "nli-support@2"  # @2: pairs of a batch-dependent (dynamically quantized) graph run alone
_MIN_WINDOW = 8  # premise tokens a chunk must keep; below it the settings cannot work

ANSWERABILITY_OUTPUT = "answerability"
"""The second output of a model with an answerability head (``[B, 3]``: P(the premise does not
answer the hypothesis read as a question), P(it holds part of the answer), P(it answers)), a head
on the same encoder as ``logits`` (``train/answerability.py``; the bundled model has none yet)."""


@dataclass(frozen=True)
class Answerability:
    """What ``config.json``'s ``answerability`` says about the graph's second output: the head's
    ``version`` and the cuts its verdicts use, chosen on a validation split of the training
    data: ``useful`` on P(holds the answer or part of it) for a context precision verdict,
    ``partly``/``answers`` on P(holds part)+P(answers) and P(answers) for a 0/1/2 rating."""

    version: str
    useful: float
    partly: float
    answers: float


@dataclass(frozen=True)
class _Unit:
    """A sentence (or a piece of a long one) of context ``context``: ``contexts[context]
    [start:end]``, ``tokens`` tokens, ``ids`` its distinct token ids."""

    context: int
    start: int
    end: int
    tokens: int
    ids: frozenset[int]


Closest = tuple[float, str, tuple[int, ...]]
"""The premise that scored best for one statement: its P(supported), its text as the model read
it (a chunk, a sentence window, or sentences packed from several contexts) and the contexts it
was taken from (:meth:`NliModel.support_matrix`'s ``closest``)."""


PADDING_SLACK = 0.05
"""The most padding a batch of pairs may carry, as a share of its real tokens. On the CPU a
pair's cost is its padded length (no gain from batching itself: 0.41 ms a token at batch 1 and
8, docs/benchmarks.md), so the typical trace's batches of 8, padded to their longest, cost 1.4x
the CPU of the same pairs alone; a GPU still gets batches of pairs of about one length."""


def padded_batches(lengths: Sequence[int], batch_size: int,
                   slack: float | None = None) -> list[list[int]]:
    """Indices of ``lengths`` (token counts) in batches of at most ``batch_size``, shortest
    first, each padded to its longest by at most ``slack`` (default :data:`PADDING_SLACK`) of
    its real tokens: a batch closes when the next pair would pad it more. Every index once; a
    batch size of 1 runs each alone."""
    if slack is None:
        slack = PADDING_SLACK
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0
    for i in order:
        n = lengths[i]
        if batch and (len(batch) >= batch_size
                      or n * (len(batch) + 1) > (1.0 + slack) * (tokens + n)):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(i)
        tokens += n
    if batch:
        batches.append(batch)
    return batches


def _top_by_share(hyp: set[int], pieces: Sequence[set[int] | frozenset[int]], k: int) -> list[int]:
    """Indices of the ``k`` pieces holding the largest share of ``hyp``'s distinct token ids,
    best first (ties: the earlier piece first)."""
    # one denominator for every piece: ranking by the shared count is ranking by the share
    shared = [len(hyp & p) for p in pieces]
    return heapq.nsmallest(k, range(len(pieces)), key=lambda j: (-shared[j], j))


class NliModelError(ValueError):
    """The model directory or the settings cannot make a working model (user-facing message)."""


class PairsTooMany(Exception):
    """A sample needs more statement-chunk pairs than ``max_pairs``."""


def _import_runtime() -> tuple[Any, Any]:
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as e:
        raise NliModelError(
            f"the nli judge needs onnxruntime and tokenizers ({e.name} is not installed): "
            "pip install 'ragpulse[nli]'"
        ) from None
    return onnxruntime, Tokenizer


def _norm(label: str) -> str:
    return str(label).strip().lower().replace("-", "_").replace(" ", "_")


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NliModelError(f"{what} {path}: cannot be read as JSON ({e})") from None
    if not isinstance(data, dict):
        raise NliModelError(f"{what} {path}: expected a JSON object")
    return data


class NliModel:
    """One loaded cross-encoder. Construction blocks (reads files, builds the onnxruntime
    session, runs one pair) and raises :class:`NliModelError` (a ``ValueError``) with a
    user-facing message when the directory, the labels or the graph's inputs are unusable, or
    when onnxruntime/tokenizers are not installed.

    ``pair_probabilities``, ``support_matrix`` and ``predict`` block (CPU) and are thread-safe:
    the session and the tokenizers are never reconfigured after construction, and onnxruntime
    allows concurrent ``run`` calls. Call them from a worker thread in async code.
    """

    def __init__(self, settings: NliJudgeSettings) -> None:
        self.settings = s = settings
        if s.model_dir is None:
            raise NliModelError(
                "the nli judge needs a model directory: --model-dir DIR or RAGPULSE_NLI__MODEL_DIR "
                "(model.onnx, tokenizer.json, config.json; see docs/judges.md)")
        ort, Tokenizer = _import_runtime()
        d = Path(s.model_dir).expanduser()
        onnx_path, tok_path, cfg_path = self._model_files(d)
        self.onnx_path: Path = onnx_path
        self.config = cfg = _read_json(cfg_path, "nli model config")
        tok_cfg_path = d / "tokenizer_config.json"
        tok_cfg = _read_json(tok_cfg_path, "tokenizer config") if tok_cfg_path.is_file() else {}

        # --- tokenizers: one for offsets (no special tokens, no truncation), one for pairs
        try:
            base = Tokenizer.from_file(str(tok_path))
        except Exception as e:
            raise NliModelError(f"nli model directory {d}: tokenizer.json cannot be loaded "
                                f"({e})") from None
        trunc = base.truncation
        base.no_truncation()
        base.no_padding()
        self._tok = base
        self.max_length = self._limit(cfg, tok_cfg, trunc)
        self.special_tokens = base.num_special_tokens_to_add(True)
        self._pair_tok = Tokenizer.from_str(base.to_str())
        self._pair_tok.enable_truncation(self.max_length, strategy="longest_first")
        if self.max_length - self.special_tokens < 2 * _MIN_WINDOW:
            raise NliModelError(f"max_length {self.max_length} leaves no room for a premise")
        pad = cfg.get("pad_token_id")
        self.pad_id = int(pad) if isinstance(pad, int) and pad >= 0 else 0

        # --- labels
        self.labels, self.positive_index = self._labels(cfg, s.positive_label)

        # --- the session
        self._open_session(ort, onnx_path, s.threads)

        # --- identity
        self.name = s.model_name or self._name(cfg, d)
        self.threshold: float = s.threshold
        # how its pairs run (what a blend was fitted with), and what the scores it makes are
        # stored under: that plus its premises, windows and claims (settings_tag)
        self.pair_version: str = _VERSION
        self.version: str = f"{_VERSION}/{settings_tag(s)}"

        # --- one pair now, so a wrong graph fails here and not on the first sample
        try:
            logits = self._run([("a premise.", "a statement.")])
        except Exception as e:
            raise NliModelError(f"nli model {onnx_path}: a test pair failed ({e})") from None
        width = logits.shape[1] if logits.ndim == 2 else -1
        expected = len(self.labels) if self.labels else width
        if width < 1 or width != expected:
            raise NliModelError(f"nli model {onnx_path}: the output {self._output!r} has shape "
                                f"{list(logits.shape)}, config.json has {len(self.labels)} labels")
        if width == 1 and self.positive_index != 0:
            raise NliModelError(f"nli model {onnx_path}: one logit, positive index must be 0")
        self.positive_label = self.labels[self.positive_index] if self.labels else "score"
        self.answerability: Answerability | None = self._answerability(cfg)

        # --- whether a pair's logits depend on the other pairs of its batch. A graph quantized
        # dynamically (onnxruntime's DynamicQuantizeLinear, as the bundled model) scales each
        # activation tensor by its maximum over the whole padded batch, so one pair's P moved by
        # up to 0.1 with the statements and contexts it happened to be batched with. Such a
        # model runs its pairs one at a time: a score then depends on its pair alone, never on
        # the sample around it or on ``batch_size`` (a resource setting).
        self.batch_invariant: bool = self._probe_batching(logits)
        self.effective_batch_size: int = s.batch_size if self.batch_invariant else 1

    # ------------------------------------------------------------------ construction helpers

    _PROBE_OTHER = ("Completely different premise text that runs on for a while, with numbers "
                    "such as 1,234,567 and 89.5 %, names like Zürich and 東京都, and more words "
                    "so that its padded row is much longer than the first pair's row.",
                    "ANOTHER STATEMENT, IN CAPITALS, WITH 42 AND 3.14159.")

    def _probe_batching(self, alone: np.ndarray) -> bool:
        """True when the test pair's logits are the same alone (``alone``) and batched with a
        longer, different pair (within 1e-4, float noise of padded matmuls)."""
        try:
            both = self._run([("a premise.", "a statement."), self._PROBE_OTHER])
        except Exception as e:
            raise NliModelError(f"nli model {self.onnx_path}: a batch of two test pairs failed "
                                f"({e})") from None
        return bool(np.allclose(both[0], alone[0], rtol=0.0, atol=1e-4))

    def _answerability(self, cfg: dict[str, Any]) -> Answerability | None:
        """The answerability head when the graph has its output and config.json describes it
        (``train/answerability.py`` writes both); None for any other model. Raises
        NliModelError when only one of the two is there, or the output is not ``[1, 3]``."""
        raw = cfg.get("answerability")
        has_output = ANSWERABILITY_OUTPUT in self._outputs
        if raw is None and not has_output:
            return None
        where = f"nli model {self.onnx_path}"
        if raw is None or not has_output:
            raise NliModelError(f"{where}: config.json's 'answerability' and the graph's "
                                f"{ANSWERABILITY_OUTPUT!r} output go together; one is missing")
        try:
            cuts = raw["thresholds"]
            head = Answerability(str(raw["version"]), float(cuts["useful"]),
                                 float(cuts["partly"]), float(cuts["answers"]))
        except (KeyError, TypeError, ValueError) as e:
            raise NliModelError(f"{where}: config.json 'answerability' needs version and "
                                f"thresholds useful/partly/answers ({e!r})") from None
        probs = self.pair_outputs([("a premise.", "a question?")], ANSWERABILITY_OUTPUT)
        if probs.shape != (1, 3):
            raise NliModelError(f"{where}: output {ANSWERABILITY_OUTPUT!r} has shape "
                                f"{list(probs.shape)} for one pair, expected [1, 3]")
        return head

    @staticmethod
    def _model_files(d: Path) -> tuple[Path, Path, Path]:
        """(model.onnx, tokenizer.json, config.json) of the model directory ``d``. Raises
        NliModelError naming what is missing."""
        if not d.is_dir():
            raise NliModelError(f"nli model directory {d} does not exist or is not a directory")
        onnx_path = next((p for p in (d / "model.onnx", d / "onnx" / "model.onnx") if p.is_file()),
                         None)
        if onnx_path is None:
            raise NliModelError(f"nli model directory {d}: no model.onnx (nor onnx/model.onnx)")
        tok_path = d / "tokenizer.json"
        if not tok_path.is_file():
            raise NliModelError(f"nli model directory {d}: no tokenizer.json (a fast tokenizer "
                                "file; optimum-cli export and Xenova/* repositories ship one)")
        cfg_path = d / "config.json"
        if not cfg_path.is_file():
            raise NliModelError(f"nli model directory {d}: no config.json (id2label, "
                                "max_position_embeddings)")
        return onnx_path, tok_path, cfg_path

    def _open_session(self, ort: Any, onnx_path: Path, threads: int) -> None:
        """The onnxruntime session (CPU, ``threads`` intra-op threads), its input dtypes and its
        output name. Raises NliModelError when onnxruntime cannot load the graph or its inputs
        are not a text-classification export's."""
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            self._session = ort.InferenceSession(str(onnx_path), so,
                                                 providers=["CPUExecutionProvider"])
        except Exception as e:
            hint = ""
            if ("BlockQuantized" in str(e) or "NBits" in str(e)) and \
                    tuple(int(x) for x in ort.__version__.split(".")[:2] if x.isdigit()) < (1, 22):
                hint = ("; a train.export --format block8 model needs onnxruntime >= 1.22, this "
                        f"is {ort.__version__}")
            raise NliModelError(
                f"nli model {onnx_path}: onnxruntime cannot load it ({e}{hint})") from None
        self._inputs: dict[str, np.dtype] = {}
        for inp in self._session.get_inputs():
            if inp.name not in ("input_ids", "attention_mask", "token_type_ids"):
                raise NliModelError(
                    f"nli model {onnx_path}: unsupported input {inp.name!r}; expected input_ids, "
                    "attention_mask and optionally token_type_ids (a text-classification export)")
            self._inputs[inp.name] = np.int32 if "int32" in str(inp.type) else np.int64
        if "input_ids" not in self._inputs:
            raise NliModelError(f"nli model {onnx_path}: the graph has no input_ids input")
        outs = [o.name for o in self._session.get_outputs()]
        self._output = "logits" if "logits" in outs else outs[0]
        self._outputs = frozenset(outs)

    def _limit(self, cfg: dict[str, Any], tok_cfg: dict[str, Any], trunc: Any) -> int:
        limits: list[int] = []
        if isinstance(trunc, dict) and isinstance(trunc.get("max_length"), int):
            limits.append(trunc["max_length"])
        mml = tok_cfg.get("model_max_length")
        if isinstance(mml, int) and 0 < mml < 1_000_000:  # transformers writes 1e30 for "none"
            limits.append(mml)
        mpe = cfg.get("max_position_embeddings")
        if isinstance(mpe, int) and mpe > 0:
            # RoBERTa-style position ids start after the padding index: two positions are lost
            if "roberta" in str(cfg.get("model_type", "")) or "camembert" in str(
                    cfg.get("model_type", "")):
                mpe -= 2
            limits.append(mpe)
        if not limits and self.settings.max_length is None:
            raise NliModelError("nli model config.json has no max_position_embeddings and the "
                                "tokenizer no max length: set max_length")
        if self.settings.max_length is not None:
            limits.append(self.settings.max_length)
        return min(limits)

    @staticmethod
    def _labels(cfg: dict[str, Any], wanted: str | None) -> tuple[list[str], int]:
        raw = cfg.get("id2label")
        labels: list[str] = []
        if raw is not None:
            try:
                pairs = sorted((int(k), str(v)) for k, v in dict(raw).items())
            except (TypeError, ValueError):
                raise NliModelError("nli model config.json: id2label must map indices to "
                                    "label names") from None
            if [i for i, _ in pairs] != list(range(len(pairs))) or not pairs:
                raise NliModelError("nli model config.json: id2label indices must be 0..n-1")
            labels = [v for _, v in pairs]
        if wanted is not None:
            w = _norm(wanted)
            hits = [i for i, lab in enumerate(labels) if _norm(lab) == w]
            if hits:
                return labels, hits[0]
            if w.isdigit() and (int(w) < len(labels) or (not labels and int(w) == 0)):
                return labels, int(w)
            raise NliModelError(f"positive label {wanted!r} is not among the model's labels "
                                f"{labels or '(none: one logit)'}; give a name or an index")
        if not labels:
            raise NliModelError("nli model config.json has no id2label: give the positive label's "
                                "index (--positive-label N)")
        if len(labels) == 1:
            return labels, 0
        hits = [i for i, lab in enumerate(labels) if _norm(lab) in POSITIVE_LABELS]
        if len(hits) != 1:
            hint = " (a 2-class HHEM-style model: usually 1)" if len(labels) == 2 else ""
            raise NliModelError(f"cannot tell which of the model's labels {labels} means "
                                f"'supported': give --positive-label NAME or INDEX{hint}")
        return labels, hits[0]

    @staticmethod
    def _name(cfg: dict[str, Any], d: Path) -> str:
        hub = cfg.get("_name_or_path")
        # a hub name ("org/model") is public; a local path could say who built it, where
        if isinstance(hub, str) and hub and not hub.startswith(("/", ".", "~")) \
                and "\\" not in hub and ":" not in hub and hub.count("/") <= 1:
            return hub
        return d.resolve().name or "nli-model"

    # ------------------------------------------------------------------ inference

    def _run(self, pairs: Sequence[tuple[str, str]], output: str | None = None) -> np.ndarray:
        return self._run_encoded(self._pair_tok.encode_batch(list(pairs)), output)

    def _run_encoded(self, encs: Sequence[Any], output: str | None = None) -> np.ndarray:
        """The graph's ``output`` for tokenized pairs (one forward pass, padded to the longest)."""
        width = max(len(e.ids) for e in encs)
        n = len(encs)
        ids = np.full((n, width), self.pad_id, dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        types = np.zeros((n, width), dtype=np.int64)
        for i, e in enumerate(encs):
            k = len(e.ids)
            ids[i, :k] = e.ids
            mask[i, :k] = e.attention_mask
            types[i, :k] = e.type_ids
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {name: arrays[name].astype(dt, copy=False) for name, dt in self._inputs.items()}
        out = self._session.run([output or self._output], feed)[0]
        return np.asarray(out, dtype=np.float64).reshape(n, -1)

    def pair_outputs(self, pairs: Sequence[tuple[str, str]], output: str) -> np.ndarray:
        """The graph output ``output`` (a name among the session's outputs) for each (premise,
        hypothesis) pair, ``[len(pairs), width]`` float64, each pair run alone (batch 1: what
        the bundled int8 graph's outputs are defined by) and truncated as every pair is.
        Blocking, thread-safe."""
        if output not in self._outputs:
            raise ValueError(f"the graph has no output {output!r} (it has {sorted(self._outputs)})")
        if not pairs:
            return np.zeros((0, 0))
        return np.concatenate([self._run([pair], output) for pair in pairs])

    def question_windows(self, question: str, contexts: Sequence[str]
                         ) -> tuple[str, list[list[str]]]:
        """``(hypothesis, premises)`` for reading each of ``contexts`` against ``question``: the
        question truncated as a statement is (``max_statement_tokens``), and each context in
        the :meth:`chunks` that fit beside it: what the answerability head reads."""
        room, cap = self._statement_room()
        hyp, n = self._hypothesis(question, cap)
        return hyp, [self.chunks(c, room - n) for c in contexts]

    def answerability_matrix(self, question: str, contexts: Sequence[str]) -> np.ndarray:
        """``[len(contexts), 3]``: for each context, the answerability head's (P(not), P(part),
        P(answers)) of its window that reads best (the highest P(part) + 2 P(answers)); a
        blank context gets (1, 0, 0). Each (window, question) pair runs alone. Raises
        ``RuntimeError`` when the model has no answerability head. Blocking, thread-safe."""
        if self.answerability is None:
            raise RuntimeError(f"{self.name} has no answerability head")
        if isinstance(contexts, str):
            raise TypeError("contexts must be a sequence of strings, not a string")
        out = np.zeros((len(contexts), 3))
        out[:, 0] = 1.0
        hyp, windows = self.question_windows(question, contexts)
        for j, pieces in enumerate(windows):
            if not pieces:
                continue
            probs = self.pair_outputs([(p, hyp) for p in pieces], ANSWERABILITY_OUTPUT)
            best = int(np.argmax(probs[:, 1] + 2.0 * probs[:, 2]))
            out[j] = probs[best]
        return out

    def pair_probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(supported) for each (premise, hypothesis) pair, in input order. A pair that occurs
        more than once runs once (a statement's packed premise is often its best sentence
        alone). Pairs are run in batches of at most ``batch_size`` (one at a time for a model
        whose outputs depend on the batch: ``batch_invariant``) of about one length
        (:func:`padded_batches`: a batch pads at most :data:`PADDING_SLACK` of its tokens); each
        pair is truncated to ``max_length`` tokens (longest side first). Blocking,
        thread-safe."""
        if not pairs:
            return np.zeros(0)
        first: dict[tuple[str, str], int] = {}
        where = [first.setdefault((p, h), len(first)) for p, h in pairs]
        if len(first) < len(pairs):
            return self._probabilities(list(first))[where]
        return self._probabilities(pairs)

    def _probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """:meth:`pair_probabilities` of distinct pairs."""
        encs = self._pair_tok.encode_batch(list(pairs))
        out = np.empty(len(pairs))
        for idx in padded_batches([len(e.ids) for e in encs], self.effective_batch_size):
            logits = self._run_encoded([encs[i] for i in idx])
            if logits.shape[1] == 1:
                z = np.clip(logits[:, 0], -60.0, 60.0)
                p = 1.0 / (1.0 + np.exp(-z))
            else:
                z = logits - logits.max(axis=1, keepdims=True)
                e = np.exp(z)
                p = e[:, self.positive_index] / e.sum(axis=1)
            out[idx] = p
        return np.clip(np.nan_to_num(out, nan=0.0), 0.0, 1.0)

    def _statement_room(self) -> tuple[int, int]:
        """``(room, cap)``: the tokens a pair has beside its special tokens, and the most of
        them a hypothesis (a statement or a question) may take (``max_statement_tokens``,
        else half, leaving a premise at least ``_MIN_WINDOW``)."""
        room = self.max_length - self.special_tokens
        return room, max(1, min(self.settings.max_statement_tokens or room // 2,
                                room - _MIN_WINDOW))

    def _hypothesis(self, statement: str, cap: int) -> tuple[str, int]:
        enc = self._tok.encode(statement, add_special_tokens=False)
        if len(enc.ids) <= cap:
            return statement, len(enc.ids)
        return statement[: enc.offsets[cap - 1][1]], cap

    def chunks(self, context: str, window: int) -> list[str]:
        """``context`` cut into pieces of at most ``window`` tokens that overlap by
        ``chunk_overlap`` tokens (at most half a window), on token boundaries; one piece when it
        fits, none when it is blank. Blocking, thread-safe."""
        if not context.strip():
            return []
        enc = self._tok.encode(context, add_special_tokens=False)
        offs = enc.offsets
        n = len(offs)
        if n <= window:
            return [context]
        step = max(1, window - min(self.settings.chunk_overlap, window // 2))
        out: list[str] = []
        start = 0
        while True:
            end = min(start + window, n)
            out.append(context[offs[start][0] : offs[end - 1][1]])
            if end >= n:
                return out
            start += step

    def support_matrix(self, statements: Sequence[str], contexts: Sequence[str], *,
                       closest: list[Closest] | None = None,
                       quotes: Sequence[str] | None = None) -> tuple[np.ndarray, int]:
        """``(P, pairs)``: ``P[i, j]`` is the best P(supported) of statement ``i`` over the chunks
        of context ``j`` (0 for a blank context) and ``pairs`` the number of pairs run. Raises
        :class:`PairsTooMany` before running anything when the sample needs more than
        ``max_pairs`` pairs, ``TypeError`` for a bare string. Blocking, thread-safe.

        ``closest``: an empty list to fill with one :data:`Closest` per statement: the premise
        that scored best for it (its P, its text as the model read it, the contexts it was
        taken from), ``(0.0, "", ())`` when no premise ran.

        With ``canonical_values`` every statement and context is rewritten once, before
        anything is split, ranked or paired (:func:`~ragpulse.scorer.judges.nli.values.
        canonical`): the premises, and the ``closest`` texts, are the rewritten ones. With
        ``quoted_support`` a statement that repeats a context's sentences word for word
        (:func:`~ragpulse.scorer.judges.nli.quoted.quoted`) has P 1 for that context, and that
        context's sentences as its ``closest``; ``quotes`` (one per statement) is the text that
        must be the quote when the statement is not (a terse statement judged with the question
        in front: the statement alone)."""
        if isinstance(statements, str) or isinstance(contexts, str):
            raise TypeError("statements and contexts must be sequences of strings, not a string")
        quotes = list(statements if quotes is None else quotes)
        if len(quotes) != len(statements):
            raise ValueError(f"{len(quotes)} quotes for {len(statements)} statements")
        if self.settings.canonical_values:
            statements, contexts, quotes = self.canonical_texts(statements, contexts, quotes)
        if closest is not None:
            closest[:] = [(-1.0, "", ())] * len(statements)
        out = np.zeros((len(statements), len(contexts)))
        if not statements or not contexts:
            if closest is not None:
                closest[:] = [(0.0, "", ())] * len(statements)
            return out, 0
        s = self.settings
        room, cap = self._statement_room()
        hyps = [self._hypothesis(st, cap) for st in statements]
        window = room - max(n for _, n in hyps)
        if s.premise == "evidence":
            found = self._evidence_matrix([h for h, _ in hyps], contexts, window, out, closest)
        elif s.premise != "chunks":
            modes = premise_modes(s.premise, passages(contexts))
            found = self._sentence_matrix([h for h, _ in hyps], contexts,
                                          max(_MIN_WINDOW, min(s.premise_tokens, window)), out,
                                          modes, closest=closest)
        else:
            pieces, owners = self._pieces(contexts, window)
            total = self._chunk_pairs(len(hyps), len(pieces))
            if total > s.max_pairs:
                raise PairsTooMany(f"{len(hyps)} statements x {len(pieces)} context chunks = "
                                   f"{total} pairs; max_pairs {s.max_pairs}")
            found = self._chunk_matrix([h for h, _ in hyps], pieces, owners, out, closest)
        matrix, pairs = found
        if s.quoted_support:
            for i, (j, text) in quoted(quotes, contexts, split_sentences).items():
                matrix[i, j] = 1.0
                if closest is not None and closest[i][0] < 1.0:
                    closest[i] = (1.0, text, (j,))
        if closest is not None:
            closest[:] = [c if c[0] >= 0.0 else (0.0, "", ()) for c in closest]
        return matrix, pairs

    @staticmethod
    def canonical_texts(*groups: Sequence[str]) -> tuple[list[str], ...]:
        """Each group of texts with its values in canonical form
        (:func:`~ragpulse.scorer.judges.nli.values.canonical`), each distinct text rewritten
        once: what ``support_matrix`` reads under ``canonical_values``."""
        done: dict[str, str] = {}
        return tuple([done[t] if t in done else done.setdefault(t, canonical(t)) for t in g]
                     for g in groups)

    def _pieces(self, contexts: Sequence[str], window: int) -> tuple[list[str], list[int]]:
        """Every context's chunks (:meth:`chunks`) and the context each came from."""
        owners: list[int] = []
        pieces: list[str] = []
        for j, c in enumerate(contexts):
            for piece in self.chunks(c, window):
                owners.append(j)
                pieces.append(piece)
        return pieces, owners

    def _chunk_pairs(self, n_hyps: int, n_pieces: int) -> int:
        """Pairs the chunk premises take: every statement runs against min(candidates, chunks)
        chunks, so the bound is known before ranking."""
        k = self.settings.candidates
        return n_hyps * (min(k, n_pieces) if k is not None else n_pieces)

    def _chunk_matrix(self, hyps: list[str], pieces: list[str], owners: list[int],
                      out: np.ndarray, closest: list[Closest] | None = None,
                      skip: frozenset[int] = frozenset()) -> tuple[np.ndarray, int]:
        """Each statement against its ``candidates`` chunks (all when unset): ``out[i, j]`` the
        best P over context ``j``'s chunks it ran; ``closest`` (see :meth:`support_matrix`)
        keeps each statement's best chunk."""
        if not pieces:
            return out, 0
        k = self.settings.candidates
        picks: list[list[int]]
        if k is not None and k < len(pieces):
            picks = self._candidates(hyps, pieces, k)
        else:
            picks = [list(range(len(pieces)))] * len(hyps)
        picks = [[] if i in skip else cs for i, cs in enumerate(picks)]
        pairs = [(pieces[c], h) for h, cs in zip(hyps, picks, strict=True) for c in cs]
        probs = self.pair_probabilities(pairs)
        at = 0
        for i, cs in enumerate(picks):
            for c in cs:
                j = owners[c]
                out[i, j] = max(out[i, j], probs[at])
                if closest is not None and probs[at] > closest[i][0]:
                    closest[i] = (float(probs[at]), pieces[c], (j,))
                at += 1
        return out, len(pairs)

    def _evidence_matrix(self, hyps: list[str], contexts: Sequence[str], window: int,
                         out: np.ndarray, closest: list[Closest] | None = None
                         ) -> tuple[np.ndarray, int]:
        """``premise="evidence"``: each statement against premises that can hold its evidence,
        its best one deciding: its ``candidates`` chunks (a passage that fits the model's window
        is one chunk, a longer one overlapping windows), its best ``premise_view_sentences``
        sentences alone and, with two or more passages, its best sentences packed across them.
        ``P[i, j]`` is the best P of any premise that drew on context ``j``. The pair bound is
        checked for all of them before any runs."""
        s = self.settings
        pieces, owners = self._pieces(contexts, window)
        n_chunk = self._chunk_pairs(len(hyps), len(pieces))
        cap = max(_MIN_WINDOW, min(s.premise_tokens, window))
        modes = premise_modes("views", passages(contexts))
        keep = s.premise_view_sentences
        units = self.sentence_units(contexts, cap)
        k = min(s.premise_sentences, len(units))
        least = n_chunk + (len(hyps) * sum(self._least_premises(m, k, keep) for m in modes)
                           if units else 0)
        if least > s.max_pairs:
            raise PairsTooMany(f"{len(hyps)} statements x ({len(pieces)} chunks and their best "
                               f"sentences) = at least {least} pairs; max_pairs {s.max_pairs}")
        views, m = self._sentence_matrix(hyps, contexts, cap, out.copy(), modes, keep=keep,
                                         combine="max", units=units, budget=s.max_pairs - n_chunk,
                                         closest=closest)
        # the cascade: statements a sentence premise already supports skip their windows
        done = (frozenset() if s.evidence_cut is None
                else frozenset(np.flatnonzero(views.max(axis=1) >= s.evidence_cut).tolist()))
        chunked, n = self._chunk_matrix(hyps, pieces, owners, out.copy(), closest, skip=done)
        return np.maximum(chunked, views), n + m

    def sentence_units(self, contexts: Sequence[str], cap: int) -> list[_Unit]:
        """The sentences of every context (``segment.split_sentences``) in document order, as
        character spans of their context with their token ids; a sentence longer than ``cap``
        tokens is cut into pieces of ``cap`` tokens overlapping by ``chunk_overlap`` (at most half
        of ``cap``), each a unit of its own. Blocking, thread-safe."""
        spans: list[tuple[int, int, int]] = []
        for j, c in enumerate(contexts):
            pos = 0
            for sent in split_sentences(c):
                at = c.find(sent, pos)
                if at < 0:  # split_sentences returns stripped substrings: not expected
                    continue
                spans.append((j, at, at + len(sent)))
                pos = at + len(sent)
        if not spans:
            return []
        encs = self._tok.encode_batch([contexts[j][a:b] for j, a, b in spans],
                                      add_special_tokens=False)
        step = max(1, cap - min(self.settings.chunk_overlap, cap // 2))
        units: list[_Unit] = []
        for (j, a, _), e in zip(spans, encs, strict=True):
            ids, offs = e.ids, e.offsets
            if not ids:
                continue
            start = 0
            while True:
                end = min(start + cap, len(ids))
                units.append(_Unit(j, a + offs[start][0], a + offs[end - 1][1], end - start,
                                   frozenset(ids[start:end])))
                if end >= len(ids):
                    break
                start += step
        return units

    def _sentence_matrix(self, hyps: list[str], contexts: Sequence[str], cap: int,
                         out: np.ndarray, modes: tuple[str, ...], *, keep: int | None = -1,
                         combine: str = "mean", units: list[_Unit] | None = None,
                         budget: int | None = None, closest: list[Closest] | None = None
                         ) -> tuple[np.ndarray, int]:
        """``support_matrix`` for ``premise="sentences"``/``"packed"`` (``modes``: one of them,
        or both, whose matrices are averaged, or under ``combine="max"`` the best of; see the
        settings). The sentences are split and ranked once, and the pairs of every mode run in
        one call. ``keep``: how many best sentences the sentence view runs (default: its
        setting's rule); ``units``: the sentences when already split; ``budget``: the pairs
        allowed (default ``max_pairs``); ``closest``: see :meth:`support_matrix`."""
        s = self.settings
        budget = s.max_pairs if budget is None else budget
        units = self.sentence_units(contexts, cap) if units is None else units
        if not units:
            return out, 0
        k = min(s.premise_sentences, len(units))
        if keep == -1:  # beside the packed premise, the sentence view runs the best few
            keep = s.premise_view_sentences if len(modes) > 1 else None
        least = len(hyps) * sum(self._least_premises(mode, k, keep) for mode in modes)
        if least > budget:  # before ranking every statement against every sentence
            raise PairsTooMany(f"{len(hyps)} statements x their top-{k} sentence windows = at "
                               f"least {least} pairs; max_pairs {s.max_pairs}")
        hsets = [set(e.ids) for e in self._tok.encode_batch(hyps, add_special_tokens=False)]
        heads = self._headings(units, s.premise_heading)
        sets = [u.ids for u in units]
        picked = [_top_by_share(hs, sets, k) for hs in hsets]
        pairs: list[tuple[str, str]] = []
        credit: list[tuple[int, int, tuple[int, ...]]] = []  # per pair: mode, statement, contexts
        for m, mode in enumerate(modes):
            for text, i, ctxs in self._mode_premises(mode, picked, units, heads, contexts, cap,
                                                     keep):
                pairs.append((text, hyps[i]))
                credit.append((m, i, ctxs))
        if len(pairs) > budget:
            raise PairsTooMany(f"{len(hyps)} statements x their top-{k} sentence windows = "
                               f"{len(pairs)} pairs; max_pairs {s.max_pairs}")
        probs = self.pair_probabilities(pairs)
        views = [out.copy() for _ in modes]
        for (m, i, ctxs), p, (text, _) in zip(credit, probs, pairs, strict=True):
            for j in ctxs:
                views[m][i, j] = max(views[m][i, j], p)
            if closest is not None and p > closest[i][0]:
                closest[i] = (float(p), text, ctxs)
        if combine == "max":  # the best premise decides; each cell the best that drew on it
            return np.maximum.reduce(views), len(pairs)
        mean = sum(views) / len(views)
        if len(modes) > 1:
            # every context of a statement's packed premise was used together: it gets the
            # statement's P (the row's best, so each statement's P is unchanged), as under
            # "packed"; else a second passage the sentence view did not run could never reach
            # the threshold (its cell at most half the packed P)
            best = mean.max(axis=1)
            packed = modes.index("packed")
            for (m, i, ctxs) in credit:
                if m == packed:
                    for j in ctxs:
                        mean[i, j] = max(mean[i, j], best[i])
        return mean, len(pairs)

    def _least_premises(self, mode: str, k: int, keep: int | None) -> int:
        """The fewest premises one statement gets under ``mode`` with its top ``k`` sentences:
        one packed premise; under ``sentences``, one per window it runs, which are distinct
        (hence exactly ``min(k, keep)``) when windows are single sentences
        (``premise_neighbours`` 0), else at least one (neighbouring windows may coincide)."""
        if mode != "sentences":
            return 1
        if self.settings.premise_neighbours:
            return 1
        return min(k, keep) if keep is not None else k

    def _mode_premises(self, mode: str, picked: list[list[int]], units: list[_Unit],
                       heads: dict[int, int], contexts: Sequence[str], cap: int,
                       keep: int | None = None) -> list[tuple[str, int, tuple[int, ...]]]:
        """One premise mode's premises: (text, statement index, the contexts it credits).
        ``keep``: under ``sentences``, run only each statement's best ``keep`` (``None``: all)."""
        s = self.settings
        found: list[tuple[str, int, tuple[int, ...]]] = []
        for i, picks in enumerate(picked):
            wins = [self._window(units, u, s.premise_neighbours, cap) for u in picks]
            if mode == "sentences":
                for lo, hi in dict.fromkeys(wins[:keep]):  # identical windows run once
                    j = units[lo].context
                    c = contexts[j]
                    text = c[units[lo].start : units[hi].end]
                    head = heads.get(j)
                    if head is not None and head < lo and units[head].tokens + sum(
                            units[x].tokens for x in range(lo, hi + 1)) <= cap:
                        text = f"{c[units[head].start : units[head].end]} {text}"
                    found.append((text, i, (j,)))
                continue
            chosen: set[int] = set()
            used = 0
            for (lo, hi), u in zip(wins, picks, strict=True):
                for span in ((lo, hi), (u, u)):  # the window, else the sentence alone
                    new = [x for x in range(span[0], span[1] + 1) if x not in chosen]
                    cost = sum(units[x].tokens for x in new)
                    if used + cost <= cap:
                        chosen.update(new)
                        used += cost
                        break
            if not chosen:  # cannot happen (a unit has at most cap tokens); be safe
                chosen = {picks[0]}
            for j in sorted({units[x].context for x in chosen}):
                head = heads.get(j)
                if head is not None and head not in chosen and used + units[head].tokens <= cap:
                    chosen.add(head)
                    used += units[head].tokens
            found.append((self._packed_text(units, sorted(chosen), contexts), i,
                          tuple(sorted({units[x].context for x in chosen}))))
        return found

    @staticmethod
    def _headings(units: list[_Unit], limit: int) -> dict[int, int]:
        """Per context, the unit index of its first sentence when that has at most ``limit``
        tokens (a title such as "12-month Fixed Deposit."): the subject its later sentences
        leave out. Empty when ``limit`` is 0."""
        heads: dict[int, int] = {}
        if limit <= 0:
            return heads
        for x, u in enumerate(units):
            if u.context not in heads:
                heads[u.context] = x
        return {j: x for j, x in heads.items()
                if units[x].tokens <= limit and (x + 1 < len(units)
                                                  and units[x + 1].context == j)}

    @staticmethod
    def _window(units: list[_Unit], u: int, neighbours: int, cap: int) -> tuple[int, int]:
        """Unit ``u`` with up to ``neighbours`` units of its context on either side (nearest
        first, the one before before the one after) while the window stays within ``cap``
        tokens: ``(first, last)`` unit indices."""
        lo = hi = u
        used = units[u].tokens
        j = units[u].context
        left = right = True
        for _ in range(neighbours):
            if left and lo > 0 and units[lo - 1].context == j \
                    and used + units[lo - 1].tokens <= cap:
                lo -= 1
                used += units[lo].tokens
            else:
                left = False
            if right and hi + 1 < len(units) and units[hi + 1].context == j \
                    and used + units[hi + 1].tokens <= cap:
                hi += 1
                used += units[hi].tokens
            else:
                right = False
        return lo, hi

    @staticmethod
    def _packed_text(units: list[_Unit], chosen: list[int], contexts: Sequence[str]) -> str:
        """The chosen units (sorted indices) as one premise: each run of consecutive units of one
        context as its text in the context, runs joined by a space, in document order."""
        runs: list[tuple[int, int]] = []
        for x in chosen:
            if runs and runs[-1][1] == x - 1 and units[x].context == units[x - 1].context:
                runs[-1] = (runs[-1][0], x)
            else:
                runs.append((x, x))
        return " ".join(contexts[units[a].context][units[a].start : units[b].end]
                        for a, b in runs)

    def _candidates(self, hyps: list[str], pieces: list[str], k: int) -> list[list[int]]:
        """Per hypothesis, the ``k`` chunks holding the largest share of its distinct tokens."""
        enc = self._tok.encode_batch([*hyps, *pieces], add_special_tokens=False)
        sets = [set(e.ids) for e in enc]
        hs, ps = sets[: len(hyps)], sets[len(hyps) :]
        return [sorted(_top_by_share(h, ps, k)) for h in hs]

    def predict(self, statements: Sequence[str], contexts: Sequence[str]) -> list[float]:
        """The support-detector contract: P(statement is supported by some chunk of some
        context) for each statement, aligned with the input; no usable context gives 0.
        Raises :class:`PairsTooMany` past ``max_pairs``. Blocking, thread-safe."""
        if isinstance(statements, str) or isinstance(contexts, str):
            raise TypeError("statements and contexts must be sequences of strings, not a string")
        if not statements:
            return []
        m, _ = self.support_matrix(statements, contexts)
        best = m.max(axis=1) if m.shape[1] else np.zeros(len(statements))
        return [float(p) if math.isfinite(p) else 0.0 for p in best]
