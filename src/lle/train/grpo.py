"""GRPO on recorded groups: the attempts at one small world, their verified rewards normalized in the group.

An `rl` snapshot row is one small world with every admitted attempt at it and its verified outcome (the
flywheel's group exploration makes such groups: one greedy attempt and several sampled). Each attempt's
reward is 1 for pass and 0 otherwise; its advantage is the reward minus the group's mean, divided by the
group's standard deviation, so a group whose attempts all passed or all failed teaches nothing and is
skipped. Every step whose call the policy recorded (the exact prompt and completion, scrubbed like any
row) is a sample carrying its attempt's advantage: the step-level credit of a multi-step episode is the
episode's, as in GRPO for agents. The loss per sample is the advantage-weighted negative log-likelihood of
the completion, as PPO's clipped surrogate with the base as the sampling policy (the attempts were sampled
from it; the ratio is clipped to 1 ± `clip`), plus `beta` times the per-token KL to the base (the k3
estimator; the base is the model with its adapter disabled), both averaged over the completion tokens.
Revoked experiences are left out; held-out tasks never reach an `rl` snapshot (the dataset gate).
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lle.carriers.dataset import recorded_call, trainable
from lle.carriers.weights import TrainingCard
from lle.errors import InvalidInputError
from lle.governance.hygiene import scrub_experience
from lle.governance.lineage import denylist
from lle.policies.catalog import sha256_file
from lle.store import Store
from lle.train.adapter_gguf import TARGET_MODULES, write_adapter
from lle.train.sft import Progress, batch_of, encode, load_base


@dataclass(frozen=True)
class GrpoConfig:
    rank: int = 8
    alpha: int = 16
    learning_rate: float = 5e-4
    beta: float = 0.04
    """Weight of the KL penalty to the base."""
    clip: float = 0.2
    """The ratio to the sampling policy is clipped to 1 ± clip (PPO's surrogate, as GRPO)."""
    steps: int = 40
    batch_size: int = 4
    seed: int = 0
    max_tokens: int = 2048
    threads: int = 2
    target_modules: tuple[str, ...] = field(default=TARGET_MODULES)


@dataclass(frozen=True)
class Sample:
    prompt: str
    completion: str
    advantage: float
    reward: float
    """The attempt's verified reward (1 pass, 0 otherwise), before normalizing in its group."""
    experience_id: str


def read_rl_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InvalidInputError(f"rows file {path} does not exist; export one with `lle export dataset --format rl`")
    try:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError) as err:
        raise InvalidInputError(f"{path} is not JSONL ({err}); pass an `rl` snapshot's JSONL") from err
    if not rows or not all(isinstance(r, dict) and "experience_ids" in r and "outcomes" in r for r in rows):
        raise InvalidInputError(f"{path} holds no rl rows (experience_ids and outcomes); pass an `rl` snapshot")
    return rows


def group_samples(store: Store, rows: Sequence[dict[str, Any]]) -> tuple[list[Sample], int]:
    """(samples, groups that taught): each group's recorded steps with their attempt's normalized advantage."""
    denied = denylist(store)
    samples: list[Sample] = []
    groups = 0
    for row in rows:
        attempts = [(str(i), 1.0 if o == "pass" else 0.0) for i, o in zip(row["experience_ids"], row["outcomes"],
                                                                           strict=True)]
        exps = [(store.get_experience(i), r) for i, r in attempts]
        exps = [(e, r) for e, r in exps if denied.blocks_experience(e) is None]
        rewards = [r for _, r in exps]
        if len(rewards) < 2 or len(set(rewards)) < 2:
            continue  # all passed or all failed: no attempt is better than its group
        mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
        groups += 1
        for exp, reward in exps:
            clean = scrub_experience(exp)
            for step in clean.steps:
                call = recorded_call(step)
                if trainable(step) and call:
                    samples.append(Sample(str(call["prompt"]), str(call["completion"]), (reward - mean) / std,
                                          reward, exp.id))
    return samples, groups


def _token_logps(model: Any, batch: dict[str, Any]) -> tuple[Any, Any]:
    """Per-token log-probabilities of the labels and the mask of completion tokens."""
    import torch

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    labels = batch["labels"][:, 1:]
    mask = labels != -100
    logps = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return logps, mask


