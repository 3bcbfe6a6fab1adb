"""The report's figures: each written figure as an image at its physical size, every format linked, and the reason
for each skipped one.
"""

from __future__ import annotations

from pathlib import Path

from specbench.figures.plot import RenderedFigure
from specbench.figures.report import CSS_PX_PER_PNG_PX, IMAGE_PREFERENCE, Html, esc, paragraph, section


def image_for(files: dict[str, Path]) -> Path | None:
    return next((files[f] for f in IMAGE_PREFERENCE if f in files), None)


def figure_block(fig: RenderedFigure, out_dir: Path) -> Html:
    spec = fig.spec
    if fig.skipped:
        return Html(
            f'<div class="skipped" id="{esc(spec.name)}"><strong>{esc(spec.title)}</strong> — skipped: '
            f"{esc(fig.skipped)}</div>"
        )
    image = image_for(fig.files)
    links = " · ".join(
        f'<a href="{esc(relative(path, out_dir))}">{esc(fmt.upper())}</a>' for fmt, path in fig.files.items()
    )
    img = (
        f'<img src="{esc(relative(image, out_dir))}" alt="{esc(spec.title)}"{size_attributes(image)}>'
        if image
        else paragraph("(PDF only: open the link below)", "muted")
    )
    return Html(
        f'<figure id="{esc(spec.name)}"><h3>{esc(spec.title)}</h3>{img}<figcaption>'
        f'<strong>How to read:</strong> {esc(spec.how_to_read)} <span class="muted">Files: {links}</span>'
        "</figcaption></figure>"
    )


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in pixels from a PNG's IHDR chunk; None for anything else."""
    head = Path(path).read_bytes()[:24]
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def size_attributes(image: Path) -> str:
    """width/height attributes that show a PNG at its physical size (SVGs carry their own)."""
    size = png_size(image) if image.suffix == ".png" else None
    if size is None:
        return ""
    return f' width="{round(size[0] * CSS_PX_PER_PNG_PX)}" height="{round(size[1] * CSS_PX_PER_PNG_PX)}"'


def relative(path: Path, out_dir: Path) -> str:
    return Path(path).resolve().relative_to(Path(out_dir).resolve()).as_posix()


def figures_section(figures: list[RenderedFigure], out_dir: Path) -> Html:
    skipped = [f for f in figures if f.skipped]
    summary = (
        paragraph(
            f"{len(skipped)} figure(s) skipped because their data are absent; the reason "
            "stands where the figure would be.",
            "note",
        )
        if skipped
        else ""
    )
    return section("figures", "Figures", summary, *[figure_block(f, out_dir) for f in figures])
