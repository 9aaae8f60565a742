"""Table and figure writers every study shares: CSV + Markdown + LaTeX, PNG + PDF, all atomic.

A table is written from one data frame to ``<stem>.csv``, ``<stem>.md`` and
``<stem>.tex``; a figure from one matplotlib figure to ``<stem>.png`` and
``<stem>.pdf``. Each file goes through :func:`unsure.io.atomic_path`. Figures
are saved here only (:func:`save_figure`): the PDF carries no creation or
modification date and the PNG no time or software field, so a rerun from the
same inputs gives the same bytes (the studies seed their bootstrap intervals).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from unsure.io import atomic_path, write_text

TABLE_SUFFIXES = (".csv", ".md", ".tex")
FIGURE_SUFFIXES = (".png", ".pdf")
FIGURE_METADATA: dict[str, dict[str, str | None]] = {
    ".pdf": {"CreationDate": None, "ModDate": None},
    ".png": {"Software": None},  # matplotlib writes no tIME chunk; its version would change the bytes
}
"""What :func:`save_figure` passes to ``savefig``: None drops a field, so no file carries a date."""


def _stem(path: str | os.PathLike[str], suffixes: Sequence[str]) -> Path:
    p = Path(path)
    return p.with_suffix("") if p.suffix in suffixes else p


def write_table(
    frame: pd.DataFrame,
    stem: str | os.PathLike[str],
    *,
    caption: str | None = None,
    float_format: str = "{:.3f}",
) -> list[Path]:
    """Write ``frame`` as ``stem.csv`` (full precision), ``stem.md`` and ``stem.tex`` (rounded).

    ``stem`` may carry one of the three suffixes; it is dropped. Returns the
    paths written. The index is not written; reset it first to keep it.
    """
    base = _stem(stem, TABLE_SUFFIXES)
    shown = frame.copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else float_format.format(v))
    csv, md, tex = (base.with_suffix(s) for s in TABLE_SUFFIXES)
    with atomic_path(csv) as tmp:
        frame.to_csv(tmp, index=False)
    markdown = shown.to_markdown(index=False, disable_numparse=True)
    write_text(md, (f"{caption}\n\n" if caption else "") + markdown + "\n")
    latex = shown.to_latex(index=False, escape=True, caption=caption, label=f"tab:{base.name}")
    write_text(tex, latex)
    return [csv, md, tex]


def save_figure(fig: Figure, stem: str | os.PathLike[str], *, dpi: int = 150) -> list[Path]:
    """Save ``fig`` as ``stem.png`` and ``stem.pdf`` (no timestamps), then close it."""
    import matplotlib.pyplot as plt

    base = _stem(stem, FIGURE_SUFFIXES)
    paths = []
    for suffix in FIGURE_SUFFIXES:
        target = base.with_suffix(suffix)
        metadata = FIGURE_METADATA[suffix]
        with atomic_path(target) as tmp:
            fig.savefig(tmp, dpi=dpi, bbox_inches="tight", metadata=metadata)
        paths.append(target)
    plt.close(fig)
    return paths
