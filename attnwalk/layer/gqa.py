"""Grouped-query attention (Ainslie et al., 2023): g K/V heads, each shared by heads/g query heads.

Query head h reads K/V head ⌊h / (heads/g)⌋, so consecutive query heads share one (Llama's
repeat_kv). g = heads is ordinary multi-head attention; g = 1 is multi-query attention.
"""

from __future__ import annotations


def kv_head_of(heads: int, kv_heads: int) -> list[int]:
    """For each query head (0-based), the index of the K/V head it reads."""
    group = heads // kv_heads
    return [h // group for h in range(heads)]


def kv_cache(kv_heads: int, d_k: int, d_v: int) -> int:
    """Numbers a KV cache keeps per token (per layer): each K/V head's key and value."""
    return kv_heads * (d_k + d_v)
