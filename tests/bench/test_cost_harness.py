"""The parts of the cost benchmark (bench/cost.py) that need no ragas: sample building, the one
tokenizer, the recording server, both responders, the tallies and the docs section. The LLM-judge
half runs end to end against the recording server, so the "2 calls per sample" claim the
benchmark reports is also checked here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from openai import BadRequestError, InternalServerError, OpenAI

from bench import cost

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------- samples


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    halu = []
    for q in range(16):
        passage = f"Passage {q}: " + " ".join(f"fact{q}-{i}" for i in range(30)) + "."
        for kind, answer in (("right", f"Answer {q}."), ("halu", f"Wrong {q}. Also wrong.")):
            halu.append({"id": f"halueval-{q}-{kind}", "question": f"Question {q}?",
                         "contexts": [passage], "answer": answer, "label": {"faithful": 1}})
    _write(tmp_path / "faithfulness_halueval.jsonl", halu)
    ja = []
    for q in range(4):
        for kind in ("pos", "neg"):
            ja.append({"id": f"jsquad-dev-{q}-{kind}", "question": f"質問{q}は何か。",
                       "contexts": [f"文脈{q}-{i}。" * 20 for i in range(5)],
                       "answer": f"答え{q}", "label": {}})
    _write(tmp_path / "context_relevance_jsquad_ja.jsonl", ja)
    return tmp_path


def test_english_samples_have_five_contexts_own_passage_first_and_are_deterministic(data_dir):
    samples = cost.load_english(data_dir, 4, context_chars=300)
    assert samples == cost.load_english(data_dir, 4, context_chars=300)
    assert [s.id for s in samples] == ["halueval-0-right", "halueval-0-halu",
                                       "halueval-1-right", "halueval-1-halu"]
    for s in samples:
        q = s.id.split("-")[1]
        own = f"Passage {q}:"
        assert len(s.contexts) == cost.N_CONTEXTS
        assert s.contexts[0].startswith(own)
        assert all(own not in c for c in s.contexts[1:])  # padding never repeats the own passage
        assert all(len(c) >= 300 for c in s.contexts)
        assert len(set(s.contexts)) == cost.N_CONTEXTS


def test_japanese_samples_take_the_pos_rows_in_file_order(data_dir):
    samples = cost.load_japanese(data_dir, 3)
    assert [s.id for s in samples] == ["jsquad-dev-0-pos", "jsquad-dev-1-pos", "jsquad-dev-2-pos"]
    assert all(len(s.contexts) == 5 and s.lang == "ja" for s in samples)


def test_too_few_rows_and_a_missing_directory_are_clear_errors(data_dir, tmp_path):
    with pytest.raises(ValueError, match="only 4 usable rows"):
        cost.load_japanese(data_dir, 5)
    with pytest.raises(ValueError, match="too few distinct passages"):
        cost.load_english(data_dir, 2, context_chars=2000)
    with pytest.raises(FileNotFoundError, match="--data"):
        cost.load_english(tmp_path / "nowhere", 1)


def test_statements_are_ragpulse_deterministic_split(data_dir):
    s = cost.with_statements(cost.load_english(data_dir, 2))[1]
    assert s.statements == ("Wrong 0.", "Also wrong.")
    assert cost.BenchSample.from_json(json.loads(json.dumps(s.to_json()))) == s


# ---------------------------------------------------------------------------------- tokens


def test_the_tokenizer_is_cl100k_base_offline_and_counts_chat_framing():
    c = cost.TokenCounter()
    # Token ids of the real cl100k_base vocabulary (tiktoken's hash check guards the file).
    assert c._enc.encode("hello world") == [15339, 1917]
    assert c.text("hello world") == 2
    assert c.text("日本語") == 4
    assert c.text("<|endoftext|>") > 1  # special-token text in user content counts as text
    one = [{"role": "user", "content": "hello world"}]
    assert c.messages(one) == 3 + 1 + 2 + 3  # framing + role + content + reply priming
    two = [{"role": "system", "content": "hello world"}, *one]
    assert c.messages(two) == c.messages(one) + 3 + c.text("system") + 2


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(RuntimeError, match="not available offline"):
        cost.TokenCounter("no_such_encoding")


# ---------------------------------------------------------------------------------- server


def test_recording_server_records_answers_with_usage_and_refuses_what_it_cannot_answer():
    counter = cost.TokenCounter()

    def respond(body):
        if body["messages"][-1]["content"] == "bad":
            raise ValueError("cannot answer that")
        return '{"ok": 1}'

    server = cost.RecordingServer(respond, counter=counter, max_requests=2)
    server.shutdown()  # safe before start
    with server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        server.tag = "s1"
        msgs = [{"role": "user", "content": "hello world"}]
        reply = client.chat.completions.create(model="m", messages=msgs,
                                               extra_headers={"X-Ragpulse-Prompt": "assess@1"})
        assert reply.choices[0].message.content == '{"ok": 1}'
        assert reply.usage.prompt_tokens == counter.messages(msgs)
        with pytest.raises(BadRequestError, match="cannot answer that"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "bad"}])
        # the buffer holds two requests: a third is refused and counted, not stored
        with pytest.raises(InternalServerError, match="recording buffer full"):
            client.chat.completions.create(model="m", messages=msgs)
        client.close()
    server.shutdown()  # idempotent
    assert [r.tag for r in server.records] == ["s1", "s1"]
    assert server.records[0].headers["x-ragpulse-prompt"] == "assess@1"
    assert server.errors == ["cannot answer that"] and server.refused == 1


# ---------------------------------------------------------------------------------- responders


def _ragas_request(title: str, schema_extra: dict, data: dict) -> dict:
    """A request shaped as ragas' BasePrompt.to_string + instructor JSON mode sends it."""
    schema = {"properties": schema_extra, "title": title, "type": "object"}
    system = ("\nAs a genius expert, your task is to understand the content and provide\n"
              "the parsed objects in json that match the following json_schema:\n\n\n"
              f"{json.dumps(schema, indent=2)}\n\nMake sure to return an instance of the JSON")
    user = ("Instruction.\nPlease return the output in a JSON format that complies with the "
            "following schema as specified in JSON Schema:\n"
            f"{json.dumps(schema)}Do not use single quotes in your response but double quotes."
            "\n--------EXAMPLES-----------\nExample 1\nInput: {\n  \"answer\": \"x\"\n}"
            "\n-----------------------------\n\nNow perform the same with the following input\n"
            f"input: {json.dumps(data, indent=4, ensure_ascii=False)}\nOutput: ")
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def test_ragas_responder_returns_the_shared_statements_and_one_verdict_per_statement():
    respond = cost.ragas_responder({"答え。二つ目。": ["答え。", "二つ目。"]})
    out = json.loads(respond(_ragas_request("StatementGeneratorOutput", {},
                                            {"question": "q", "answer": "答え。二つ目。"})))
    assert out == {"statements": ["答え。", "二つ目。"]}
    out = json.loads(respond(_ragas_request("NLIStatementOutput", {},
                                            {"context": "c", "statements": ["a", "b", "c"]})))
    assert [v["statement"] for v in out["statements"]] == ["a", "b", "c"]
    out = json.loads(respond(_ragas_request("ContextPrecisionOutput", {},
                                            {"question": "q", "context": "c", "answer": "a"})))
    assert out["verdict"] == 1
    out = json.loads(respond(_ragas_request("Verification", {},  # the legacy prompt's model
                                            {"question": "q", "context": "c", "answer": "a"})))
    assert out["verdict"] == 1
    with pytest.raises(ValueError, match="unexpected ragas output model"):
        respond(_ragas_request("SomethingElse", {}, {"x": 1}))
    with pytest.raises(ValueError, match="not in the sample set"):
        respond(_ragas_request("StatementGeneratorOutput", {}, {"question": "q", "answer": "?"}))


