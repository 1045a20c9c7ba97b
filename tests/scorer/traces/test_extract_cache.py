"""The extractor's memo of attribute families: same answers as computing afresh, bounded."""

from __future__ import annotations

import sys

import ragpulse.scorer.traces.extract.families  # noqa: F401  (the module, not the re-exported function)

X = sys.modules["ragpulse.scorer.traces.extract.families"]


def _fresh(attrs: dict[str, object]) -> dict[str, list[str]]:
    X._FAMILIES_CACHE.clear()
    out = X.families(attrs)
    X._FAMILIES_CACHE.clear()
    return out


def test_memoized_families_equal_fresh_ones() -> None:
    a = {"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "q",
         "openinference.span.kind": "LLM", "x": 1, "gen_ai.prompt": "p", "a.b": 2}
    first = X.families(a)
    again = X.families(dict(a))  # an equal key set: served from the memo
    assert again is first
    assert first == _fresh(a)
    assert first["llm.input_messages"] == [
        "llm.input_messages.0.message.role", "llm.input_messages.0.message.content"]
    # Key order is part of the memo key: attribute order is preserved in each family.
    b = dict(reversed(list(a.items())))
    assert X.families(b)["llm.input_messages"][0] == "llm.input_messages.0.message.content"


def test_memo_is_bounded_in_entries_and_key_size() -> None:
    X._FAMILIES_CACHE.clear()
    for i in range(X._FAMILIES_CACHE_MAX * 3):
        X.families({f"k{i}.a.b": 1})
    assert 0 < len(X._FAMILIES_CACHE) <= X._FAMILIES_CACHE_MAX
    X._FAMILIES_CACHE.clear()
    huge = {"a." + "x" * X._FAMILIES_CACHE_KEY_CHARS: 1}
    assert X.families(huge) == {"a." + "x" * X._FAMILIES_CACHE_KEY_CHARS: list(huge)}
    assert not X._FAMILIES_CACHE  # large key sets are never retained
