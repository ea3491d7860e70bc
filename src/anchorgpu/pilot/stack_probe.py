"""Finding out this machine's accelerator stack: the live side of ``anchorgpu pilot check``.

Sources, each optional: PyTorch (``torch.version``, ``torch.cuda`` device
properties, the compiled architecture list, ``torch.cuda.nccl.version()``,
which is RCCL's on a ROCm build), NVML through ``pynvml`` (driver version,
active NVLinks), ``nvidia-smi topo -m`` or ``rocm-smi --showtopo`` (the
topology matrix), and sysfs (the GPUs on the PCI bus whether or not PyTorch
can use them, each device's NUMA node, the amdgpu driver version). A source
that fails leaves its reason in ``record.unknown``; nothing here raises.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import warnings
from pathlib import Path

from .stack import PCI_VENDORS, BusAccelerator, Device, StackRecord
from .topology import parse_nvidia_smi_topo, parse_rocm_smi_topo

PCI_ROOT = Path("/sys/bus/pci/devices")
VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
TOOL_TIMEOUT = 20  # seconds for nvidia-smi / rocm-smi
AMDGPU_VERSION = Path("/sys/module/amdgpu/version")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def normal_bus_id(text: str) -> str:
    """"00000000:18:00.0" (NVML's eight-digit domain) -> "0000:18:00.0", as sysfs names it."""
    parts = text.strip().lower().split(":")
    if len(parts) == 3 and parts[0]:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    return text.strip().lower()


def read_numa_node(bus_id: str, root: Path = PCI_ROOT) -> int | None:
    try:
        return int((root / bus_id / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None


def scan_pci(root: Path = PCI_ROOT) -> list[BusAccelerator]:
    """NVIDIA and AMD display or processing-accelerator functions on the PCI bus."""
    found = []
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            vendor = (entry / "vendor").read_text().strip().lower()
            kind = (entry / "class").read_text().strip().lower()
        except OSError:
            continue
        # 0x03....: display controllers (NVIDIA's data-centre cards are 3D controllers); 0x12....: accelerators
        if vendor in PCI_VENDORS and (kind.startswith("0x03") or kind.startswith("0x12")):
            found.append(BusAccelerator(entry.name, PCI_VENDORS[vendor], None, read_numa_node(entry.name, root)))
    return found


def probe_stack(*, pci_root: Path = PCI_ROOT, run=subprocess.run) -> StackRecord:
    """The stack record of this machine."""
    record = StackRecord(host=socket.gethostname(),
                         visible_env={k: os.environ[k] for k in VISIBILITY if k in os.environ})
    try:
        record.bus = scan_pci(pci_root)
    except OSError as exc:
        record.unknown["bus"] = _reason(exc)
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising something else while loading
        record.torch_error = _reason(exc)
        _nvml(record)
        return record
    record.torch_version = torch.__version__
    record.cuda_runtime = torch.version.cuda
    record.hip_runtime = getattr(torch.version, "hip", None)
    try:
        record.arch_list = list(torch.cuda.get_arch_list())
    except Exception as exc:
        record.unknown["arch_list"] = _reason(exc)
    _devices(torch, record, pci_root)
    _libraries(torch, record)
    _nvml(record)
    if record.build == "rocm" and record.driver is None:
        try:
            record.driver = AMDGPU_VERSION.read_text().strip()
            record.unknown.pop("driver", None)
        except OSError:
            record.unknown.setdefault("driver", "no /sys/module/amdgpu/version (an in-kernel amdgpu driver)")
    _topology(record, run)
    return record


def _devices(torch, record: StackRecord, pci_root: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            count = torch.cuda.device_count() if record.build in ("cuda", "rocm") else 0
        except Exception as exc:
            record.unknown["devices"] = _reason(exc)
            count = 0
    said = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    if said and not count:
        record.unknown.setdefault("devices", said[0])
    for index in range(count):
        try:
            props = torch.cuda.get_device_properties(index)
        except Exception as exc:
            record.unknown[f"device {index}"] = _reason(exc)
            continue
        device = Device(index=index, name=str(props.name), total_memory=int(props.total_memory))
        if record.build == "rocm":
            device.arch = getattr(props, "gcnArchName", None) or None
        else:
            device.capability = f"{props.major}.{props.minor}"
        uuid = getattr(props, "uuid", None)
        device.uuid = str(uuid) if uuid is not None else None
        if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
            device.pci_bus_id = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
            device.numa_node = read_numa_node(device.pci_bus_id, pci_root)
        record.devices.append(device)


def _libraries(torch, record: StackRecord) -> None:
    if record.build not in ("cuda", "rocm"):
        return
    try:
        version = torch.cuda.nccl.version()
        version = version if isinstance(version, tuple) else (version,)
        record.collective = {"name": "rccl" if record.build == "rocm" else "nccl",
                             "version": ".".join(str(part) for part in version)}
    except Exception as exc:
        record.unknown["collective"] = _reason(exc)
    try:
        cudnn = torch.backends.cudnn.version()
        record.cudnn = str(cudnn) if cudnn else None
    except Exception as exc:
        record.unknown["cudnn"] = _reason(exc)


def _nvml(record: StackRecord) -> None:
    """Driver version, names of the cards on the bus, and active NVLinks per device, from NVML."""
    if not any(b.vendor == "nvidia" for b in record.bus) and record.build != "cuda":
        record.unknown.setdefault("driver", "no NVIDIA GPU on the PCI bus and not a CUDA build")
        return
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        record.unknown["driver"] = f"NVML unavailable ({_reason(exc)})"
        return
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        record.driver = version.decode() if isinstance(version, bytes) else str(version)
        by_bus = {b.bus_id: b for b in record.bus}
        by_uuid = {(d.uuid or "").lower().removeprefix("gpu-"): d for d in record.devices}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
            bus_id = normal_bus_id(bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id))
            if bus_id in by_bus:
                by_bus[bus_id].name = name
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            uuid = (uuid.decode() if isinstance(uuid, bytes) else str(uuid)).lower().removeprefix("gpu-")
            device = by_uuid.get(uuid)
            if device is not None:
                device.pci_bus_id = device.pci_bus_id or bus_id
                device.numa_node = device.numa_node if device.numa_node is not None else read_numa_node(bus_id)
                device.nvlink_active_links = _active_links(pynvml, handle)
    except Exception as exc:
        record.unknown["nvml"] = _reason(exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _active_links(pynvml, handle) -> int | None:
    active = 0
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            active += int(pynvml.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED)
        except pynvml.NVMLError_NotSupported:
            return 0 if link == 0 else active  # a card without NVLink answers "not supported"
        except pynvml.NVMLError:
            continue  # a link number this card does not have
    return active


def _topology(record: StackRecord, run) -> None:
    tools = [("nvidia-smi", ["topo", "-m"], parse_nvidia_smi_topo), ("rocm-smi", ["--showtopo"], parse_rocm_smi_topo)]
    if record.build == "rocm" or any(b.vendor == "amd" for b in record.bus):
        tools.reverse()
    reasons = []
    for tool, args, parse in tools:
        path = shutil.which(tool)
        if path is None:
            reasons.append(f"no {tool} on PATH")
            continue
        try:
            done = run([path, *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT)
            if done.returncode != 0:
                raise RuntimeError(f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}")
            record.topology = parse(done.stdout)
            record.topology["raw"] = done.stdout
            return
        except Exception as exc:
            reasons.append(f"{tool}: {_reason(exc)}")
    record.unknown["topology"] = "; ".join(reasons)