def train_grpo(rows_path: Path, store: Store, base_gguf: Path, out_dir: Path, *, base_model: str,
               config: GrpoConfig = GrpoConfig(), snapshot_id: str | None = None,
               progress: Progress | None = None) -> TrainingCard:
    """Train a LoRA adapter by GRPO on the recorded groups of an `rl` snapshot; write `adapter.gguf`, `card.json`."""
    import torch
    from peft import LoraConfig, get_peft_model


    start = time.perf_counter()
    rows = read_rl_rows(rows_path)
    samples, groups = group_samples(store, rows)
    if not samples:
        raise InvalidInputError(f"{rows_path}: no group has attempts that both passed and failed with recorded "
                                "calls; explore with groups (lle run --group 4) on a model policy first")
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    model, tokenizer = load_base(base_gguf)
    architecture = str(getattr(model.config, "model_type", "llama"))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    encoded = [(*encode({"prompt": s.prompt, "completion": s.completion}, tokenizer, config.max_tokens)[:2],
                s.advantage, s.reward) for s in samples]
    model = get_peft_model(model, LoraConfig(r=config.rank, lora_alpha=config.alpha, lora_dropout=0.0,
                                             target_modules=list(config.target_modules), task_type="CAUSAL_LM"))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=config.learning_rate)
    rng = random.Random(config.seed)
    order: list[int] = []
    losses: list[float] = []
    kls: list[float] = []
    model.train()
    for step in range(1, config.steps + 1):
        if len(order) < config.batch_size:
            order += rng.sample(range(len(encoded)), len(encoded))
        chunk = [encoded[order.pop(0)] for _ in range(min(config.batch_size, len(order)))]
        batch = batch_of([(ids, labels) for ids, labels, _, _ in chunk], pad)
        advantages = torch.tensor([a for _, _, a, _ in chunk])
        logps, mask = _token_logps(model, batch)
        with torch.no_grad(), model.disable_adapter():
            ref, _ = _token_logps(model, batch)
        # The attempts were sampled from the base (the policy served when they ran): it is the old policy of the
        # clipped ratio, so an update stops pushing a token once it moved `clip` away from how it was sampled.
        ratio = torch.exp(logps - ref)
        surrogate = torch.minimum(ratio * advantages[:, None],
                                  ratio.clamp(1 - config.clip, 1 + config.clip) * advantages[:, None])
        delta = ref - logps
        kl = torch.exp(delta) - delta - 1  # k3: unbiased, always >= 0
        tokens = mask.sum(dim=1).clamp(min=1)
        per_sample = ((-surrogate + config.beta * kl) * mask).sum(dim=1) / tokens
        loss = per_sample.mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(loss.item(), 4))
        kls.append(round(float(((kl * mask).sum() / mask.sum().clamp(min=1)).item()), 5))
        if progress is not None:
            progress(step, config.steps, {"loss": losses[-1], "kl": kls[-1],
                                          "reward": round(statistics.fmean(r for *_, r in chunk), 3)})
    state = {k: v.detach().clone() for k, v in model.state_dict().items() if ".lora_" in k}
    out_dir.mkdir(parents=True, exist_ok=True)
    adapter = write_adapter(state, alpha=config.alpha, architecture=architecture, path=out_dir / "adapter.gguf",
                            name=f"lle-grpo-{out_dir.name}")
    card = TrainingCard(
        method="grpo", base_model=base_model, base_sha256=sha256_file(base_gguf), snapshot_id=snapshot_id,
        snapshot_sha256=hashlib.sha256(rows_path.read_bytes()).hexdigest(), rows=len(rows), exact_rows=len(samples),
        train_rows=len(samples), holdout_rows=0, experience_ids=sorted({s.experience_id for s in samples}),
        steps=config.steps, best_step=config.steps, rank=config.rank, alpha=config.alpha,
        learning_rate=config.learning_rate, target_modules=list(config.target_modules), losses=losses,
        beta=config.beta, kl=kls, groups=groups, wall_seconds=round(time.perf_counter() - start, 1),
        threads=config.threads, adapter_file=adapter.name, adapter_sha256=sha256_file(adapter),
    )
    (out_dir / "card.json").write_text(card.model_dump_json(indent=2), encoding="utf-8")
    return card
