"""Parameters of the vision towers of multimodal models the planner plans for their text tower.

A text fine-tune of a multimodal checkpoint still loads its vision tower: its
weights sit on the card, frozen. ``vision_parameters`` counts them from the
config (held to the module tree in the tests) or says that it cannot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import PlannerInputError

# transformers' SiglipVisionConfig defaults, for fields a config leaves out.
_SIGLIP = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
           "image_size": 224, "patch_size": 16}


def _siglip(vision: Mapping[str, Any]) -> int:
    f = {key: vision.get(key, default) for key, default in _SIGLIP.items()}
    for key, value in f.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise PlannerInputError(f"config.vision_config.{key}", "“%(key)s” must be a positive whole number.",
                                    key=key)
    h, i, channels, patch = f["hidden_size"], f["intermediate_size"], f["num_channels"], f["patch_size"]
    patches = (f["image_size"] // patch) ** 2
    embeddings = channels * patch * patch * h + h + patches * h
    layer = 4 * (h * h + h) + 4 * h + (h * i + i) + (i * h + h)
    return embeddings + f["num_hidden_layers"] * layer + 2 * h


def vision_parameters(family: str, config: Mapping[str, Any]) -> tuple[int, str]:
    """(parameters of the vision tower and projector, a note for the plan)."""
    vision = config.get("vision_config") or {}
    if family == "gemma3" and isinstance(vision, Mapping):
        text = config.get("text_config") or {}
        text_hidden = text.get("hidden_size", 2304) if isinstance(text, Mapping) else 2304
        h = vision.get("hidden_size", _SIGLIP["hidden_size"])
        projector = h * text_hidden + h  # mm_input_projection_weight and mm_soft_emb_norm
        count = _siglip(vision) + projector
        return count, (f"Planned for the text tower; the SigLIP vision tower and its projector ({count:,} "
                       "parameters) are loaded and kept frozen.")
    return 0, ("Planned for the text tower only; the vision tower's weights are not counted (add them if you "
               "load the whole checkpoint).")
