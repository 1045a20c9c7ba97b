"""The chain's links are made in one place, ``service.build_chain`` (issue 43, item 7).

A step gets the steps it hands messages to and, when its work finishes on another thread, the
inbox's ``post`` only: no step routes inbox messages (to itself or to another step) as a side
effect of being built, and the :class:`Scorer` keeps no step it picked up while building.
"""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace
from typing import Any

from ragpulse.scorer.pipeline import Scorer, ScorerSettings
from ragpulse.scorer.pipeline.messages import (
    DeadLetterOutcome,
    Done,
    Scored,
    TraceWork,
    Unwritable,
    WriteOutcome,
)
from ragpulse.scorer.pipeline.offsets import RecordRef
from ragpulse.scorer.pipeline.processor import Bookkeeping, Chain
from ragpulse.scorer.pipeline.service import build_chain
from ragpulse.scorer.pipeline.steps import Inbox, Step
from ragpulse.scorer.traces.span_decoder import SpanDecoder


class RecordingInbox(Inbox):
    """An inbox that remembers which function added each route."""

    def __init__(self) -> None:
        super().__init__()
        self.routed_by: list[str] = []

    def route(self, kind: type[Any], handler: Any) -> None:
        self.routed_by.append(sys._getframe(1).f_code.co_name)
        super().route(kind, handler)


def chain(inbox: Inbox, released: list[Any]) -> Chain:
    book = Bookkeeping(
        hold=lambda ref: None,
        seal=lambda ref: None,
        release=released.extend,
        trace_started=lambda work: None,
        trace_ended=lambda work: None,
        traces_in_flight=lambda: 0,
        commit=lambda: None,
    )
    return build_chain(
        ScorerSettings(),
        book,
        inbox=inbox,
        evaluator=SimpleNamespace(metrics=()),  # type: ignore[arg-type]
        writer=object(),  # type: ignore[arg-type]
        preparer=lambda trace: None,  # type: ignore[arg-type,return-value]
        decoder=SpanDecoder(),
        clock=lambda: 0.0,
        producer_factory=lambda cfg: None,
        owns_judge=False,
    )


def test_every_inbox_route_is_a_link_made_by_build_chain_to_the_step_that_applies_it() -> None:
    inbox = RecordingInbox()
    built = chain(inbox, [])
    assert set(inbox.routed_by) == {"build_chain"}  # no step constructor routed anything
    by_name = {type(step).__name__: step for step in built.steps}
    routes = {
        kind.__name__: (type(handler.__self__).__name__, handler.__name__)
        for kind, handler in inbox.routes.items()
    }
    assert routes == {
        "Scored": ("WriteStep", "submit"),  # evaluate's judged rows, from the event-loop thread
        "Unwritable": ("EvaluateStep", "drop_unwritable"),
        "WriteOutcome": ("WriteStep", "settle"),  # from the writer's thread
        "DeadLetterOutcome": ("DeadLetterStep", "settle"),  # from the producer's I/O thread
    }
    for handler in inbox.routes.values():  # the chain's own steps, not copies
        assert handler.__self__ is by_name[type(handler.__self__).__name__]
    assert [type(s).__name__ for s in built.steps] == [
        "DecodeStep", "DeadLetterStep", "AssembleStep", "PrepareStep", "EvaluateStep",
        "WriteStep", "CommitStep",
    ]
    assert built.first is built.steps[0]


def test_no_step_takes_the_inbox_only_its_post() -> None:
    """A step that could reach the inbox could route messages to itself when built, which hides
    the link from build_chain: steps take ``post`` (a callable) and nothing that can route."""
    built = chain(Inbox(), [])
    for step in built.steps:
        params = inspect.signature(type(step).__init__).parameters
        assert "inbox" not in params, type(step).__name__
        assert all(p.annotation not in (Inbox, "Inbox") for p in params.values())
        assert not any(isinstance(v, Inbox) for v in vars(step).values()), type(step).__name__


def test_messages_posted_from_other_threads_reach_the_commit_step_through_the_routes() -> None:
    """Following a sample across a thread: an Unwritable posted by the event loop is applied on
    the consumer thread by the evaluate step, which hands the trace to the commit step."""
    inbox, released = Inbox(), []
    built = chain(inbox, released)
    r = RecordRef("t", 0, 5, epoch=1)
    inbox.post(Unwritable(TraceWork("a" * 32, [r]), ValueError("bad meta")))
    inbox.drain()
    assert released == [r]
    assert next(s for s in built.steps if type(s).__name__ == "EvaluateStep").stats()[
        "traces_dropped"] == 1
    # The kinds routed are exactly the cross-thread messages; a step-to-step one is not.
    assert set(inbox.routes) == {Scored, Unwritable, WriteOutcome, DeadLetterOutcome}
    assert Done not in inbox.routes


def test_the_scorer_keeps_no_step_of_its_own() -> None:
    """The steps live in the chain the processor drives; the Scorer reads them from there and
    holds no reference it picked up as a side effect of building them."""
    scorer = Scorer(ScorerSettings(), evaluator=SimpleNamespace(metrics=()),  # type: ignore[arg-type]
                    writer=object(), preparer=lambda t: None)  # type: ignore[arg-type,return-value]
    assert not any(isinstance(v, Step) for v in vars(scorer).values())
    assert scorer._steps is scorer._processor.steps
