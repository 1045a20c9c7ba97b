"""Web pages against the OTLP/HTTP receiver, over real sockets (issue 38, item 3).

DNS rebinding: a page of rebind.evil.example, whose name then resolves to 127.0.0.1, is
same-origin with a local ``up``: its POSTs need no preflight. Before, the receiver accepted
``Host: rebind.evil.example:PORT`` with ``Origin: http://rebind.evil.example:PORT`` (protobuf and
JSON 200, the trace stored and scored), while the facade refused the same Host. Now both use one
guard (``ragpulse.common.browser_refusal``); the receiver answers 403 / PERMISSION_DENIED before
the token and the body, counted ``http_refused_origin``. Browser exporters are a legitimate use:
origins in ``otlp.cors_allowed_origins`` get their preflights answered and CORS headers, as
otelcol's receiver does.
"""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Callable
from urllib.parse import urlsplit

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2

from ragpulse.collector.service import Collector
from testkit.payloads import rag_request

REBIND = "rebind.evil.example"


def _request(collector: Collector, method: str, headers: dict[str, str], body: bytes = b"",
             host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(collector.http_endpoint or "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.putrequest(method, "/v1/traces", skip_host=True)
        conn.putheader("Host", host or f"{url.hostname}:{url.port}")
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _post(collector: Collector, headers: dict[str, str], as_json: bool = False,
          host: str | None = None, seed: int = 0) -> tuple[int, dict[str, str], bytes]:
    request = rag_request(1, seed=seed)
    if as_json:
        doc = json_format.MessageToDict(request)
        for rs in doc["resourceSpans"]:
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        body, content_type = json.dumps(doc).encode(), "application/json"
    else:
        body, content_type = request.SerializeToString(), "application/x-protobuf"
    return _request(collector, "POST", {"Content-Type": content_type, **headers}, body, host)


def test_dns_rebinding_and_foreign_pages_are_refused_on_loopback(
        make_collector: Callable[..., Collector]) -> None:
    collector = make_collector()
    port = urlsplit(collector.http_endpoint or "").port
    rebound = {"Origin": f"http://{REBIND}:{port}"}
    for as_json in (False, True):
        status, _, body = _post(collector, rebound, as_json, host=f"{REBIND}:{port}")
        assert status == 403, body
        message = json.loads(body) if as_json else status_pb2.Status.FromString(body)
        code = message["code"] if as_json else message.code
        text = message["message"] if as_json else message.message
        assert code == code_pb2.PERMISSION_DENIED and "DNS rebinding" in text
    refused = [
        ({}, f"{REBIND}:{port}"),  # the Host alone
        ({"Origin": "https://evil.example"}, None),  # another site's page, loopback Host
        ({"Sec-Fetch-Site": "cross-site"}, None),  # a no-cors request: no Origin
    ]
    for headers, host in refused:
        assert _post(collector, headers, host=host)[0] == 403, (headers, host)
    stats = collector.stats()
    assert stats["http_refused_origin"] == 5 and stats["spans_received"] == 0

    # Clients: a loopback Host, no Origin; a page of this machine; a same-site page.
    accepted = [({}, None), ({}, f"localhost:{port}"), ({"Origin": "http://localhost:3000"}, None),
                ({"Sec-Fetch-Site": "same-site"}, f"[::1]:{port}")]
    for i, (headers, host) in enumerate(accepted):
        assert _post(collector, headers, host=host, seed=i)[0] == 200, (headers, host)
    assert collector.stats()["http_refused_origin"] == 5


def test_configured_origins_get_cors_as_otelcol_gives_it(
        make_collector: Callable[..., Collector]) -> None:
    collector = make_collector(otlp={"cors_allowed_origins": ["https://*.example.com"],
                                     "cors_allowed_headers": ["Authorization"],
                                     "cors_max_age_s": 600, "auth_token": "s3cret"})
    app = "https://app.example.com"
    preflight = {"Origin": app, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type, authorization"}
    status, headers, _ = _request(collector, "OPTIONS", preflight)  # no token: a preflight has none
    assert status == 204
    assert headers["access-control-allow-origin"] == app and headers["vary"] == "Origin"
    assert headers["access-control-allow-methods"] == "POST"
    assert headers["access-control-allow-headers"] == "authorization, content-type"
    assert headers["access-control-max-age"] == "600"
    for changed in ({"Origin": "https://evil.example"}, {"Origin": "https://example.com.evil.org"},
                    {"Access-Control-Request-Method": "PUT"},
                    {"Access-Control-Request-Headers": "x-evil"}):
        status, headers, _ = _request(collector, "OPTIONS", {**preflight, **changed})
        assert status == 403 and "access-control-allow-origin" not in headers, changed
    assert collector.stats()["http_refused_origin"] == 4

    # The page's POST: cross-site from an allowed origin, with the token.
    status, headers, _ = _post(collector, {"Origin": app, "Sec-Fetch-Site": "cross-site",
                                           "Authorization": "Bearer s3cret"})
    assert status == 200 and headers["access-control-allow-origin"] == app
    # Without the token: 401, still readable by the page (it can tell the user why).
    status, headers, _ = _post(collector, {"Origin": app, "Sec-Fetch-Site": "cross-site"})
    assert status == 401 and headers["access-control-allow-origin"] == app
    assert collector.stats()["spans_accepted"] > 0


def test_off_loopback_a_token_protects_the_receiver_whatever_the_host_name(
        make_collector: Callable[..., Collector]) -> None:
    """Behind a DNS name or a proxy the Host is not a loopback name; off loopback the token
    decides (a rebound page cannot send it), not the Host."""
    collector = make_collector(otlp={"http_host": "0.0.0.0", "grpc_host": "127.0.0.1",
                                     "auth_token": "s3cret"})
    url = urlsplit(collector.http_endpoint or "")
    assert _post(collector, {"Authorization": "Bearer s3cret"},
                 host=f"collector.internal:{url.port}")[0] == 200
    assert _post(collector, {}, host=f"{REBIND}:{url.port}")[0] == 401
