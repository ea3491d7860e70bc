"""The parsers of fleet discovery, on outputs recorded on real machines (tests/fleet/fixtures/SOURCES.md says
where each came from) and on broken ones. Expected values are read off the fixture text."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorgpu.fleet import inventory_parse as p
from anchorgpu.fleet.card_match import card_problem, model_word

FIX = Path(__file__).parent / "fixtures"


def text(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_query_of_an_h100_reads_its_uuid_bus_memory_and_driver_among_212_columns():
    [card] = p.parse_nvidia_query(text("nvidia-smi-query-h100-80gb-hbm3.csv"))
    assert card == p.Card(index=0, uuid="GPU-00000000-0000-0000-0000-000000000000", name="NVIDIA H100 80GB HBM3",
                          pci_bus_id="00000000:00:09.0", memory_mib=81559, driver_version="590.48.01")


def test_query_of_an_h200_and_an_l40s():
    [h200] = p.parse_nvidia_query(text("nvidia-smi-query-h200.csv"))
    assert (h200.name, h200.memory_mib, h200.pci_bus_id) == ("NVIDIA H200", 143771, "00000000:83:00.0")
    [l40s] = p.parse_nvidia_query(text("nvidia-smi-query-l40s.csv"))
    assert (l40s.name, l40s.memory_mib, l40s.driver_version) == ("NVIDIA L40S", 46068, "595.80")


def test_query_in_another_column_order_without_memory():
    [card] = p.parse_nvidia_query(text("nvidia-smi-query-rtx2080super-466.csv"))
    assert card == p.Card(index=0, uuid="GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa",
                          name="NVIDIA GeForce RTX 2080 SUPER", pci_bus_id="00000000:01:00.0", memory_mib=None,
                          driver_version="466.63")


def test_noheader_nounits_form_reads_in_query_fields_order():
    row = "3, GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa, NVIDIA H100 80GB HBM3, 00000000:1B:00.0, 81559, 550.54.15\n"
    [card] = p.parse_nvidia_query(row)
    assert (card.index, card.memory_mib, card.driver_version) == (3, 81559, "550.54.15")


@pytest.mark.parametrize("bad, says", [
    ("", "printed nothing"),
    ("index, name\n0, x\n", "lacks uuid"),
    ("index, uuid, name\n", "a header and no card"),
    ("index, uuid, name\n0, GPU-0000aaaa-11, A, extra\n", "has 4 fields"),
    ("index, uuid, name\nzero, GPU-0000aaaa-11, A\n", "not a number"),
    ("index, uuid, name\n0, not-a-uuid, A\n", "not a GPU UUID"),
    ("index, uuid, name\n0, GPU-0000aaaa-11, A\n1, GPU-0000aaaa-11, A\n", "more than one card"),
    ("index, uuid, name, memory.total [MiB]\n0, GPU-0000aaaa-11, A, lots\n", "not a number of MiB"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "fields"),
])
def test_malformed_query_output_is_refused_with_a_reason(bad, says):
    with pytest.raises(ValueError, match=says):
        p.parse_nvidia_query(bad)


def test_topology_of_an_hgx_h100_has_nv18_between_every_pair_and_pairs_consecutive_indices():
    links = p.parse_nvidia_topology(text("nvidia-smi-topo-hgx-h100-8x.txt"))
    assert len(links) == 28 and set(links.values()) == {18}
    assert p.nvlink_pairs(list(range(8)), links) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}


def test_topology_with_nic_rows_and_columns():
    links = p.parse_nvidia_topology(text("nvidia-smi-topo-h100-4x-nv6-nics.txt"))
    assert links == {(0, 1): 6, (0, 2): 6, (0, 3): 6, (1, 2): 6, (1, 3): 6, (2, 3): 6}


def test_bridged_pcie_cards_pair_by_their_bridges_not_their_indices():
    links = p.parse_nvidia_topology(text("nvidia-smi-topo-rtx3090-4x-bridged.txt"))
    assert links == {(0, 2): 4, (1, 3): 4}
    assert p.nvlink_pairs([0, 1, 2, 3], links) == {0: 0, 2: 0, 1: 1, 3: 1}


def test_pcie_only_server_has_no_nvlink():
    links = p.parse_nvidia_topology(text("nvidia-smi-topo-rtx4090-8x-pcie.txt"))
    assert links == {} and p.nvlink_pairs(list(range(8)), links) == {}


def test_single_card_topology_with_terminal_underline_codes():
    for name in ("nvidia-smi-topo-h100-80gb-hbm3.txt", "nvidia-smi-topo-h200.txt", "nvidia-smi-topo-l40s.txt"):
        assert "\x1b[4m" in text(name)
        assert p.parse_nvidia_topology(text(name)) == {}


@pytest.mark.parametrize("bad, says", [
    ("", "printed nothing"),
    ("hello world\n", "no GPU matrix"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-3\nGPU1\tNV2\t X \t0-3\n", "shows 4 and 2"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-3\n", "are not the GPU columns"),
    ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\nGPU0\t X \tNV4\nGPU1\tNV4\t X \tSYS\nGPU2\tSYS\tSYS\t X \n", "has 1 cells"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV4\t X \t0-3\nGPU1\tNV4\t X \t0-3\n", "marks GPU1, not itself, X"),
])
def test_malformed_topology_is_refused(bad, says):
    with pytest.raises(ValueError, match=says):
        p.parse_nvidia_topology(bad)


def test_rocm_smi_product_names_of_an_mi250x_and_refusal_without_unique_id():
    assert p.parse_rocm_product_names(text("rocm-smi-productname-mi250x.json")) == {
        0: "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2"}
    with pytest.raises(ValueError, match="card0 reports no unique id"):
        p.parse_rocm_smi(text("rocm-smi-productname-mi250x.json"))
    with pytest.raises(ValueError, match="not JSON"):
        p.parse_rocm_smi("ERROR: GPU[0] : Unable to read")


def test_this_machines_memory_cpus_disk_and_images():
    assert p.parse_meminfo(text("proc-meminfo-this-machine.txt")) == 24683584 * 1024
    assert p.parse_nproc(text("nproc-this-machine.txt")) == 2
    assert p.parse_lscpu_model(text("lscpu-json-this-machine.json")) == "AMD EPYC"
    assert p.parse_df(text("df-root-this-machine.txt")) == {"mount": "/", "size_bytes": 270553174016,
                                                           "avail_bytes": 82548150272}
    assert p.parse_podman_images(text("podman-images-this-machine.json")) == [
        "localhost/anchorgpu/base:cuda-12.4", "localhost/anchorgpu/pytorch:2.5-cu124",
        "localhost/anchorgpu/pytorch:2.7-rocm6.3"]


def test_docker_json_lines_skip_untagged_images():
    assert p.parse_docker_images(text("docker-images-json-lines.txt")) == ["iris-python:latest", "mysql:latest"]


@pytest.mark.parametrize("fn, bad, says", [
    (p.parse_meminfo, "MemFree: 1 kB\n", "no MemTotal"),
    (p.parse_nproc, "two\n", "not a CPU count"),
    (p.parse_lscpu_model, "<html>", "not the JSON"),
    (p.parse_df, "df: /nope: No such file or directory\n", "a header and one line"),
    (p.parse_df, "Mounted on 1B-blocks Avail\n/ big small\n", "not 'mount size avail'"),
    (p.parse_podman_images, '{"Names": []}', "expected a JSON list"),
    (p.parse_docker_images, "not json\n", "line 1 is not JSON"),
])
def test_malformed_system_outputs(fn, bad, says):
    with pytest.raises(ValueError, match=says):
        fn(bad)


def test_image_references_compare_without_registry_defaults():
    assert p.normal_image("localhost/anchorgpu/pytorch:2.5-cu124") == p.normal_image("anchorgpu/pytorch:2.5-cu124")
    assert p.normal_image("docker.io/library/ubuntu") == "ubuntu:latest"
    assert p.normal_image("registry.example.com:5000/x/y") == "registry.example.com:5000/x/y:latest"


def test_card_rule_on_the_recorded_names():
    assert model_word("H100 SXM 80 GB") == "H100" and model_word("MI300X 192 GB") == "MI300X"
    assert card_problem(card_name="NVIDIA H100 80GB HBM3", memory_mib=81559, product_name="H100 SXM 80 GB",
                        product_memory_gb=80) is None
    assert card_problem(card_name="NVIDIA H200", memory_mib=143771, product_name="H200 141 GB",
                        product_memory_gb=141) is None
    assert "not a H100" in card_problem(card_name="NVIDIA L40S", memory_mib=46068, product_name="H100 SXM 80 GB",
                                        product_memory_gb=80)
    assert "NVL board" in card_problem(card_name="NVIDIA H100 NVL", memory_mib=95830, product_name="H100 SXM 80 GB",
                                       product_memory_gb=80)
    assert "143771 MiB" in card_problem(card_name="NVIDIA H200", memory_mib=143771, product_name="H200 80 GB",
                                        product_memory_gb=80)
    assert "did not report its memory" in card_problem(card_name="NVIDIA GeForce RTX 2080 SUPER", memory_mib=None,
                                                       product_name="RTX 2080 SUPER", product_memory_gb=8)
