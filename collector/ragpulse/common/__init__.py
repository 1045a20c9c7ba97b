"""ragpulse.common: contracts and building blocks every ragpulse component shares.

It imports nothing else from ragpulse, so the collector, the scorer, the dashboards and deploy
can all depend on it without depending on each other. It lives in the ``collector/`` source tree
only because the collector defines the wire format the others read; it is not part of the
collector.

* :mod:`.http` — HTTP/1.1 server hardening shared by the OTLP/HTTP receiver and the
  ClickHouse-HTTP facade: a connection-capped threading server that evicts idle and slow clients,
  read deadlines, and one bounded body decoder (``Content-Length`` and chunked).
"""
