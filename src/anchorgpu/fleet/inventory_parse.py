"""Reading what a GPU host prints about itself. Pure domain code, no Django.

Every function takes the text a command printed on a machine we do not control and returns plain data, or
raises ``ValueError`` with a sentence saying what was wrong with it. The commands, as fleet discovery runs them:

- ``nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total,driver_version --format=csv`` (the header
  form: columns are found by their header, so a wider or reordered query still reads; ``noheader`` output is
  read with ``QUERY_FIELDS`` in that order)
- ``nvidia-smi topo -m`` (the link matrix; NV# cells are NVLink bonds)
- ``rocm-smi --showproductname --showuniqueid --showbus --showmeminfo vram --json`` (AMD cards)
- ``cat /proc/meminfo``, ``nproc``, ``lscpu -J``, ``df -B1 --output=target,size,avail PATH``
- ``podman images --format json`` or ``docker images --format '{{json .}}'`` (the runtime's image list)
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

from anchorgpu.pilot.topology import parse_nvidia_smi_topo

QUERY_FIELDS = ("index", "uuid", "name", "pci.bus_id", "memory.total", "driver_version")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi underlines the topo header on a terminal-like output
_NV = re.compile(r"^NV(\d+)$")
_MAX_LINES = 4096  # a host with more lines than this is not printing what we asked


@dataclass(frozen=True)
class Card:
    index: int
    uuid: str
    name: str
    pci_bus_id: str = ""
    memory_mib: int | None = None
    driver_version: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _lines(text: str, what: str) -> list[str]:
    if not isinstance(text, str):
        raise ValueError(f"{what}: expected text")
    lines = [ln.rstrip("\r") for ln in _ANSI.sub("", text).splitlines()]
    if len(lines) > _MAX_LINES:
        raise ValueError(f"{what}: {len(lines)} lines is far more than a GPU host prints")
    return lines


def _na(value: str) -> bool:
    return value.strip() in {"", "[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}


def _mib(value: str, what: str) -> int | None:
    value = value.strip()
    if _na(value):
        return None
    m = re.fullmatch(r"(\d+)(?:\s*MiB)?", value)
    if not m:
        raise ValueError(f"{what}: memory {value!r} is not a number of MiB")
    return int(m.group(1))


def parse_nvidia_query(text: str) -> list[Card]:
    """The cards from ``nvidia-smi --query-gpu=… --format=csv`` (with or without header and units)."""
    what = "nvidia-smi --query-gpu"
    lines = [ln for ln in _lines(text, what) if ln.strip()]
    if not lines:
        raise ValueError(f"{what}: printed nothing (no NVIDIA card, or the driver is not loaded)")
    first = [c.strip() for c in lines[0].split(",")]
    if not first[0].isdigit() and any(h in first for h in ("index", "uuid", "name")):
        header = [re.sub(r"\s*\[.*\]$", "", h) for h in first]  # "memory.total [MiB]" -> "memory.total"
        rows = lines[1:]
    else:
        header, rows = list(QUERY_FIELDS), lines
    missing = [f for f in ("index", "uuid", "name") if f not in header]
    if missing:
        raise ValueError(f"{what}: the header lacks {', '.join(missing)}")
    if not rows:
        raise ValueError(f"{what}: a header and no card")
    cards = []
    for n, line in enumerate(rows, start=1):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            raise ValueError(f"{what}: line {n} has {len(cells)} fields, the header {len(header)}: {line[:120]!r}")
        row = dict(zip(header, cells, strict=True))
        if not row["index"].isdigit():
            raise ValueError(f"{what}: line {n}: index {row['index']!r} is not a number")
        uuid = row["uuid"]
        if not re.fullmatch(r"GPU-[0-9a-fA-F-]{8,64}", uuid):
            raise ValueError(f"{what}: line {n}: {uuid!r} is not a GPU UUID (GPU-…)")
        if not row["name"]:
            raise ValueError(f"{what}: line {n}: the card has no name")
        cards.append(Card(index=int(row["index"]), uuid=uuid, name=row["name"],
                          pci_bus_id="" if _na(row.get("pci.bus_id", "")) else row.get("pci.bus_id", ""),
                          memory_mib=_mib(row["memory.total"], what) if "memory.total" in row else None,
                          driver_version="" if _na(row.get("driver_version", "")) else row.get("driver_version", "")))
    _check_distinct(cards, what)
    return sorted(cards, key=lambda c: c.index)


def _check_distinct(cards: list[Card], what: str) -> None:
    for attr in ("index", "uuid"):
        seen = [getattr(c, attr) for c in cards]
        dup = sorted({str(v) for v in seen if seen.count(v) > 1})
        if dup:
            raise ValueError(f"{what}: {attr} {', '.join(dup)} appears on more than one card")


def parse_nvidia_topology(text: str) -> dict[tuple[int, int], int]:
    """NVLink bonds from ``nvidia-smi topo -m``: ``{(i, j): links}`` for i < j, from the GPU rows' NV# cells.

    The matrix is read by the pilot kit's parser (``pilot.topology``, which also drops the terminal's underline
    codes and the NIC rows and columns); this adds what a fleet record needs on top: every GPU row marks itself
    ``X``, the rows are the columns, and the NV cells agree across the diagonal. PCIe paths (SYS, NODE, PHB,
    PXB, PIX) are left out."""
    what = "nvidia-smi topo -m"
    if not any(line.strip() for line in _lines(text, what)):
        raise ValueError(f"{what}: printed nothing")
    try:
        matrix = parse_nvidia_smi_topo(text)["links"]
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    columns = {peer for row in matrix.values() for peer in row} | set(matrix)
    if set(matrix) != columns:
        raise ValueError(f"{what}: the GPU rows ({sorted(matrix)}) are not the GPU columns ({sorted(columns)})")
    links: dict[tuple[int, int], int] = {}
    for name, row in matrix.items():
        me = int(name[3:])
        if len(row) != len(columns) - 1:
            raise ValueError(f"{what}: row {name} has {len(row)} cells for {len(columns) - 1} other GPUs")
        for peer, cell in row.items():
            m = _NV.match(cell)
            if cell == "X":
                raise ValueError(f"{what}: row {name} marks {peer}, not itself, X")
            if not m:
                continue
            other = int(peer[3:])
            key = (min(me, other), max(me, other))
            count = int(m.group(1))
            if key in links and links[key] != count:
                raise ValueError(f"{what}: GPU{key[0]}–GPU{key[1]} shows {links[key]} and {count} NVLinks")
            links[key] = count
    return links


def gpu_count_in_topology(text: str) -> int:
    header = _lines(text, "nvidia-smi topo -m")[0] if text.strip() else ""
    return len(re.findall(r"\bGPU\d+\b", header.split("CPU")[0]))


def nvlink_pairs(indices: list[int], links: dict[tuple[int, int], int]) -> dict[int, int]:
    """Which cards to sell together as an NVLink pair: ``{index: pair number}``; unpaired cards are left out.

    The rule: walk the cards by index; each card not yet paired takes, among the later unpaired cards it has an
    NVLink bond with, the one with the most links, the lowest index on a tie. On a board where every card
    reaches every other through NVSwitch (HGX/DGX A100, H100, H200, B200: NV12 or NV18 in every cell) this pairs
    consecutive indices 0–1, 2–3, …; they are then as good as any other pairing, and consecutive indices share a
    NUMA node on the boards whose matrices we have seen. On PCIe cards joined by bridges (NV4 between two
    cards only) it pairs exactly the bridged cards, whatever their indices. Pair numbers count from 0."""
    pairs: dict[int, int] = {}
    number = 0
    ordered = sorted(indices)
    for i in ordered:
        if i in pairs:
            continue
        partners = [(links.get((min(i, j), max(i, j)), 0), j) for j in ordered if j > i and j not in pairs]
        partners = [(n, j) for n, j in partners if n > 0]
        if not partners:
            continue
        best = max(n for n, _ in partners)
        j = min(j for n, j in partners if n == best)
        pairs[i] = pairs[j] = number
        number += 1
    return pairs


def parse_rocm_smi(text: str) -> list[Card]:
    """AMD cards from ``rocm-smi --showproductname --showuniqueid --showbus --showmeminfo vram --json``.

    rocm-smi keys its JSON by ``cardN``; the product is ``Card Series`` (older releases: ``Card series``), the
    identity ``Unique ID``, memory ``VRAM Total Memory (B)``. Without a unique id the card is refused: the shop
    hands cards to containers by a stable id."""
    what = "rocm-smi --json"
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what}: expected an object keyed by card")
    cards = []
    for key, info in data.items():
        m = re.fullmatch(r"card(\d+)", key)
        if not m:
            continue  # "system" and other entries
        if not isinstance(info, dict):
            raise ValueError(f"{what}: {key} is not an object")
        norm = {k.lower(): str(v) for k, v in info.items()}
        name = norm.get("card series") or norm.get("device name") or ""
        uuid = norm.get("unique id", "")
        if _na(uuid):
            raise ValueError(f"{what}: {key} reports no unique id")
        vram = norm.get("vram total memory (b)", "")
        memory = int(vram) // (1024 * 1024) if vram.isdigit() else None
        cards.append(Card(index=int(m.group(1)), uuid=uuid, name=name, pci_bus_id=norm.get("pci bus", ""),
                          memory_mib=memory))
    if not cards:
        raise ValueError(f"{what}: no card in the output")
    _check_distinct(cards, what)
    return sorted(cards, key=lambda c: c.index)


def parse_rocm_product_names(text: str) -> dict[int, str]:
    """Just the product names (``Card Series``) by card index, for a host whose cards have no unique id yet."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"rocm-smi --json: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("rocm-smi --json: expected an object keyed by card")
    names = {}
    for key, info in data.items():
        m = re.fullmatch(r"card(\d+)", key)
        if m and isinstance(info, dict):
            norm = {k.lower(): str(v) for k, v in info.items()}
            names[int(m.group(1))] = norm.get("card series", "")
    return names


