"""The probe on this (CPU-only) machine, on a made-up sysfs tree and a stand-in nvidia-smi; the topology parsers."""

import json
import os
import stat
from pathlib import Path

import pytest
import torch

from anchorgpu.pilot.stack_probe import normal_bus_id, probe_stack, scan_pci
from anchorgpu.pilot.topology import parse_nvidia_smi_topo, parse_rocm_smi_topo

STACKS = Path(__file__).parent / "stacks"

EIGHT_WITH_NICS = (
    "\x1b[4m\tGPU0\tGPU1\tGPU2\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV12\tSYS\tPXB\tSYS\t0-47,96-143\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tSYS\tPXB\tSYS\t0-47,96-143\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tSYS\tPXB\t48-95,144-191\t1\t\tN/A\n"
    "NIC0\tPXB\tPXB\tSYS\t X \tSYS\n"
    "NIC1\tSYS\tSYS\tPXB\tSYS\t X \n\n"
    "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


def test_nvidia_smi_topology_with_nics_and_colour_codes():
    topology = parse_nvidia_smi_topo(EIGHT_WITH_NICS)
    assert topology["links"] == {"GPU0": {"GPU1": "NV12", "GPU2": "SYS"}, "GPU1": {"GPU0": "NV12", "GPU2": "SYS"},
                                 "GPU2": {"GPU0": "SYS", "GPU1": "SYS"}}
    assert topology["numa_affinity"] == {"GPU0": "0", "GPU1": "0", "GPU2": "1"}
    assert topology["cpu_affinity"]["GPU2"] == "48-95,144-191"


def test_the_recorded_topologies_parse_back_to_what_the_records_hold():
    for name, parse in (("b200-lot-2x180gb", parse_nvidia_smi_topo), ("a100-sxm-80gb", parse_nvidia_smi_topo),
                        ("mi300x-192gb", parse_rocm_smi_topo)):
        recorded = json.loads((STACKS / f"{name}.json").read_text())["topology"]
        parsed = parse(recorded["raw"])
        assert parsed["links"] == recorded["links"] and parsed["numa_affinity"] == recorded["numa_affinity"], name


@pytest.mark.parametrize("parse", [parse_nvidia_smi_topo, parse_rocm_smi_topo])
def test_text_without_a_matrix_is_refused(parse):
    with pytest.raises(ValueError):
        parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


def test_bus_ids_are_normalised_to_the_sysfs_spelling():
    assert normal_bus_id("00000000:1B:00.0") == "0000:1b:00.0"
    assert normal_bus_id("0000:9a:00.0") == "0000:9a:00.0"


def _fake_pci(root: Path) -> Path:
    for bus, vendor, kind, numa in [("0000:18:00.0", "0x10de", "0x030200", "0"),  # an NVIDIA 3D controller
                                    ("0000:05:00.0", "0x1002", "0x120000", "1"),  # an AMD accelerator
                                    ("0000:00:01.0", "0x1002", "0x060400", "0"),  # an AMD PCIe bridge: not a GPU
                                    ("0000:03:00.0", "0x1a03", "0x030000", "0")]:  # a BMC's VGA: not a GPU
        entry = root / bus
        entry.mkdir(parents=True)
        (entry / "vendor").write_text(vendor + "\n")
        (entry / "class").write_text(kind + "\n")
        (entry / "numa_node").write_text(numa + "\n")
    return root


def test_the_pci_scan_finds_the_gpus_and_only_them(tmp_path):
    found = scan_pci(_fake_pci(tmp_path / "pci"))
    assert [(b.bus_id, b.vendor, b.numa_node) for b in found] == [("0000:05:00.0", "amd", 1),
                                                                  ("0000:18:00.0", "nvidia", 0)]


def test_the_probe_on_this_machine_records_what_it_found_and_why_not_the_rest(tmp_path, monkeypatch):
    # A stand-in nvidia-smi that prints a recorded matrix: the probe runs it and keeps the parsed topology.
    raw = json.loads((STACKS / "b200-lot-2x180gb.json").read_text())["topology"]["raw"]
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "topo.txt").write_text(raw)
    script = tools / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat '{tools / 'topo.txt'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    record = probe_stack(pci_root=_fake_pci(tmp_path / "pci"))
    assert record.torch_version == torch.__version__ and record.cuda_runtime == torch.version.cuda
    assert record.build == ("cuda" if torch.version.cuda else "cpu")
    assert record.devices == [] or torch.cuda.is_available()
    assert [b.vendor for b in record.bus] == ["amd", "nvidia"]
    assert record.visible_env == {"CUDA_VISIBLE_DEVICES": ""}
    assert record.topology["source"] == "nvidia-smi topo -m" and record.topology["links"]["GPU0"] == {"GPU1": "NV18"}
    assert record.unknown.get("driver")  # no NVML here: the reason is kept instead of a value
    json.dumps(record.to_json())  # a plain-JSON record


def test_a_failing_tool_leaves_its_reason(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    script = tools / "nvidia-smi"
    script.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin")
    record = probe_stack(pci_root=tmp_path / "no-such-dir")
    assert record.topology is None and record.bus == []
    assert "exit 9" in record.unknown["topology"] and "NVIDIA-SMI has failed" in record.unknown["topology"]
