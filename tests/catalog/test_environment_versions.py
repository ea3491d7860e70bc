"""An environment says which CUDA or ROCm release its image is built with; fleet discovery judges drivers by it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from anchorgpu.catalog.models import Environment
from anchorgpu.demo import ENVIRONMENTS, load_catalog


@pytest.mark.parametrize("fields, error_on", [
    ({"stack": "cuda", "cuda_version": "twelve"}, "cuda_version"),
    ({"stack": "rocm", "cuda_version": "12.4"}, "cuda_version"),
    ({"stack": "cuda", "rocm_version": "6.3"}, "rocm_version"),
])
def test_a_wrong_release_is_refused_on_its_field(fields, error_on):
    with pytest.raises(ValidationError) as exc:
        Environment(slug="e", name="e", **fields).clean()
    assert error_on in exc.value.message_dict


def test_a_release_number_is_kept_trimmed():
    env = Environment(slug="e", name="e", stack="cuda", cuda_version=" 12.8 ")
    env.clean()
    assert env.cuda_version == "12.8"


@pytest.mark.django_db
def test_the_demo_environments_carry_the_releases_their_image_tags_name():
    load_catalog()
    got = {e.image: (e.cuda_version, e.rocm_version) for e in Environment.objects.all()}
    assert got == {"anchorgpu/pytorch:2.5-cu124": ("12.4", ""), "anchorgpu/pytorch:2.7-cu128": ("12.8", ""),
                   "anchorgpu/pytorch:2.7-rocm6.3": ("", "6.3"), "anchorgpu/base:cuda-12.4": ("12.4", ""),
                   "anchorgpu/base:rocm-6.3": ("", "6.3")}
    assert len(ENVIRONMENTS) == 5
