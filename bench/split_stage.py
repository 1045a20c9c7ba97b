"""The collector's split stage (``split_request``: byte-level split, RAG filter, per-span checks,
records built) in CPU µs per span, this tree against git revisions, in one process.

    .venv/bin/python bench/split_stage.py --baseline main [--baseline REV ...] [--payload plain]

Each revision's ``collector/ragpulse/collector/split.py`` (stdlib-only) is loaded as its own
module; all split the bench's requests (``bench/collector.py``'s default payload: 24
``load_request`` bodies of 20 traces x 5 spans) in alternation, and each keeps its least CPU
time (``time.process_time``) over the rounds, so a drifting shared machine moves all alike.
``--payload plain``: requests of non-RAG traces only (``rag_request``'s HTTP and database
spans), where the RAG filter looks for every marker in every span: its worst case.
The records of every revision are checked to be byte-identical to this tree's first.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testkit.payloads import load_request, rag_request

REPO = Path(__file__).resolve().parents[1]

SPLIT = "collector/ragpulse/collector/split.py"


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", action="append", default=[], metavar="REV")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--passes", type=int, default=20, help="passes over the bodies per round")
    parser.add_argument("--payload", choices=("load", "plain"), default="load")
    args = parser.parse_args()
    if args.payload == "load":
        requests = [load_request(20, 5, seed=1000 + i) for i in range(24)]
    else:
        requests = [rag_request(30, seed=1000 + i, plain_every=1) for i in range(24)]
    bodies = [r.SerializeToString() for r in requests]
    spans = sum(len(ss.spans) for r in requests for rs in r.resource_spans
                for ss in rs.scope_spans) * args.passes
    tmp = Path(tempfile.mkdtemp(prefix="split-stage-"))
    modules = {"this tree": load(REPO / SPLIT, "split_this")}
    for i, rev in enumerate(args.baseline):
        path = tmp / f"split_{i}.py"
        path.write_bytes(subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{SPLIT}"],
                                        check=True, capture_output=True).stdout)
        modules[rev] = load(path, f"split_{i}")
    want = [(r.key, r.value, r.spans, r.rag) for b in bodies for r in modules["this tree"].split_request(b).records]
    for name, module in modules.items():
        got = [(r.key, r.value, r.spans, r.rag) for b in bodies for r in module.split_request(b).records]
        assert got == want, f"{name}: records differ"
    best = dict.fromkeys(modules, float("inf"))
    for _ in range(args.rounds):
        for name, module in modules.items():
            split = module.split_request
            t = time.process_time()
            for _ in range(args.passes):
                for body in bodies:
                    split(body)
            best[name] = min(best[name], (time.process_time() - t) / spans * 1e6)
    base = best[args.baseline[0]] if args.baseline else None
    for name, us in best.items():
        ratio = f"  ({us / base:.2f}x {args.baseline[0]})" if base else ""
        print(f"{name:>12}: {us:.3f} µs/span{ratio}")


if __name__ == "__main__":
    main()
