"""The commands the real provisioner runs on a host to learn about it and to check an order's container."""

from __future__ import annotations

from anchorgpu.fleet import ssh
from anchorgpu.orders.provisioner import HostRefused

from . import containers as c
from . import health
from .records import HostPart, OrderWork

SMI = ["nvidia-smi", "--query-gpu=uuid,driver_version", "--format=csv,noheader"]
DEFAULT_CPUS = 8  # per card, when the host's own count cannot be read
DEFAULT_MEMORY_MIB = 64 * 1024


def card_check(conn: ssh.Connection, part: HostPart, work: OrderWork) -> dict:
    """The host reports every booked card the fleet record names; HostRefused(block_host) when it does not."""
    where = f"order {work.reference}, allocate_devices, host {part.name}"
    if work.vendor == "amd":
        nodes = render_nodes(conn, part, work)
        return {"cards": [card.uuid for card in part.cards], "render_nodes": nodes}
    listed = conn.run(SMI, check=False)
    if not listed.ok:
        raise HostRefused(f"{where}: the GPU tool does not answer ({listed.brief()}); the fleet record says the "
                          "host has NVIDIA cards", host=part.name, block_host=True)
    uuids, driver = health.smi_rows(listed.stdout)
    missing = [f"gpu{card.index} {card.uuid}" for card in part.cards if card.uuid not in uuids]
    if missing:
        raise HostRefused(f"{where}: the host does not report card(s) {', '.join(missing)} that the fleet record "
                          f"gives it (it reports {len(uuids)} card(s)); taken off sale until fleet discovery or an "
                          "operator sets the record right", host=part.name, block_host=True)
    return {"cards": [card.uuid for card in part.cards], "indices": [card.index for card in part.cards],
            "driver_version": driver, "host_reports": len(uuids)}


def render_nodes(conn: ssh.Connection, part: HostPart, work: OrderWork) -> list[str]:
    """AMD: each booked card's render node, found from its PCI bus id (``/dev/dri/by-path``)."""
    nodes = []
    for card, bus in zip(part.cards, part.pci_bus_ids, strict=True):
        if not bus:
            raise HostRefused(f"order {work.reference}, host {part.name}: card gpu{card.index} has no PCI bus id "
                              "in the fleet record, so its render node cannot be found", host=part.name)
        found = conn.run(["readlink", "-f", f"/dev/dri/by-path/pci-{bus.lower()}-render"], check=False)
        node = found.stdout.strip()
        if not found.ok or not node.startswith("/dev/dri/renderD"):
            raise HostRefused(f"order {work.reference}, host {part.name}: no render node for card gpu{card.index} "
                              f"at PCI {bus}", host=part.name, block_host=True)
        nodes.append(node)
    return nodes


def host_share(conn: ssh.Connection, part: HostPart) -> c.Share:
    """The host's CPUs and memory as it reports them (``nproc``, ``/proc/meminfo``)."""
    out = conn.run(["sh", "-c", "nproc; grep MemTotal /proc/meminfo"], check=False).stdout.split()
    try:
        cpus = int(out[0])
        memory = int(out[2]) // 1024
    except (IndexError, ValueError):
        cpus, memory = DEFAULT_CPUS * part.card_count, DEFAULT_MEMORY_MIB * part.card_count
    return c.Share(cpus=cpus, memory_mib=memory, cards=part.card_count)


def _exec(conn: ssh.Connection, part: HostPart, name: str, *command: str) -> ssh.CommandResult:
    return conn.run(c.exec_argv(part.runtime, name, *command), check=False)


def health_findings(conn: ssh.Connection, part: HostPart, work: OrderWork, name: str) -> health.Findings:
    listing = _exec(conn, part, name, "sh", "-c", "ls -1 /dev; ls -1 /dev/dri 2>/dev/null; true").stdout
    seen_nodes = health.card_nodes(listing)
    if work.vendor == "nvidia":
        expected_nodes = sorted(f"nvidia{card.index}" for card in part.cards)
        smi = _exec(conn, part, name, *SMI)
        uuids, driver = health.smi_rows(smi.stdout) if smi.ok else ([], "")
        expected_uuids = sorted(card.uuid for card in part.cards)
        booked_nodes = [f"/dev/nvidia{card.index}" for card in part.cards]
        major = health.NVIDIA_MAJOR
    else:  # AMD: the render nodes; the GPU tool's UUIDs are not read for AMD cards yet
        expected_nodes = sorted(card_node.rsplit("/", 1)[-1] for card_node in render_nodes(conn, part, work))
        uuids, driver, expected_uuids = [], "", []
        booked_nodes = [f"/dev/dri/{node}" for node in expected_nodes]
        major = 226
    booked_open = {}
    for node in booked_nodes:
        opened = _exec(conn, part, name, "sh", "-c", health.OPEN_NODE, "open", node)
        booked_open[node] = health.open_verdict(opened.stdout + opened.stderr, opened.exit_status)
    other_open = {}
    others = list(part.other_indices[:1]) or [254]
    for index in others:
        minor = index if major == health.NVIDIA_MAJOR else 128 + index
        probed = _exec(conn, part, name, "sh", "-c", health.PROBE_NODE, "probe", str(major), str(minor))
        other_open[f"{major}:{minor}"] = health.open_verdict(probed.stdout + probed.stderr, probed.exit_status)
    cuda = _exec(conn, part, name, "sh", "-c", 'echo "$CUDA_VERSION"').stdout.strip() if work.vendor == "nvidia" \
        else ""
    df = _exec(conn, part, name, "df", "-Pk", "/workspace")
    return health.Findings(expected_nodes=expected_nodes, seen_nodes=seen_nodes, expected_uuids=expected_uuids,
                           seen_uuids=uuids, driver_version=driver, cuda_version=cuda, booked_open=booked_open,
                           other_open=other_open, free_gib=health.free_gib(df.stdout), sold_gib=work.sold_on(part)
                           ).judge()
