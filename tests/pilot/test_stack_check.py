"""The stack check's decisions on recorded device and build descriptions, one per product and the mismatches.

The descriptions in ``stacks/`` were written by hand from public specifications and PyTorch's published build
matrix (each says so in its ``source``); none was captured on a real machine.
"""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from anchorgpu.pilot.stack import PRODUCTS, CudaTarget, StackRecord, cuda_coverage, rocm_covers
from anchorgpu.pilot.stack_rules import FAIL, OK, WARN, judge

STACKS = Path(__file__).parent / "stacks"


def load(name: str) -> dict:
    return json.loads((STACKS / f"{name}.json").read_text())


def verdict_of(data: dict, product: str | None = None):
    return judge(StackRecord.from_json(data), product)


def messages(verdict, level):
    return [f.message for f in verdict.findings if f.level == level]


@pytest.mark.parametrize("code", sorted(PRODUCTS))
def test_each_product_with_its_proper_build_passes_inferred_and_named(code):
    data = load(code)
    inferred = verdict_of(data)
    assert inferred.passed, messages(inferred, FAIL)
    assert inferred.product.code == code and inferred.product_inferred
    assert not messages(inferred, WARN)
    named = verdict_of(data, code)
    assert named.passed and not named.product_inferred
    arch = PRODUCTS[code].arch
    assert any(arch in m and "the build has" in m for m in messages(named, OK))


def test_a_b200_lot_with_a_build_without_sm_100_fails():
    verdict = verdict_of(load("mismatch-b200-without-sm100"), "b200-lot-2x180gb")
    fails = messages(verdict, FAIL)
    assert not verdict.passed
    assert any("no kernels for sm_100" in m and "sm_90" in m and m.startswith("both GPUs") for m in fails)
    assert any("CUDA 12.8 or newer" in m and "CUDA 12.6" in m for m in fails)


def test_a_cuda_build_on_an_mi300x_machine_fails():
    verdict = verdict_of(load("mismatch-mi300x-cuda-build"))
    fails = messages(verdict, FAIL)
    assert not verdict.passed
    assert any("CUDA build" in m and "AMD GPUs" in m and "ROCm build" in m for m in fails)
    assert any("no GPU is visible" in m for m in fails)
    # Where the PCI bus cannot be read (some containers), the product booked tells the vendor.
    hidden = load("mismatch-mi300x-cuda-build")
    hidden["bus"] = []
    assert not verdict_of(hidden).passed  # no GPU at all
    named = verdict_of(hidden, "mi300x-192gb")
    assert any("CUDA build" in m and "AMD GPUs" in m for m in messages(named, FAIL))


def test_a_rocm_build_without_gfx942_fails_on_mi300x():
    verdict = verdict_of(load("mismatch-mi300x-rocm-without-gfx942"), "mi300x-192gb")
    assert not verdict.passed
    assert any("no code objects for gfx942" in m and "gfx90a" in m for m in messages(verdict, FAIL))


def test_a_cpu_only_build_on_an_h100_machine_fails():
    verdict = verdict_of(load("mismatch-h100-cpu-build"))
    assert verdict.product.code == "h100-sxm-80gb"  # from the name NVML gave the card on the bus
    assert any("CPU-only build" in m and "NVIDIA GPUs" in m and "CUDA build" in m
               for m in messages(verdict, FAIL))


def test_no_gpu_at_all_fails_clearly():
    verdict = verdict_of(load("mismatch-no-devices"))
    assert not verdict.passed and verdict.product is None
    assert messages(verdict, FAIL) == ["no GPU is visible to PyTorch; none is on the PCI bus either"]


def test_a_hidden_gpu_is_explained():
    data = load("mismatch-no-devices")
    data["bus"] = [{"bus_id": "0000:18:00.0", "vendor": "nvidia", "name": "NVIDIA H200", "numa_node": 0}]
    data["visible_env"] = {"CUDA_VISIBLE_DEVICES": ""}
    [fail] = messages(verdict_of(data), FAIL)
    assert "1 NVIDIA GPU(s) are on the PCI bus" in fail and "CUDA_VISIBLE_DEVICES=''" in fail


def test_ptx_only_for_an_older_arch_passes_with_a_warning():
    verdict = verdict_of(load("warn-b200-ptx-only"), "b200-lot-2x180gb")
    assert verdict.passed
    [warning] = messages(verdict, WARN)
    assert "no sm_100 machine code" in warning and "compute_90" in warning and "first use" in warning


def test_missing_pytorch_is_a_failure_not_a_crash():
    data = load("mismatch-h100-cpu-build")
    data.update(torch_version=None, torch_error="ModuleNotFoundError: No module named 'torch'")
    verdict = verdict_of(data)
    assert any("PyTorch cannot be imported" in m and "No module named" in m for m in messages(verdict, FAIL))


