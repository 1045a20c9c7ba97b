"""Local judges: metrics computed on this machine, with no API and no download."""
