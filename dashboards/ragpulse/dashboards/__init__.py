"""ragpulse.dashboards: Grafana dashboards and alert rules over ClickHouse, and offline reports."""
