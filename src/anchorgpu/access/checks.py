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


def health_findings(conn: ssh.Connection, part: HostPart, work: OrderWork, name: str) -> health.Findings:
    if work.vendor == "nvidia":
        expected_nodes = sorted(f"nvidia{card.index}" for card in part.cards)
        expected_uuids = sorted(card.uuid for card in part.cards)
        booked_nodes = [f"/dev/nvidia{card.index}" for card in part.cards]
        major, minor = health.NVIDIA_MAJOR, (part.other_indices[:1] or (254,))[0]
    else:  # AMD: the render nodes; the GPU tool's UUIDs are not read for AMD cards yet
        expected_nodes = sorted(node.rsplit("/", 1)[-1] for node in render_nodes(conn, part, work))
        expected_uuids = []
        booked_nodes = [f"/dev/dri/{node}" for node in expected_nodes]
        major, minor = 226, 128 + (part.other_indices[:1] or (126,))[0]
    ran = conn.run(c.exec_argv(part.runtime, name, "sh", "-c", health.SCRIPT, "health", str(major), str(minor),
                               *booked_nodes), check=False)
    seen = health.sections(ran.stdout)
    uuids, driver = health.smi_rows(seen.get("smi", "")) if work.vendor == "nvidia" else ([], "")
    return health.Findings(
        expected_nodes=expected_nodes, seen_nodes=health.card_nodes(seen.get("nodes", "")),
        expected_uuids=expected_uuids, seen_uuids=uuids, driver_version=driver,
        cuda_version=seen.get("cuda", "").strip() if work.vendor == "nvidia" else "",
        booked_open={node: health.open_verdict(seen.get(f"open {node}", "")) for node in booked_nodes},
        other_open={f"{major}:{minor}": health.open_verdict(seen.get("probe", ""))},
        free_gib=health.free_gib(seen.get("df", "")), sold_gib=work.sold_on(part)).judge()
