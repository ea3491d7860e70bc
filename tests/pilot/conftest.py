"""A tiny Llama-style model (a config alone: random weights) and data the tests write; nothing from a hub."""

import json
import random

import pytest

pytest.importorskip("torch")

TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "max_position_embeddings": 256,
              "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "vocab_size": 300,
              "attention_dropout": 0.1, "tie_word_embeddings": False}
WORDS = ("tensor", "gradient", "card", "memory", "term", "batch", "token", "step", "loss", "shard")


@pytest.fixture
def tiny_model(tmp_path):
    path = tmp_path / "tiny-llama"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(TINY_LLAMA))
    return str(path)


@pytest.fixture
def tiny_data(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "train.jsonl"
    with path.open("w") as handle:
        for _ in range(30):
            handle.write(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))}) + "\n")
    return str(path)
