"""Each span's attribute families (keys grouped by their first two dotted components) and the
conventions its keys show, memoized by key set (:func:`key_info`): the source tables look a
convention's keys up by family instead of scanning every key of every span. Pure and
thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ragpulse.common import conventions_in

from ..span import AttrValue

Families = dict[str, list[str]]


_FAMILIES_CACHE: dict[tuple[str, ...], tuple[dict[str, list[str]], frozenset[str]]] = {}
_FAMILIES_CACHE_MAX = 256
_FAMILIES_CACHE_KEY_CHARS = 4096  # larger key sets are not memoized: the cache stays < ~2 MB


def families(attrs: Mapping[str, AttrValue]) -> dict[str, list[str]]:
    """The keys grouped by their first two dotted components (``llm.input_messages``,
    ``gen_ai.prompt``), in attribute order: computed once per span, so an absent flattened list
    costs a dict lookup and a present one a walk over its own keys, not a scan of all keys.

    Spans of one instrumentation repeat the same key sets, so results are memoized by the key
    tuple (bounded in entries and key characters; cleared when full, so hostile key sets cost a
    recomputation, never memory). The returned dict is shared: callers must not mutate it.
    Thread-safe (a race at worst computes a result twice)."""
    return key_info(attrs)[0]


def key_info(
    attrs: Mapping[str, AttrValue],
) -> tuple[dict[str, list[str]], frozenset[str]]:
    """:func:`families` and the ids of the conventions the attribute keys show
    (:func:`ragpulse.common.conventions_in`), memoized together by the key tuple."""
    sig = tuple(attrs)
    info = _FAMILIES_CACHE.get(sig)
    if info is not None:
        return info
    fams: dict[str, list[str]] = {}
    for k in sig:
        j = k.find(".", k.find(".") + 1)
        fam = k if j < 0 else k[:j]
        keys = fams.get(fam)
        if keys is None:
            fams[fam] = [k]
        else:
            keys.append(k)
    info = (fams, frozenset(conventions_in(sig)))
    if sum(map(len, sig)) <= _FAMILIES_CACHE_KEY_CHARS:
        if len(_FAMILIES_CACHE) >= _FAMILIES_CACHE_MAX:
            _FAMILIES_CACHE.clear()
        _FAMILIES_CACHE[sig] = info
    return info


def indexed(
    attrs: Mapping[str, AttrValue], prefix: str, fams: dict[str, list[str]] | None = None
) -> list[dict[str, AttrValue]]:
    """Flattened list attributes ``<prefix><i>.<sub>`` as a list of ``{sub: value}`` in index order.
    ``prefix`` ends with a dot and has two components; ``fams`` (from :func:`families`) limits
    the walk to that family's keys."""
    if fams is not None:
        keys: Iterable[str] = fams.get(prefix[:-1], ())
        if not keys:  # the usual case: most conventions are absent from most spans
            return []
    else:
        keys = attrs
    found: dict[int, dict[str, AttrValue]] = {}
    plen = len(prefix)
    for k in keys:
        if k.startswith(prefix):
            i, dot, sub = k[plen:].partition(".")
            if dot and i.isdigit():
                found.setdefault(int(i), {})[sub] = attrs[k]
    return [found[i] for i in sorted(found)]
