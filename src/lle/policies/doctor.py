"""Can the embedded model run on this CPU? Decode a few tokens in a child process and say.

llama.cpp compiled for another CPU (native code paths, AVX-512, AMX tiles) dies on the first matrix
product with SIGILL or SIGSEGV, taking the whole Python process with it. The check therefore loads the
model and decodes in a child process: a crash there becomes a one-line `ModelError` that names the
signal, the instruction-set features llama.cpp was compiled with that this CPU lacks, and the fix.

    python -m lle.policies.doctor MODEL.gguf TOKENS   # the child: prints one JSON object
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lle.errors import ModelError

REBUILD_FIX = (
    "rebuild llama-cpp-python portably: `rm -rf .venv && make setup` (the Makefile builds it without native, "
    "AVX-512 or AMX code paths; docs/00-install.md)"
)
BUILD_FLAGS_FILE = "llama-build-flags"
"""Written into the virtualenv by `make setup`: the CMAKE_ARGS llama.cpp was built with."""

# llama.cpp's system-info names -> the /proc/cpuinfo flag a CPU needs for them.
CPU_FLAG_OF = {
    "SSE3": "pni", "SSSE3": "ssse3", "AVX": "avx", "AVX2": "avx2", "F16C": "f16c", "FMA": "fma",
    "BMI2": "bmi2", "AVX_VNNI": "avx_vnni", "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni", "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8",
    "AMX_BF16": "amx_bf16", "AMX_TILE": "amx_tile",
}
PROMPT = "The capital of France is"


def compiled_features(system_info: str) -> list[str]:
    """The instruction-set features in llama.cpp's system info that are on (`AVX2 = 1`)."""
    on = re.findall(r"\b([A-Z0-9_]+) = 1\b", system_info)
    return [name for name in dict.fromkeys(on) if name in CPU_FLAG_OF]


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """This CPU's feature flags, or None where /proc/cpuinfo does not say (not Linux x86)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else None


def missing_on_this_cpu(features: list[str], flags: set[str] | None) -> list[str]:
    """Compiled-in features this CPU does not have (empty when the CPU's flags are unknown)."""
    if flags is None:
        return []
    return [name for name in features if CPU_FLAG_OF[name] not in flags]


def build_flags() -> str | None:
    """The CMAKE_ARGS of this environment's llama.cpp build, when `make setup` built it."""
    path = Path(sys.prefix) / BUILD_FLAGS_FILE
    return path.read_text().strip() if path.is_file() else None


def run_child(argv: list[str], *, what: str, timeout: float = 600.0) -> dict[str, Any]:
    """Run `argv` (a child that prints one JSON object last); a death by signal is a one-line ModelError."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise ModelError(f"{what}: no answer within {timeout:.0f} s; fix: check the machine's load, or "
                         "run `lle models check` with a smaller --tokens") from None
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        features = compiled_features(proc.stderr)
        missing = missing_on_this_cpu(features, cpu_flags())
        lacking = f"; llama.cpp uses {', '.join(missing)}, which this CPU lacks" if missing else ""
        raise ModelError(f"{what}: the model process died with {name}{lacking}; fix: {REBUILD_FIX}")
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelError(f"{what}: the model process failed (exit {proc.returncode}: {last[:300]}); "
                         "fix: `lle models verify` the file, then `make setup`")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def check_model(path: Path, *, tokens: int = 8, timeout: float = 600.0) -> dict[str, Any]:
    """Load the GGUF at `path` in a child process, decode `tokens` tokens greedily, report what ran."""
    if tokens < 1:
        raise ModelError(f"--tokens {tokens}: decode at least 1 token")
    report = run_child([sys.executable, "-m", "lle.policies.doctor", str(path), str(tokens)],
                       what=f"model check of {path.name}", timeout=timeout)
    features = report["features"]
    report["cpu_lacks"] = missing_on_this_cpu(features, cpu_flags())
    report["build_flags"] = build_flags()
    return report


def _child(path: str, tokens: int) -> None:
    import llama_cpp  # here only: the parent never loads llama.cpp

    # The compiled features go to stderr first: if decoding crashes, the parent can still name them.
    print(llama_cpp.llama_print_system_info().decode(errors="replace"), file=sys.stderr, flush=True)
    started = time.perf_counter()
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_threads=1, verbose=False, seed=0)
    loaded = time.perf_counter()
    out: Any = llm.create_completion(PROMPT, max_tokens=tokens, temperature=0.0)
    decoded = time.perf_counter()
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    print(json.dumps({
        "model": Path(path).name,
        "text": out["choices"][0]["text"],
        "completion_tokens": out["usage"]["completion_tokens"],
        "load_s": round(loaded - started, 3),
        "decode_s": round(decoded - loaded, 3),
        "system_info": info.strip(),
        "features": compiled_features(info),
        "llama_cpp_python": llama_cpp.__version__,
    }))


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
