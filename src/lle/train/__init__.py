"""Weights from verified experience: LoRA expert iteration on the dequantized GGUF base, adapters as GGUF.

Needs the `[train]` extra (torch, transformers, peft, gguf); nothing in the base install imports this
package. Adapters are then carrier items: `lle.carriers.weights`.
"""
