"""Does a host's GPU driver run an image's CUDA? Pure domain code, no Django.

The rule is NVIDIA's *minor version compatibility*: since CUDA 11, an application built with any CUDA
X.y runs on a driver at or above the first driver of major X (11.x: 450.80.02, 12.x: 525.60.13, 13.x:
580.65.06), with the documented exception that PTX compiled by a newer toolkit cannot be JIT-compiled by an
older driver. Below that floor nothing of CUDA X runs. Facts from NVIDIA's CUDA compatibility guide and the
data-centre driver support matrix; the wording is ours.
"""

from __future__ import annotations

import re

# First Linux driver of each CUDA major (minor version compatibility floor).
MAJOR_FLOOR: dict[int, tuple[int, ...]] = {
    11: (450, 80, 2),
    12: (525, 60, 13),
    13: (580, 65, 6),
}

_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


def parse_version(text: str) -> tuple[int, ...]:
    """``"550.54.14"`` → ``(550, 54, 14)``; a clear ``ValueError`` for anything else."""
    text = (text or "").strip()
    if not _VERSION.match(text):
        raise ValueError(f"not a version number: {text!r}")
    return tuple(int(p) for p in text.split("."))


def cuda_driver_problem(driver_version: str, cuda_version: str) -> str | None:
    """None when a driver ``driver_version`` runs CUDA ``cuda_version``; else why not, in a sentence."""
    try:
        driver = parse_version(driver_version)
    except ValueError:
        return f"the host's driver version {driver_version!r} cannot be read"
    try:
        cuda = parse_version(cuda_version)
    except ValueError:
        return f"the image's CUDA version {cuda_version!r} cannot be read"
    floor = MAJOR_FLOOR.get(cuda[0])
    if floor is None:
        return f"CUDA {cuda_version} is not a CUDA major this shop knows the driver floor of"
    if driver < floor:
        need = ".".join(map(str, floor))
        return f"CUDA {cuda_version} needs an NVIDIA driver of at least {need}; the host has {driver_version}"
    return None
