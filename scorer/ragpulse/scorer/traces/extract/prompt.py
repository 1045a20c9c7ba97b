"""The prompt fallback: the contexts (and question) written into the final LLM prompt, for apps
whose retrieval is not traced. :func:`split_prompt` reads one message; the template-variable
reader takes OpenInference's ``llm.prompt_template.variables`` first.

Prompt text is partly user-controlled, so nothing here may backtrack super-linearly: tags are
found by an opening-tag pattern plus ``str.find`` for the closing tag, separators line by line.
Pure and thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .readers import CONTEXT_KEYS, doc_texts

_BLOCK_OPEN = re.compile(
    r"<(context|contexts|documents|sources|retrieved_context)\b[^>\n]*>", re.IGNORECASE
)
_DOC_OPEN = re.compile(r"<(document|doc|source|passage|chunk)\b[^>\n]*>", re.IGNORECASE)


def _tagged(text: str, opening: re.Pattern[str], first_only: bool) -> list[str]:
    """Inner texts of ``<tag ...>...</tag>`` pairs, scanning left to right in linear time; an
    unclosed last tag runs to the end of the text."""
    out: list[str] = []
    lower = None
    pos = 0
    while (m := opening.search(text, pos)) is not None:
        if lower is None:
            lower = text.lower()
        close = lower.find(f"</{m.group(1).lower()}", m.end())
        if close < 0:  # unclosed: most often a prompt cut by an attribute length limit
            out.append(text[m.end() :])
            break
        out.append(text[m.end() : close])
        if first_only:
            break
        end = text.find(">", close)
        pos = end + 1 if end >= 0 else len(text)
    return out


def _tag_block(text: str) -> str | None:
    found = _tagged(text, _BLOCK_OPEN, first_only=True)
    return found[0] if found else None


_CONTEXT_LABEL = re.compile(
    r"^[ \t]*(?:#+[ \t]*)?(?:\*\*)?(?:retrieved[ \t]+)?"
    r"(?:context(?:s|[ \t]+information)?|documents|sources|passages)(?:\*\*)?"
    r"(?:[ \t]*:(?:\*\*)?"
    r"|[ \t]+(?:is|are)[ \t]+(?:below|as[ \t]+follows)[ \t]*[.:]?[ \t]*$"
    r"|[ \t]*$)",
    re.IGNORECASE | re.MULTILINE,
)
_QUESTION_LABEL = re.compile(
    r"^[ \t]*(?:(?:#+[ \t]*)?(?:\*\*)?(?:user[ \t]+)?(?:question|query)(?:\*\*)?[ \t]*:(?:\*\*)?"
    r"|#+[ \t]*(?:user[ \t]+)?(?:question|query)[ \t]*$)",
    re.IGNORECASE | re.MULTILINE,
)
_SECTION_END = re.compile(
    r"^[ \t]*(?:(?:#+[ \t]*)?(?:\*\*)?"
    r"(?:(?:user[ \t]+)?(?:question|query)|answer|response|instructions?|"
    r"context(?:s|[ \t]+information)?|documents|sources)(?:\*\*)?[ \t]*:"
    r"|given[ \t]+the[ \t]+context\b|#+[ \t]+\S)",
    re.IGNORECASE | re.MULTILINE,
)
_SEPARATOR_LINE = re.compile(r"^[ \t]*(?:-{3,}|={3,}|\*{3,}|_{3,})[ \t]*$", re.MULTILINE)
_NUMBERED_DOC = re.compile(
    r"^[ \t]*(?:\[\d+\]"
    r"|(?:document|doc|source|passage|context|chunk)[ \t]*#?\d+[ \t]*[:.)\]-])[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_BLANK_LINES = re.compile(r"\n[ \t]*\n")


def _is_separator(line: str) -> bool:
    t = line.strip()
    return len(t) >= 3 and t[0] in "-=*_" and t == t[0] * len(t)


def _split_block(block: str) -> list[str]:
    """One context block → documents: explicit tags, then numbered markers, then separator lines,
    then blank lines (``"\\n\\n".join(docs)`` is how LangChain and LlamaIndex fill
    ``{context}``)."""
    tagged = [t.strip() for t in _tagged(block, _DOC_OPEN, first_only=False)]
    if tagged:
        return [t for t in tagged if t]
    starts = [m for m in _NUMBERED_DOC.finditer(block)]
    if len(starts) >= 1 and not block[: starts[0].start()].strip():
        out = []
        for i, m in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(block)
            out.append(block[m.end() : end].strip())
        return [t for t in out if t]
    parts = _SEPARATOR_LINE.split(block)
    if len(parts) > 1:
        return [t.strip() for t in parts if t.strip()]
    return [t.strip() for t in _BLANK_LINES.split(block) if t.strip()]


def _labeled_section(text: str, label: re.Pattern[str]) -> str | None:
    """The body after a label (same-line text after ``:`` included) up to the next label line.

    ``^`` in a pattern searched from a mid-line position does not match there, so a body that
    starts on the label's own line is never cut by its own label."""
    m = label.search(text)
    if m is None:
        return None
    nxt = _SECTION_END.search(text, m.end())
    return text[m.end() : nxt.start() if nxt is not None else len(text)]


def split_prompt(text: str) -> tuple[list[str], str | None]:
    """Find the context block and the question inside one prompt message.

    Heuristics, in order: a ``<context>``/``<documents>`` tag block; else a labeled section
    (a line starting ``Context:``, ``Context information is below.``, ``Documents:``,
    ``Sources:``, optionally markdown ``#``/``**``) running to the next label line
    (``Question:``, ``Query:``, ``Answer:``, ``Given the context...``) or the end, with separator
    lines (``-----``) trimmed. The block is split into documents by :func:`_split_block`.
    The question is a ``Question:``/``Query:`` section. Returns ``([], None)`` when nothing matches.
    """
    contexts: list[str] = []
    block = _tag_block(text)
    if block is not None:
        contexts = _split_block(block.strip())
    else:
        sec = _labeled_section(text, _CONTEXT_LABEL)
        if sec is not None:
            # trim the frame LlamaIndex puts around {context_str}
            lines = sec.strip().split("\n")
            lo, hi = 0, len(lines)  # indices, not list.pop(0): a prompt of separators is linear
            while lo < hi and _is_separator(lines[lo]):
                lo += 1
            while hi > lo and _is_separator(lines[hi - 1]):
                hi -= 1
            body = "\n".join(lines[lo:hi]).strip()
            if body:
                contexts = _split_block(body)
    question = None
    q = _labeled_section(text, _QUESTION_LABEL)
    if q is not None:
        question = q.strip() or None
    return contexts, question


def contexts_from_variables(variables: Mapping[str, Any]) -> list[str]:
    for key in CONTEXT_KEYS:
        v = variables.get(key)
        if isinstance(v, str) and v.strip():
            inner = _tag_block(v)
            return _split_block(inner.strip() if inner is not None else v.strip())
        if isinstance(v, list) and (docs := doc_texts(v)):
            return docs
    return []