def parse_meminfo(text: str) -> int:
    """``MemTotal`` from ``/proc/meminfo``, in bytes."""
    for line in _lines(text, "/proc/meminfo"):
        m = re.fullmatch(r"MemTotal:\s+(\d+)\s*kB", line.strip())
        if m:
            return int(m.group(1)) * 1024
    raise ValueError("/proc/meminfo: no MemTotal line")


def parse_nproc(text: str) -> int:
    value = (text or "").strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"nproc: {value[:40]!r} is not a CPU count")
    return int(value)


def parse_lscpu_model(text: str) -> str:
    """The CPU model from ``lscpu -J`` (empty when it does not say)."""
    try:
        data = json.loads(text)
        fields = data["lscpu"]
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"lscpu -J: not the JSON lscpu prints ({exc})") from None
    stack = list(fields) if isinstance(fields, list) else []
    while stack:
        item = stack.pop(0)
        if not isinstance(item, dict):
            continue
        if item.get("field") == "Model name:":
            return str(item.get("data") or "")
        stack.extend(item.get("children") or [])
    return ""


def parse_df(text: str) -> dict:
    """``df -B1 --output=target,size,avail PATH``: ``{"mount", "size_bytes", "avail_bytes"}``."""
    lines = [ln for ln in _lines(text, "df") if ln.strip()]
    if len(lines) != 2:
        raise ValueError(f"df: expected a header and one line, got {len(lines)} lines")
    cells = lines[1].split()
    if len(cells) != 3 or not cells[1].isdigit() or not cells[2].isdigit():
        raise ValueError(f"df: {lines[1][:120]!r} is not 'mount size avail' in bytes")
    return {"mount": cells[0], "size_bytes": int(cells[1]), "avail_bytes": int(cells[2])}


