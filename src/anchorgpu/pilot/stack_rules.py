"""Judging a stack record against the product booked: findings marked ok, warn or fail.

A failure is something that stops or silently spoils a campaign: no PyTorch,
a build for the wrong vendor or without GPU support, no GPU visible, a card
the build has no kernels for, a card other than the one booked, a B200 lot
whose cards are not joined by NVLink. A warning is something that works but
deserves a look: kernels only as PTX that the driver must compile at first
use, a fact the probe could not find out. Pure Python: no torch, no Django.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .stack import (
    JIT,
    NATIVE,
    PRODUCTS,
    VENDOR_NAMES,
    Device,
    Product,
    StackRecord,
    cuda_coverage,
    device_arch_name,
    infer_product,
    rocm_covers,
)

OK, WARN, FAIL = "ok", "warn", "fail"
GiB = 1024**3
MEMORY_SLACK = 0.95  # a card reports a little less than its nominal memory; less than this share is another card
HIDING_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@dataclass(frozen=True)
class Finding:
    level: str
    area: str
    message: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Verdict:
    findings: list[Finding]
    product: Product | None
    product_inferred: bool

    @property
    def passed(self) -> bool:
        return not any(f.level == FAIL for f in self.findings)

    def to_json(self) -> dict:
        return {"passed": self.passed, "product": self.product.code if self.product else None,
                "product_inferred": self.product_inferred, "findings": [f.to_json() for f in self.findings]}


def judge(record: StackRecord, product_code: str | None = None) -> Verdict:
    """The findings for ``record``; ``product_code`` is the product booked (inferred from the devices if None)."""
    if product_code is not None and product_code not in PRODUCTS:
        raise ValueError(f"unknown product {product_code!r}; known: {', '.join(PRODUCTS)}")
    product = PRODUCTS[product_code] if product_code else infer_product(record)
    found: list[Finding] = []
    if product_code:
        found.append(Finding(OK, "product", f"checking against {product.label} (--product {product.code})"))
    elif product:
        found.append(Finding(OK, "product", f"product {product.label}, inferred from the device names "
                                            "(--product makes it explicit)"))
    if record.torch_version is None:
        found.append(Finding(FAIL, "torch", f"PyTorch cannot be imported ({record.torch_error or 'not installed'}); "
                                            "install the CUDA or ROCm build that matches this machine"))
        found += _bus_only(record, product)
        return Verdict(found, product, product_code is None and product is not None)
    found += _build_against_machine(record, product)
    if record.devices:
        found += _devices(record, product)
        found += _links(record, product)
        found += _libraries(record)
    else:
        found.append(Finding(FAIL, "devices", _why_no_devices(record, any(f.level == FAIL for f in found))))
    if record.devices and product is None and not product_code:
        found.append(Finding(WARN, "product", "these cards are not one of the shop's products; the build was "
                                              "checked against the cards themselves (--product names the booking)"))
    return Verdict(found, product, product_code is None and product is not None)


def machine_vendors(record: StackRecord) -> set[str]:
    """The GPU vendors present: from the PCI bus, and from the devices a GPU build sees."""
    vendors = {b.vendor for b in record.bus}
    if record.devices and record.build in ("cuda", "rocm"):
        vendors.add("amd" if record.build == "rocm" else "nvidia")
    return vendors


def _build_against_machine(record: StackRecord, product: Product | None) -> list[Finding]:
    vendors = machine_vendors(record) or ({product.vendor} if product else set())
    build, version = record.build, record.torch_version
    names = " and ".join(VENDOR_NAMES[v] for v in sorted(vendors))
    if build == "cpu":
        where = f"on a machine with {names} GPUs" if vendors else "on a machine without GPUs"
        wanted = "a ROCm build" if vendors == {"amd"} else "a CUDA build" if vendors else "a CUDA or ROCm build"
        return [Finding(FAIL, "build", f"PyTorch {version} is a CPU-only build (no CUDA, no ROCm) {where}; "
                                       f"install {wanted} of PyTorch")]
    if build == "cuda" and "amd" in vendors and "nvidia" not in vendors:
        return [Finding(FAIL, "build", f"PyTorch {version} is a CUDA build (CUDA {record.cuda_runtime}) on a "
                                       "machine with AMD GPUs; it cannot use them: install the ROCm build")]
    if build == "rocm" and "nvidia" in vendors and "amd" not in vendors:
        return [Finding(FAIL, "build", f"PyTorch {version} is a ROCm build (HIP {record.hip_runtime}) on a machine "
                                       "with NVIDIA GPUs; it cannot use them: install a CUDA build")]
    runtime = f"CUDA {record.cuda_runtime}" if build == "cuda" else f"ROCm/HIP {record.hip_runtime}"
    found = [Finding(OK, "build", f"PyTorch {version}, a {runtime} build")]
    if product and product.vendor != ("amd" if build == "rocm" else "nvidia"):
        wanted = "ROCm" if product.vendor == "amd" else "CUDA"
        found.append(Finding(FAIL, "build", f"{product.label} needs a {wanted} build; this is {runtime}"))
    if build == "cuda" and product and product.min_cuda and record.cuda_runtime:
        have = tuple(int(p) for p in record.cuda_runtime.split(".")[:2] if p.isdigit())
        if have < product.min_cuda:
            need = ".".join(map(str, product.min_cuda))
            found.append(Finding(FAIL, "build", f"{product.label} needs a build for CUDA {need} or newer; this one "
                                                f"is for CUDA {record.cuda_runtime}"))
    return found


def _why_no_devices(record: StackRecord, build_failed: bool) -> str:
    hidden = [f"{k}={v!r}" for k, v in record.visible_env.items() if k in HIDING_VARIABLES]
    text = "no GPU is visible to PyTorch"
    on_bus = f"{len(record.bus)} {' and '.join(sorted({VENDOR_NAMES[b.vendor] for b in record.bus}))} GPU(s)"
    if record.bus and build_failed:
        text += f"; the {on_bus} on the PCI bus need the build named above"
    elif record.bus:
        text += (f"; {on_bus} are on the PCI bus, so the driver is missing, not loaded, or older than this "
                 "build needs")
    else:
        text += "; none is on the PCI bus either"
    if hidden:
        text += f" ({', '.join(hidden)} may hide them)"
    if record.unknown.get("devices"):
        text += f". PyTorch said: {record.unknown['devices']}"
    return text


def _bus_only(record: StackRecord, product: Product | None) -> list[Finding]:
    if record.bus:
        names = sorted({VENDOR_NAMES[b.vendor] for b in record.bus})
        return [Finding(OK, "devices", f"{len(record.bus)} {' and '.join(names)} GPU(s) on the PCI bus")]
    return [Finding(FAIL, "devices", "no GPU found on the PCI bus")]


def _devices(record: StackRecord, product: Product | None) -> list[Finding]:
    per_device: dict[tuple[str, str, str], list[int]] = {}
    for device in record.devices:
        for level, area, message in _one_device(record, device, product):
            per_device.setdefault((level, area, message), []).append(device.index)
    found = [Finding(level, area, f"{_gpus(indices, len(record.devices))}: {message}")
             for (level, area, message), indices in per_device.items()]
    models = sorted({d.name for d in record.devices})
    if len(models) > 1:
        found.append(Finding(FAIL, "devices", f"the cards are not all the same model: {', '.join(models)}"))
    if product and len(record.devices) % product.cards_per_unit:
        found.append(Finding(FAIL, "devices", f"{len(record.devices)} card(s) visible; a {product.label} comes in "
                                              f"units of {product.cards_per_unit}"))
    return found


def _gpus(indices: list[int], total: int) -> str:
    if len(indices) == total and total > 1:
        return "both GPUs" if total == 2 else f"all {total} GPUs"
    return "GPU " + ", ".join(map(str, indices))


def _one_device(record: StackRecord, device: Device, product: Product | None) -> list[tuple[str, str, str]]:
    found = []
    arch = device_arch_name(device)
    if record.build == "rocm":
        found.append(_rocm_arch(record, device))
    elif device.capability:
        found.append(_cuda_arch(record, device, arch))
    else:
        found.append((WARN, "build", "the card's compute capability is unknown; the build could not be checked"))
    if product:
        if product.name_token.lower() not in (device.name or "").lower() and not (
                product.vendor == "amd" and not (device.name or "").strip() and arch == product.arch):
            found.append((FAIL, "product", f"the card is a {device.name or 'device without a name'} ({arch}), "
                                           f"not the {product.label} booked"))
        elif arch and arch != product.arch:
            found.append((FAIL, "product", f"the card reports {arch}; a {product.label} is {product.arch}"))
        if product.form and "pcie" in (device.name or "").lower():
            found.append((WARN, "product", f"the card is a PCIe variant; the product is {product.form}"))
        if device.total_memory is not None and device.total_memory < MEMORY_SLACK * product.memory_gib * GiB:
            found.append((FAIL, "memory", f"{device.total_memory / GiB:.1f} GiB of memory; a {product.label} has "
                                          f"{product.memory_gib} (a partition of a card, or another card)"))
    if device.total_memory is None:
        found.append((WARN, "memory", "the card's memory size is unknown"))
    return found


def _cuda_arch(record: StackRecord, device: Device, arch: str | None) -> tuple[str, str, str]:
    if not record.arch_list:
        return (WARN, "build", "the build does not list the architectures it was compiled for; cannot check "
                               f"that it has kernels for {arch}")
    kind, entries = cuda_coverage(record.arch_list, device.capability)
    listed = " ".join(record.arch_list)
    if kind == NATIVE:
        return (OK, "build", f"{arch} (compute capability {device.capability}): the build has kernels for it "
                             f"({', '.join(entries)})")
    if kind == JIT:
        return (WARN, "build", f"no {arch} machine code in the build ({listed}); only PTX ({', '.join(entries)}) "
                               "that the driver compiles at first use: a slow first start, and kernels that may run "
                               f"slower; a build that lists {arch} is better")
    hint = " (Blackwell needs a build for CUDA 12.8 or newer)" if arch and arch.startswith("sm_10") else ""
    return (FAIL, "build", f"the build has no kernels for {arch} (compute capability {device.capability}): it was "
                           f"compiled for {listed}{hint}")


def _rocm_arch(record: StackRecord, device: Device) -> tuple[str, str, str]:
    if not device.arch:
        return (WARN, "build", "the card's gfx target is unknown; the build could not be checked")
    if not record.arch_list:
        return (WARN, "build", f"the build does not list its gfx targets; cannot check {device.arch}")
    entries = rocm_covers(record.arch_list, device.arch)
    if entries:
        return (OK, "build", f"{device.arch}: the build has code objects for it ({', '.join(entries)})")
    return (FAIL, "build", f"the build has no code objects for {device.arch}: it was compiled for "
                           f"{' '.join(record.arch_list)}")


def nvlinked(record: StackRecord) -> dict[str, list[str]] | None:
    """For each GPU of the topology matrix, the GPUs it reaches over NVLink (None when there is no matrix)."""
    topology = record.topology or {}
    links = topology.get("links")
    if not links:
        return None
    return {gpu: sorted(peer for peer, kind in row.items() if str(kind).upper().startswith("NV"))
            for gpu, row in links.items()}


def _links(record: StackRecord, product: Product | None) -> list[Finding]:
    found = []
    count = len(record.devices)
    reach = nvlinked(record)
    if product and product.needs_nvlink and count > 1:
        counts = [d.nvlink_active_links for d in record.devices]
        if reach is not None:
            lonely = [gpu for gpu, peers in reach.items() if not peers]
            if lonely:
                found.append(Finding(FAIL, "links", f"{', '.join(lonely)} reach(es) no other GPU over NVLink; a "
                                                    f"{product.label} must be joined by NVLink"))
            else:
                found.append(Finding(OK, "links", "every GPU reaches another over NVLink"))
        elif all(c is not None for c in counts):
            if any(c == 0 for c in counts):
                found.append(Finding(FAIL, "links", f"NVML reports no active NVLink on some cards ({counts}); a "
                                                    f"{product.label} must be joined by NVLink"))
            else:
                found.append(Finding(OK, "links", f"active NVLinks per card: {counts}"))
        else:
            found.append(Finding(WARN, "links", f"could not verify the NVLink between the cards "
                                                f"({record.unknown.get('topology', 'no topology found')})"))
    elif count > 1 and not record.topology:
        found.append(Finding(WARN, "links", f"the topology between the cards is unknown "
                                            f"({record.unknown.get('topology', 'not probed')})"))
    return found


def _libraries(record: StackRecord) -> list[Finding]:
    found = []
    if record.driver is None:
        why = record.unknown.get("driver", "not probed")
        found.append(Finding(WARN, "driver", f"the driver version is unknown ({why})"))
    if record.collective and record.collective.get("version"):
        found.append(Finding(OK, "collective", f"{record.collective_name} {record.collective['version']}"))
    elif len(record.devices) > 1:
        found.append(Finding(WARN, "collective", f"the {record.collective_name} version is unknown "
                                                 f"({record.unknown.get('collective', 'not probed')})"))
    return found
