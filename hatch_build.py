"""Build hook: compiles the collector's optional C module, ``ragpulse.collector._native``.

``collector/ragpulse/collector/_native.c`` is the per-span loop of ``split.py`` in C (about 4x
less CPU per span; docs/benchmarks.md). It needs only the C compiler and the Python headers that
built this interpreter (``sysconfig``), no build-time package. Where they are missing, or with
``RAGPULSE_NO_NATIVE=1``, the build says so and goes on: ``split.py`` is the reference and the
fallback, and gives the same records.

The module is compiled next to its source (an editable install imports it from there; a wheel
takes it as an artifact, and is then tagged for this platform and interpreter). Run
``python hatch_build.py`` to rebuild it in place after editing the C file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SOURCE = ROOT / "collector" / "ragpulse" / "collector" / "_native.c"


def target() -> Path:
    return SOURCE.with_name("_native" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def compile_native(*, log=print) -> Path | None:
    """Compile ``_native.c`` in place; the built file, or None (said why) where it cannot be."""
    out = target()
    if os.environ.get("RAGPULSE_NO_NATIVE"):
        log("ragpulse: RAGPULSE_NO_NATIVE is set: the collector's split runs in Python")
        out.unlink(missing_ok=True)
        return None
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        log(f"ragpulse: no Python.h in {include}: the collector's split runs in Python "
            "(install the interpreter's development headers for the C module)")
        return None
    tmp = out.with_name(out.name + ".tmp")
    cmd = [*cc, "-O2", "-fPIC", "-shared", "-std=c11", "-Wall", "-Werror=implicit-function-declaration",
           "-fvisibility=hidden", "-I", include, str(SOURCE), "-o", str(tmp)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        log(f"ragpulse: cannot compile the collector's C module ({shlex.join(cmd)}): {detail.strip()}; "
            "the collector's split runs in Python")
        tmp.unlink(missing_ok=True)
        return None
    os.replace(tmp, out)  # atomic: a running collector keeps the file it mapped
    return out


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # run as a script, without hatchling
    BuildHookInterface = object  # type: ignore[misc,assignment]


class NativeBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel":
            return
        built = compile_native(log=self.app.display_warning)
        if built is None:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":  # an editable install imports it from the source tree
            build_data["force_include"][str(built)] = f"ragpulse/collector/{built.name}"


if __name__ == "__main__":
    path = compile_native()
    print(path if path else "not built")
    sys.exit(0 if path else 1)
