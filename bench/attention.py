"""Attention over the engine's packed rows: its dense 4-D mask against FlexAttention's block mask.

    python -m bench.attention [--device cpu|cuda] [--shapes tiny 1b 8b] [--widths 256 1000 2048] [--out FILE]

The engine packs a context and its continuations into one row (a census row and
its two option orders, a label prompt and its 2-10 labels) and builds the row's
attention as a dense additive ``(batch, 1, width, width)`` mask
(:func:`unsure.engine.forward.packed_mask`) for ``scaled_dot_product_attention``.
Issue 28 asks whether FlexAttention, with a ``BlockMask`` built from the same
segments, is faster where the device allows it. This times both on the
attention alone (the shape's heads, KV heads and head size; random queries, keys
and values in the device's dtype: bf16 on a GPU, float32 on a CPU) over rows laid
out as the engine lays out risk-score and label-score requests, and compares each
with a float32 dense reference on the same inputs:

- dense: the engine's mask and SDPA, steady time per call;
- flex: ``torch.compile(flex_attention)`` with a block mask from the segments:
  its first call (the compile, or a load from inductor's cache on disk) and its
  steady time, at the row width as it is and padded to a multiple of the block
  size (128), since compiled FlexAttention has given wrong results at other
  widths (pytorch/pytorch#159247; on this project's CPU with torch 2.13: NaN or
  errors of 1-2 at the tiny shape and a width of 40).

Prints a Markdown table per shape, and writes them to ``--out``. Downloads nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from unsure.engine.forward import packed_mask

BLOCK = 128
"""FlexAttention's default block size: the widths it handles without partial blocks."""

SHAPES = {"tiny": (4, 2, 16), "1b": (32, 8, 64), "8b": (32, 8, 128)}
"""Query heads, KV heads and head size of each shape's attention (Llama-3.2-1B, Llama-3-8B)."""


@dataclass(frozen=True)
class Layout:
    """Rows of one width: the engine's segments (0 the context, ``s`` the ``s``-th continuation, -1 padding)."""

    name: str
    segments: torch.Tensor


