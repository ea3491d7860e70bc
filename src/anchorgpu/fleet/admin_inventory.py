"""How the host's page shows what discovery read, and the operator's guide to connecting a real host."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

SSH_HELP = gettext_lazy(
    "How to add a real host. On the host install: the GPU driver with nvidia-smi (AMD: ROCm with rocm-smi); the "
    "NVIDIA Container Toolkit, and write its CDI spec with `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` "
    "(podman reads /etc/cdi and /var/run/cdi); podman (or Docker); and pull every offered environment's image. "
    "Create the SSH user below and put the operator's public key (the pair of the private key named by "
    "ANCHORGPU_HOST_SSH_KEY_FILE) in its ~/.ssh/authorized_keys. Pin the host's key with `anchorgpu fleet "
    "pin-host-key HOST`, comparing the fingerprint it prints with `ssh-keygen -lf "
    "/etc/ssh/ssh_host_ed25519_key.pub` run on the host's console, never trusting the first answer blindly. Then "
    "use the action “Read the inventory over SSH” (or `anchorgpu fleet discover HOST`).")

INVENTORY_HELP = gettext_lazy(
    "What discovery checks: each card's model and memory against the product, the card UUIDs and PCI ids, the "
    "NVLink links nvidia-smi reports (pairs are formed from them), the driver against the CUDA release of every "
    "offered environment, that every offered image is on the host, and the CPU count, memory and disk. What it "
    "cannot check: that the links carry their full rate, the cards' health under load, a card that misreports its "
    "name (a virtual machine can), network bandwidth, or an AMD driver against a ROCm release. A host whose "
    "reading finds a problem is not sold; discovery lifts its own block once the cause is gone.")


def _gib(n) -> str:
    return f"{n / 2**30:.1f} GiB" if isinstance(n, int) else "?"


def inventory_html(inv: dict) -> str:
    if not inv:
        return _("Not read yet.")
    pairs = {}
    for a, b, n in inv.get("nvlink") or []:
        pairs.setdefault(a, []).append(f"GPU{b} (NV{n})")
        pairs.setdefault(b, []).append(f"GPU{a} (NV{n})")
    rows = format_html_join("", "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td>"
                                "<td>{}</td></tr>",
                            ((c["index"], c["uuid"], c["name"], c.get("pci_bus_id") or "",
                              f"{c['memory_mib']} MiB" if c.get("memory_mib") else "?",
                              ", ".join(pairs.get(c["index"], [])) or "—") for c in inv.get("cards") or []))
    head = format_html("<tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>",
                       _("GPU"), _("UUID"), _("model"), _("PCI bus"), _("memory"), _("NVLink to"))
    disk = inv.get("disk") or {}
    images = inv.get("images")
    facts = format_html(
        "<p>{}: {} · {}: {} {} · {}: {} · {} {}: {} ({} {})</p><p>{}: {}</p>",
        _("driver"), inv.get("driver_version") or "?", _("CPUs"), inv.get("cpu_count") or "?",
        inv.get("cpu_model") or "", _("memory"), _gib(inv.get("memory_bytes")), _("disk"), disk.get("mount", "?"),
        _gib(disk.get("size_bytes")), _gib(disk.get("avail_bytes")), _("free"), _("images"),
        ", ".join(images) if images else (_("none") if images == [] else _("not read")))
    problems = inv.get("problems") or []
    listed = format_html("<ul>{}</ul>", format_html_join("", "<li>{}</li>", ((p,) for p in problems))) \
        if problems else ""
    return format_html("<table>{}{}</table>{}{}", head, rows, facts, listed)
