"""vLLM's ``moe_align_block_size``: group the (token, k) slots of a top-k routing by expert, padded per block.

The fused MoE kernel processes BLOCK_SIZE_M slots of one expert per program, so every expert's slot list is
padded up to a multiple of BLOCK_SIZE_M. Hence its inputs depend on BLOCK_SIZE_M (a "variant" of the data).
"""

from __future__ import annotations

import torch


def moe_align_block_size(
    topk_ids: torch.Tensor, block_size: int, num_experts: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``(sorted_token_ids, expert_ids, num_tokens_post_padded)`` as int32 tensors.

    ``topk_ids`` is ``[M, top_k]`` (expert of each slot). ``sorted_token_ids`` has EM entries (EM = sum over
    experts of the slot count rounded up to ``block_size``): for each expert in order, its flat slot ids
    ``i * top_k + k`` ascending, then padding with ``M * top_k`` (vLLM's pad value: it fails the kernel's
    ``offs_token < num_valid_tokens`` mask). ``expert_ids`` has EM / block_size entries, the expert of each
    block; an expert with no slot gets no block. ``num_tokens_post_padded`` is ``[EM]``.
    """
    if topk_ids.dim() != 2:
        raise ValueError(f"moe_align_block_size: topk_ids must be [M, top_k], got shape {tuple(topk_ids.shape)}")
    if block_size <= 0:
        raise ValueError(f"moe_align_block_size: block_size must be positive, got {block_size}")
    flat = topk_ids.reshape(-1).to(torch.int64)
    if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= num_experts):
        raise ValueError(f"moe_align_block_size: expert ids must be in [0, {num_experts}), got {flat.unique()}")
    pad = flat.numel()
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_size - 1) // block_size * block_size
    em = int(padded.sum())
    sorted_ids = torch.full((em,), pad, dtype=torch.int32)
    expert_ids = torch.empty(em // block_size, dtype=torch.int32)
    start = 0
    for e in range(num_experts):
        slots = torch.nonzero(flat == e).reshape(-1)  # ascending flat ids i * top_k + k
        sorted_ids[start : start + slots.numel()] = slots.to(torch.int32)
        expert_ids[start // block_size : (start + int(padded[e])) // block_size] = e
        start += int(padded[e])
    return sorted_ids, expert_ids, torch.tensor([em], dtype=torch.int32)
