"""The test hosts' container image, built offline: busybox-static, OpenSSH's sshd and ssh-keygen with the
libraries ``ldd`` lists, a root account that logs in by key only, and the CUDA version as an environment variable
and a label (what a real environment image states). No host key is baked in: each container makes its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

CUDA_VERSION = "12.4.1"
BINARIES = ("/usr/sbin/sshd", "/usr/bin/ssh-keygen", "/bin/busybox")


def _libraries(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout  # a static binary: none
    found = set()
    for line in out.splitlines():
        match = re.search(r"(/\S+)\s+\(0x", line)
        if match:
            found.add(match.group(1))
    return found


def _copy(path: str, root: Path) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(path), target)


def build_rootfs(root: Path) -> Path:
    """The image's files under ``root``; returns the tarball to import."""
    if root.exists():
        shutil.rmtree(root)
    for folder in ("bin", "etc", "root", "run/sshd", "tmp", "var/empty", "workspace", "dev", "proc", "sys"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    os.chmod(root / "root", 0o700)
    for binary in BINARIES:
        _copy(binary, root)
        for library in _libraries(binary):
            _copy(library, root)
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet in ("busybox", "sshd", "ssh-keygen"):
            continue
        link = root / "bin" / applet
        if not link.exists():
            link.symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                         "sshd:x:100:65534:sshd:/run/sshd:/bin/false\n"
                                         "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    (root / "etc" / "group").write_text("root:x:0:\nvideo:x:44:\nnogroup:x:65534:\n")
    # '*': no password can log in, but the account is not locked (sshd with UsePAM no refuses a locked '!' one).
    (root / "etc" / "shadow").write_text("root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n")
    os.chmod(root / "etc" / "shadow", 0o600)
    tarball = root.parent / f"{root.name}.tar"
    subprocess.run(["tar", "-C", str(root), "-cf", str(tarball), "."], check=True)
    return tarball


def import_image(tarball: Path, reference: str, env: dict[str, str]) -> None:
    """Import the tarball into one test host's podman storage (``env`` names its containers.conf)."""
    subprocess.run(["podman", "import", "--change", f"ENV CUDA_VERSION={CUDA_VERSION}",
                    "--change", f"LABEL anchorgpu.cuda={CUDA_VERSION}", "--change", "ENV PATH=/bin:/usr/sbin:/usr/bin",
                    "--change", 'CMD ["/bin/sh"]', str(tarball), reference],
                   env={**os.environ, **env}, check=True, capture_output=True, timeout=120)