def _ragpulse_sample():
    return cost.with_statements([cost.BenchSample(
        id="s1", lang="en", question="Where is the head office?",
        contexts=tuple(f"Context {i}. It says something." for i in range(1, 6)),
        answer="The head office is in Delhi. It opened in 1934.")])[0]


def test_ragpulse_responder_answers_what_the_judge_parser_accepts():
    from ragpulse.scorer.judges.llm.parsing import ParseFailure, parse_task

    s = _ragpulse_sample()
    _, settings_cls, render = cost._ragpulse_api()
    reqs = render(cost._to_sample(s), cost._needs_of_metrics(), settings_cls(api_key="k"),
                  statements=list(s.statements))
    assert len(reqs) == 3
    respond = cost.ragpulse_responder({s.answer: s.statements})
    replies = [json.loads(respond({"messages": r})) for r in reqs]
    by_key = {k: r for r in replies for k in r}
    assert not isinstance(parse_task("questions", by_key["questions"], {"questions": 3}),
                          ParseFailure)
    claims = parse_task("claims", by_key["claims"], {"contexts": 5})
    assert claims["statements"] == list(s.statements) and claims["verdicts"] == [1, 1]
    for task in ("context_useful", "context_used"):
        assert parse_task(task, by_key[task], {"contexts": 5}) == [1] * 5
    with pytest.raises(ValueError, match="unexpected ragpulse request"):
        respond({"messages": [{"role": "user", "content": "no data blocks"}]})


