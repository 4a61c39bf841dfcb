"""A PEFT LoRA adapter written as a GGUF LoRA file that llama.cpp loads on the quantized base.

llama.cpp reads an adapter as: `general.type = adapter`, `adapter.type = lora`, `adapter.lora.alpha`, and per
adapted base tensor two tensors `<gguf name>.lora_a` (rank × in) and `<gguf name>.lora_b` (out × rank), in
PyTorch's row-major order (the GGUF writer stores shapes reversed, as ggml counts them). Only the projections
whose GGUF tensors keep Hugging Face's row order are adapted: llama.cpp's converter permutes the rows of
`q_proj`/`k_proj` for rotary embeddings, and an adapter on them would need the same permutation of `lora_b`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lle.errors import InvalidInputError

# Hugging Face module name → llama.cpp tensor name, for the llama architecture (SmolLM2, and Qwen2's layout).
GGUF_NAMES = {
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
TARGET_MODULES = tuple(name.split(".")[-1] for name in GGUF_NAMES)
"""The PEFT `target_modules` whose adapters `write_adapter` can place (see the module doc)."""

_LORA_KEY = re.compile(r"(?:base_model\.model\.)?model\.layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])\.(?:default\.)?weight$")


def gguf_tensor_name(peft_key: str) -> str:
    """`base_model.model.model.layers.3.mlp.up_proj.lora_A.weight` → `blk.3.ffn_up.weight.lora_a`."""
    match = _LORA_KEY.match(peft_key)
    if match is None or match.group(2) not in GGUF_NAMES:
        raise InvalidInputError(f"LoRA tensor {peft_key} has no llama.cpp name; adapt only {', '.join(TARGET_MODULES)}")
    layer, module, which = match.groups()
    return f"blk.{layer}.{GGUF_NAMES[module]}.weight.lora_{which.lower()}"


def write_adapter(state: Mapping[str, Any], *, alpha: float, architecture: str, path: Path,
                  name: str = "lle-lora") -> Path:
    """Write the LoRA tensors of a PEFT `state` dict (name → torch tensor) to `path` as a GGUF adapter."""
    import gguf  # the [train] extra

    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_string("general.type", "adapter")
    writer.add_string("general.name", name)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(alpha))
    written = 0
    for key in sorted(state):
        if ".lora_" not in key:
            continue
        array = state[key].detach().to("cpu").float().contiguous().numpy()
        writer.add_tensor(gguf_tensor_name(key), array)
        written += 1
    if not written:
        raise InvalidInputError("the adapter has no LoRA tensors; train with target modules from TARGET_MODULES")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
