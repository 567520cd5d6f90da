"""A character-level language model for Python documentation text (seed: a one-layer GRU)."""

import torch
from torch import nn

EMBED = 32  # size of each character's embedding
HIDDEN = 128  # GRU state size
LAYERS = 1  # stacked GRU layers
LR = 3e-3  # Adam learning rate (read by the evaluator)
BATCH = 64  # sequences per optimizer step (read by the evaluator)
CONTEXT = 32  # characters per training sequence (read by the evaluator)


class CharGRU(nn.Module):
    def __init__(self, vocab_size: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, EMBED)
        self.rnn = nn.GRU(EMBED, HIDDEN, LAYERS, batch_first=True)
        self.head = nn.Linear(HIDDEN, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.embed(x))
        return self.head(h)


def build_model(vocab_size: int) -> nn.Module:
    """Map (B, T) character ids to (B, T, vocab_size) next-character logits; position t may see only ids <= t."""
    return CharGRU(vocab_size)
