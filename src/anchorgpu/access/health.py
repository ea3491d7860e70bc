"""What the health check reads inside an order's container, and what it concludes. Pure code, no Django.

The checks, each run inside the container (``runtime exec``):

- the card device nodes it can see (``/dev/nvidia<N>``, ``/dev/dri/renderD<N>``) are exactly the booked ones;
- the GPU tool lists exactly the booked UUIDs (``nvidia-smi --query-gpu=uuid,driver_version``);
- a booked card's node opens (or, on a host without a driver, fails with "no such device", which is the
  driver's answer, not the cgroup's), and another card's node, made inside with ``mknod``, is refused by the
  device cgroup ("operation not permitted");
- the image's CUDA version (its ``CUDA_VERSION``) runs on the host's driver (``driver_compat``);
- the free space on ``/workspace`` is at least what was sold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from anchorgpu.fleet.driver_compat import cuda_driver_problem

NVIDIA_MAJOR = 195
_CARD_NODE = re.compile(r"^(nvidia\d+|renderD\d+)$")

# Everything the check reads, in one run inside the container. Arguments: the card major, the minor of another
# card (made with mknod in /tmp and opened: the device cgroup must refuse it), then the booked card nodes (each
# opened without being read). Each part of the output starts with a line "@name".
SCRIPT = """exec 2>&1; major=$1; minor=$2; shift 2
echo @nodes; ls -1 /dev; ls -1 /dev/dri 2>/dev/null
echo @smi; command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=uuid,driver_version --format=csv,noheader
echo @cuda; echo "$CUDA_VERSION"
echo @df; df -Pk /workspace
echo @probe; p=/tmp/.anchorgpu-probe-$$
if mknod "$p" c "$major" "$minor"; then ( : < "$p" ) && echo opened; rm -f "$p"; else echo "mknod failed"; fi
for node in "$@"; do echo "@open $node"; ( : < "$node" ) && echo opened; done
true
"""


def sections(output: str) -> dict[str, str]:
    """The script's output cut at its "@name" lines."""
    parts: dict[str, list[str]] = {}
    current = ""
    for line in output.splitlines():
        if line.startswith("@"):
            current = line[1:].strip()
            parts[current] = []
        elif current:
            parts[current].append(line)
    return {name: "\n".join(lines) for name, lines in parts.items()}


def card_nodes(listing: str) -> list[str]:
    """The card nodes in an ``ls -1 /dev /dev/dri`` listing."""
    return sorted({line.strip() for line in listing.splitlines() if _CARD_NODE.match(line.strip())})


def smi_rows(stdout: str) -> tuple[list[str], str]:
    """``uuid, driver_version`` lines → (UUIDs, driver version)."""
    uuids, drivers = [], set()
    for line in stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if parts and parts[0]:
            uuids.append(parts[0])
            if len(parts) > 1 and parts[1]:
                drivers.add(parts[1])
    return sorted(uuids), (sorted(drivers)[0] if len(drivers) == 1 else ", ".join(sorted(drivers)))


def open_verdict(output: str) -> str:
    """'opened', 'denied' (the cgroup: EPERM), 'no-driver' (ENXIO/ENODEV: the cgroup let it through) or
    'failed: …'."""
    text = output.strip().lower()
    if "mknod failed" in text:
        return "failed: could not make the probe node (mknod)"
    if "opened" in text:
        return "opened"
    if "operation not permitted" in text:
        return "denied"
    if "no such device" in text:
        return "no-driver"
    return f"failed: {output.strip()[:200]}"


def free_gib(df_output: str) -> float | None:
    """Available space from ``df -Pk PATH`` (POSIX format: 1024-byte blocks)."""
    lines = [line for line in df_output.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    parts = lines[-1].split()
    try:
        return round(int(parts[3]) / 1024 / 1024, 2)
    except (IndexError, ValueError):
        return None


@dataclass
class Findings:
    """Everything the health check saw, and what is wrong with it (empty ``problems``: healthy)."""

    expected_nodes: list[str]
    seen_nodes: list[str]
    expected_uuids: list[str]
    seen_uuids: list[str]
    driver_version: str
    cuda_version: str
    booked_open: dict[str, str]
    other_open: dict[str, str]
    free_gib: float | None
    sold_gib: float
    problems: list[str] = field(default_factory=list)
    isolation_broken: bool = False

    def judge(self) -> Findings:
        if self.seen_nodes != self.expected_nodes:
            self.problems.append(f"the container sees card nodes {self.seen_nodes or 'none'}, "
                                 f"not the booked {self.expected_nodes}")
            self.isolation_broken = bool(set(self.seen_nodes) - set(self.expected_nodes))
        if self.seen_uuids != self.expected_uuids:
            self.problems.append(f"the GPU tool lists {self.seen_uuids or 'no card'}, not the booked "
                                 f"{self.expected_uuids}")
            self.isolation_broken = self.isolation_broken or bool(set(self.seen_uuids) - set(self.expected_uuids))
        for node, verdict in self.booked_open.items():
            if verdict not in ("opened", "no-driver"):
                self.problems.append(f"booked card node {node} cannot be opened: {verdict}")
        for node, verdict in self.other_open.items():
            if verdict == "opened" or verdict == "no-driver":
                self.problems.append(f"another card's node ({node}) is not refused by the device cgroup")
                self.isolation_broken = True
            elif verdict != "denied":
                self.problems.append(f"another card's node ({node}) could not be tried: {verdict}")
        if self.cuda_version:
            problem = cuda_driver_problem(self.driver_version, self.cuda_version)
            if problem:
                self.problems.append(problem)
        if self.free_gib is None:
            self.problems.append("the free space on /workspace could not be read")
        elif self.free_gib < self.sold_gib:
            self.problems.append(f"/workspace has {self.free_gib} GiB free, {self.sold_gib} GiB were sold")
        return self
