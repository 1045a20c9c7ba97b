"""ragpulse.deploy: running ragpulse, from the embedded single-machine default to production."""