def test_the_wrong_card_for_the_product_fails():
    verdict = verdict_of(load("h100-sxm-80gb"), "h200-141gb")
    assert any("NVIDIA H100 80GB HBM3" in m and "not the H200 141 GB booked" in m for m in messages(verdict, FAIL))
    # Same chip family, wrong generation: an A100 booked, an H100 delivered.
    assert not verdict_of(load("h100-sxm-80gb"), "a100-sxm-80gb").passed


def test_a_partition_of_a_card_fails_on_memory():
    data = load("h100-sxm-80gb")
    data["devices"][0]["total_memory"] = 10 * 1024**3  # e.g. a 1g.10gb MIG slice
    assert any("10.0 GiB of memory" in m for m in messages(verdict_of(data), FAIL))


def test_a_b200_lot_must_be_two_cards_joined_by_nvlink():
    data = load("b200-lot-2x180gb")
    data["topology"]["links"] = {"GPU0": {"GPU1": "SYS"}, "GPU1": {"GPU0": "SYS"}}
    assert any("over NVLink" in m for m in messages(verdict_of(data), FAIL))
    unknown = load("b200-lot-2x180gb")
    unknown["topology"] = None
    for device in unknown["devices"]:
        device["nvlink_active_links"] = None
    unknown["unknown"]["topology"] = "no nvidia-smi on PATH"
    verdict = verdict_of(unknown)
    assert verdict.passed and any("could not verify the NVLink" in m for m in messages(verdict, WARN))
    single = load("b200-lot-2x180gb")
    single["devices"] = single["devices"][:1]
    assert any("units of 2" in m for m in messages(verdict_of(single), FAIL))


def test_mixed_cards_fail():
    data = load("h200-141gb")
    data["devices"][1]["name"] = "NVIDIA H100 80GB HBM3"
    assert any("not all the same model" in m for m in messages(verdict_of(data), FAIL))


def test_cards_the_shop_does_not_sell_are_still_checked_against_the_build():
    data = load("h100-sxm-80gb")
    data["devices"][0].update(name="NVIDIA L40S", capability="8.9")
    verdict = verdict_of(data)
    assert verdict.passed and verdict.product is None
    assert any("sm_89" in m and "(sm_80, sm_86)" in m for m in messages(verdict, OK))  # 8.x code runs on 8.9
    assert any("not one of the shop's products" in m for m in messages(verdict, WARN))


@pytest.mark.parametrize("entry, capability, expected", [
    ("sm_90", (9, 0), "native"),
    ("sm_90a", (9, 0), "native"),  # arch-specific code runs on exactly its own chip
    ("sm_90a", (10, 0), None),
    ("compute_90a", (10, 0), None),  # and its PTX does not carry forward either
    ("compute_90", (10, 0), "jit"),  # plain PTX does, compiled by the driver
    ("sm_80", (8, 6), "native"),  # machine code runs on later minors of the same major
    ("sm_86", (8, 0), None),
    ("sm_90", (10, 0), None),  # but not across majors
    ("sm_100f", (10, 3), "native"),  # family code runs across the family
    ("compute_100", (9, 0), None),  # PTX never runs on an older card
])
def test_which_compiled_code_runs_on_which_card(entry, capability, expected):
    assert CudaTarget.parse(entry).runs_on(*capability) == expected


def test_native_code_is_preferred_over_ptx_and_gfx_features_must_agree():
    assert cuda_coverage(["sm_80", "compute_90", "sm_90"], "9.0") == ("native", ["sm_90"])
    assert cuda_coverage(["sm_80", "compute_80"], "9.0") == ("jit", ["compute_80"])
    assert rocm_covers(["gfx90a", "gfx942"], "gfx942:sramecc+:xnack-") == ["gfx942"]
    assert rocm_covers(["gfx942:xnack+"], "gfx942:sramecc+:xnack-") == []
    assert rocm_covers(["gfx942:xnack-"], "gfx942:sramecc+:xnack-") == ["gfx942:xnack-"]


def test_a_record_survives_a_round_trip_and_ignores_extra_keys():
    data = load("mi300x-192gb")
    record = StackRecord.from_json({**data, "verdict": {"passed": True}, "later_field": 1})
    assert record.build == "rocm" and record.devices[1].arch == "gfx942:sramecc+:xnack-"
    again = record.to_json()
    assert again == data


def test_an_unknown_product_code_is_refused():
    with pytest.raises(ValueError, match="unknown product"):
        judge(StackRecord.from_json(load("h100-sxm-80gb")), "h300")


def test_the_decision_modules_import_without_torch():
    code = ("import sys\n"
            "import anchorgpu.pilot.stack, anchorgpu.pilot.stack_rules, anchorgpu.pilot.topology\n"
            "import anchorgpu.pilot.check_report, anchorgpu.pilot.check\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'django')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_fixtures_say_where_they_came_from():
    for path in STACKS.glob("*.json"):
        data = json.loads(path.read_text())
        assert "not captured on a real machine" in data["source"], path.name
        assert copy.deepcopy(data)["record_version"] == 1