def parse_podman_images(text: str) -> list[str]:
    """Image names from ``podman images --format json`` (a JSON list; ``Names`` per image, repeated per tag)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"podman images: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError("podman images: expected a JSON list")
    names = set()
    for item in data:
        if not isinstance(item, dict):
            raise ValueError("podman images: an entry is not an object")
        for name in item.get("Names") or []:
            names.add(str(name))
    return sorted(names)


def parse_docker_images(text: str) -> list[str]:
    """Image names from ``docker images --format '{{json .}}'`` (one JSON object a line)."""
    names = set()
    for n, line in enumerate(_lines(text, "docker images"), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise ValueError(f"docker images: line {n} is not JSON") from None
        if not isinstance(item, dict) or "Repository" not in item:
            raise ValueError(f"docker images: line {n} has no Repository")
        if item["Repository"] != "<none>" and item.get("Tag", "<none>") != "<none>":
            names.add(f"{item['Repository']}:{item['Tag']}")
    return sorted(names)


def normal_image(ref: str) -> str:
    """One spelling of an image reference, for comparing an environment's image with the host's list:
    no registry defaults (``docker.io/``, ``localhost/``, ``library/``), ``:latest`` when untagged."""
    ref = (ref or "").strip()
    for prefix in ("docker.io/", "localhost/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
    if ref.startswith("library/"):
        ref = ref[len("library/"):]
    last = ref.rsplit("/", 1)[-1]
    if "@" not in ref and ":" not in last:
        ref += ":latest"
    return ref
