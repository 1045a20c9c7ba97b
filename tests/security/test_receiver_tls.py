"""TLS on the OTLP receivers (``otlp.tls_cert_file`` / ``otlp.tls_key_file``): HTTPS and gRPC over
TLS carry spans to Kafka; a plain-text client gets nothing through and the failed handshake is
counted; the certificate is the test's own, made with the ``openssl`` command."""

from __future__ import annotations

import http.client
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
from pydantic import ValidationError

from ragpulse.collector.config import OtlpSettings
from ragpulse.collector.service import Collector
from tests.collector.conftest import read_records
from tests.security.corpus import good_request

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(crt), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )
    return crt, key


def test_cert_and_key_go_together(cert) -> None:
    crt, _ = cert
    with pytest.raises(ValidationError, match="go together"):
        OtlpSettings(tls_cert_file=str(crt))


def test_https_and_grpc_tls_deliver_and_plain_text_is_refused(
        make_collector: Callable[..., Collector], cert) -> None:
    crt, key = cert
    collector = make_collector(otlp={"tls_cert_file": str(crt), "tls_key_file": str(key)})
    assert (collector.http_endpoint or "").startswith("https://")
    url = urlsplit(collector.http_endpoint or "")
    ctx = ssl.create_default_context(cafile=str(crt))
    sent = []

    tid, req = good_request(800)
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30)
    conn.request("POST", "/v1/traces", body=req.SerializeToString(),
                 headers={"Content-Type": "application/x-protobuf"})
    assert conn.getresponse().status == 200
    conn.close()
    sent.append(tid)

    # plain HTTP to the TLS port: no request gets through
    plain = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    with pytest.raises((http.client.HTTPException, OSError)):
        plain.request("POST", "/v1/traces", body=good_request(801)[1].SerializeToString(),
                      headers={"Content-Type": "application/x-protobuf"})
        plain.getresponse().read()
    plain.close()

    creds = grpc.ssl_channel_credentials(root_certificates=crt.read_bytes())
    with grpc.secure_channel(collector.grpc_endpoint or "", creds) as channel:
        tid, req = good_request(802)
        channel.unary_unary(EXPORT)(req.SerializeToString(), timeout=10)
        sent.append(tid)
    with grpc.insecure_channel(collector.grpc_endpoint or "") as channel:
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary(EXPORT)(good_request(803)[1].SerializeToString(), timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE

    keys = {r.key.decode() for r in read_records(collector.settings.kafka, expected=2)}
    assert keys == set(sent)
    st = collector.stats()
    assert st["http_tls_failed"] >= 1 and st["requests_received"] == 2