# ---------------------------------------------------------------------------------- tallies


def _rec(sample, metric, content):
    return {"sample": sample, "metric": metric,
            "messages": [{"role": "user", "content": content}], "response_format": None}


def test_ragas_tally_counts_every_call_and_drops_only_cross_metric_repeats():
    counter = cost.TokenCounter()
    records = []
    for sid in ("a", "b"):
        records += [_rec(sid, "faithfulness", f"extract {sid}"), _rec(sid, "faithfulness", "nli")]
        records += [_rec(sid, "answer_relevancy", "gen q")] * 3  # meant to differ: all count
        for i in range(5):
            records.append(_rec(sid, "context_precision", f"ctx {i} {sid}"))
        for i in range(5):
            records.append(_rec(sid, "context_utilization", f"ctx {i} {sid}"))
    t = cost.summarize_ragas(records, counter, 2)
    assert t.calls == {"faithfulness": 2, "answer_relevancy": 3, "context_precision": 5,
                       "context_utilization": 5}
    assert t.total_calls == 15 and t.max_calls == 15
    assert t.distinct_calls == 10
    per = counter.messages(records[0]["messages"])
    assert t.tokens["faithfulness"] == per + counter.messages(records[1]["messages"])
    assert t.distinct_tokens == t.total_tokens - t.tokens["context_utilization"]


def test_target_verdict_names_what_is_missed():
    ok = cost.SideCost(total_calls=2, total_tokens=2999, max_calls=2)
    assert cost.verdict(ok) == "meets the target"
    over = cost.SideCost(total_calls=2.2, total_tokens=3500, max_calls=3)
    v = cost.verdict(over)
    assert v.startswith("MISSES") and "worst 3" in v and "3,500 > 3,000" in v


def test_table_has_a_row_per_metric_and_the_totals():
    side = cost.SideCost(calls=dict.fromkeys(cost.METRICS, 0.5),
                         tokens=dict.fromkeys(cost.METRICS, 500.0),
                         total_calls=2, total_tokens=2000, max_calls=2, max_tokens=2100)
    table = cost.markdown_table({"en": {"ragas": side, "ragpulse": side}})
    lines = table.splitlines()
    assert len(lines) == 2 + len(cost.METRICS) + 3
    assert lines[2].startswith("| faithfulness | 0.50 | 500 | 0.50 | 500 |")
    assert "| **total** | 2 | 2,000 |" in table


