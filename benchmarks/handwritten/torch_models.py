"""The three workloads written by hand, the way a PyTorch user writes them from the architecture.

Plain ``nn.Module`` classes and a plain training step: the yardstick the lowered models are timed
against (``benchmarks/lowering_torch.py``). Their parameters are declared in the same order as
the spec's layers, so ``copy_weights`` can load a lowered model's weights to check that both
compute the same function before their clocks are compared.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class VGGNet(nn.Module):
    """The Rosetta Stone CIFAR-10 CNN (ReLU after max-pool, as the original)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 50, 3, padding=1)
        self.conv2 = nn.Conv2d(50, 50, 3, padding=1)
        self.conv3 = nn.Conv2d(50, 100, 3, padding=1)
        self.conv4 = nn.Conv2d(100, 100, 3, padding=1)
        self.fc1 = nn.Linear(100 * 8 * 8, 512)
        self.fc2 = nn.Linear(512, num_classes)
        self.drop1 = nn.Dropout(0.25)
        self.drop2 = nn.Dropout(0.25)
        self.drop3 = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = self.drop1(F.relu(F.max_pool2d(self.conv2(x), 2)))
        x = F.relu(self.conv3(x))
        x = self.drop2(F.relu(F.max_pool2d(self.conv4(x), 2)))
        x = torch.flatten(x, 1)  # (N, 100, 8, 8) -> (N, 6400)
        x = self.drop3(F.relu(self.fc1(x)))
        return self.fc2(x)


class GRUNet(nn.Module):
    """Embedding(30000, 125) - GRU(100) - last output - Linear(2)."""

    def __init__(self, vocab: int = 30000, dim: int = 125, hidden: int = 100) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.embedding(x))  # (N, T, H)
        return self.fc(out[:, -1])


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (stride on the 3x3 conv), torchvision's layout."""

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_ch != width * 4:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, width * 4, 1, stride=stride, bias=False),
                nn.BatchNorm2d(width * 4),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += identity
        return self.relu(out)


class ResNet50Features(nn.Module):
    """ResNet-50 up to the global average pool: (N, 3, H, W) -> (N, 2048)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers, in_ch = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(in_ch, width, stride if i == 0 else 1))
                in_ch = width * 4
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


class EncoderBlock(nn.Module):
    """Pre-LN encoder block: x + drop(attn(ln1(x))), then x + drop(ff2(gelu(ff1(ln2(x)))))."""

    def __init__(self, dim: int = 128, heads: int = 4, hidden: int = 512, rate: float = 0.1):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim, eps=1e-5)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim, bias=False)  # the spec's: a key bias cancels in the softmax
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-5)
        self.ff1 = nn.Linear(dim, hidden)
        self.ff2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(rate)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        n, t, e = x.shape
        h = self.ln1(x)
        q, k, v = (
            p(h).view(n, t, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=valid[:, None, None, :])
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(n, t, e)))
        return x + self.drop(self.ff2(F.gelu(self.ff1(self.ln2(x)))))


class TransformerNet(nn.Module):
    """Token + position embedding, 2 encoder blocks, final LayerNorm, masked mean, dense 2."""

    def __init__(self, vocab: int = 30000, dim: int = 128, length: int = 150) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)  # learned positions, BERT's way
        self.blocks = nn.ModuleList([EncoderBlock(dim), EncoderBlock(dim)])
        self.ln = nn.LayerNorm(dim, eps=1e-5)
        self.fc = nn.Linear(dim, 2)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        valid = ids != 0  # (N, T): real tokens
        x = self.embedding(ids) + self.pos.weight[: ids.shape[1]]
        for block in self.blocks:
            x = block(x, valid)
        w = valid.to(x.dtype)
        pooled = (self.ln(x) * w[..., None]).sum(1) / w.sum(1, keepdim=True).clamp(min=1)
        return self.fc(pooled)


class DecoderBlock(nn.Module):
    """Pre-LN GPT block: x + drop(attn(ln1(x))) with query i reading keys 0..i, then the MLP;
    ``cache`` (a dict, generating) keeps this block's keys and values of the positions seen."""

    def __init__(self, dim: int = 256, heads: int = 4, hidden: int = 1024, rate: float = 0.1):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim, eps=1e-5)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-5)
        self.ff1 = nn.Linear(dim, hidden)
        self.ff2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(rate)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        n, t, e = x.shape
        h = self.ln1(x)
        q, k, v = (
            p(h).view(n, t, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        if cache is not None:
            if "k" in cache:  # one new token after the cached positions
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(n, t, e)))
        return x + self.drop(self.ff2(F.gelu(self.ff1(self.ln2(x)))))


class DecoderNet(nn.Module):
    """nanoGPT's shape at the spec's size: token + learned positions, 4 blocks, final LayerNorm,
    the head tied to the token table."""

    def __init__(self, vocab: int = 8192, dim: int = 256, context: int = 128) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)  # learned positions, GPT-2's wpe
        self.blocks = nn.ModuleList([DecoderBlock(dim) for _ in range(4)])
        self.ln = nn.LayerNorm(dim, eps=1e-5)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embedding.weight  # tied

    def forward(self, ids: torch.Tensor, caches: list | None = None, offset: int = 0):
        x = self.embedding(ids) + self.pos.weight[offset : offset + ids.shape[1]]
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return self.head(self.ln(x))


@torch.inference_mode()
def generate(model: DecoderNet, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a KV cache, as a user writes it: the prompt once, then a token a
    step (each token on the host, as a server streams it)."""
    caches: list[dict] = [{} for _ in model.blocks]
    nxt = model(prompts, caches)[:, -1].argmax(dim=-1)
    out = [nxt]
    for i in range(1, new_tokens):
        nxt = model(nxt[:, None], caches, prompts.shape[1] + i - 1)[:, -1].argmax(dim=-1)
        nxt.cpu()
        out.append(nxt)
    return torch.stack(out, dim=1)


def lm_train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x, y) -> torch.Tensor:
    """The language model's step: the cross-entropy over every position."""
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    optimizer.step()
    return loss.detach()


def adamw_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """The usual AdamW split: matrices of the linear layers decay; biases, norms, tables don't."""
    decay, plain = [], []
    for name, p in model.named_parameters():
        tables = name.startswith(("embedding", "pos"))
        linear = name.endswith("weight") and p.ndim == 2 and not tables
        (decay if linear else plain).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


MODELS = {"cnn": VGGNet, "gru": GRUNet, "resnet50": ResNet50Features, "transformer": TransformerNet,
          "decoder": DecoderNet}  # fmt: skip


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x, y) -> torch.Tensor:
    """The step every PyTorch tutorial writes."""
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


def features_step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Feature extraction as a user writes it."""
    with torch.inference_mode():
        return model(x)


def copy_weights(src: nn.Module, dst: nn.Module) -> None:
    """Load ``src``'s parameters and buffers into ``dst`` by position (same declaration order)."""
    a, b = src.state_dict(), dst.state_dict()
    a = [v for k, v in a.items() if not k.endswith("num_batches_tracked")]
    b_keys = [k for k in b if not k.endswith("num_batches_tracked")]
    if len(a) != len(b_keys):
        raise ValueError(f"{len(a)} tensors in the source, {len(b_keys)} in the destination")
    with torch.no_grad():
        for value, key in zip(a, b_keys, strict=True):
            if value.shape != b[key].shape:
                raise ValueError(f"{key}: shape {tuple(b[key].shape)} != {tuple(value.shape)}")
            b[key].copy_(value)
