"""Where the training data comes from: public GitHub snapshots, each pinned to a commit, with its licence.

Every source is read straight out of a bare git directory (a `fetch` snapshot or a `git clone
--bare`), with `git show <commit>:<path>`, so nothing is copied into this repository. Set
RAGPULSE_MIRROR (default /work/.mirror) to the folder that holds `<owner>+<name>/repo`.

docs/faithfulness-data.md lists the same table with the reasons each licence allows shipping a
model trained on it, and what was skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    repo: str          # owner/name on GitHub
    commit: str        # the snapshot read
    licence: str
    note: str = ""

    def gitdir(self) -> Path:
        root = Path(os.environ.get("RAGPULSE_MIRROR", "/work/.mirror")) / self.repo.replace("/", "+")
        for cand in (root / "repo" / ".git", root / "repo", root):
            if (cand / "HEAD").exists() and (cand / "objects").exists():
                return cand
        raise FileNotFoundError(f"no git snapshot of {self.repo} under {root}")

    def read_bytes(self, path: str) -> bytes:
        out = subprocess.run(["git", f"--git-dir={self.gitdir()}", "show", f"{self.commit}:{path}"],
                             check=True, capture_output=True)
        return out.stdout

    def read(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")


JGLUE = Source("yahoojapan/JGLUE", "6f071c09316baae89c3d083a90985b4b1cb9968c",
               "CC BY-SA 4.0",
               "JNLI test, JSTS train, JSQuAD valid (articles 30+) and test; the snapshot lacks the "
               "JNLI and JSQuAD train files. JNLI valid and JSQuAD valid articles 0-29 are eval sets")
JANLI = Source("verypluming/JaNLI", "2bbb63622570f7b20abc118146141b501efe5183", "CC BY-SA 4.0", "split == train only")
ESNLI = Source("OanaMariaCamburu/e-SNLI", "7b585a3f077fdea899780eb0473940522ae44a2e", "MIT (repository); SNLI text CC BY-SA 4.0",
               "SNLI 1.0 dev and test sentence pairs as copied into e-SNLI's dataset/eSNLI/")
CMRC2018 = Source("ymcui/cmrc2018", "c0eb1b6ba219847457e6af3180da722bbeb656af", "CC BY-SA 4.0",
                  "squad-style-data dev and trial (the train file is not in the snapshot)")
SQUAD2_SUBSET = Source("VinACE/san_mrc", "74f10c582d3fb1249ef9559967dc9cb6c989acbe", "SQuAD 2.0 text CC BY-SA 4.0",
                       "dev-v1.1.json there is a 5-article SQuAD 2.0 dev excerpt")
WIKITEXT2 = Source("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8",
                   "repository BSD-3-Clause; WikiText text CC BY-SA 3.0 (Merity et al. 2016, from Wikipedia)",
                   "word_language_model/data/wikitext-2/{valid,test}.txt (train.txt is not in the snapshot)")

# data v6 (--more-sources): found reachable after data v5 (docs/history/faithfulness-data.md, "Data v6 sources")
CMRC2018_TRAIN = Source("SunYanCN/bert-text", "4b97af7e32e8220195fd0d7151ad869f192c78b0",
                        "CC BY-SA 4.0 (ymcui/cmrc2018's LICENCE; this repository redistributes it)",
                        "data/cmrc2018.tar.gz: cmrc2018/cmrc2018_train.json is byte-identical to the "
                        "train file missing from the ymcui/cmrc2018 snapshot (git blob cd56f7d3)")
JAQUAD = Source("SkelterLabsInc/JaQuAD", "23f5d72cc273c49b35e2d9efe0f51757aa1770bd", "CC BY-SA 3.0",
                "data/train/jaquad_train_00NN.json (30 files) and data/dev/ (4): Japanese Wikipedia, "
                "SQuAD format; articles titled as a held-out JSQuAD valid article are skipped")
JNLI_NEG = Source("asahi-y/JNLI-Neg", "cbd89b97da4981c2c64eef65747a87130787b343", "CC BY-SA 4.0",
                  "data/jnli-neg-v1.1/jnli-neg-train-v1.1.jsonl only: JNLI train pairs and their "
                  "negated variants. Its valid files are built from JNLI valid (an eval set): never read")
PAWSX_ZH = Source("zejunwang1/CSTS", "2e7eeedf505c78bf39d34f836773081cfc98af0c",
                  "PAWS-X: \"may be freely used for any purpose\" (google-research-datasets/paws LICENSE); "
                  "this repository redistributes it",
                  "PAWS-X/{dev,test}_2k.tsv: human-translated Chinese paraphrase pairs")
BEGIN = Source("google/BEGIN-dataset", "6e65f0d5a1ed1b9574643a7640ff1678d4e979b5",
               "CC BY 4.0 (wow/, cmu-dog/), CDLA-Sharing-1.0 (topicalchat/), per folder LICENSE",
               "wow/begin_{dev,test}_wow.tsv, cmu-dog/begin_dev_cmu.tsv, topicalchat/begin_dev_tc.tsv "
               "(the other test files are not in the snapshot)")

ALL = {"jglue": JGLUE, "janli": JANLI, "esnli": ESNLI, "cmrc2018": CMRC2018, "squad2": SQUAD2_SUBSET,
       "wikitext2": WIKITEXT2, "cmrc2018_train": CMRC2018_TRAIN, "jaquad": JAQUAD,
       "jnli_neg": JNLI_NEG, "pawsx_zh": PAWSX_ZH, "begin": BEGIN}


def read_jsonl(src: Source, path: str) -> list[dict]:
    return [json.loads(line) for line in src.read(path).splitlines() if line.strip()]


def read_json(src: Source, path: str) -> dict:
    return json.loads(src.read(path))


def main(argv: list[str] | None = None) -> int:
    """``python -m train.data.sources``: every source's snapshot, pinned commit and whether it
    is here (a fresh machine needs each one fetched before ``train.data.build`` runs: the
    library's ``fetch github:OWNER/NAME``, or ``git clone --bare`` into
    ``$RAGPULSE_MIRROR/OWNER+NAME/repo``). Exit status 1 when one is missing."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    missing = 0
    for name, src in ALL.items():
        try:
            gitdir = src.gitdir()
            ok = subprocess.run(["git", f"--git-dir={gitdir}", "cat-file", "-e",
                                 f"{src.commit}^{{commit}}"], capture_output=True).returncode == 0
            state = "ok" if ok else f"snapshot lacks commit {src.commit[:12]}"
        except FileNotFoundError:
            state = "MISSING"
        missing += state != "ok"
        print(f"{name:<15} github:{src.repo:<32} {src.commit[:12]}  {state}")
    if missing:
        print(f"{missing} source(s) to fetch first (RAGPULSE_MIRROR="
              f"{os.environ.get('RAGPULSE_MIRROR', '/work/.mirror')})")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
