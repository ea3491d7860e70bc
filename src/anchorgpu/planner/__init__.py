"""The memory planner: peak memory per device of a fine-tuning step, and what to rent for it.

Pure Python, no Django and no torch: ``model_spec`` reads a Hugging Face
config (or ``presets`` gives one), ``setup`` describes the training step,
``params`` counts parameters exactly, ``activations`` and ``analytic``
estimate the bytes per device, ``recommend`` turns that into products,
quantities and prices. Every bad input raises ``PlannerInputError``.
"""

from .analytic import Breakdown, Reserve, estimate, trainable_parameters
from .errors import PlannerInputError
from .model_spec import ModelSpec, load_config, model_spec_from_config
from .params import parameter_counts
from .presets import PRESETS, preset, preset_spec
from .recommend import Offer, Plan, Throughput, plan, recommend
from .setup import TrainingSetup, setup_from_mapping

__all__ = [
    "Breakdown", "ModelSpec", "Offer", "PRESETS", "Plan", "PlannerInputError", "Reserve", "Throughput",
    "TrainingSetup", "estimate", "load_config", "model_spec_from_config", "parameter_counts", "plan", "preset",
    "preset_spec", "recommend", "setup_from_mapping", "trainable_parameters",
]
