"""Reading the GPU topology out of ``nvidia-smi topo -m`` and ``rocm-smi --showtopo``.

Both print a matrix with one row and one column per GPU; a cell says how the
two are joined: ``NV18`` (18 bonded NVLinks), ``PIX``/``PXB``/``PHB``/``NODE``/
``SYS`` (PCIe paths, from shortest to longest) on NVIDIA, ``XGMI`` or
``PCIE`` on AMD. The result is plain data for the stack record:

    {"source": "nvidia-smi topo -m", "links": {"GPU0": {"GPU1": "NV18"}, ...},
     "numa_affinity": {"GPU0": "0", ...}, "cpu_affinity": {"GPU0": "0-55,112-167", ...}}

Pure Python: the probe runs the tools; this only parses their text.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"GPU\d+")
_COLUMN = re.compile(r"(GPU|NIC|mlx\S*)\d*")


def parse_nvidia_smi_topo(text: str) -> dict:
    """The GPU-to-GPU links and each GPU's CPU and NUMA affinity; ValueError when there is no matrix."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    # The header is the first line that starts with a GPU name; the rows follow it.
    header_at = next((i for i, line in enumerate(lines) if line.split()[:1] and _GPU.fullmatch(line.split()[0])),
                     None)
    if header_at is None:
        raise ValueError("no GPU matrix in the nvidia-smi topo output")
    header = lines[header_at].split()
    columns = []
    for token in header:
        if not _COLUMN.fullmatch(token):
            break
        columns.append(token)
    links, numa, cpus = {}, {}, {}
    for line in lines[header_at + 1:]:
        tokens = line.split()
        if not tokens or tokens[0].startswith("Legend"):
            break
        if not _GPU.fullmatch(tokens[0]):
            continue
        cells, rest = tokens[1:1 + len(columns)], tokens[1 + len(columns):]
        links[tokens[0]] = {peer: cell for peer, cell in zip(columns, cells, strict=False)
                            if _GPU.fullmatch(peer) and peer != tokens[0]}
        if rest:
            cpus[tokens[0]] = rest[0]
        if len(rest) > 1:
            numa[tokens[0]] = rest[1]
    if not links:
        raise ValueError("no GPU rows in the nvidia-smi topo output")
    return {"source": "nvidia-smi topo -m", "links": links, "numa_affinity": numa, "cpu_affinity": cpus}


def parse_rocm_smi_topo(text: str) -> dict:
    """The link types (XGMI, PCIE) between GPUs and each GPU's NUMA node; ValueError when there is no table."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    start = next((i for i, line in enumerate(lines) if "Link Type between two GPUs" in line), None)
    if start is None:
        raise ValueError("no link-type table in the rocm-smi output")
    links: dict[str, dict[str, str]] = {}
    columns: list[str] = []
    for line in lines[start + 1:]:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].startswith("="):
            break
        if all(_GPU.fullmatch(t) for t in tokens):
            columns = tokens
            continue
        if _GPU.fullmatch(tokens[0]) and columns:
            links[tokens[0]] = {peer: cell for peer, cell in zip(columns, tokens[1:], strict=False)
                               if peer != tokens[0]}
    if not links:
        raise ValueError("the rocm-smi link-type table is empty")
    numa = {f"GPU{m.group(1)}": m.group(2)
            for m in re.finditer(r"GPU\[(\d+)\]\s*:\s*\(Topology\) Numa Node:\s*(-?\d+)", text)}
    return {"source": "rocm-smi --showtopo", "links": links, "numa_affinity": numa, "cpu_affinity": {}}
