"""Catalog rules: terms, quantities, environment stacks. Pure, no database."""

from __future__ import annotations

from decimal import Decimal

import pytest

from anchorgpu.catalog.rules import (
    MAX_QUANTITY,
    TERM_DAYS,
    RuleError,
    Stack,
    check_environment,
    check_quantity,
    check_term,
    environment_fits,
)

CUDA, ROCM, BLACKWELL = Stack.CUDA, Stack.ROCM, Stack.BLACKWELL


def test_terms_are_3_7_and_30_days():
    assert TERM_DAYS == (3, 7, 30)
    for days in TERM_DAYS:
        assert check_term(days) == days


@pytest.mark.parametrize("days", [0, -3, 1, 5, 14, 31, 365])
def test_other_terms_are_refused_with_the_allowed_ones_listed(days):
    with pytest.raises(RuleError) as caught:
        check_term(days)
    assert str(caught.value) == f"Terms are 3, 7, 30 days; {days} is not one of them."


@pytest.mark.parametrize("quantity", [1, 2, 8, MAX_QUANTITY])
def test_quantities_within_bounds_pass(quantity):
    assert check_quantity(quantity) == quantity


@pytest.mark.parametrize("quantity, message", [
    (0, "Quantity must be at least 1."),
    (-1, "Quantity must be at least 1."),
    (MAX_QUANTITY + 1, "Quantity must be at most 1000."),
])
def test_quantities_out_of_bounds_are_refused(quantity, message):
    with pytest.raises(RuleError) as caught:
        check_quantity(quantity)
    assert str(caught.value) == message


@pytest.mark.parametrize("quantity", [1.5, Decimal("2.5"), "2", True, None])
def test_quantity_must_be_a_whole_number(quantity):
    with pytest.raises(RuleError, match="whole number"):
        check_quantity(quantity)


@pytest.mark.parametrize("days", [7.0, Decimal("7"), "7", True, None])
def test_term_must_be_a_whole_number_of_days(days):
    with pytest.raises(RuleError, match="Terms are 3, 7, 30 days"):
        check_term(days)


def test_rule_errors_are_value_errors():
    assert issubclass(RuleError, ValueError)


# --- environments and stacks ------------------------------------------------------------------

@pytest.mark.parametrize("product_stack, environment_stack, fits", [
    (CUDA, CUDA, True),            # A100 / H100 / H200 with a CUDA image
    (CUDA, BLACKWELL, True),       # a Blackwell-ready build also carries Ampere/Hopper kernels
    (CUDA, ROCM, False),
    (BLACKWELL, BLACKWELL, True),  # B200 needs the Blackwell-ready build
    (BLACKWELL, CUDA, False),
    (BLACKWELL, ROCM, False),
    (ROCM, ROCM, True),            # MI300X
    (ROCM, CUDA, False),           # a CUDA image never on AMD
    (ROCM, BLACKWELL, False),
])
def test_environment_fits_matrix(product_stack, environment_stack, fits):
    assert environment_fits(product_stack, environment_stack) is fits
    assert environment_fits(product_stack.value, environment_stack.value) is fits  # stored as strings


def test_a_fitting_environment_passes_the_check():
    check_environment("MI300X", "rocm", "PyTorch ROCm 6", "rocm")
    check_environment("B200 lot", "blackwell", "PyTorch 2.7 Blackwell", "blackwell")


def test_a_cuda_image_on_amd_is_refused_with_a_clear_message():
    with pytest.raises(RuleError) as caught:
        check_environment("MI300X", "rocm", "PyTorch CUDA 12", "cuda")
    assert str(caught.value) == "The environment “PyTorch CUDA 12” is built for CUDA and cannot run on MI300X (ROCm)."


def test_a_plain_cuda_build_on_b200_is_refused_naming_the_blackwell_stack():
    with pytest.raises(RuleError, match=r"cannot run on B200 lot \(CUDA, Blackwell-ready build\)"):
        check_environment("B200 lot", "blackwell", "PyTorch CUDA 11", "cuda")


def test_a_rocm_image_on_nvidia_is_refused():
    with pytest.raises(RuleError, match="built for ROCm and cannot run on H100"):
        check_environment("H100", "cuda", "PyTorch ROCm", "rocm")


def test_unknown_stacks_are_value_errors():
    with pytest.raises(ValueError):
        environment_fits("tpu", "cuda")


def test_stack_labels():
    assert [s.label for s in Stack] == ["CUDA", "ROCm", "CUDA, Blackwell-ready build"]
