"""Expert iteration: LoRA supervised fine-tuning on verified successes, on the dequantized GGUF base.

The rows are a dataset snapshot's `sft` rows (`lle.carriers.exports`). A row that kept the recorded call
trains on exactly what the model was given (`prompt`) and what it wrote (`completion`); an older row without
it is rendered from its messages with the base's own chat template and counted apart on the card. Loss is on
the completion tokens only. Rows are split by task into train and a small holdout of train-split tasks; the
adapter kept is the one of lowest holdout loss, and training stops when it has not improved for `patience`
evaluations. The result is a GGUF LoRA (`adapter_gguf`) that llama.cpp applies on the quantized base.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lle.carriers.weights import TrainingCard
from lle.errors import InvalidInputError
from lle.policies.catalog import sha256_file
from lle.train.adapter_gguf import TARGET_MODULES, write_adapter

Row = dict[str, Any]
Progress = Callable[[int, int, dict[str, float]], None]
"""(step, of steps, metrics) after each optimizer step: `loss` always; GRPO adds `kl` and `reward`."""


@dataclass(frozen=True)
class SftConfig:
    rank: int = 8
    alpha: int = 16
    learning_rate: float = 1e-3
    steps: int = 40
    batch_size: int = 4
    holdout: float = 0.2
    """Share of tasks held back (from the train split) for early stopping; 0 trains on all."""
    eval_every: int = 10
    patience: int = 2
    seed: int = 0
    max_tokens: int = 2048
    threads: int = 2
    target_modules: tuple[str, ...] = field(default=TARGET_MODULES)


def read_rows(path: Path) -> list[Row]:
    """The rows of an `sft` snapshot file (JSONL), with a one-line error when it is not one."""
    if not path.is_file():
        raise InvalidInputError(f"rows file {path} does not exist; export one with `lle dataset export --format sft`")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"rows file {path} is not UTF-8 text ({err.reason}); pass an `sft` snapshot's "
                                "JSONL") from err
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise InvalidInputError(f"{path} line {n} is not JSON ({err}); pass an `sft` snapshot's JSONL") from err
        if not isinstance(row, dict) or not (("prompt" in row and "completion" in row) or "messages" in row):
            raise InvalidInputError(f"{path} line {n} is not an sft row (no prompt/completion or messages); "
                                    "pass an `sft` snapshot's JSONL")
        rows.append(row)
    if not rows:
        raise InvalidInputError(f"{path} holds no rows; admit verified successes to the dataset and export again")
    return rows


def load_base(gguf_path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) of a GGUF file, dequantized to float32 by transformers."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    return model, tokenizer


def _texts(row: Row, tokenizer: Any) -> tuple[str, str, bool]:
    """(prompt, completion, exact) of a row."""
    if isinstance(row.get("prompt"), str) and isinstance(row.get("completion"), str):
        return row["prompt"], row["completion"], True
    messages = row["messages"]
    prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
    return str(prompt), str(messages[-1]["content"]), False


def encode(row: Row, tokenizer: Any, max_tokens: int) -> tuple[list[int], list[int], bool]:
    """(input ids, labels, exact): the prompt's labels are -100, so only the completion is learned."""
    prompt, completion, exact = _texts(row, tokenizer)
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c = tokenizer(completion + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
    ids = (p + c)[-max_tokens:]
    labels = ([-100] * len(p) + c)[-max_tokens:]
    return ids, labels, exact


def split_by_task(rows: Sequence[Row], share: float, seed: int) -> tuple[list[int], list[int]]:
    """Row indices for training and holdout; all rows of one task fall on the same side."""
    tasks = sorted({str(r.get("small_world_id", i)) for i, r in enumerate(rows)})
    random.Random(seed).shuffle(tasks)
    n_hold = int(len(tasks) * share) if len(tasks) >= 4 else 0
    held = set(tasks[:n_hold])
    train = [i for i, r in enumerate(rows) if str(r.get("small_world_id", i)) not in held]
    hold = [i for i, r in enumerate(rows) if str(r.get("small_world_id", i)) in held]
    return train, hold


def batch_of(examples: Sequence[tuple[list[int], list[int]]], pad: int) -> dict[str, Any]:
    import torch

    width = max(len(ids) for ids, _ in examples)
    ids = [x + [pad] * (width - len(x)) for x, _ in examples]
    labels = [y + [-100] * (width - len(y)) for _, y in examples]
    mask = [[1] * len(x) + [0] * (width - len(x)) for x, _ in examples]
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels), "attention_mask": torch.tensor(mask)}


