"""``LLMJudge``: the :class:`~ragpulse.scorer.judges.base.Judge` backed by any OpenAI-compatible
chat-completions endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM).

A thin composition of three parts: :mod:`.transport` sends one request (budget, pacing,
concurrency slots, retries, timeouts, usage), :mod:`.calls` asks each planned call its votes
(verdict cache, parsing, one repair), :mod:`.findings` turns the parsed votes into one finding
per fact. The judge plans the calls of a sample (:mod:`.plan`) and starts them in order.
"""

from __future__ import annotations

import asyncio

from ...embeddings import Embedder, USEEmbedder
from ...model import Fact, Finding, Reason, Sample, status_of
from ..base import Needs
from .calls import CallRunner, Ledger, Results
from .findings import FindingBuilder
from .plan import PROMPT_NAMES, CallSpec, SampleInputs, dependent_calls, independent_calls
from .prompts import PromptLibrary
from .settings import LLMJudgeSettings
from .transport import SAMPLE_DEADLINE, ChatTransport

__all__ = ["LLMJudge", "build_llm_judge"]


def build_llm_judge(settings: LLMJudgeSettings, embedder: Embedder | None = None) -> LLMJudge:
    """The factory the scorer's wiring calls. Blocking: loads the prompt files."""
    return LLMJudge(settings, embedder=embedder)


class LLMJudge:
    """The LLM judge. Implements :class:`~ragpulse.scorer.judges.base.Judge`.

    ``gather`` is a coroutine; many may run concurrently on one event loop, sharing the bounded
    concurrency, the rate limiter, the token budget and the verdict cache. It never raises for
    model or network trouble (findings carry the reason) and never blocks the loop (embeddings
    run in worker threads). All of a sample's requests share one deadline (``deadline_s`` from
    the start of ``gather``): when it passes, what is not answered yet becomes null with
    ``judge_timeout``. Loop-confined: use one judge from one event loop. ``aclose`` ends
    pending waits and in-flight requests at once (their findings get ``judge_error``), closes
    the HTTP client, and is idempotent.

    ``stats``, ``budget`` and ``limiter`` are the transport's counters, token budget and rate
    limiter.

    Raises ``ValueError`` at construction when no API key is available for api.openai.com and
    :class:`~ragpulse.scorer.judges.llm.prompts.PromptError` when prompt files are malformed.
    """

    name = "llm"

    def __init__(self, settings: LLMJudgeSettings | None = None, *,
                 embedder: Embedder | None = None, prompts: PromptLibrary | None = None) -> None:
        self.settings = settings = settings or LLMJudgeSettings()
        self.model = settings.model
        self.prompts = prompts or PromptLibrary.load(settings.prompts_dir)
        self.prompts.require(PROMPT_NAMES)
        self._embedder = embedder
        self.transport = ChatTransport(settings)
        self.stats = self.transport.stats
        self.budget = self.transport.budget
        self.limiter = self.transport.limiter
        self._calls = CallRunner(settings, self.prompts, self.transport)
        self._findings = FindingBuilder(self.model, self.prompts, lambda: self.embedder)

    @property
    def embedder(self) -> Embedder:
        """The embedder of the similarity facts: the one given, else USE loaded on first use."""
        if self._embedder is None:
            self._embedder = USEEmbedder()
        return self._embedder

    async def gather(self, sample: Sample, needs: Needs) -> dict[Fact, Finding]:
        """One finding per fact in ``needs.facts``. See the class docstring for the contract."""
        inputs = SampleInputs.of(sample, self.settings)
        SAMPLE_DEADLINE.set(asyncio.get_running_loop().time() + self.settings.deadline_s)
        ledger = Ledger()
        results: Results = {}

        async def run(spec: CallSpec) -> None:
            r = await self._calls.run_votes(spec, ledger, needs)
            for t in spec.tasks:
                results[(spec.prompt, t)] = r

        async def decompose_then_dependent(first: list[CallSpec]) -> None:
            await asyncio.gather(*(run(s) for s in first))
            stmts, refs = self._findings.decomposed(results)
            await asyncio.gather(*(run(s) for s in dependent_calls(
                needs, inputs, self.settings, self.prompts, stmts or [], refs or [])))

        # Every call that needs only the sample starts at once; the reference facts' calls that
        # read decompose's statements start when it returns.
        specs = independent_calls(needs, inputs, self.settings, self.prompts)
        dec = [s for s in specs if s.prompt == "decompose"]
        others = [run(s) for s in specs if s.prompt != "decompose"]
        await asyncio.gather(decompose_then_dependent(dec), *others)
        findings = await self._findings.build(needs, inputs, results, ledger)
        for f in findings.values():
            # Count judge trouble, not facts undefined for this sample (no contexts, ...).
            if f.reason is not None and status_of(f.reason) in ("error", "skipped"):
                self.stats.errors_by_reason[f.reason.value] += 1
                if f.reason is Reason.BUDGET_EXHAUSTED:
                    self.stats.budget_skipped_findings += 1
        return findings

    async def aclose(self) -> None:
        """Stop waits and in-flight requests, close the HTTP client. Idempotent."""
        await self.transport.aclose()
