"""The container of one order on one host, as argument lists for podman or Docker. Pure code, no Django.

One container per order and host, named by the order (``anchorgpu-<reference>``), with:

- only the booked cards: NVIDIA through CDI (``--device nvidia.com/gpu=<uuid>``, the NVIDIA Container Toolkit's
  spec names each card by its UUID), or Docker's ``--gpus device=<uuid>``; AMD through ``/dev/kfd`` and the cards'
  own ``/dev/dri/renderD*`` nodes, with the ``video`` group;
- CPU and memory limits in proportion to the cards: booked cards / host cards of the host's CPUs and memory;
- a per-order volume on ``/workspace``;
- the host's network, with the container's own sshd on the order's port: ``BASE_PORT`` + the index of the first
  booked card. Live orders on one host hold disjoint cards, so their ports differ; a card is booked again only
  after the previous term's wipe removed its container;
- no host key in the image: sshd's key is made inside the container when it first starts, and the customer's
  keys are written into it by ``install_ssh_keys`` through standard input, never on a command line.

Every container carries the labels ``anchorgpu.order`` (the reference) and ``anchorgpu.config`` (a digest of
everything above), so a step run again after a crash finds it, and one made with another configuration (a
half-made one, or one from before a change) is removed and made again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

BASE_PORT = 2200
LOGIN_USER = "root"
PIDS_LIMIT = 8192
STOP_GRACE_SECONDS = 10
CONFIG_DIR = "/etc/anchorgpu"
SSHD_PID = "/run/anchorgpu-sshd.pid"
KEYS_FILE = f"{CONFIG_DIR}/authorized_keys"
HOST_KEY = f"{CONFIG_DIR}/ssh_host_ed25519_key"

# What the container runs: a host key of its own on first start, sshd on the order's port with the order's keys
# only (no password, no keyboard-interactive). A constant: the order's values reach it as environment variables.
ENTRYPOINT = f"""set -e
umask 077
mkdir -p {CONFIG_DIR} /run/sshd
[ -s {HOST_KEY} ] || ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY}
[ -e {KEYS_FILE} ] || : > {KEYS_FILE}
printf '%s\\n' "Port $ANCHORGPU_SSH_PORT" "HostKey {HOST_KEY}" "AuthorizedKeysFile {KEYS_FILE}" \\
  "PasswordAuthentication no" "KbdInteractiveAuthentication no" "PermitRootLogin prohibit-password" \\
  "PermitUserEnvironment no" "PidFile {SSHD_PID}" "UsePAM no" > {CONFIG_DIR}/sshd_config
exec /usr/sbin/sshd -D -e -f {CONFIG_DIR}/sshd_config
"""

# Replaces the authorized keys from standard input, in one rename.
WRITE_KEYS = f"umask 077 && cat > {KEYS_FILE}.new && mv -f {KEYS_FILE}.new {KEYS_FILE}"

_UNSAFE = re.compile(r"[^a-z0-9_.-]+")


def container_name(reference: str) -> str:
    """``anchorgpu-<reference>``, lower case, anything but letters, digits, ``_ . -`` replaced by ``-``."""
    cleaned = _UNSAFE.sub("-", (reference or "").strip().lower()).strip("-.")
    if not cleaned:
        raise ValueError("an order reference is needed to name its container")
    return f"anchorgpu-{cleaned}"[:63]


def volume_name(reference: str) -> str:
    return f"{container_name(reference)}-workspace"


@dataclass(frozen=True)
class Card:
    index: int  # on the host
    uuid: str  # as the driver reports it
    render_node: str = ""  # AMD only: /dev/dri/renderD<N>


@dataclass(frozen=True)
class Share:
    """The host's size, for the limits."""

    cpus: int
    memory_mib: int
    cards: int  # cards the host has in the fleet record


