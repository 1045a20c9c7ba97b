"""One OTLP/HTTP protobuf POST to a collector, for the fault tests' senders."""

from __future__ import annotations

import http.client


def post_traces(host: str, port: int, body: bytes) -> tuple[int, str | None]:
    """POST ``body`` to ``/v1/traces``; returns the status and the Retry-After header.

    Raises ``OSError`` / ``http.client.HTTPException`` when the collector cannot be reached.
    """
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("POST", "/v1/traces", body=body,
                     headers={"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("Retry-After")
    finally:
        conn.close()