# ---------------------------------------------------------------------------------- docs


def test_section_is_appended_then_replaced_leaving_other_sections_alone():
    other = "# Benchmarks\n\n## Quality\n\nAUROC 0.9\n"
    first = cost.replace_section(other, cost.SECTION_TITLE + "\n\nold numbers\n")
    assert first.startswith(other) and first.endswith("old numbers\n")
    following = first + "\n## Later section\n\nkept\n"
    second = cost.replace_section(following, cost.SECTION_TITLE + "\n\nnew numbers\n")
    assert "old numbers" not in second and "new numbers" in second
    assert second.startswith(other) and second.endswith("## Later section\n\nkept\n")
    assert cost.replace_section(second, cost.SECTION_TITLE + "\n\nnew numbers\n") == second
    assert cost.replace_section("", "## X\n") == "## X\n"


# ---------------------------------------------------------------------------------- live judge


def test_llm_judge_makes_three_calls_per_sample_against_the_recording_server():
    samples = [_ragpulse_sample(), cost.with_statements([cost.BenchSample(
        id="s2", lang="ja", question="本社はどこか。",
        contexts=tuple(f"文脈{i}。本社は東京にある。" for i in range(5)), answer="東京")])[0]]
    live = cost.live_ragpulse(samples, cost.TokenCounter())
    assert live.requests == 6
    assert live.cost.total_calls == 3 and live.cost.max_calls == 3
    assert live.statuses == {"ok": len(cost.METRICS) * len(samples)}
    # the judge's own per-metric cost shares add up to what the server received
    assert sum(live.cost.calls.values()) == pytest.approx(3.0)
    assert live.score_tokens == pytest.approx(live.server_tokens)
    assert set(live.by_prompt) == {"decompose@2", "assess@2", "grounding@1"}
    # render_requests shows exactly what is sent, once the per-request random nonces are aligned
    _, settings_cls, render = cost._ragpulse_api()
    nonce = re.compile(r"data-[0-9a-f]{16}")

    def aligned(requests):
        return [[{**m, "content": nonce.sub("data-N", m["content"])} for m in msgs]
                for msgs in requests]

    for s in samples:
        rendered = render(cost._to_sample(s), cost._needs_of_metrics(),
                          settings_cls(api_key="k"), statements=list(s.statements))
        key = json.dumps  # the three calls go concurrently: compare in any order
        assert sorted(map(key, aligned(rendered))) == sorted(map(key, aligned(live.sent[s.id])))


# ---------------------------------------------------------------------------------- ragas itself

_RAGAS_PY = REPO / "bench" / ".venv-ragas" / "bin" / "python"


@pytest.mark.skipif(not _RAGAS_PY.exists(),
                    reason="bench/.venv-ragas not created (bench/requirements-ragas.txt)")
@pytest.mark.parametrize(("api", "per_metric"), [
    ("collections", {"faithfulness": 2, "answer_relevancy": 3, "context_precision": 5,
                     "context_utilization": 5}),
    ("legacy", {"faithfulness": 2, "answer_relevancy": 1, "context_precision": 5,
                "context_utilization": 5}),
])
def test_ragas_worker_records_every_request_ragas_sends(api, per_metric):
    s = _ragpulse_sample()
    records = cost.run_ragas_worker([s], _RAGAS_PY, api)
    counts: dict[str, int] = {}
    for r in records:
        counts[r["metric"]] = counts.get(r["metric"], 0) + 1
    assert counts == per_metric
    # the NLI prompt judges exactly the statements both sides share, against all five contexts
    nli = [r for r in records if r["metric"] == "faithfulness"][1]["messages"][-1]["content"]
    assert all(st in nli for st in s.statements) and all(c in nli for c in s.contexts)
