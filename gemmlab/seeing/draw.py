"""Pictures of layouts, TV partitions, swizzles, bank wavefronts and CTA rasters.

Every function returns a matplotlib ``Figure`` (shown by Jupyter, savable with
``fig.savefig``). Colours are painted with one ``imshow`` per panel and labels are only
drawn when cells are big enough to read, so a 128x128 tile renders well under a second.
The conventions follow CuTe's ``print_layout``/``print_latex``: row = first coordinate,
threads coloured by ``thread % 8``, cells labelled ``T#V#``, an MMA drawn with A (MxK) on
the left, B (KxN) on top and C (MxN) in the middle.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from gemmlab import layout as L
from gemmlab.seeing.banks import Access, NUM_BANKS
from gemmlab.errors import GemmlabError
from gemmlab.seeing.figures import figure_png


class DrawError(GemmlabError):
    """What was given cannot be drawn (wrong rank, shapes that do not fit...)."""


#: CuTe's print_latex TV palette (TikzColor_TV), indexed by thread % 8.
TV_PALETTE = np.array([
    (175, 175, 255), (175, 255, 175), (255, 255, 175), (255, 175, 175),
    (210, 210, 255), (210, 255, 210), (255, 255, 210), (255, 210, 210)], dtype=float) / 255
HIGHLIGHT = np.array((0.85, 0.1, 0.1))
LABEL_MAX_CELLS = 1024  # more cells than this: colours only, no text


def _new_figure(**kwargs: Any) -> Any:
    """A pyplot-free Figure (no global state, no double display) that IPython shows as PNG.

    Jupyter's inline backend registers a PNG printer for figures only once pyplot is
    imported; register our own if none is there, so returned figures always display.
    """
    from matplotlib.figure import Figure

    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with jupyter
        get_ipython = lambda: None  # noqa: E731
    ip = get_ipython()
    if ip is not None:
        fmt = ip.display_formatter.formatters["image/png"]
        if Figure not in fmt.type_printers:
            fmt.for_type(Figure, figure_png)
    return Figure(**kwargs)


def _figure(ncols: int, cell_rows: int, cell_cols: int, extra_w: float = 0.0) -> Any:
    """A figure with panels sized so cells are square and readable but never huge."""
    scale = min(0.45, 10.0 / max(cell_cols, 1), 8.0 / max(cell_rows, 1))
    w = max(3.0, cell_cols * scale + 1.2) + extra_w
    h = max(2.0, cell_rows * scale + 1.2)
    return _new_figure(figsize=(w, h), layout="constrained")


# --------------------------------------------------------------------------- layouts

def layout_values_2d(layout: Any) -> np.ndarray:
    """The layout evaluated on its (rows, cols) grid, nested modes flattened like print_layout.

    A rank-1 layout is drawn as one row.
    """
    shape = L.mode_sizes(layout)
    if len(shape) > 2:
        raise DrawError(f"layout_grid draws rank-1 and rank-2 layouts; this one has rank {len(shape)} "
                        f"({shape}). Group modes first, e.g. with gemmlab.layout.make_layout(...)")
    vals = L.layout_to_array(layout)
    return vals.reshape(1, -1) if vals.ndim == 1 else vals


def _label_cells(ax, texts: np.ndarray, fontsize: float | None = None) -> None:
    rows, cols = texts.shape
    if rows * cols > LABEL_MAX_CELLS:
        return
    size = fontsize or max(4.0, min(9.0, 200.0 / max(rows, cols)))
    for (r, c), t in np.ndenumerate(texts):
        if t:
            ax.text(c, r, t, ha="center", va="center", fontsize=size)


def _grid_axes(ax, rows: int, cols: int, ticks: bool = True) -> None:
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    if rows * cols <= LABEL_MAX_CELLS * 4:
        ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        ax.grid(which="minor", color="black", linewidth=0.4)
    ax.tick_params(which="minor", length=0)
    if ticks:
        # few labelled ticks: their text extents dominate the render time of big grids
        step_c = 1 if cols <= 16 else max(2, cols // 8)
        step_r = 1 if rows <= 16 else max(2, rows // 8)
        ax.set_xticks(range(0, cols, step_c))
        ax.set_yticks(range(0, rows, step_r))
    ax.xaxis.tick_top()


def layout_grid(layout: Any, title: str | None = None, cmap: str = "Greys", colour_mod: int = 8):
    """Draw a layout as CuTe's print_layout does: cell (r, c) holds layout(r, c).

    Colours cycle every ``colour_mod`` indices (print_latex's 8 greys), so repeats of a
    pattern are visible at a glance.
    """
    vals = layout_values_2d(layout)
    rows, cols = vals.shape
    fig = _figure(1, rows, cols)
    ax = fig.add_subplot()
    shades = np.array([0, 40, 20, 60, 10, 50, 30, 70], dtype=float) / 100
    grey = 1 - shades[vals % colour_mod % 8] if cmap == "Greys" else None
    if grey is not None:
        ax.imshow(np.repeat(grey[..., None], 3, axis=2), interpolation="nearest", aspect="equal")
        _label_text_on_grey(ax, vals, grey)
    else:
        ax.imshow(vals % colour_mod, cmap=cmap, interpolation="nearest", aspect="equal")
        _label_cells(ax, vals.astype(str).astype(object))
    _grid_axes(ax, rows, cols)
    ax.set_title(title or str(layout), fontsize=10)
    return fig


def _label_text_on_grey(ax, vals: np.ndarray, grey: np.ndarray) -> None:
    rows, cols = vals.shape
    if rows * cols > LABEL_MAX_CELLS:
        return
    size = max(4.0, min(9.0, 200.0 / max(rows, cols)))
    for (r, c), v in np.ndenumerate(vals):
        ax.text(c, r, str(v), ha="center", va="center", fontsize=size,
                color="white" if grey[r, c] < 0.5 else "black")


# --------------------------------------------------------------------------- divides and local_tile

#: How a divide is named in a picture's title, by ``how``.
DIVIDES = {"zipped": "zipped_divide", "logical": "logical_divide"}


def _tile_colours(n: int) -> np.ndarray:
    """``n`` light, distinct colours (RGB rows) for tiles; they repeat after 20."""
    from matplotlib import colormaps

    base = np.array(colormaps["tab20"].colors)[[0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19]]
    return 0.45 + 0.55 * base[np.arange(n) % len(base)]


def tile_numbers(shape: Any, tiler: Any, how: str = "zipped") -> tuple[np.ndarray, np.ndarray]:
    """(tile_of, grid): which tile each element of a ``shape`` matrix falls in when divided by ``tiler``, and for
    every cell of the divided layout's picture (``how``: "zipped" or "logical"), the tile its element came from.

    A tile is numbered by its position in the zipped form's second mode (column-major over the tile grid), the
    order in which ``zipped_divide`` lists the tiles. Found by dividing the matrix's coordinates themselves
    (CuTe's identity layout), so any tiler CuTe accepts, a shape or layouts per mode, is drawn as CuTe divides it.
    """
    if how not in DIVIDES:
        raise DrawError(f"how is one of {', '.join(map(repr, DIVIDES))}, not {how!r}")
    coords = L.make_layout(shape)                      # (r, c) -> r + rows * c: a coordinate's linear index
    sizes = L.mode_sizes(coords)
    if len(sizes) != 2:
        raise DrawError(f"a divide is drawn for a matrix (a rank-2 layout); this one has rank {len(sizes)} ({shape}).")
    rows, cols = sizes
    try:
        zipped = layout_values_2d(L.zipped_divide(coords, tiler))
        divided = zipped if how == "zipped" else layout_values_2d(L.logical_divide(coords, tiler))
    except (L.LayoutError, AssertionError, TypeError, IndexError, ValueError) as exc:
        raise DrawError(f"the tiler {tiler} does not divide a {rows}x{cols} matrix ({exc}).") from None
    tile_of = np.full(rows * cols, -1)
    tile_of[zipped] = np.arange(zipped.shape[1])[None, :].repeat(zipped.shape[0], axis=0)
    return tile_of.reshape(cols, rows).T, tile_of[divided]


def _tile_borders(ax, tiles: np.ndarray) -> None:
    """Thick lines between neighbouring cells of different tiles."""
    rows, cols = tiles.shape
    for r, c in zip(*np.nonzero(tiles[:, 1:] != tiles[:, :-1])):
        ax.plot([c + 0.5, c + 0.5], [r - 0.5, r + 0.5], color="black", linewidth=2.2)
    for r, c in zip(*np.nonzero(tiles[1:, :] != tiles[:-1, :])):
        ax.plot([c - 0.5, c + 0.5], [r + 0.5, r + 0.5], color="black", linewidth=2.2)


def _paint_tiles(ax, values: np.ndarray, tiles: np.ndarray, colours: np.ndarray) -> None:
    """Cells coloured by tile, labelled with ``values``, tiles outlined."""
    ax.imshow(colours[tiles], interpolation="nearest", aspect="equal")
    _label_cells(ax, values.astype(str).astype(object))
    rows, cols = values.shape
    _grid_axes(ax, rows, cols)
    _tile_borders(ax, tiles)


def _mode_ticks(ax, layout: Any, most: int = 16) -> None:
    """Tick labels that spell each row's and column's coordinate in the layout's (nested) modes, column-major as
    CuTe splits an index; plain numbers where a mode is flat or has more than ``most`` positions."""
    for mode, set_ticks in ((layout[0], ax.set_yticks), (layout[1], ax.set_xticks)):
        n = L.size(mode)
        if isinstance(mode.shape, tuple) and n <= most:
            set_ticks(range(n), [L.cute_str(L.idx2crd(i, mode.shape)) for i in range(n)], fontsize=6)


def divide(layout: Any, tiler: Any, how: str = "zipped"):
    """A layout divided into tiles, before and after, as CuTe's print_layout draws both.

    Left: ``layout`` with each element in the colour of its tile. Right: ``zipped_divide(layout, tiler)``
    (``how="zipped"``: mode 0 runs inside a tile, mode 1 over the tiles, so each column is one tile) or
    ``logical_divide(layout, tiler)`` (``how="logical"``: each mode split into (inside a tile, which tile)),
    every index in the colour of the tile it came from. Nothing moves: the right holds the left's indices in
    another order.
    """
    tile_of, grid_tiles = tile_numbers(layout.shape, tiler, how)
    before = layout_values_2d(layout)
    result = (L.zipped_divide if how == "zipped" else L.logical_divide)(layout, tiler)
    after = layout_values_2d(result)
    colours = _tile_colours(int(tile_of.max()) + 1)
    width = before.shape[1] + after.shape[1]
    scale = min(0.45, 12.0 / max(width, 1), 7.0 / max(before.shape[0], after.shape[0]))
    fig = _new_figure(figsize=(max(6.0, width * scale + 2.6), max(2.8, max(before.shape[0], after.shape[0]) * scale
                                                                   + 1.8)), layout="constrained")
    axes = fig.subplots(1, 2, width_ratios=[before.shape[1], after.shape[1]])
    _paint_tiles(axes[0], before, tile_of, colours)
    axes[0].set_title(f"{layout}\neach tile of {L.cute_str(tiler)} in its colour", fontsize=9)
    _paint_tiles(axes[1], after, grid_tiles, colours)
    axes[1].set_title(f"{DIVIDES[how]}: {result}", fontsize=9)
    _mode_ticks(axes[1], result)
    if how == "zipped":
        axes[1].set_ylabel("mode 0: where in the tile", fontsize=8)
        axes[1].set_xlabel("mode 1: which tile", fontsize=8)
    else:
        axes[1].set_ylabel("mode 0: (in the tile, which tile)", fontsize=8)
        axes[1].set_xlabel("mode 1: (in the tile, which tile)", fontsize=8)
    axes[1].xaxis.set_label_position("top")
    fig.suptitle(f"{DIVIDES[how]}(L, {L.cute_str(tiler)}): the same indices, visited in another order", fontsize=10)
    return fig


def local_tile(shape: Sequence[int], tiler: Sequence[int], coord: Any,
               tile_names: tuple[str, str] = ("tile row", "tile column")):
    """The tiles ``local_tile(mX, tiler, coord)`` cuts an (M, N) matrix into, each labelled with its tile
    coordinate, and the elements it returns for ``coord`` highlighted (``None`` in ``coord`` keeps that tile mode,
    as CuTe's ``_``: every tile along it is highlighted). ``tile_names`` name the two tile coordinates on the axes,
    e.g. ``("blockIdx.x", "blockIdx.y")`` for a kernel's convention."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != 2:
        raise DrawError(f"local_tile draws a 2-D matrix (M, N); got the shape {shape}")
    tile_of, _ = tile_numbers(shape, tuple(tiler))
    rest = L.zipped_divide(L.make_layout(shape), tuple(tiler))[1].shape
    counts = rest if isinstance(rest, tuple) else (rest, 1)
    coord = tuple(coord)
    if len(coord) != 2 or any(c is not None and not 0 <= int(c) < n for c, n in zip(coord, L.product_each(counts))):
        raise DrawError(f"the tile coordinate {coord} is outside the {counts[0]}x{counts[1]} tiles of {tuple(tiler)} "
                        f"in a {shape[0]}x{shape[1]} matrix: each is 0 up to the tile count minus one, or None.")
    coords = L.make_identity_tensor(shape)
    try:
        mine = L.local_tile(coords, tuple(tiler), coord).values().reshape(-1, 2)
    except L.LayoutError as exc:
        raise DrawError(str(exc)) from None
    rows, cols = shape
    picked = np.zeros(shape, dtype=bool)
    picked[mine[:, 0], mine[:, 1]] = True
    colours = _tile_colours(int(tile_of.max()) + 1)
    rgb = 0.55 + 0.45 * colours[tile_of]
    rgb[picked] = HIGHLIGHT
    scale = min(0.45, 10.0 / cols, 7.0 / rows)
    fig = _new_figure(figsize=(max(4.5, cols * scale + 1.8), max(3.0, rows * scale + 1.8)), layout="constrained")
    ax = fig.add_subplot()
    ax.imshow(rgb, interpolation="nearest", aspect="equal")
    _grid_axes(ax, rows, cols)
    _tile_borders(ax, tile_of)
    for t in range(int(tile_of.max()) + 1):
        rr, cc = np.nonzero(tile_of == t)
        m, n = L.idx2crd(t, rest) if isinstance(rest, tuple) else (t, 0)
        inside = picked[rr[0], cc[0]]
        ax.text(cc.mean(), rr.mean(), f"({m},{n})", ha="center", va="center", fontsize=9,
                color="white" if inside else "black", fontweight="bold" if inside else "normal")
    ax.set_ylabel(f"row   (the tiles' first coordinate: {tile_names[0]})", fontsize=8)
    ax.set_xlabel(f"column   (second coordinate: {tile_names[1]})", fontsize=8)
    ax.xaxis.set_label_position("top")
    spans = f"rows {mine[:, 0].min()}..{mine[:, 0].max()}, columns {mine[:, 1].min()}..{mine[:, 1].max()}"
    ax.set_title(f"local_tile(mX, {L.cute_str(tuple(tiler))}, {L.cute_str(tuple(coord)).replace('None', '_')}): "
                 f"{len(mine)} elements, {spans}", fontsize=9)
    return fig


# --------------------------------------------------------------------------- TV layouts

def tv_table(tv: Any, tile_shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(thread_of, value_of): who holds each element of an (M, N) tile, -1 where nobody.

    Where several (thread, value) pairs map to one element (broadcast), the lowest thread
    wins, as in CuTe's print_latex. The tables the pictures paint:
    :func:`gemmlab.layout.tv_to_tile_table`.
    """
    return L.tv_to_tile_table(tv, tile_shape)


def owned_coords(tv: Any, tile_shape: Sequence[int], thread: int) -> list[tuple[int, int]]:
    """Every (row, col) of the tile that ``thread`` holds, in value order."""
    values = L.tv_to_array(tv)
    nthr = values.shape[0]
    if not 0 <= thread < nthr:
        raise DrawError(f"thread {thread} does not exist: this layout has threads 0..{nthr - 1}")
    m = int(tile_shape[0])
    return [(int(i % m), int(i // m)) for i in values[thread]]


def _paint_tv(ax, thread_of: np.ndarray, value_of: np.ndarray, highlight: int | None,
              labels: bool = True) -> None:
    rgb = TV_PALETTE[np.maximum(thread_of, 0) % 8].copy()
    rgb[thread_of < 0] = 1.0
    if highlight is not None:
        mine = thread_of == highlight
        rgb[~mine] = 0.75 + 0.25 * rgb[~mine]
        rgb[mine] = HIGHLIGHT
    ax.imshow(rgb, interpolation="nearest", aspect="equal")
    rows, cols = thread_of.shape
    if labels and rows * cols <= LABEL_MAX_CELLS:
        size = max(3.5, min(8.0, 160.0 / max(rows, cols)))
        for (r, c), t in np.ndenumerate(thread_of):
            if t >= 0:
                ax.text(c, r, f"T{t}\nV{value_of[r, c]}", ha="center", va="center", fontsize=size,
                        color="white" if highlight is not None and t == highlight else "black",
                        linespacing=0.9)
    _grid_axes(ax, rows, cols)


def tv_layout(tv: Any, tile_shape: Sequence[int], highlight_thread: int | None = None,
              title: str | None = None, labels: bool = True):
    """Each element of an (M, N) tile coloured by the thread that holds it, labelled T#V#."""
    thread_of, value_of = tv_table(tv, tile_shape)
    fig = _figure(1, *thread_of.shape)
    ax = fig.add_subplot()
    _paint_tv(ax, thread_of, value_of, highlight_thread, labels)
    ax.set_title(title or f"TV layout {tv} on a {tile_shape[0]}x{tile_shape[1]} tile", fontsize=9)
    return fig


def _mma_tile(obj: Any) -> tuple[int, int, int]:
    for name in ("tile_mnk", "shape_mnk"):
        t = getattr(obj, name, None)
        if t is not None:
            return tuple(int(x) for x in t)  # type: ignore[return-value]
    raise DrawError("expected a TiledMMA or MMA atom from gemmlab.layout (with .tile_mnk or .shape_mnk)")


def mma_tables(tiled_mma: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Owner tables drawn for an MMA: A as MxK, B as KxN (CuTe's print_latex), C as MxN."""
    m, n, k = _mma_tile(tiled_mma)
    a = tv_table(tiled_mma.tv_a, (m, k))
    b_nk = tv_table(tiled_mma.tv_b, (n, k))
    c = tv_table(tiled_mma.tv_c, (m, n))
    return {"A": a, "B": (b_nk[0].T, b_nk[1].T), "C": c}


def tiled_mma(tiled_mma: Any, which: str = "ABC", highlight_thread: int | None = None,
              labels: bool = True):
    """A (MxK), B (KxN) and C (MxN) of a TiledMMA (or MMA atom), coloured by thread."""
    which = which.upper()
    if not which or set(which) - set("ABC"):
        raise DrawError(f"which must be a combination of 'A', 'B', 'C', not {which!r}")
    tables = mma_tables(tiled_mma)
    m, n, k = _mma_tile(tiled_mma)
    dims = {"A": (m, k), "B": (k, n), "C": (m, n)}
    scale = min(0.4, 14.0 / max(sum(dims[w][1] for w in which), 1), 8.0 / max(max(dims[w][0] for w in which), 1))
    fig = _new_figure(figsize=(max(4.0, sum(dims[w][1] for w in which) * scale + 1.5 * len(which)),
                          max(2.5, max(dims[w][0] for w in which) * scale + 1.3)), layout="constrained")
    axes = fig.subplots(1, len(which), width_ratios=[dims[w][1] for w in which], squeeze=False)[0]
    names = {"A": f"A ({m}x{k}, M x K)", "B": f"B ({k}x{n}, K x N)", "C": f"C ({m}x{n}, M x N)"}
    for ax, w in zip(axes, which):
        _paint_tv(ax, *tables[w], highlight_thread, labels)
        ax.set_title(names[w], fontsize=9)
    label = getattr(tiled_mma, "name", None) or type(tiled_mma).__name__
    extra = f", thread {highlight_thread} highlighted" if highlight_thread is not None else ""
    fig.suptitle(f"{label}: {getattr(tiled_mma, 'num_threads', '?')} threads{extra}", fontsize=10)
    return fig


def tiled_copy(tiled_copy: Any, highlight_thread: int | None = None, labels: bool = True):
    """Source and destination TV layouts of a TiledCopy over its tile, side by side."""
    tiler = tuple(int(x) for x in tiled_copy.tiler)
    if len(tiler) != 2:
        raise DrawError(f"tiled_copy draws 2-D tiles; this copy's tile is {tiler}")
    src = tiled_copy.get_layoutS_TV() if hasattr(tiled_copy, "get_layoutS_TV") else getattr(tiled_copy, "tv_layout", None)
    dst = tiled_copy.get_layoutD_TV() if hasattr(tiled_copy, "get_layoutD_TV") else src
    if src is None:
        raise DrawError("the tiled copy has no .tv_layout; build it with gemmlab.layout.make_tiled_copy")
    panels = [("source", src)] + ([("destination", dst)] if dst != src else [])
    scale = min(0.4, 12.0 / (tiler[1] * len(panels)), 8.0 / tiler[0])
    fig = _new_figure(figsize=(max(4.0, tiler[1] * scale * len(panels) + 1.5), max(2.5, tiler[0] * scale + 1.3)),
                 layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (name, tv) in zip(axes, panels):
        _paint_tv(ax, *tv_table(tv, tiler), highlight_thread, labels)
        ax.set_title(f"{name}: {tv}", fontsize=8)
    fig.suptitle(f"TiledCopy over a {tiler[0]}x{tiler[1]} tile", fontsize=10)
    return fig


# --------------------------------------------------------------------------- swizzles and banks

def bank_grid(layout: Any, elem_bytes: int) -> np.ndarray:
    """The shared-memory bank of every element of a 2-D smem layout (offsets in elements)."""
    return (layout_values_2d(layout) * elem_bytes // 4) % NUM_BANKS


def swizzle(swizzle: Any, layout: Any, elem_bytes: int = 2):
    """Bank of each element before and after the swizzle's XOR (same colour = same bank).

    ``swizzle`` is a Swizzle(B, M, S) acting on element offsets, as CuTe composes it.
    """
    inner = layout.layoutA if hasattr(layout, "layoutA") else layout
    swizzled = L.make_composed_layout(swizzle, 0, inner)
    before, after = bank_grid(inner, elem_bytes), bank_grid(swizzled, elem_bytes)
    rows, cols = before.shape
    from matplotlib import colormaps
    scale = min(0.4, 7.0 / cols, 8.0 / rows)
    fig = _new_figure(figsize=(max(6.0, 2 * cols * scale + 1.8), max(2.5, rows * scale + 1.4)), layout="constrained")
    axes = fig.subplots(1, 2)
    cmap = colormaps["hsv"].resampled(NUM_BANKS)
    for ax, grid, name in ((axes[0], before, f"before: {inner}"), (axes[1], after, f"after: {swizzle} o {inner}")):
        ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=NUM_BANKS - 0.5, interpolation="nearest", aspect="equal")
        if rows * cols <= LABEL_MAX_CELLS:
            size = max(3.5, min(8.0, 160.0 / max(rows, cols)))
            for (r, c), b in np.ndenumerate(grid):
                ax.text(c, r, str(b), ha="center", va="center", fontsize=size)
        _grid_axes(ax, rows, cols)
        ax.set_title(name, fontsize=8)
    fig.suptitle(f"shared-memory bank of each {elem_bytes}-byte element", fontsize=10)
    return fig


def banks(access: Access, max_lanes_shown: int = 4):
    """One row per wavefront, one column per bank: the lanes served; conflicted banks in red."""
    detail = access.wavefront_detail
    rows = max(len(detail), 1)
    state = np.zeros((rows, NUM_BANKS))  # 0 idle, 1 served, 2 served in a conflicted bank
    texts = np.full((rows, NUM_BANKS), "", dtype=object)
    for w in detail:
        for b in range(NUM_BANKS):
            lanes = w.lanes[b]
            if lanes:
                state[w.index, b] = 2 if b in w.conflicted_banks else 1
                shown = ",".join(str(l) for l in lanes[:max_lanes_shown])
                texts[w.index, b] = shown + ("+" if len(lanes) > max_lanes_shown else "")
    from matplotlib.colors import ListedColormap
    fig = _new_figure(figsize=(14, max(1.6, 0.32 * rows + 1.3)), layout="constrained")
    ax = fig.add_subplot()
    ax.imshow(state, cmap=ListedColormap(["white", "#b5e3b5", "#f08080"]), vmin=0, vmax=2,
              interpolation="nearest", aspect="auto")
    if rows * NUM_BANKS <= LABEL_MAX_CELLS * 2:
        for (r, c), t in np.ndenumerate(texts):
            if t:
                ax.text(c, r, t, ha="center", va="center", fontsize=5.5)
    ax.set_xlim(-0.5, NUM_BANKS - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xticks(range(NUM_BANKS))
    ax.set_yticks(range(rows))
    ax.set_yticklabels([f"wf {w.index} (phase {w.phase})" for w in detail] or [""], fontsize=7)
    ax.set_xlabel("bank")
    ax.tick_params(labelsize=7)
    ax.set_title(f"{access.op}: {access.wavefronts} wavefronts (ideal {access.ideal_wavefronts}), "
                 f"{access.conflicts} bank conflicts - cells list the lanes served", fontsize=9)
    return fig


# --------------------------------------------------------------------------- CTA raster

@dataclass(frozen=True)
class RasterTraffic:
    """DRAM traffic for the A and B panels when CTAs run in a given order."""

    order: np.ndarray  # (tiles_m, tiles_n): visiting index of each CTA tile
    a_bytes: int
    b_bytes: int
    ideal_bytes: int  # each A and B panel read exactly once
    panel_loads: int

    @property
    def total_bytes(self) -> int:
        return self.a_bytes + self.b_bytes

    @property
    def ratio_to_ideal(self) -> float:
        return self.total_bytes / self.ideal_bytes if self.ideal_bytes else 0.0


def raster_order(tiles_m: int, tiles_n: int, group: int | None = None) -> np.ndarray:
    """Visiting index of each CTA tile: row-major, or grouped by ``group`` tile-rows.

    Grouping (Triton's "grouped ordering", CUTLASS's swizzled rasterisation) walks
    down a band of ``group`` tile-rows before moving right, so CTAs running together
    share A panels (rows) and B panels (columns).
    """
    if tiles_m <= 0 or tiles_n <= 0:
        raise DrawError("the CTA grid must have at least one tile in each direction")
    pid = np.arange(tiles_m * tiles_n)
    if not group or group <= 1:
        m, n = pid // tiles_n, pid % tiles_n
    else:
        per_group = group * tiles_n
        first_m = (pid // per_group) * group
        size = np.minimum(tiles_m - first_m, group)
        m = first_m + (pid % per_group) % size
        n = (pid % per_group) // size
    order = np.empty((tiles_m, tiles_n), dtype=np.int64)
    order[m, n] = pid
    return order


def raster_traffic(M: int, N: int, K: int, tile_m: int, tile_n: int, group: int | None = None,
                   l2_bytes: int | None = None, elem_bytes: int = 2) -> RasterTraffic:
    """Bytes of A and B read from DRAM when CTAs visit tiles in raster order.

    Model: CTA (m, n) needs A's row panel m (tile_m x K) and B's column panel n
    (tile_n x K). L2 keeps whole panels, least recently used first out, up to
    ``l2_bytes`` (None: unlimited, so every panel is read once). A panel not in L2 is
    read from DRAM. It ignores C, partial reuse inside a panel and CTAs running out of
    order: enough to show why grouped rasterisation helps, not a cycle count.
    """
    if min(M, N, K, tile_m, tile_n, elem_bytes) <= 0:
        raise DrawError("M, N, K, tile sizes and elem_bytes must all be positive")
    tm, tn = -(-M // tile_m), -(-N // tile_n)
    order = raster_order(tm, tn, group)
    a_panel = tile_m * K * elem_bytes
    b_panel = tile_n * K * elem_bytes
    visit = np.argsort(order, axis=None)
    cache: OrderedDict[tuple[str, int], int] = OrderedDict()
    used = 0
    a_bytes = b_bytes = loads = 0
    for flat in visit:
        mi, ni = divmod(int(flat), tn)
        for key, size in ((("A", mi), a_panel), (("B", ni), b_panel)):
            if key in cache:
                cache.move_to_end(key)
                continue
            loads += 1
            if key[0] == "A":
                a_bytes += size
            else:
                b_bytes += size
            cache[key] = size
            used += size
            while l2_bytes is not None and used > l2_bytes and len(cache) > 1:
                _, old = cache.popitem(last=False)
                used -= old
    ideal = tm * a_panel + tn * b_panel
    return RasterTraffic(order, a_bytes, b_bytes, ideal, loads)


def cta_raster(M: int, N: int, tile_m: int, tile_n: int, group: int | None = None,
               l2_bytes: int | None = None, elem_bytes: int = 2, K: int | None = None):
    """The CTA grid in visiting order: row-major next to grouped (if ``group``), with the
    A/B DRAM traffic each order costs for an L2 of ``l2_bytes`` (default K = max(M, N))."""
    K = K or max(M, N)
    orders = [("row-major", None)] + ([(f"grouped by {group}", group)] if group and group > 1 else [])
    tm, tn = -(-M // tile_m), -(-N // tile_n)
    scale = min(0.45, 6.0 / tn, 7.0 / tm)
    fig = _new_figure(figsize=(max(5.0, len(orders) * (tn * scale + 1.2)), max(3.0, tm * scale + 1.6)),
                 layout="constrained")
    axes = fig.subplots(1, len(orders), squeeze=False)[0]
    for ax, (name, g) in zip(axes, orders):
        t = raster_traffic(M, N, K, tile_m, tile_n, g, l2_bytes, elem_bytes)
        ax.imshow(t.order, cmap="viridis", interpolation="nearest", aspect="equal")
        if tm * tn <= 400:
            for (r, c), v in np.ndenumerate(t.order):
                ax.text(c, r, str(v), ha="center", va="center", fontsize=7,
                        color="white" if v < t.order.size / 2 else "black")
        _grid_axes(ax, tm, tn)
        ax.set_xlabel("tile column (N)")
        ax.set_ylabel("tile row (M)")
        ax.set_title(f"{name}\nA+B from DRAM: {t.total_bytes / 2**20:.1f} MiB "
                     f"({t.ratio_to_ideal:.2f}x ideal)", fontsize=9)
    l2 = "unlimited L2" if l2_bytes is None else f"L2 {l2_bytes / 2**20:.0f} MiB"
    fig.suptitle(f"CTA visiting order, {M}x{N}x{K}, tile {tile_m}x{tile_n}, {l2}", fontsize=10)
    return fig
