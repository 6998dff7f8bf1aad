"""A GPT-2-small transformer block (768 wide, 12 heads, MLP 4x with tanh GELU, pre-norm, causal attention) in
bfloat16, batch 8 of 1024 tokens, inference: a whole real model for `kevolve optimize examples/gpt2_block_bf16.py
--offline` (issue 34)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

N_EMBD = 768
N_HEAD = 12
SEQ = 1024
BATCH = 8  # one size per line: the CPU checks shrink them (offline/graph/shrink.py)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
        self.mlp_proj = nn.Linear(4 * N_EMBD, N_EMBD)
        self.to(torch.bfloat16)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(N_EMBD, dim=2)
        q = q.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        k = k.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        v = v.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


def get_inputs():
    return [torch.randn(BATCH, SEQ, N_EMBD, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
