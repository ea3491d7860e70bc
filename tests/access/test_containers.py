"""The container's argument lists and the health check's reading of what it saw (pure code)."""

from __future__ import annotations

import pytest

from anchorgpu.access import containers as c
from anchorgpu.access import health

CARDS = (c.Card(index=2, uuid="GPU-aaaa"), c.Card(index=3, uuid="GPU-bbbb"))


def spec(**kwargs) -> c.ContainerSpec:
    values = dict(reference="AG-7K2M9QXD", runtime="podman", vendor="nvidia", image="registry.example/pt:2.7",
                  cards=CARDS, share=c.Share(cpus=64, memory_mib=1024 * 1024, cards=8))
    values.update(kwargs)
    return c.ContainerSpec(**values)


def test_names_come_from_the_reference_and_cannot_carry_shell_or_path_syntax():
    assert c.container_name("AG-7K2M9QXD") == "anchorgpu-ag-7k2m9qxd"
    assert c.container_name("x; rm -rf /") == "anchorgpu-x-rm--rf"
    assert c.volume_name("AG-1") == "anchorgpu-ag-1-workspace"
    with pytest.raises(ValueError):
        c.container_name(" ;; ")


def test_podman_gets_exactly_the_booked_cards_by_cdi_and_limits_in_proportion():
    s = spec()
    argv = c.create_argv(s)
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "--device"]
    assert devices == ["nvidia.com/gpu=GPU-aaaa", "nvidia.com/gpu=GPU-bbbb"]
    assert argv[argv.index("--cpus") + 1] == "16.0"  # 2 of 8 cards: a quarter of 64 CPUs
    assert argv[argv.index("--memory") + 1] == f"{256 * 1024}m"
    assert argv[argv.index("--volume") + 1] == "anchorgpu-ag-7k2m9qxd-workspace:/workspace"
    assert argv[argv.index("--network") + 1] == "host"
    assert s.port == c.BASE_PORT + 2
    assert f"anchorgpu.order={s.reference}" in argv and f"anchorgpu.config={s.digest}" in argv
    assert argv[-3:] == [s.image, "-c", c.ENTRYPOINT]


def test_docker_takes_the_cards_by_uuid_and_amd_gets_kfd_and_its_render_nodes():
    docker = c.create_argv(spec(runtime="docker"))
    assert docker[docker.index("--gpus") + 1] == '"device=GPU-aaaa,GPU-bbbb"'
    amd = spec(vendor="amd", cards=(c.Card(0, "x", "/dev/dri/renderD128"), c.Card(1, "y", "/dev/dri/renderD129")))
    assert c.device_args(amd) == ["--device", "/dev/kfd", "--device", "/dev/dri/renderD128", "--device",
                                  "/dev/dri/renderD129", "--group-add", "video"]
    with pytest.raises(ValueError):
        c.device_args(spec(vendor="amd"))


def test_the_config_digest_changes_with_what_the_container_is_given():
    assert spec().digest == spec().digest
    assert spec().digest != spec(cards=CARDS[:1]).digest
    assert spec().digest != spec(image="other:1").digest


def test_inspect_output_is_read_back():
    labels, running = c.parse_inspect('{"anchorgpu.order":"AG-1","anchorgpu.config":"abc"} true')
    assert labels["anchorgpu.config"] == "abc" and running is True
    assert c.parse_inspect("null false") == ({}, False)


def _findings(**kwargs) -> health.Findings:
    values = dict(expected_nodes=["nvidia2"], seen_nodes=["nvidia2"], expected_uuids=["GPU-a"], seen_uuids=["GPU-a"],
                  driver_version="550.54.15", cuda_version="12.4.1", booked_open={"/dev/nvidia2": "no-driver"},
                  other_open={"195:0": "denied"}, free_gib=70.0, sold_gib=50.0)
    values.update(kwargs)
    return health.Findings(**values).judge()


def test_the_health_check_passes_only_with_exactly_the_booked_cards_and_the_rest_right():
    assert _findings().problems == []
    extra = _findings(seen_nodes=["nvidia2", "nvidia5"])
    assert extra.isolation_broken and "not the booked" in extra.problems[0]
    assert _findings(other_open={"195:0": "opened"}).isolation_broken
    assert "needs an NVIDIA driver of at least 525.60.13" in _findings(driver_version="470.82.01").problems[0]
    assert "/workspace has 10.0 GiB free, 50.0 GiB were sold" in _findings(free_gib=10.0).problems[0]


def test_what_the_commands_print_is_parsed():
    assert health.card_nodes("null\nnvidia0\nnvidiactl\nnvidia-uvm\nrenderD128\nnvidia12\n") == [
        "nvidia0", "nvidia12", "renderD128"]
    assert health.smi_rows("GPU-b, 550.54.15\nGPU-a, 550.54.15\n") == (["GPU-a", "GPU-b"], "550.54.15")
    assert health.open_verdict("sh: can't open '/tmp/p': Operation not permitted") == "denied"
    assert health.open_verdict("can't open '/dev/nvidia1': No such device or address") == "no-driver"
    assert health.open_verdict("opened\n") == "opened"
    assert health.open_verdict("mknod: /tmp/p: Operation not permitted\nmknod failed").startswith("failed")
    assert health.sections("@nodes\nnvidia0\n@open /dev/nvidia0\nopened\n") == {
        "nodes": "nvidia0", "open /dev/nvidia0": "opened"}
    df = "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 264212084 25747528 80643384 25% /\n"
    assert health.free_gib(df) == 76.91
    assert health.free_gib("") is None
