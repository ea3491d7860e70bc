"""The operation checks on the CPU: each one passes on a sound stack and says why when it fails."""

import sys

import pytest

from anchorgpu.pilot import opchecks


def test_bf16_matmul_matches_fp32_and_is_timed():
    result = opchecks.check_matmul("cpu", size=128)
    assert result.passed and result.error is None, result.error
    assert 0 < result.detail["relative_error"] < opchecks.MATMUL_TOLERANCE
    assert result.detail["seconds_each"] > 0 and result.seconds >= result.detail["seconds_each"]


def test_the_matmul_comparison_is_real(monkeypatch):
    # bf16 cannot match fp32 to a millionth: with that tolerance the same product must fail, and say why.
    monkeypatch.setattr(opchecks, "MATMUL_TOLERANCE", 1e-6)
    result = opchecks.check_matmul("cpu", size=64)
    assert not result.passed and "relative error" in result.error and "above 1e-06" in result.error


def test_attention_forward_and_backward_match_the_written_out_attention():
    result = opchecks.check_sdpa("cpu", shape=(1, 2, 64, 32))
    assert result.passed, result.error
    errors = result.detail["relative_errors"]
    assert set(errors) == {"output", "grad_q", "grad_k", "grad_v"}
    assert all(0 < e < opchecks.SDPA_TOLERANCE for e in errors.values())


def test_an_operation_that_raises_is_a_failure_with_its_message():
    result = opchecks.check_matmul("no-such-device", size=8)
    assert not result.passed and result.error and "Traceback" not in result.error


def test_an_all_reduce_whose_backend_is_missing_fails_with_the_reason():
    # The CPU build has no NCCL: the spawned ranks fail to start, and the check says so in one line.
    pytest.importorskip("torch")
    import torch.distributed as dist

    if dist.is_nccl_available():
        pytest.skip("this build has NCCL")
    result = opchecks.check_all_reduce("cpu", world=1, backend="nccl", timeout=60)
    assert not result.passed and "NCCL" in result.error and "\n" not in result.error


def test_extensions_import_or_say_they_are_missing(tmp_path, monkeypatch):
    (tmp_path / "customer_kernels.py").write_text("def self_test():\n    return 42\n"
                                                  "def broken():\n    raise RuntimeError('kernel image missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = opchecks.check_extension("customer_kernels")
    assert found.passed and found.detail["file"].endswith("customer_kernels.py")
    missing = opchecks.check_extension("no_such_extension_here")
    assert not missing.passed and "No module named 'no_such_extension_here'" in missing.error
    called = opchecks.check_extension_call("customer_kernels:self_test")
    assert called.passed and called.detail["returned"] == "42"
    failing = opchecks.check_extension_call("customer_kernels:broken")
    assert not failing.passed and failing.error == "RuntimeError: kernel image missing"
    absent = opchecks.check_extension_call("customer_kernels:nothing")
    assert not absent.passed and "nothing" in absent.error
    sys.modules.pop("customer_kernels", None)
