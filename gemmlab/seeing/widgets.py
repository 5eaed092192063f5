"""Interactive explorers for the course: TV layouts of a TiledMMA, swizzles, CTA rasters.

Each explorer is a class: its ipywidgets are attributes, its state is computed by plain
methods (``update()``), and the picture is drawn into an ``Output`` widget. Tests set
``.value`` on the widgets and read the state, no browser needed. Problems a student can
cause (an invalid swizzle, a permutation that does not fit) are shown as a message in
the explorer instead of a traceback.
"""
from __future__ import annotations

from typing import Any

import ipywidgets as W

from gemmlab.seeing import banks, draw
from gemmlab import layout as L
from gemmlab.errors import GemmlabError

DEFAULT_ATOM = "SM80_16x8x16_F32F16F16F32_TN"


def _show(output: W.Output, *figures: Any) -> None:
    """Replace the Output's content by the figures (each drawn once, as PNG)."""
    from IPython.display import display

    output.clear_output(wait=True)
    with output:
        for fig in figures:
            display(fig)


def _error_html(exc: Exception) -> str:
    import html

    return f"<span style='color:#b00'>{html.escape(str(exc))}</span>"


class _Explorer:
    """Shared plumbing: observe every control, recompute, redraw, report errors."""

    controls: list[W.Widget]

    def __init__(self, draw_figures: bool = True) -> None:
        self.draw_figures = draw_figures
        self.output = W.Output()
        self.message = W.HTML()
        self.figure: Any = None
        self.error: str | None = None

    def _wire(self) -> None:
        for c in self.controls:
            c.observe(self._on_change, names="value")
        self.box = W.VBox([W.HBox(self.controls[:4]), W.HBox(self.controls[4:]),
                           self.message, self.output])
        self.update()

    def _on_change(self, _change: dict) -> None:
        self.update()

    def update(self) -> None:
        """Recompute the state from the widgets; draw it; show errors as a message."""
        try:
            self.compute()
            self.error = None
            self.message.value = self.summary()
            if self.draw_figures:
                figs = self.figures()
                self.figure = figs[0]
                _show(self.output, *figs)
        except GemmlabError as exc:
            self.error = str(exc)
            self.message.value = _error_html(exc)

    def compute(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def summary(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def figures(self) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.box)


# --------------------------------------------------------------------------- TV explorer

def _parse_ints(text: str, what: str) -> tuple[int, ...] | None:
    text = text.strip().strip("()")
    if not text or text.lower() == "none":
        return None
    try:
        return tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise GemmlabError(f"{what} must be integers separated by commas, e.g. 32,32,16 "
                           f"(or empty for none); got {text!r}") from None


class TVExplorer(_Explorer):
    """Pick an MMA atom, how atoms tile (atoms_layout) and a permutation; highlight a thread.

    State after ``update()``: ``tiled_mma`` and ``owned`` = {"A": [(m, k)...], "B": [(n, k)...],
    "C": [(m, n)...]} for the highlighted thread (empty when thread is -1).
    """

    def __init__(self, atom: str = DEFAULT_ATOM, draw_figures: bool = True) -> None:
        super().__init__(draw_figures)
        self.atom = W.Dropdown(options=L.mma_atom_names(), value=atom, description="atom")
        self.atoms_m = W.BoundedIntText(1, min=1, max=8, description="atoms M", layout=W.Layout(width="150px"))
        self.atoms_n = W.BoundedIntText(1, min=1, max=8, description="atoms N", layout=W.Layout(width="150px"))
        self.atoms_k = W.BoundedIntText(1, min=1, max=4, description="atoms K", layout=W.Layout(width="150px"))
        self.permutation = W.Text("", description="tile MNK", placeholder="e.g. 32,32,16")
        self.which = W.Dropdown(options=["ABC", "A", "B", "C"], value="ABC", description="show")
        self.thread = W.BoundedIntText(0, min=-1, max=4095, description="thread")
        self.controls = [self.atom, self.atoms_m, self.atoms_n, self.atoms_k,
                         self.permutation, self.which, self.thread]
        self.tiled_mma: Any = None
        self.owned: dict[str, list[tuple[int, int]]] = {}
        self._wire()

    def compute(self) -> None:
        perm = _parse_ints(self.permutation.value, "tile MNK")
        if perm is not None and len(perm) != 3:
            raise GemmlabError(f"tile MNK needs three sizes (M, N, K), got {perm}")
        self.tiled_mma = L.make_tiled_mma(
            self.atom.value, (self.atoms_m.value, self.atoms_n.value, self.atoms_k.value), perm)
        t = self.thread.value
        n = self.tiled_mma.num_threads
        if t >= n:
            raise GemmlabError(f"thread {t} does not exist: this TiledMMA has threads 0..{n - 1} "
                               f"(-1 highlights none)")
        M, N, K = self.tiled_mma.tile_mnk
        self.owned = {} if t < 0 else {
            "A": draw.owned_coords(self.tiled_mma.tv_a, (M, K), t),
            "B": draw.owned_coords(self.tiled_mma.tv_b, (N, K), t),
            "C": draw.owned_coords(self.tiled_mma.tv_c, (M, N), t),
        }

    def summary(self) -> str:
        M, N, K = self.tiled_mma.tile_mnk
        text = f"{self.atom.value}: tile {M}x{N}x{K}, {self.tiled_mma.num_threads} threads"
        if self.owned:
            text += (f"; thread {self.thread.value} holds {len(self.owned['A'])} A, "
                     f"{len(self.owned['B'])} B and {len(self.owned['C'])} C values")
        return text

    def figures(self) -> list[Any]:
        t = self.thread.value
        return [draw.tiled_mma(self.tiled_mma, self.which.value, None if t < 0 else t)]


def tv_explorer(atom: str = DEFAULT_ATOM) -> TVExplorer:
    """Explore which thread holds which A, B and C element of a TiledMMA."""
    return TVExplorer(atom)


# --------------------------------------------------------------------------- swizzle explorer

ACCESSES = {
    "ldmatrix.x4: 8 rows x 4 chunks of 16 bytes": "ldmatrix.x4",
    "ld128 down a column: chunk 0 of each row (lane l reads row l mod rows)": "ld128",
    "ld32 down a column: element 0 of each row (lane l reads row l mod rows)": "ld32",
    "ld128 along rows: 32 consecutive 16-byte chunks": "ld128_rows",
}


class SwizzleExplorer(_Explorer):
    """Swizzle<B,M,S> over a row-major smem tile: banks before/after, and conflicts of one access.

    State after ``update()``: ``smem_layout``, ``addresses`` (32 lane byte addresses),
    ``access`` (a :class:`gemmlab.seeing.banks.Access`) and ``conflicts``.
    """

    def __init__(self, draw_figures: bool = True) -> None:
        super().__init__(draw_figures)
        self.bits = W.IntSlider(3, min=0, max=4, description="B (bits)")
        self.base = W.IntSlider(3, min=0, max=5, description="M (base)")
        self.shift = W.IntSlider(3, min=1, max=7, description="S (shift)")
        self.elem_bytes = W.Dropdown(options=[1, 2, 4, 8], value=2, description="elem bytes")
        self.rows = W.Dropdown(options=[8, 16, 32], value=8, description="rows")
        self.cols = W.Dropdown(options=[16, 32, 64, 128], value=64, description="cols")
        self.access_kind = W.Dropdown(options=list(ACCESSES), value=list(ACCESSES)[0],
                                      description="access", layout=W.Layout(width="420px"))
        self.controls = [self.bits, self.base, self.shift, self.elem_bytes,
                         self.rows, self.cols, self.access_kind]
        self.swizzle: L.Swizzle | None = None
        self.smem_layout: L.ComposedLayout | None = None
        self.addresses: list[int] = []
        self.access: banks.Access | None = None
        self.conflicts = 0
        self._wire()

    def compute(self) -> None:
        B, M, S = self.bits.value, self.base.value, self.shift.value
        if S < B:
            raise GemmlabError(f"Swizzle<{B},{M},{S}> is not valid: the shift S must be at least "
                               f"the number of bits B (the XORed bit ranges would overlap)")
        rows, cols, eb = self.rows.value, self.cols.value, self.elem_bytes.value
        self.swizzle = L.Swizzle(B, M, S)
        self.smem_layout = L.composition(self.swizzle, L.Layout((rows, cols), (cols, 1)))
        offs = L.layout_to_array(self.smem_layout)  # [row, col]
        op = ACCESSES[self.access_kind.value]
        chunk = max(1, 16 // eb)
        if op == "ld128_rows":
            op = "ld128"
            idx = [(l * chunk) // cols for l in range(32)], [(l * chunk) % cols for l in range(32)]
            addrs = [int(offs[r % rows, c]) * eb for r, c in zip(*idx)]
        elif op == "ldmatrix.x4":
            if cols * eb < 64:
                raise GemmlabError("ldmatrix.x4 here reads 4 chunks of 16 bytes per row: "
                                   "make rows at least 64 bytes wide")
            addrs = [int(offs[l % 8 % rows, (l // 8) * chunk]) * eb for l in range(32)]
        elif op == "ld128":
            addrs = [int(offs[l % rows, 0]) * eb for l in range(32)]
        else:
            addrs = [int(offs[l % rows, 0]) * eb // 4 * 4 for l in range(32)]
        width = banks.OPS[op].bytes_per_address
        per_vector = width // eb
        if width >= 16 and per_vector > 1 and cols % per_vector == 0:   # the 16-byte accesses
            vectors = offs.reshape(rows, cols // per_vector, per_vector)
            if not (vectors[:, :, 1:] - vectors[:, :, :-1] == 1).all():
                raise GemmlabError(
                    f"M={M} is too small: with {eb}-byte elements this swizzle breaks each {width}-byte "
                    f"vector of a row apart (its {per_vector} elements are no longer next to each other), "
                    f"so a {width}-byte access would read the wrong elements, not only conflict; "
                    f"raise M to at least {per_vector.bit_length() - 1}")
        if any(a % width for a in addrs):
            raise GemmlabError(f"with {eb}-byte elements this swizzle moves a {width}-byte access "
                               f"off its alignment (M={M} is too small to keep {width} bytes "
                               f"together); raise M")
        self.addresses = addrs
        self.access = banks.analyze(addrs, op)
        self.conflicts = self.access.conflicts

    def summary(self) -> str:
        a = self.access
        return (f"{self.smem_layout}: {a.op} takes {a.wavefronts} wavefronts "
                f"(ideal {a.ideal_wavefronts}) = <b>{a.conflicts} bank conflicts</b>")

    def figures(self) -> list[Any]:
        return [draw.swizzle(self.swizzle, self.smem_layout.inner, self.elem_bytes.value), draw.banks(self.access)]


def swizzle_explorer() -> SwizzleExplorer:
    """Explore how Swizzle<B,M,S> spreads a tile over the 32 banks, and what an access costs."""
    return SwizzleExplorer()


# --------------------------------------------------------------------------- CTA grid explorer

class CtaGridExplorer(_Explorer):
    """CTA visiting order (row-major vs grouped) and the A/B DRAM traffic it costs.

    State after ``update()``: ``row_major`` and ``grouped`` (:class:`gemmlab.seeing.draw.RasterTraffic`).
    """

    def __init__(self, draw_figures: bool = True) -> None:
        super().__init__(draw_figures)
        self.M = W.BoundedIntText(4096, min=1, max=65536, description="M")
        self.N = W.BoundedIntText(4096, min=1, max=65536, description="N")
        self.K = W.BoundedIntText(4096, min=1, max=65536, description="K")
        self.tile_m = W.Dropdown(options=[64, 128, 256], value=128, description="tile M")
        self.tile_n = W.Dropdown(options=[64, 128, 256], value=128, description="tile N")
        self.group = W.IntSlider(8, min=1, max=32, description="group")
        self.l2_mib = W.BoundedIntText(50, min=1, max=1024, description="L2 MiB")
        self.elem_bytes = W.Dropdown(options=[1, 2, 4], value=2, description="elem bytes")
        self.controls = [self.M, self.N, self.K, self.tile_m, self.tile_n, self.group,
                         self.l2_mib, self.elem_bytes]
        self.row_major: draw.RasterTraffic | None = None
        self.grouped: draw.RasterTraffic | None = None
        self._wire()

    def _args(self) -> dict[str, Any]:
        return dict(M=self.M.value, N=self.N.value, K=self.K.value, tile_m=self.tile_m.value,
                    tile_n=self.tile_n.value, l2_bytes=self.l2_mib.value << 20,
                    elem_bytes=self.elem_bytes.value)

    def compute(self) -> None:
        args = self._args()
        self.row_major = draw.raster_traffic(group=None, **args)
        self.grouped = draw.raster_traffic(group=self.group.value, **args)

    def summary(self) -> str:
        r, g = self.row_major, self.grouped
        return (f"A+B from DRAM: row-major {r.total_bytes / 2**20:.0f} MiB "
                f"({r.ratio_to_ideal:.2f}x ideal), grouped by {self.group.value}: "
                f"{g.total_bytes / 2**20:.0f} MiB ({g.ratio_to_ideal:.2f}x ideal)")

    def figures(self) -> list[Any]:
        a = self._args()
        return [draw.cta_raster(a["M"], a["N"], a["tile_m"], a["tile_n"], self.group.value,
                                a["l2_bytes"], a["elem_bytes"], a["K"])]


def cta_grid_explorer() -> CtaGridExplorer:
    """Explore CTA rasterisation and its effect on DRAM traffic through L2."""
    return CtaGridExplorer()
