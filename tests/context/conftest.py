"""The real tokenizer of the default model, vocabulary only (no weights loaded)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="the llama extra is not installed (make test installs it)")

from lle.policies.catalog import DEFAULT_MODEL, locate  # noqa: E402


@pytest.fixture(scope="session")
def vocab() -> object:
    return llama_cpp.Llama(model_path=str(locate(DEFAULT_MODEL)), vocab_only=True, verbose=False)


@pytest.fixture(scope="session")
def real_count(vocab: object) -> Callable[[str], int]:
    return lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def chat_prompt_tokens(vocab: object) -> Callable[[list[dict[str, str]]], int]:
    """Tokens of the prompt exactly as llama.cpp renders it with the model's own chat template."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    meta = vocab.metadata  # type: ignore[attr-defined]
    eos = vocab.detokenize([vocab.token_eos()]).decode()  # type: ignore[attr-defined]
    bos = vocab.detokenize([vocab.token_bos()]).decode()  # type: ignore[attr-defined]
    formatter = Jinja2ChatFormatter(template=meta["tokenizer.chat_template"], eos_token=eos, bos_token=bos)

    def count(messages: list[dict[str, str]]) -> int:
        result = formatter(messages=messages)
        ids = vocab.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special,  # type: ignore[attr-defined]
                             special=True)
        return len(ids)

    return count