def _loss(model: Any, examples: Sequence[tuple[list[int], list[int]]], pad: int, batch_size: int) -> float:
    import torch

    total = 0.0
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            chunk = examples[start:start + batch_size]
            total += float(model(**batch_of(chunk, pad)).loss) * len(chunk)
    return total / max(len(examples), 1)


def train_sft(rows_path: Path, base_gguf: Path, out_dir: Path, *, base_model: str, config: SftConfig = SftConfig(),
              snapshot_id: str | None = None, progress: Progress | None = None) -> TrainingCard:
    """Train a LoRA adapter on the rows at `rows_path`; write `adapter.gguf` and `card.json` into `out_dir`."""
    import torch
    from peft import LoraConfig, get_peft_model

    start = time.perf_counter()
    rows = read_rows(rows_path)
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    model, tokenizer = load_base(base_gguf)
    architecture = str(getattr(model.config, "model_type", "llama"))
    encoded = [encode(r, tokenizer, config.max_tokens) for r in rows]
    train_idx, hold_idx = split_by_task(rows, config.holdout, config.seed)
    train = [encoded[i][:2] for i in train_idx]
    hold = [encoded[i][:2] for i in hold_idx]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model = get_peft_model(model, LoraConfig(r=config.rank, lora_alpha=config.alpha, lora_dropout=0.0,
                                             target_modules=list(config.target_modules), task_type="CAUSAL_LM"))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.learning_rate)
    rng = random.Random(config.seed)
    losses: list[float] = []
    holdout_losses: list[tuple[int, float]] = []
    best: tuple[float, int, dict[str, Any]] | None = None
    stale = 0
    step = 0
    model.train()
    for step in range(1, config.steps + 1):
        chunk = rng.sample(train, min(config.batch_size, len(train)))
        loss = model(**batch_of(chunk, pad)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(loss.item(), 4))
        if progress is not None:
            progress(step, config.steps, {"loss": losses[-1]})
        if hold and (step % config.eval_every == 0 or step == config.steps):
            model.eval()
            value = round(_loss(model, hold, pad, config.batch_size), 4)
            model.train()
            holdout_losses.append((step, value))
            if best is None or value < best[0]:
                best, stale = (value, step, _lora_state(model)), 0
            else:
                stale += 1
                if stale >= config.patience:
                    break
    state = best[2] if best is not None else _lora_state(model)
    best_step = best[1] if best is not None else step
    out_dir.mkdir(parents=True, exist_ok=True)
    adapter = write_adapter(state, alpha=config.alpha, architecture=architecture, path=out_dir / "adapter.gguf",
                            name=f"lle-sft-{out_dir.name}")
    experience_ids = sorted({e for r in (rows[i] for i in train_idx) for e in r.get("experience_ids", [])})
    card = TrainingCard(
        method="sft", base_model=base_model, base_sha256=sha256_file(base_gguf), snapshot_id=snapshot_id,
        snapshot_sha256=hashlib.sha256(rows_path.read_bytes()).hexdigest(), rows=len(rows),
        exact_rows=sum(1 for _, _, exact in encoded if exact), train_rows=len(train), holdout_rows=len(hold),
        experience_ids=experience_ids, steps=step, best_step=best_step, rank=config.rank, alpha=config.alpha,
        learning_rate=config.learning_rate, target_modules=list(config.target_modules), losses=losses,
        holdout_losses=holdout_losses, wall_seconds=round(time.perf_counter() - start, 1), threads=config.threads,
        adapter_file=adapter.name, adapter_sha256=sha256_file(adapter),
    )
    (out_dir / "card.json").write_text(card.model_dump_json(indent=2), encoding="utf-8")
    return card


def _lora_state(model: Any) -> dict[str, Any]:
    return {k: v.detach().clone() for k, v in model.state_dict().items() if ".lora_" in k}
