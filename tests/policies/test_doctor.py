"""The embedded model decodes in a child process; a child that dies by a signal is a readable error."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lle.errors import ModelError
from lle.policies.doctor import (
    compiled_features,
    cpu_flags,
    missing_on_this_cpu,
    run_child,
)

# What a build compiled natively on a Sapphire Rapids machine reports (the crash this check exists for).
NATIVE_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
               "AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |")


def test_features_are_read_from_system_info_and_compared_with_the_cpu(tmp_path: Path) -> None:
    features = compiled_features(NATIVE_INFO)
    assert features == ["SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VNNI",
                        "AVX512_BF16", "AMX_INT8"]
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu pni ssse3 avx avx2 f16c fma bmi2\n")
    assert missing_on_this_cpu(features, cpu_flags(cpuinfo)) == ["AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"]
    assert missing_on_this_cpu(features, cpu_flags(tmp_path / "absent")) == []


def test_a_child_killed_by_a_signal_is_a_one_line_error_with_the_fix() -> None:
    crash = textwrap.dedent(f"""
        import os, signal, sys
        print({NATIVE_INFO!r}, file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    """)
    with pytest.raises(ModelError) as caught:
        run_child([sys.executable, "-c", crash], what="model check of demo.gguf")
    message = str(caught.value)
    assert "\n" not in message
    assert "died with SIGSEGV" in message and "make setup" in message and "demo.gguf" in message
    lacking = missing_on_this_cpu(compiled_features(NATIVE_INFO), cpu_flags())
    for feature in lacking:
        assert feature in message


@pytest.mark.slow
def test_the_default_model_decodes_in_a_child_process(smollm_path: Path) -> None:
    """`lle models check` end to end: the child decodes, and the build uses nothing this CPU lacks."""
    result = subprocess.run([sys.executable, "-m", "lle.cli.main", "models", "check", str(smollm_path), "--json"],
                            capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        pytest.fail(f"the embedded model does not run here: {result.stderr.strip()}")
    report = json.loads(result.stdout)
    assert report["completion_tokens"] >= 1 and report["text"].strip()
    assert "AVX2" in report["features"] or not (cpu_flags() or set()) & {"avx2"}
    assert report["cpu_lacks"] == []
    if report["build_flags"] is not None:  # built by `make setup`: portable, whatever CPU built it
        assert "-DGGML_NATIVE=OFF" in report["build_flags"]
        assert not {"AMX_INT8", "AMX_BF16", "AVX512"} & set(report["features"])
