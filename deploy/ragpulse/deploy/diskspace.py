"""Free space under ``ragpulse up``'s data directory: checked before anything starts, watched
while it runs.

Why: on a full disk the embedded stack fails in ways that do not say so. SeaweedFS (``--durable``)
sizes its volumes from the disk (up to 1 GiB each on a large one) and allows as many as fit in the
free space; with less than one volume free it has none to write to, and tansu then answers
CreateTopics with a truncated response (``KafkaProtocolError: Unable to decode response``).
Measured on a 246 GiB ext4 file system with 700 MiB free (docs/reliability.md, "Disk space").
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["DiskSpaceError", "check_free_space", "free_bytes", "human_bytes", "low_disk_note"]

GiB = 1 << 30
MiB = 1 << 20
# --durable: one SeaweedFS volume (1 GiB on a large disk) plus room for chDB's parts and logs.
DURABLE_MIN_FREE = GiB + 256 * MiB
# --in-memory: chDB's parts, merges and logs only.
IN_MEMORY_MIN_FREE = 256 * MiB


class DiskSpaceError(RuntimeError):
    """Less free space under the data directory than ``up`` needs to run."""


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor: the file system the directory will live on."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system that holds ``path`` (which
    need not exist yet)."""
    return shutil.disk_usage(_existing(path)).free


def human_bytes(count: float) -> str:
    """``count`` bytes in GiB, MiB or KiB, at most two decimals ("1.25 GiB", "700 MiB")."""
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if abs(count) >= size:
            return f"{count / size:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{count / 1024:.0f} KiB"


def check_free_space(data_dir: Path, need: int, *, durable: bool) -> int:
    """Raise :class:`DiskSpaceError` when the file system of ``data_dir`` has less than ``need``
    bytes free; return the free bytes otherwise. Creates nothing."""
    free = free_bytes(data_dir)
    if free >= need:
        return free
    why = ("SeaweedFS (--durable) keeps the broker's data in volumes of up to 1 GiB and cannot "
           "write without room for one; chDB needs room for its parts" if durable
           else "chDB needs room for its parts and merges")
    raise DiskSpaceError(
        f"only {human_bytes(free)} free on the file system of {data_dir} "
        f"({_existing(data_dir)}); ragpulse up needs {human_bytes(need)} there: {why}. Free "
        "some space, choose another --data-dir, or set RAGPULSE_UP__MIN_FREE_BYTES "
        "(docs/reliability.md, \"Disk space\")")


def low_disk_note(free: int | None, need: int | None, data_dir: str) -> str:
    """The status line's warning once free space falls below what ``up`` started with as its
    minimum: writes are about to fail. Empty when there is room (or nothing was measured)."""
    if free is None or need is None or free >= need:
        return ""
    return f"; DISK LOW: {human_bytes(free)} free under {data_dir} (needs {human_bytes(need)})"
