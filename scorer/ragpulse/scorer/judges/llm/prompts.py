"""Versioned prompt files and the renderer that turns trace content into delimited data.

A prompt file (TOML, in ``ragpulse/scorer/prompts/``) has a ``name``, an integer ``version``, a
``system`` and a ``user`` template (``string.Template`` syntax: ``${data}``, ``${tasks}``,
``${output}``, ``${nonce}``) and a table of ``tasks``: each task declares the inputs it reads, its
instruction and the JSON keys it answers with. A request asks only for the tasks the metrics
need, and shows only the inputs those tasks read.

Prompt injection: every piece of trace content (question, contexts, answer, reference, and the
statements a model extracted from them) is wrapped in ``<data-NONCE kind=... n=...>`` tags with
a per-request random nonce, and the system message declares everything inside as untrusted data.
Content cannot close its own tag: any ``data-`` tag look-alike and any occurrence of the nonce in
the content are neutralized before wrapping.
"""

from __future__ import annotations

import re
import secrets
import string
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "INPUT_LABELS",
    "Prompt",
    "PromptError",
    "PromptLibrary",
    "Task",
    "neutralize",
    "new_nonce",
    "wrap",
]

INPUT_LABELS: dict[str, str] = {
    "question": "QUESTION",
    "contexts": "CONTEXTS",
    "answer": "ANSWER",
    "reference": "REFERENCE ANSWER",
    "statements": "ANSWER STATEMENTS",
    "reference_statements": "REFERENCE STATEMENTS",
    "sentences": "CONTEXT SENTENCES",
}
"""The inputs a prompt may show, with the heading each gets. Keys are the vocabulary of the
``inputs`` lists in prompt files."""

_KIND = {
    "question": "question",
    "contexts": "context",
    "answer": "answer",
    "reference": "reference",
    "statements": "statement",
    "reference_statements": "reference_statement",
    "sentences": "context",
}

_REQUIRED_PLACEHOLDERS = ("data", "tasks", "output")
# A tag that could open or close a data block, with or without a nonce, any case and spacing.
_TAG_LOOKALIKE = re.compile(r"<\s*/?\s*data-[^>\s]*", re.IGNORECASE)


class PromptError(ValueError):
    """A prompt file is missing, malformed or inconsistent. Raised at load time, never per call."""


@dataclass(frozen=True)
class Task:
    """One question a prompt asks: the inputs it reads, its instruction, and the JSON key and
    shape of its answer (``output``)."""

    name: str
    inputs: tuple[str, ...]
    instruction: str
    output: str


@dataclass(frozen=True)
class Prompt:
    """One prompt file, validated. ``ref`` (``"assess@1"``) is stored beside every score."""

    name: str
    version: int
    inputs: tuple[str, ...]
    system: str
    user: str
    tasks: Mapping[str, Task]
    source: str = ""

    @property
    def ref(self) -> str:
        """``name@version``, the prompt version stored beside every score."""
        return f"{self.name}@{self.version}"

    def render(
        self,
        task_names: Sequence[str],
        items: Mapping[str, Sequence[str]],
        *,
        nonce: str,
        params: Mapping[str, str] | None = None,
    ) -> list[dict[str, str]]:
        """The chat messages asking for ``task_names`` (in the file's task order).

        ``items`` maps an input name to its pieces (one string for question/answer/reference,
        one per context or statement); only the inputs the asked tasks read are shown. Pure and
        deterministic for a given ``nonce``. Raises ``KeyError`` for an unknown task.
        """
        wanted = [t for t in self.tasks if t in set(task_names)]
        unknown = set(task_names) - set(self.tasks)
        if unknown:
            raise KeyError(f"{self.ref}: unknown task(s) {sorted(unknown)}")
        shown = {i for t in wanted for i in self.tasks[t].inputs}
        params = dict(params or {})
        blocks: list[str] = []
        for name in self.inputs:
            if name not in shown:
                continue
            pieces = items.get(name, ())
            numbered = name in ("contexts", "statements", "reference_statements", "sentences")
            body = [
                wrap(p, nonce=nonce, kind=_KIND[name], number=i if numbered else None)
                for i, p in enumerate(pieces, start=1)
            ] or ["(none)"]
            blocks.append(f"{INPUT_LABELS[name]}:\n" + "\n".join(body))
        tasks_text = "\n".join(
            f"- {string.Template(self.tasks[t].instruction).substitute(params)}" for t in wanted
        )
        output = "\n".join(self.tasks[t].output for t in wanted)
        values = {"nonce": nonce, "data": "\n\n".join(blocks), "tasks": tasks_text,
                  "output": output, **params}
        return [
            {"role": "system", "content": string.Template(self.system).substitute(values).strip()},
            {"role": "user", "content": string.Template(self.user).substitute(values).strip()},
        ]


