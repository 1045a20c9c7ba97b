"""ragpulse's benchmarks: each module is a script (``python bench/<name>.py --help``) that measures
the product and can write its figures into docs/benchmarks.md (docs/benchmarks.md names the
command behind every figure).

bench is a package of the repository, not of the wheel: the editable install (``make install``)
puts the repository root on the path, so ``bench``, ``train`` and ``testkit`` import by name from
any script. Imports go one way (docs/architecture.md, "Repository layers"; tests/test_layers.py):
tests may import bench, train's commands may import bench, bench may import ``testkit`` and
``train.data`` (the corpus readers); bench never imports tests or the rest of train.
"""
