"""What a machine's accelerator stack is, as plain data: the record ``anchorgpu pilot check`` judges.

A :class:`StackRecord` holds what the probe found (``stack_probe``) or what a
recorded description says (a JSON fixture, or the ``stack`` of an earlier
check or pilot report): the devices PyTorch sees, the accelerators on the PCI
bus whether PyTorch sees them or not, the driver, the PyTorch build with its
compiled architecture list, the collective library and the topology. Every
probe that failed leaves its reason in ``unknown`` instead of a value.

This module also knows the shop's products and which compiled architectures
run on which card. Pure Python: no torch, no Django, so a record can be judged
anywhere (``stack_rules``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields

RECORD_VERSION = 1


@dataclass(frozen=True)
class Product:
    code: str
    label: str
    vendor: str  # "nvidia" or "amd"
    arch: str  # "sm_90" (compute capability 9.0) or "gfx942"
    memory_gib: int  # per card, as the shop sells it
    cards_per_unit: int
    name_token: str  # what the device name contains, e.g. "H200"
    needs_nvlink: bool = False
    min_cuda: tuple[int, int] | None = None  # the oldest CUDA runtime that supports the card
    form: str | None = None  # "SXM": a PCIe variant of the same chip is flagged

    @property
    def capability(self) -> tuple[int, int] | None:
        """(9, 0) for "sm_90"; None for an AMD product."""
        match = re.fullmatch(r"sm_(\d+)(\d)", self.arch)
        return (int(match.group(1)), int(match.group(2))) if match else None


PRODUCTS: dict[str, Product] = {p.code: p for p in [
    Product("a100-sxm-80gb", "A100 SXM 80 GB", "nvidia", "sm_80", 80, 1, "A100", form="SXM"),
    Product("h100-sxm-80gb", "H100 SXM 80 GB", "nvidia", "sm_90", 80, 1, "H100", form="SXM"),
    Product("h200-141gb", "H200 141 GB", "nvidia", "sm_90", 141, 1, "H200"),
    # Blackwell: CUDA 12.8 is the first toolkit that builds for sm_100 in PyTorch's release wheels.
    Product("b200-lot-2x180gb", "B200 lot, 2 x 180 GB", "nvidia", "sm_100", 180, 2, "B200", needs_nvlink=True,
            min_cuda=(12, 8)),
    Product("mi300x-192gb", "MI300X 192 GB", "amd", "gfx942", 192, 1, "MI300X"),
]}

VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD"}
PCI_VENDORS = {"0x10de": "nvidia", "0x1002": "amd"}


@dataclass
class Device:
    """One accelerator as PyTorch sees it (``torch.cuda``, which is also the ROCm/HIP device API)."""

    index: int
    name: str
    total_memory: int | None = None  # bytes
    capability: str | None = None  # "9.0" on CUDA
    arch: str | None = None  # gcnArchName on ROCm, e.g. "gfx942:sramecc+:xnack-"
    uuid: str | None = None
    pci_bus_id: str | None = None  # "0000:18:00.0"
    numa_node: int | None = None  # -1 where the platform does not say
    nvlink_active_links: int | None = None  # from NVML; None where unknown


@dataclass
class BusAccelerator:
    """A GPU found on the PCI bus (or by the driver's own tool), seen whether PyTorch can use it or not."""

    bus_id: str
    vendor: str  # "nvidia" or "amd"
    name: str | None = None
    numa_node: int | None = None


@dataclass
class StackRecord:
    torch_version: str | None = None
    torch_error: str | None = None  # why torch could not be imported
    cuda_runtime: str | None = None  # torch.version.cuda
    hip_runtime: str | None = None  # torch.version.hip
    arch_list: list[str] = field(default_factory=list)  # torch.cuda.get_arch_list()
    devices: list[Device] = field(default_factory=list)
    bus: list[BusAccelerator] = field(default_factory=list)
    driver: str | None = None
    collective: dict | None = None  # {"name": "nccl" | "rccl", "version": "2.26.2"}
    cudnn: str | None = None
    topology: dict | None = None  # see topology.py: {"source", "links", "numa_affinity", "cpu_affinity"}
    visible_env: dict[str, str] = field(default_factory=dict)  # CUDA_VISIBLE_DEVICES and the like, when set
    unknown: dict[str, str] = field(default_factory=dict)  # what could not be found out, and why
    host: str | None = None
    source: str = "probed on this machine"

    @property
    def build(self) -> str | None:
        """"cuda", "rocm", "cpu", or None when torch could not be imported."""
        if self.torch_version is None:
            return None
        if self.hip_runtime:
            return "rocm"
        if self.cuda_runtime:
            return "cuda"
        return "cpu"

    @property
    def collective_name(self) -> str:
        return "RCCL" if self.build == "rocm" else "NCCL"

    def to_json(self) -> dict:
        return {"record_version": RECORD_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> StackRecord:
        """Reads a record written by ``to_json`` (extra keys, such as a report's findings, are ignored)."""
        if not isinstance(data, dict):
            raise ValueError("a stack record is a JSON object")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["devices"] = [_build(Device, d) for d in data.get("devices") or []]
        values["bus"] = [_build(BusAccelerator, b) for b in data.get("bus") or []]
        values["arch_list"] = [str(a) for a in data.get("arch_list") or []]
        return cls(**values)


def _build(kind, data):
    if not isinstance(data, dict):
        raise ValueError(f"a {kind.__name__} entry is a JSON object, not {data!r}")
    known = {f.name for f in fields(kind)}
    return kind(**{k: v for k, v in data.items() if k in known})


# --- Which compiled code runs on which card -------------------------------------------------------------------

NATIVE, JIT = "native", "jit"


@dataclass(frozen=True)
class CudaTarget:
    """One entry of a CUDA build's architecture list: "sm_90" (machine code), "compute_90" (PTX), with an
    optional "a" (this exact chip only) or "f" (this family) suffix."""

    ptx: bool
    major: int
    minor: int
    suffix: str

    @classmethod
    def parse(cls, text: str) -> CudaTarget | None:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", text.strip())
        if not match:
            return None
        return cls(match.group(1) == "compute", int(match.group(2)), int(match.group(3)), match.group(4))

    def runs_on(self, major: int, minor: int) -> str | None:
        """NATIVE, JIT or None for a device of compute capability major.minor.

        Machine code runs on the same major version with an equal or higher minor; "a" code only on exactly
        its own capability; "f" code on its family (same major, equal or higher minor). PTX is compiled by
        the driver at first use for any equal or newer capability, except "a"/"f" PTX, which keeps the same
        limits as its machine code.
        """
        same = (major, minor) == (self.major, self.minor)
        family = major == self.major and minor >= self.minor
        if self.suffix == "a":
            fits = same
        elif self.suffix == "f" or not self.ptx:
            fits = family
        else:
            fits = (major, minor) >= (self.major, self.minor)
        if not fits:
            return None
        return JIT if self.ptx else NATIVE


def cuda_coverage(arch_list: list[str], capability: str) -> tuple[str | None, list[str]]:
    """How a CUDA build covers a device: (NATIVE | JIT | None, the entries that cover it)."""
    major, minor = (int(part) for part in capability.split(".")[:2])
    native, jit = [], []
    for entry in arch_list:
        target = CudaTarget.parse(entry)
        kind = target.runs_on(major, minor) if target else None
        (native if kind == NATIVE else jit if kind == JIT else []).append(entry)
    if native:
        return NATIVE, native
    return (JIT, jit) if jit else (None, [])


def split_gfx(text: str) -> tuple[str, dict[str, str]]:
    """"gfx942:sramecc+:xnack-" -> ("gfx942", {"sramecc": "+", "xnack": "-"})."""
    base, *features = text.strip().split(":")
    return base, {f[:-1]: f[-1] for f in features if f and f[-1] in "+-"}


def rocm_covers(arch_list: list[str], gcn_arch: str) -> list[str]:
    """The entries of a ROCm build that run on this device: same gfx target, and every feature the entry pins
    (xnack, sramecc) set the same way on the device. ROCm code objects do not carry over to other targets."""
    base, features = split_gfx(gcn_arch)
    found = []
    for entry in arch_list:
        entry_base, entry_features = split_gfx(entry)
        if entry_base == base and all(features.get(k, v) == v for k, v in entry_features.items()):
            found.append(entry)
    return found


def device_arch_name(device: Device) -> str | None:
    """"sm_90" for a CUDA device of capability 9.0, "gfx942" for an AMD one."""
    if device.arch:
        return split_gfx(device.arch)[0]
    if device.capability:
        major, minor = device.capability.split(".")[:2]
        return f"sm_{major}{minor}"
    return None


def infer_product(record: StackRecord) -> Product | None:
    """The product whose name every visible device (or, with none visible, every bus device) carries."""
    names = [d.name for d in record.devices] or [b.name for b in record.bus if b.name]
    archs = {device_arch_name(d) for d in record.devices}
    for product in PRODUCTS.values():
        if names and all(product.name_token.lower() in (n or "").lower() for n in names):
            return product
    blank = record.devices and not any((d.name or "").strip() for d in record.devices)
    if blank and len(archs) == 1 and None not in archs:  # e.g. a ROCm version that leaves the name blank
        matching = [p for p in PRODUCTS.values() if p.arch == next(iter(archs))]
        if len(matching) == 1:
            return matching[0]
    return None