def new_nonce() -> str:
    """A fresh 64-bit random boundary, unguessable by trace content."""
    return secrets.token_hex(8)


def neutralize(text: str, nonce: str) -> str:
    """``text`` with every data-tag look-alike defanged and every occurrence of ``nonce`` removed,
    so content can neither close its own block nor open a fake one."""
    text = _TAG_LOOKALIKE.sub(lambda m: m.group(0).replace("<", "[").replace("data-", "data_"), text)
    while nonce in text:  # removal can splice a new occurrence together; repeat until none
        text = text.replace(nonce, "")
    return text


def wrap(text: str, *, nonce: str, kind: str, number: int | None = None) -> str:
    """``text`` as one delimited data block; ``number`` is its ``n`` attribute (1-based)."""
    attrs = f' kind="{kind}"' + (f' n="{number}"' if number is not None else "")
    return f"<data-{nonce}{attrs}>{neutralize(text, nonce)}</data-{nonce}>"


@dataclass
class PromptLibrary:
    """All prompts, loaded once at start-up. Immutable after construction; thread-safe to read."""

    prompts: dict[str, Prompt] = field(default_factory=dict)

    @classmethod
    def load(cls, override_dir: Path | None = None) -> PromptLibrary:
        """The packaged prompts, each replaced by a file of the same name in ``override_dir``.

        Blocking (reads a few small files). Raises :class:`PromptError` for a malformed file.
        """
        found: dict[str, tuple[str, str]] = {}
        pkg = resources.files("ragpulse.scorer").joinpath("prompts")
        for entry in pkg.iterdir():
            if entry.name.endswith(".toml"):
                found[entry.name] = (entry.read_text(encoding="utf-8"), f"package:{entry.name}")
        if override_dir is not None:
            for p in sorted(Path(override_dir).glob("*.toml")):
                found[p.name] = (p.read_text(encoding="utf-8"), str(p))
        lib = cls()
        for fname, (text, source) in sorted(found.items()):
            prompt = parse_prompt(text, source)
            if prompt.name != fname.removesuffix(".toml"):
                raise PromptError(f"{source}: name {prompt.name!r} does not match the file name")
            lib.prompts[prompt.name] = prompt
        return lib

    def __getitem__(self, name: str) -> Prompt:
        try:
            return self.prompts[name]
        except KeyError:
            raise PromptError(f"no prompt named {name!r}; have {sorted(self.prompts)}") from None

    def require(self, names: Sequence[str]) -> None:
        """Raise :class:`PromptError` unless every prompt in ``names`` is present."""
        missing = sorted(set(names) - set(self.prompts))
        if missing:
            raise PromptError(f"missing prompt file(s): {', '.join(m + '.toml' for m in missing)}")


def parse_prompt(text: str, source: str = "<string>") -> Prompt:
    """Parse and validate one prompt file. Raises :class:`PromptError` naming the file."""
    try:
        raw: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{source}: {exc}") from exc
    try:
        name, version = str(raw["name"]), raw["version"]
        system, user = str(raw["system"]), str(raw["user"])
        inputs = tuple(raw["inputs"])
        raw_tasks = raw["tasks"]
    except KeyError as exc:
        raise PromptError(f"{source}: missing key {exc.args[0]!r}") from None
    if not isinstance(version, int) or version < 1:
        raise PromptError(f"{source}: version must be a positive integer")
    if unknown := set(inputs) - set(INPUT_LABELS):
        raise PromptError(f"{source}: unknown inputs {sorted(unknown)}")
    for ph in _REQUIRED_PLACEHOLDERS:
        if f"${{{ph}}}" not in user and f"${{{ph}}}" not in system:
            raise PromptError(f"{source}: templates lack ${{{ph}}}")
    if "${nonce}" not in system:
        raise PromptError(f"{source}: the system template must declare the data tags (${{nonce}})")
    tasks: dict[str, Task] = {}
    for tname, t in raw_tasks.items():
        try:
            task = Task(tname, tuple(t["inputs"]), str(t["instruction"]), str(t["output"]))
        except KeyError as exc:
            raise PromptError(f"{source}: task {tname!r} lacks {exc.args[0]!r}") from None
        if extra := set(task.inputs) - set(inputs):
            raise PromptError(f"{source}: task {tname!r} reads inputs {sorted(extra)} "
                              f"the prompt does not declare")
        tasks[tname] = task
    if not tasks:
        raise PromptError(f"{source}: no tasks")
    return Prompt(name, version, inputs, system, user, tasks, source)
