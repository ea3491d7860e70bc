"""The customer's data for a pilot: read, tokenized, and served longest batches first.

Files are JSONL (one object per line, the text under ``--text-field``) or
plain text (one example per non-empty line). Tokens come from the model
directory's own tokenizer when it has one (read locally, never from a hub);
a config alone gets a byte tokenizer (each UTF-8 byte one token, folded into
the vocabulary), which is enough to exercise memory and speed.

Examples are sorted longest first, so the timed steps run on the batches
that need the most memory. Every tenth example is held out for validation
(when there are at least ten). ``Batches`` hands out micro-batches in order
and keeps its position, which a checkpoint stores and a restore checks.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import PilotInputError

IGNORE = -100  # the label of padding: no loss


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_texts(paths: tuple[str, ...], text_field: str) -> list[str]:
    texts: list[str] = []
    for path in paths:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise PilotInputError("data", f"{path} cannot be read ({exc.strerror or exc}).") from None
        except UnicodeDecodeError:
            raise PilotInputError("data", f"{path} is not UTF-8 text.") from None
        jsonl = path.endswith((".jsonl", ".json"))
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            if not jsonl:
                texts.append(line)
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PilotInputError("data", f"{path} line {number} is not JSON ({exc.msg}).") from None
            text = item.get(text_field) if isinstance(item, dict) else None
            if not isinstance(text, str):
                raise PilotInputError("data", f"{path} line {number} has no text under “{text_field}” "
                                              "(choose the field with --text-field).")
            texts.append(text)
    if not texts:
        raise PilotInputError("data", "the data files hold no examples.")
    return texts


class ByteTokenizer:
    """UTF-8 bytes as token ids, folded into the model's vocabulary (for models given as a config alone)."""

    name = "bytes (no tokenizer in the model directory)"

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def __call__(self, text: str) -> list[int]:
        return [(b + 3) % self.vocab_size for b in text.encode("utf-8")]


def load_tokenizer(model: str, vocab_size: int) -> tuple[Callable[[str], list[int]], str]:
    path = Path(model)
    if path.is_dir() and any((path / name).exists() for name in ("tokenizer.json", "tokenizer_config.json",
                                                                  "tokenizer.model")):
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise PilotInputError("model", f"the tokenizer in {model} cannot be loaded ({exc}).") from None
        return (lambda text: tokenizer(text, add_special_tokens=True)["input_ids"]), f"{type(tokenizer).__name__}"
    tokenizer = ByteTokenizer(vocab_size)
    return tokenizer, tokenizer.name


@dataclass(frozen=True)
class Dataset:
    train: tuple[tuple[int, ...], ...]  # longest first
    validation: tuple[tuple[int, ...], ...]
    validation_is_held_out: bool
    tokenizer: str
    files: dict  # path -> sha256
    truncated: int  # examples cut to the sequence length


def load_dataset(paths: tuple[str, ...], text_field: str, model: str, vocab_size: int, seq_len: int) -> Dataset:
    texts = read_texts(paths, text_field)
    tokenize, tokenizer_name = load_tokenizer(model, vocab_size)
    encoded, truncated = [], 0
    for text in texts:
        ids = tokenize(text)
        if len(ids) > seq_len:
            ids, truncated = ids[:seq_len], truncated + 1
        if len(ids) >= 2:  # a causal LM needs two tokens for one prediction
            encoded.append(tuple(ids))
    if not encoded:
        raise PilotInputError("data", "every example is shorter than two tokens.")
    held_out = len(encoded) >= 10
    validation = [ids for i, ids in enumerate(encoded) if i % 10 == 9] if held_out else list(encoded)
    train = [ids for i, ids in enumerate(encoded) if i % 10 != 9] if held_out else list(encoded)
    order = sorted(range(len(train)), key=lambda i: (-len(train[i]), i))
    return Dataset(tuple(train[i] for i in order), tuple(sorted(validation, key=len, reverse=True)), held_out,
                   tokenizer_name, {p: file_sha256(p) for p in paths}, truncated)


def collate(examples: list[tuple[int, ...]], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask and labels (padding ignored) for one micro-batch."""
    width = max(len(e) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        ids[row, :len(example)] = torch.tensor(example, dtype=torch.long)
        mask[row, :len(example)] = 1
    labels = ids.masked_fill(mask == 0, IGNORE)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Batches:
    """Micro-batches of ``examples`` in order, wrapping around; ``position`` counts the ones handed out.

    ``next(device)`` returns the batch on ``device`` and the seconds spent
    preparing it (the data-loading wait the step had to sit through).
    ``shard``/``shards`` give each rank of a distributed run its own slice.
    """

    def __init__(self, examples: tuple[tuple[int, ...], ...], micro_batch: int, *, shard: int = 0, shards: int = 1):
        self.examples, self.micro_batch = examples, micro_batch
        self.shard, self.shards = shard, shards
        self.position = 0

    def _take(self, index: int) -> list[tuple[int, ...]]:
        start = (index * self.shards + self.shard) * self.micro_batch
        return [self.examples[(start + k) % len(self.examples)] for k in range(self.micro_batch)]

    def next(self, device: torch.device) -> tuple[dict[str, torch.Tensor], float]:
        started = time.perf_counter()
        batch = collate(self._take(self.position))
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        self.position += 1
        return batch, time.perf_counter() - started

    def tokens(self, batch: dict[str, torch.Tensor]) -> int:
        return int(batch["attention_mask"].sum())

    def state_dict(self) -> dict:
        return {"position": self.position, "micro_batch": self.micro_batch, "shard": self.shard,
                "shards": self.shards, "examples": len(self.examples)}

    def load_state_dict(self, state: dict) -> None:
        if state.get("examples") != len(self.examples) or state.get("micro_batch") != self.micro_batch:
            raise PilotInputError("checkpoint", "the checkpoint was written for other data or another micro-batch.")
        self.position = int(state["position"])