def layouts(width: int, rows: int) -> list[Layout]:
    """Risk scores (a context of most of the row, two short options) and label scores (a context
    of 80% of the row, then up to ten labels of a few tokens), the rest padding in some rows."""
    choice = torch.full((rows, width), -1, dtype=torch.long)
    labels = torch.full((rows, width), -1, dtype=torch.long)
    for r in range(rows):
        used = width - (r % 4) * width // 16  # a batch's rows are of similar, not equal, lengths
        context = used - 4
        choice[r, :context], choice[r, context : context + 2], choice[r, context + 2 : used] = 0, 1, 2
        context = int(used * 0.8)
        labels[r, :context] = 0
        step = max(1, (used - context) // 10)
        for s, start in enumerate(range(context, used, step), start=1):
            labels[r, start : min(used, start + step)] = min(s, 10)
    return [Layout("risk scores", choice), Layout("label scores", labels)]


def block_mask(segments: torch.Tensor) -> BlockMask:
    """The engine's packed attention (:func:`unsure.engine.forward.packed_mask`) as a FlexAttention block mask."""

    def allowed(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        ks, qs = segments[b, kv], segments[b, q]
        return ((q >= kv) & (ks >= 0) & ((ks == 0) | (ks == qs))) | (q == kv)

    rows, width = segments.shape
    return create_block_mask(allowed, rows, None, width, width, device=segments.device)


def padded(segments: torch.Tensor) -> torch.Tensor:
    """``segments`` widened with padding to a multiple of :data:`BLOCK`."""
    extra = -segments.shape[1] % BLOCK
    return torch.nn.functional.pad(segments, (0, extra), value=-1)


def steady(call: Callable[[], torch.Tensor], device: torch.device, repeats: int) -> float:
    """Seconds per call after one call (the compile, for a compiled function)."""
    call()
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    _sync(device)
    return (time.perf_counter() - start) / repeats


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(layout: Layout, shape: str, device: torch.device, dtype: torch.dtype, repeats: int) -> dict[str, object]:
    """Dense and flex times and their largest differences from a float32 dense reference."""
    heads, kv_heads, size = SHAPES[shape]
    segments = layout.segments.to(device)
    rows, width = segments.shape
    gen = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(rows, n, width, size, generator=gen).to(device) for n in (heads, kv_heads, kv_heads))

    def dense(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
        # as transformers runs SDPA with a mask: the KV heads repeated (its masked GQA falls back to math)
        k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=packed_mask(seg, q.dtype))

    # row by row: a float32 batch at 8B and 4,096 tokens may take the math kernel's memory
    reference = torch.cat([dense(q[r : r + 1], k[r : r + 1], v[r : r + 1], segments[r : r + 1]) for r in range(rows)])
    lq, lk, lv = (t.to(dtype) for t in (q, k, v))
    valid = (segments >= 0)[:, None, :, None]

    def error(result: torch.Tensor) -> float:
        """The largest difference from the reference over the rows' tokens (a NaN there counts)."""
        return float(torch.where(valid, (result.float() - reference).abs(), 0.0).max())

    out: dict[str, object] = {"layout": layout.name, "width": width, "rows": rows}
    out["dense s"] = steady(lambda: dense(lq, lk, lv, segments), device, repeats)
    out["dense error"] = error(dense(lq, lk, lv, segments))
    compiled = torch.compile(flex_attention, dynamic=False)
    for label, seg in (("flex", segments), ("flex padded", padded(segments))):
        grow = seg.shape[1] - width
        fq, fk, fv = (torch.nn.functional.pad(t, (0, 0, 0, grow)) for t in (lq, lk, lv))
        mask = block_mask(seg)

        def flex(
            fq: torch.Tensor = fq, fk: torch.Tensor = fk, fv: torch.Tensor = fv, mask: BlockMask = mask
        ) -> torch.Tensor:
            return compiled(fq, fk, fv, block_mask=mask, enable_gqa=True)

        start = time.perf_counter()
        result = flex()
        _sync(device)
        out[f"{label} first s"] = time.perf_counter() - start
        out[f"{label} s"] = steady(flex, device, repeats)
        out[f"{label} error"] = error(result[:, :, :width])
    return out


COLUMNS = (
    *("layout", "width", "rows", "dense s", "dense error", "flex first s", "flex s", "flex error"),
    *("flex padded first s", "flex padded s", "flex padded error"),
)


def table(results: list[dict[str, object]]) -> str:
    """The results as a Markdown table (times in ms, errors in the reference's units)."""

    def cell(key: str, value: object) -> str:
        if isinstance(value, float):
            return f"{value * 1e3:.2f}" if key.endswith(" s") else f"{value:.1e}"
        return str(value)

    head = [c.replace(" s", " ms") for c in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c, r[c]) for c in COLUMNS) + " |" for r in results]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), help="default: 1b 8b on a GPU, tiny 1b on a CPU")
    parser.add_argument("--widths", type=int, nargs="+", default=None, help="default: 1000 2048 4096 (CPU: 40 250 512)")
    parser.add_argument("--rows", type=int, default=None, help="rows a batch (default: 16; CPU: 4)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    # one compile per shape: past dynamo's default of 8, flex_attention would fall back to its eager
    # reference, which materialises every score (what an engine on varying widths would meet too)
    torch._dynamo.config.recompile_limit = 64
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    shapes = args.shapes or (["1b", "8b"] if gpu else ["tiny", "1b"])
    widths = args.widths or ([1000, 2048, 4096] if gpu else [40, 250, 512])
    rows = args.rows or (16 if gpu else 4)
    dtype = torch.bfloat16 if gpu else torch.float32
    name = torch.cuda.get_device_name(device) if gpu else "CPU"
    text = f"Packed-row attention on {name}, {dtype}, {rows} rows a batch (`python -m bench.attention`).\n"
    for shape in shapes:
        heads, kv_heads, size = SHAPES[shape]
        results = [
            measure(layout, shape, device, dtype, args.repeats) for width in widths for layout in layouts(width, rows)
        ]
        text += f"\nShape {shape} ({heads} heads, {kv_heads} KV heads, head size {size}):\n\n" + table(results)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
