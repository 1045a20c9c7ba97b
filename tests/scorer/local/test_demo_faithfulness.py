"""The demo's traffic through the real local judge: faithful answers clear the Grafana alert on
faithfulness, hallucinated ones fall under it (a new user's first screen must not be an alert
storm, and the demo's hallucinations must still be visible)."""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np

from ragpulse.dashboards.levels import FAITHFULNESS_LEVELS
from ragpulse.dashboards.settings import AlertSettings
from ragpulse.deploy.demo import CORPUS, SERVICES, plan_scenario
from ragpulse.scorer import Evaluator, Sample

# The generic absolute level (0.7, the LLM judge's): stricter than the local judge's own level
# (faithfulness_min_by_judge["local"]); tests/dashboards/test_demo_alerts.py runs the rules.
ALERT = AlertSettings().faithfulness_min


async def _faithfulness(judge, samples: list[Sample]) -> dict[str, float | None]:
    ev = Evaluator(judge, ["faithfulness"], max_concurrency=2)
    return {r.sample_id: r.scores[0].value async for r in ev.evaluate_many(samples)}


async def test_demo_faithful_answers_clear_the_alert_and_hallucinated_ones_do_not(
    local_judge,
) -> None:
    # Every document answered faithfully and wrongly, with the demo's own context mix: the
    # document plus two others of its language.
    samples, kinds, langs = [], {}, {}
    for lang, docs in CORPUS.items():
        for doc in docs:
            others = [d.text for d in docs if d is not doc][:2]
            for kind, answer in (("faithful", doc.answer), ("hallucinated", doc.wrong_answer)):
                sid = f"{lang}-{doc.id}-{kind}"
                samples.append(Sample(id=sid, question=doc.question,
                                      contexts=[doc.text, *others], answer=answer))
                kinds[sid], langs[sid] = kind, lang
    values = await _faithfulness(local_judge, samples)
    for service, lang, _env, _genai in SERVICES:
        faithful = [v for k, v in values.items() if langs[k] == lang and kinds[k] == "faithful"]
        wrong = [v for k, v in values.items() if langs[k] == lang and kinds[k] == "hallucinated"]
        assert None not in faithful + wrong
        assert np.mean(faithful) >= ALERT + 0.05, (service, faithful)
        assert max(wrong) < ALERT, (service, wrong)
        assert np.mean(wrong) <= 0.45, (service, wrong)


async def test_demo_traffic_mix_per_service(local_judge) -> None:
    """The planned traffic (seeded as ``ragpulse up --demo``), scored. Before the demo's turn
    (its first 5 minutes: a new user's first screen), per service, the mean over all
    interactions (what the alert averages) and over faithful ones clears the alert level, and
    the mean over hallucinated ones is below it. After the turn prompt v2 is a deliberate
    regression (``status --why`` finds it): each service's mean then still clears the local
    judges' own alert level (``FAITHFULNESS_LEVELS``, what the demo's rules apply) by a wide
    margin, and v2's mean is below v1's."""
    rng = random.Random(7)
    for turned in (False, True):
        plans = [plan_scenario(rng, turned=turned) for _ in range(300)]
        samples = [Sample(id=str(i), question=p.question, contexts=list(p.contexts),
                          answer=p.answer) for i, p in enumerate(plans)]
        values = await _faithfulness(local_judge, samples)
        by: dict[tuple[str, str], list[float]] = defaultdict(list)
        prompts: dict[str, list[float]] = defaultdict(list)
        for i, p in enumerate(plans):
            v = values[str(i)]
            if v is not None:
                by[(p.service, p.kind)].append(v)
                prompts[p.prompt_version].append(v)
        for service, *_ in SERVICES:
            overall = [v for (svc, _kind), vs in by.items() if svc == service for v in vs]
            level = ALERT + 0.02 if not turned else max(FAITHFULNESS_LEVELS.values()) + 0.2
            assert np.mean(overall) >= level, (turned, service, np.mean(overall))
            assert np.mean(by[(service, "faithful")]) >= ALERT, (service, by[(service, "faithful")])
            if by[(service, "hallucinated")]:
                assert np.mean(by[(service, "hallucinated")]) < ALERT
        if turned:
            assert np.mean(prompts["v2"]) < np.mean(prompts["v1"]) - 0.1


async def test_examples_samples_faithful_above_alert_hallucinated_below(local_judge) -> None:
    """``examples/samples.jsonl`` (what the README's quick start scores): the faithful samples
    read as faithful on the absolute scale, the hallucinated ones as not."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / "samples.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    values = await _faithfulness(local_judge, [Sample.model_validate(r) for r in rows])
    assert values["en-faithful"] >= 0.8
    assert values["ja-faithful"] >= 0.8
    assert values["zh-faithful"] >= ALERT
    for sid in ("en-hallucinated", "ja-hallucinated"):
        assert values[sid] <= 0.4
