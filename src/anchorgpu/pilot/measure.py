"""Memory and versions, measured where the run happens.

On a GPU: PyTorch's allocator peaks (``max_memory_allocated`` and
``max_memory_reserved``) and, where NVML is present, the device-wide used
memory, which also holds the CUDA context and every library's own buffers
that the allocator never sees. NVML answers only "now", so it is sampled
after every step and its maximum is a lower bound of the true peak. On the
CPU: the process's peak resident set (``ru_maxrss``) and its growth over the
run. Every figure says where it came from.
"""

from __future__ import annotations

import platform
import resource
import sys
from importlib import metadata

import torch


def _rss_now() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


class _Nvml:
    def __init__(self, index: int):
        self.handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.pynvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # no NVML library, no driver, a ROCm machine: the figure is simply absent
            self.handle = None

    def used(self) -> int | None:
        if self.handle is None:
            return None
        try:
            return int(self.pynvml.nvmlDeviceGetMemoryInfo(self.handle).used)
        except Exception:
            return None

    def driver(self) -> str | None:
        if self.handle is None:
            return None
        try:
            version = self.pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        except Exception:
            return None


class MemoryProbe:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.nvml = _Nvml(device.index or 0) if self.cuda else None
        self.device_used_peak = 0
        self.rss_before = _rss_now()
        self.samples: list[dict] = []

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.device_used_peak = 0

    def sample(self, step: int) -> dict:
        """Memory after ``step``: allocated now and its peak so far (GPU), or resident now (CPU)."""
        if self.cuda:
            used = self.nvml.used() if self.nvml else None
            if used is not None:
                self.device_used_peak = max(self.device_used_peak, used)
            record = {"step": step, "allocated": torch.cuda.memory_allocated(self.device),
                      "peak_allocated": torch.cuda.max_memory_allocated(self.device), "device_used": used}
        else:
            record = {"step": step, "rss": _rss_now(), "peak_rss": _peak_rss()}
        self.samples.append(record)
        return record

    def summary(self) -> dict:
        """The report's ``memory``: bytes, each with its source."""
        if self.cuda:
            result = {
                "peak_allocated": {"bytes": torch.cuda.max_memory_allocated(self.device),
                                   "source": "torch.cuda.max_memory_allocated (timed steps)"},
                "peak_reserved": {"bytes": torch.cuda.max_memory_reserved(self.device),
                                  "source": "torch.cuda.max_memory_reserved (timed steps)"},
                "capacity": {"bytes": torch.cuda.get_device_properties(self.device).total_memory,
                             "source": "torch.cuda.get_device_properties"},
            }
            if self.device_used_peak:
                result["device_used_peak"] = {"bytes": self.device_used_peak,
                                              "source": "NVML nvmlDeviceGetMemoryInfo.used, sampled after each "
                                                        "step (a lower bound of the true peak)"}
            else:
                result["device_used_peak"] = {"bytes": None, "source": "NVML not available"}
        else:
            result = {
                "peak_rss": {"bytes": _peak_rss(), "source": "getrusage ru_maxrss (whole process lifetime)"},
                "rss_growth": {"bytes": max(0, _peak_rss() - self.rss_before),
                               "source": "peak RSS minus RSS when the model was loaded"},
            }
        result["over_steps"] = self.samples
        return result


def versions(device: torch.device) -> dict:
    """The exact versions that produced the figures."""
    found = {"python": sys.version.split()[0], "platform": platform.platform(), "torch": torch.__version__,
             "cuda": torch.version.cuda, "rocm": getattr(torch.version, "hip", None)}
    for package in ("transformers", "peft", "numpy", "anchorgpu"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    if device.type == "cuda":
        found["device"] = torch.cuda.get_device_name(device)
        nvml = _Nvml(device.index or 0)
        found["driver"] = nvml.driver()
        try:
            found["nccl"] = ".".join(str(part) for part in torch.cuda.nccl.version())
        except Exception:
            found["nccl"] = None
    else:
        found["device"] = f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
        found["driver"] = None
        found["nccl"] = None
    return found