@dataclass(frozen=True)
class ContainerSpec:
    reference: str
    runtime: str  # "podman" or "docker"
    vendor: str  # "nvidia" or "amd"
    image: str
    cards: tuple[Card, ...]
    share: Share
    labels: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.runtime not in ("podman", "docker"):
            raise ValueError(f"unknown container runtime {self.runtime!r}")
        if self.vendor not in ("nvidia", "amd"):
            raise ValueError(f"unknown GPU vendor {self.vendor!r}")
        if not self.cards:
            raise ValueError("a container needs at least one card")
        if not self.image:
            raise ValueError("a container needs an image")

    @property
    def name(self) -> str:
        return container_name(self.reference)

    @property
    def volume(self) -> str:
        return volume_name(self.reference)

    @property
    def port(self) -> int:
        return BASE_PORT + min(c.index for c in self.cards)

    @property
    def cpus(self) -> float:
        share = max(0.1, self.share.cpus * len(self.cards) / max(self.share.cards, len(self.cards)))
        return round(share, 2)

    @property
    def memory_mib(self) -> int:
        return max(256, self.share.memory_mib * len(self.cards) // max(self.share.cards, len(self.cards)))

    @property
    def digest(self) -> str:
        data = {k: v for k, v in asdict(self).items() if k != "labels"}
        data["entrypoint"] = ENTRYPOINT
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def device_args(spec: ContainerSpec) -> list[str]:
    if spec.vendor == "nvidia":
        if spec.runtime == "docker":  # Docker 20.10 has no CDI; the toolkit's runtime hook takes UUIDs
            return ["--gpus", '"device=' + ",".join(c.uuid for c in spec.cards) + '"']
        return [arg for c in spec.cards for arg in ("--device", f"nvidia.com/gpu={c.uuid}")]
    missing = [c.index for c in spec.cards if not c.render_node]
    if missing:
        raise ValueError(f"no render node known for card(s) {missing}")
    return ["--device", "/dev/kfd", *[a for c in spec.cards for a in ("--device", c.render_node)],
            "--group-add", "video"]


def create_argv(spec: ContainerSpec) -> list[str]:
    labels = {"anchorgpu.order": spec.reference, "anchorgpu.config": spec.digest, "anchorgpu.port": str(spec.port),
              **spec.labels}
    argv = [spec.runtime, "create", "--name", spec.name, "--hostname", spec.name]
    for key, value in sorted(labels.items()):
        argv += ["--label", f"{key}={value}"]
    argv += ["--network", "host", "--cpus", str(spec.cpus), "--memory", f"{spec.memory_mib}m",
             "--memory-swap", f"{spec.memory_mib}m", "--pids-limit", str(PIDS_LIMIT),
             "--security-opt", "no-new-privileges",
             "--volume", f"{spec.volume}:/workspace", "--env", f"ANCHORGPU_SSH_PORT={spec.port}",
             *device_args(spec), "--entrypoint", "/bin/sh", spec.image, "-c", ENTRYPOINT]
    return argv


def volume_create_argv(spec: ContainerSpec) -> list[str]:
    return [spec.runtime, "volume", "create", "--label", f"anchorgpu.order={spec.reference}", spec.volume]


def inspect_argv(runtime: str, name: str) -> list[str]:
    return [runtime, "container", "inspect", "--format",
            '{{json .Config.Labels}} {{.State.Running}}', name]


def image_exists_argv(runtime: str, image: str) -> list[str]:
    return [runtime, "image", "inspect", "--format", "{{.Id}}", image]


def exec_argv(runtime: str, name: str, *command: str, stdin: bool = False) -> list[str]:
    return [runtime, "exec", *(["-i"] if stdin else []), name, *command]


def stop_argv(runtime: str, name: str, grace: int = STOP_GRACE_SECONDS) -> list[str]:
    """Stop: SIGTERM, then SIGKILL after ``grace`` seconds."""
    return [runtime, "stop", "-t", str(grace), name]


def remove_argv(runtime: str, name: str) -> list[str]:
    return [runtime, "rm", "-f", name]


def volume_remove_argv(runtime: str, volume: str) -> list[str]:
    return [runtime, "volume", "rm", "-f", volume]


def exists_argv(runtime: str, kind: str, name: str) -> list[str]:
    """Exit status 0 when it exists (``kind``: container or volume)."""
    if runtime == "podman":
        return ["podman", kind, "exists", name]
    return ["docker", kind, "inspect", "--format", "{{.Name}}", name]


def parse_inspect(stdout: str) -> tuple[dict, bool]:
    """``{{json .Config.Labels}} {{.State.Running}}`` → (labels, running)."""
    text = stdout.strip()
    head, _, running = text.rpartition(" ")
    try:
        labels = json.loads(head or "{}") or {}
    except ValueError:
        labels = {}
    return (labels if isinstance(labels, dict) else {}), running.strip().lower() == "true"
