"""What a check or a timing found, as data that crosses between processes: the results and the limits they share.

Why one module: ``check_gemm``, ``check_copy``, ``bench_copy`` and ``bench_gemm`` build these results on a local
GPU, the class's GPU pool (:mod:`gemmlab.remote`) rebuilds the very same types from the judge's report, and the
judge's request format (:mod:`gemmlab.judge.protocol`) validates against the same limits. Keeping them apart from
the code that runs kernels lets every side import them without importing the others, and without torch (numpy and
matplotlib are imported only when a heatmap or a "who" map is read).
"""
from __future__ import annotations

import dataclasses
import html
import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from gemmlab.errors import GemmlabError
from gemmlab.seeing.figures import figure_img_tag
from gemmlab.timing.spread import LEVEL, Comparison, NoSpreadError, against_one, between, interval_text

# --------------------------------------------------------------------------- check_gemm

Shape = tuple[int, int, int]

#: Named shape suites (M, N, K). "aligned" keeps every dimension a multiple of 16 so
#: kernels with 16-byte vector accesses are legal; the others deliberately are not.
SUITES: dict[str, list[Shape]] = {
    "aligned": [(128, 128, 64), (256, 256, 256), (16, 16, 16), (512, 384, 128), (384, 640, 320),
                (16, 4096, 64), (4096, 16, 64), (64, 64, 4096), (1024, 1024, 1024)],
    "default": [(128, 128, 128), (256, 512, 256), (16, 16, 16), (129, 257, 64), (257, 129, 136),
                (1000, 1001, 999), (3, 5, 7), (16, 4096, 64), (4096, 16, 64), (64, 64, 4096),
                (1024, 1024, 1024)],
    "odd": [(1, 1, 1), (3, 5, 7), (17, 33, 9), (129, 257, 65), (255, 1, 300), (1, 255, 513),
            (1000, 1001, 999)],
    "large": [(2048, 2048, 2048), (4096, 4096, 4096), (4095, 4097, 4096), (8192, 1024, 2048)],
}

#: The most elements a check pads each row with (``check_gemm(pad=...)``): enough for any leading dimension a
#: student's kernel could get wrong, small enough that padded operands stay near the unpadded size.
MAX_PAD = 256
#: The most elements a check shifts each operand's start by (``check_gemm(offset=...)``): any misalignment of a
#: 16-byte vector is a shift of fewer than 8 half-precision elements.
MAX_OFFSET = 64

@dataclass
class Row:
    """The verdict for one shape."""

    shape: Shape
    passed: bool
    rel_error: float
    worst: tuple[int, int, float, float] | None  # (i, j, got, expected) of the worst element
    n_bad: int
    guard_ok: bool
    inputs_ok: bool
    message: str
    n_unwritten: int = 0
    n_nonfinite: int = 0
    tile_fraction: Any = None  # numpy (tiles_m, tiles_n): share of wrong elements per output tile

    @property
    def bad_tiles(self) -> list[tuple[int, int]]:
        """(tile row, tile column) of every output tile with at least one wrong element."""
        return [] if self.tile_fraction is None else nonzero_tiles(self.tile_fraction)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields: tuples as lists, NaN/inf errors as None/"inf", the heatmap as nested lists."""
        return {
            "shape": list(self.shape), "passed": self.passed, "rel_error": _float_out(self.rel_error),
            "worst": None if self.worst is None else [self.worst[0], self.worst[1], _float_out(self.worst[2]),
                                                      _float_out(self.worst[3])],
            "n_bad": self.n_bad, "guard_ok": self.guard_ok, "inputs_ok": self.inputs_ok, "message": self.message,
            "n_unwritten": self.n_unwritten, "n_nonfinite": self.n_nonfinite,
            "tile_fraction": None if self.tile_fraction is None else [[float(v) for v in row]
                                                                      for row in self.tile_fraction.tolist()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Row":
        """The row :meth:`to_dict` wrote."""
        import numpy as np

        worst = data["worst"]
        frac = data["tile_fraction"]
        return cls(tuple(int(v) for v in data["shape"]), bool(data["passed"]),  # type: ignore[arg-type]
                   _float_in(data["rel_error"]),
                   None if worst is None else (int(worst[0]), int(worst[1]), _float_in(worst[2]), _float_in(worst[3])),
                   int(data["n_bad"]), bool(data["guard_ok"]), bool(data["inputs_ok"]), str(data["message"]),
                   int(data["n_unwritten"]), int(data["n_nonfinite"]),
                   None if frac is None else np.array(frac, dtype=np.float32).reshape(len(frac), -1))


def _float_out(x: float) -> float | str | None:
    """A float as JSON allows: NaN becomes None, infinities "inf"/"-inf"."""
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


def _float_in(x: float | str | None) -> float:
    return math.nan if x is None else float(x)


def nonzero_tiles(fraction: Any) -> list[tuple[int, int]]:
    """(tile row, tile column) of every nonzero entry of a per-tile array, sorted."""
    rows, cols = fraction.nonzero()
    return sorted(zip(rows.tolist(), cols.tolist()))


class RowVerdicts:
    """``passed``, truth and ``failures`` of a result made of ``rows`` that each say whether they ``passed``
    (check_gemm's and check_copy's results): no rows is no pass."""

    rows: list[Any]

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failures(self) -> list[Any]:
        return [r for r in self.rows if not r.passed]


@dataclass
class CheckResult(RowVerdicts):
    """All rows of one ``check_gemm`` call; displays as a table (plus a heatmap on failure)."""

    rows: list[Row]
    convention: str
    dtype: str
    out_dtype: str
    tile: tuple[int, int]
    seed: int
    device: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: every row (with its per-tile heatmap data) and the check's settings."""
        return {"rows": [r.to_dict() for r in self.rows], "convention": self.convention, "dtype": self.dtype,
                "out_dtype": self.out_dtype, "tile": list(self.tile), "seed": self.seed, "device": self.device,
                "passed": self.passed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CheckResult":
        """The result :meth:`to_dict` wrote (``passed`` is recomputed from the rows)."""
        return cls([Row.from_dict(r) for r in data["rows"]], str(data["convention"]), str(data["dtype"]),
                   str(data["out_dtype"]), (int(data["tile"][0]), int(data["tile"][1])), int(data["seed"]),
                   str(data.get("device", "")))

    def _title(self) -> str:
        verdict = "PASSED" if self.passed else f"FAILED ({len(self.failures)} of {len(self.rows)} shapes)"
        where = f" on {self.device}" if self.device and not self.device.startswith(("cuda", "cpu")) else ""
        return (f"check_gemm {self.convention} {self.dtype}→{self.out_dtype}: {verdict}{where}  "
                f"[seed={self.seed}]")

    def __str__(self) -> str:
        header = f"{'M×N×K':>18}  {'ok':4} {'rel.err':>9} {'bad':>9}  message"
        lines = [self._title(), header]
        for r in self.rows:
            shape = "×".join(map(str, r.shape))
            err = "-" if math.isnan(r.rel_error) else f"{r.rel_error:.2e}"
            lines.append(f"{shape:>18}  {'ok' if r.passed else 'FAIL':4} {err:>9} {r.n_bad:>9,}  {r.message}")
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """AssertionError with the table when any shape failed (for nbgrader test cells)."""
        if not self.passed:
            raise AssertionError("\n" + str(self))

    def heatmap(self, row: int | Row | None = None) -> Any:
        """Figure: share of wrong elements in each output tile, for ``row`` or the first failure."""
        target = self._pick(row)
        if target is None or target.tile_fraction is None:
            raise GemmlabError("No heatmap: no failing shape has wrong output elements to map"
                               " (guard-zone or input writes are shown in the table).")
        return _heatmap_figure(target, self.tile)

    def _pick(self, row: int | Row | None) -> Row | None:
        if isinstance(row, Row):
            return row
        if isinstance(row, int):
            return self.rows[row]
        for r in self.rows:
            if not r.passed and r.tile_fraction is not None and r.tile_fraction.any():
                return r
        return None

    def _repr_html_(self) -> str:
        cells = []
        for r in self.rows:
            colour = "#e6f4ea" if r.passed else "#fce8e6"
            shape = "×".join(map(str, r.shape))
            err = "-" if math.isnan(r.rel_error) else f"{r.rel_error:.2e}"
            worst = "" if r.worst is None else f"({r.worst[0]}, {r.worst[1]}): {r.worst[2]:.4g} vs {r.worst[3]:.4g}"
            cells.append(
                f"<tr style='background:{colour}'><td>{shape}</td><td>{'✔' if r.passed else '✘'}</td>"
                f"<td>{err}</td><td>{r.n_bad:,}</td><td>{html.escape(worst)}</td>"
                f"<td style='text-align:left'>{html.escape(r.message)}</td></tr>"
            )
        table = (
            f"<p><b>{html.escape(self._title())}</b></p><table><tr><th>M×N×K</th><th>ok</th>"
            "<th>rel. error</th><th>wrong elements</th><th>worst (i, j): got vs expected</th>"
            f"<th>message</th></tr>{''.join(cells)}</table>"
        )
        target = self._pick(None)
        if target is not None:
            table += figure_img_tag(_heatmap_figure(target, self.tile), "wrong elements per output tile")
        return table


def _heatmap_figure(row: Row, tile: tuple[int, int]) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    frac = row.tile_fraction
    tm, tn = frac.shape
    fig = Figure(figsize=(min(max(4.8, 2.5 + 0.45 * tn), 11), min(max(3.6, 1.8 + 0.45 * tm), 8)),
                 layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(frac, cmap="Reds", vmin=0, vmax=1, interpolation="nearest", aspect="auto")
    M, N, K = row.shape
    ax.set_title(f"wrong elements per {tile[0]}×{tile[1]} output tile, M×N×K = {M}×{N}×{K}", fontsize=9)
    ax.set_xlabel(f"tile column (n // {tile[1]})")
    ax.set_ylabel(f"tile row (m // {tile[0]})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if tm * tn <= 256:
        for i in range(tm):
            for j in range(tn):
                if frac[i, j] > 0:
                    ax.text(j, i, f"{frac[i, j]:.0%}", ha="center", va="center", fontsize=7,
                            color="white" if frac[i, j] > 0.5 else "black")
    fig.colorbar(image, ax=ax, label="share wrong")
    return fig


# --------------------------------------------------------------------------- check_copy and bench_copy

Shape2 = tuple[int, int]
#: Element types a copy check moves.
COPY_DTYPES = ("float16", "bfloat16", "float32")
#: Largest side of a copied matrix, and most elements of one (the judge's limits too).
MAX_SIDE = 16384
MAX_COPY_ELEMENTS = 8192 * 8192
#: Most elements of the "who copied what" maps one pool request carries, all shapes together (they cross the wire
#: as numbers: at most about 11 MB of JSON, under the judge's report limit).
MAX_WHO_ELEMENTS = 1 << 20


@dataclass
class CopyRow:
    """The verdict for one shape: how many elements are wrong or never written, where, and who wrote what."""

    shape: Shape2
    passed: bool
    n_bad: int
    n_unwritten: int
    guard_ok: bool
    input_ok: bool
    message: str
    bad_tiles: tuple[tuple[int, int], ...] = ()   # (tile row, tile column) of dst's first wrong 32×32 tiles
    who: Any = None                                 # numpy int32 (M, N): the thread index the kernel wrote, or None

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "passed": self.passed, "n_bad": self.n_bad, "n_unwritten": self.n_unwritten,
                "guard_ok": self.guard_ok, "input_ok": self.input_ok, "message": self.message,
                "bad_tiles": [list(t) for t in self.bad_tiles],
                "who": None if self.who is None else self.who.tolist()}

    @classmethod
    def from_dict(cls, data: Any) -> "CopyRow":
        """The row :meth:`to_dict` wrote; anything else is a GemmlabError."""
        import numpy as np

        try:
            shape = copy_shape(data["shape"])
            who = data["who"]
            if who is not None:
                who = np.array(who, dtype=np.int64)
                if who.shape != shape or np.abs(who).max(initial=0) >= 2**31:
                    raise ValueError("who map")
                who = who.astype(np.int32)
            flags = [data[k] for k in ("passed", "guard_ok", "input_ok")]
            counts = [data[k] for k in ("n_bad", "n_unwritten")]
            if not all(type(f) is bool for f in flags) or not all(type(c) is int and c >= 0 for c in counts) \
                    or not isinstance(data["message"], str):
                raise TypeError("a flag, count or message of the wrong type")
            return cls(shape, flags[0], counts[0], counts[1], flags[1], flags[2], data["message"][:2000],
                       tuple((int(r), int(c)) for r, c in data["bad_tiles"][:64]), who)
        except (KeyError, TypeError, ValueError, GemmlabError) as exc:
            raise GemmlabError(f"not a copy check row ({type(exc).__name__}: {str(exc)[:80]}).") from None


@dataclass
class CopyResult(RowVerdicts):
    """All rows of one :func:`check_copy` call; prints as a table."""

    rows: list[CopyRow]
    dtype: str
    transpose: bool
    seed: int
    device: str = ""
    with_who: bool = False     #: whether the kernel was given a who map (check_copy's who=True)

    def who(self, shape: Sequence[int]) -> Any:
        """The "who copied what" map of ``shape`` (numpy int32, the thread index at every element of dst)."""
        for row in self.rows:
            if row.shape == tuple(shape):
                if row.who is None:
                    why = (f"the copy failed before its who map was read: {row.message}" if self.with_who
                           else "pass who=True to check_copy")
                    raise GemmlabError(f"the check of {tuple(shape)} carries no who map: {why}")
                return row.who
        raise GemmlabError(f"no row of this check has shape {tuple(shape)}; it checked {[r.shape for r in self.rows]}.")

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "dtype": self.dtype, "transpose": self.transpose,
                "seed": self.seed, "device": self.device, "passed": self.passed, "with_who": self.with_who}

    @classmethod
    def from_dict(cls, data: Any) -> "CopyResult":
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise GemmlabError("not a copy check result: an object with a list of rows.")
        seed, transpose, with_who = data.get("seed", 0), data.get("transpose", False), data.get("with_who", False)
        if type(seed) is not int or type(transpose) is not bool or type(with_who) is not bool:
            raise GemmlabError("not a copy check result: its seed is an integer, transpose and with_who true or false.")
        return cls([CopyRow.from_dict(r) for r in data["rows"]], str(data.get("dtype", "")), transpose, seed,
                   str(data.get("device", "")), with_who)

    def __str__(self) -> str:
        what = "transpose" if self.transpose else "copy"
        verdict = "PASSED" if self.passed else f"FAILED ({len(self.failures)} of {len(self.rows)} shapes)"
        where = f" on {self.device}" if self.device and not self.device.startswith(("cuda", "cpu")) else ""
        lines = [f"check_copy ({what}, {self.dtype}): {verdict}{where}  [seed={self.seed}]",
                 f"{'M×N':>12}  {'ok':4} {'wrong':>9} {'unwritten':>10}  message"]
        for r in self.rows:
            lines.append(f"{'×'.join(map(str, r.shape)):>12}  {'ok' if r.passed else 'FAIL':4} {r.n_bad:>9,} "
                         f"{r.n_unwritten:>10,}  {r.message}")
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        """AssertionError with the table when any shape failed (for test cells)."""
        if not self.passed:
            raise AssertionError(str(self))


def copy_shape(value: Any) -> Shape2:
    """``value`` as a copy's (M, N) within the copy limits, or a GemmlabError saying what is wrong."""
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(
            type(v) is int or (hasattr(v, "__index__") and not isinstance(v, bool)) for v in value):
        raise GemmlabError(f"a copy shape is (M, N), two whole numbers, not {value!r:.60}.")
    M, N = (int(v) for v in value)
    if not (1 <= M <= MAX_SIDE and 1 <= N <= MAX_SIDE) or M * N > MAX_COPY_ELEMENTS:
        raise GemmlabError(f"copy shape {M}×{N} is outside 1..{MAX_SIDE} per side and {MAX_COPY_ELEMENTS:,} elements.")
    return M, N


@dataclass(frozen=True)
class CopyTiming:
    """What :func:`bench_copy` measured: the median of the timed batches and the bandwidth it means.

    ``gbps`` counts the bytes read and written (2 × M × N × element size) per second; ``low_gbps`` and
    ``high_gbps`` bound the median with ``coverage`` (gemmlab.timing.spread.median_interval over the batches).
    """

    shape: Shape2
    dtype: str
    transpose: bool
    ms: float
    gbps: float
    low_gbps: float
    high_gbps: float
    coverage: float
    batches: int
    device: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype, "transpose": self.transpose, "ms": self.ms,
                "gbps": self.gbps, "low_gbps": self.low_gbps, "high_gbps": self.high_gbps, "coverage": self.coverage,
                "batches": self.batches, "device": self.device}

    @classmethod
    def from_dict(cls, data: Any) -> "CopyTiming":
        try:
            values = [float(data[k]) for k in ("ms", "gbps", "low_gbps", "high_gbps", "coverage")]
            if not all(math.isfinite(v) and v >= 0 for v in values):
                raise ValueError("not finite")
            return cls(copy_shape(data["shape"]), str(data["dtype"]), bool(data["transpose"]), *values,
                       int(data["batches"]), str(data.get("device", "")))
        except (KeyError, TypeError, ValueError, GemmlabError) as exc:
            raise GemmlabError(f"not a copy timing ({type(exc).__name__}: {str(exc)[:80]}).") from None

    def __str__(self) -> str:
        where = f" on {self.device}" if self.device else ""
        return (f"{'transpose' if self.transpose else 'copy'} {self.shape[0]}×{self.shape[1]} {self.dtype}: "
                f"{self.gbps:,.0f} GB/s (median of {self.batches} batches, {self.coverage:.0%} interval "
                f"{self.low_gbps:,.0f}–{self.high_gbps:,.0f}){where}")


# --------------------------------------------------------------------------- bench_gemm

#: Rounds of kernel-then-cuBLAS (or cuBLAS-then-kernel) timings in one bench_gemm call.
ROUNDS = 12
#: The timing methods, each with the fill it uses unless told otherwise, and what it is, in a line.
METHODS = {
    "flushed": ("normal", "kernel and cuBLAS interleaved in rounds, L2 flushed before every call"),
    "nvidia": ("uniform", "NVIDIA's fixed-power method: clock settled over 3 s or more of back-to-back calls, "
                          "1,000 or more calls rotating through operand copies of twice the L2 size"),
}
#: Input fills: normal random numbers (mean 0, variance 1) or uniform in [-1, 1] (NVIDIA's choice).
FILLS = ("normal", "uniform")


@dataclass(frozen=True)
class BenchResult:
    """Median times (ms) and TFLOPS for a GEMM function and for cuBLAS on the same problem, and the
    median per-round ratio with its interval (``ratio_low``–``ratio_high``, which holds the true
    median ratio of this run's conditions with probability ``coverage``; None when fewer than two
    rounds were timed)."""

    shape: tuple[int, int, int]
    convention: str
    dtype: str
    out_dtype: str
    ms: float
    tflops: float
    cublas_ms: float
    cublas_tflops: float
    ratio: float  # your TFLOPS / cuBLAS TFLOPS
    device: str
    reps: int
    label: str = "your kernel"
    ratio_low: float | None = None
    ratio_high: float | None = None
    coverage: float | None = None
    rounds: int = 0
    round_ratios: tuple[float, ...] = ()
    method: str = "flushed"                 #: "flushed" or "nvidia" (METHODS)
    fill: str = "normal"                    #: the inputs' values: "normal" or "uniform" (FILLS)
    sm_clock_mhz: float | None = None       #: median SM clock while the kernel was timed (None: not sampled)
    power_w: float | None = None            #: median board power then
    cublas_sm_clock_mhz: float | None = None
    cublas_power_w: float | None = None
    clock_source: str = ""                  #: "nvml", "nvidia-smi", or "" (nothing sampled)
    light_ms: float | None = None           #: the problem's speed of light on this GPU (gemmlab.timing.speed_of_light)
    peak_tflops: float | None = None        #: the tensor cores' dense peak at the GPU's highest clock
    max_sm_clock_mhz: float | None = None   #: that clock
    warmup_s: float | None = None           #: "nvidia": how long the kernel ran back to back before timing
    settled: bool | None = None             #: "nvidia": whether its clock had settled by then (None: unknown)
    launch_bound: bool = False              #: "nvidia": the GPU caught up with Python, so gaps between calls were timed
    graphed: bool | None = None             #: "nvidia": the kernel's calls were replayed from a CUDA graph

    @property
    def intensity(self) -> float:
        """Ideal arithmetic intensity (flop/byte) of this problem, for the roofline."""
        from gemmlab.timing.roofline_math import intensity_ideal

        M, N, K = self.shape
        size = {"float16": 2, "bfloat16": 2, "float32": 4}
        return intensity_ideal(M, N, K, size.get(self.dtype, 2), size.get(self.out_dtype, 2),
                               read_output=self.convention == "nn")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields (the shape as a list), for results exchanged between processes."""
        data = asdict(self)
        data["shape"] = list(self.shape)
        data["round_ratios"] = list(self.round_ratios)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchResult":
        """The result :meth:`to_dict` wrote (records from before a field existed get its default)."""
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in dict(data).items() if k in known}
        fields["shape"] = tuple(int(v) for v in fields["shape"])
        fields["round_ratios"] = tuple(float(v) for v in fields.get("round_ratios", ()))
        return cls(**fields)

    @property
    def tensor_share(self) -> float | None:
        """The kernel's TFLOPS over the tensor cores' peak at the clock it ran at: how busy it kept them
        (None without a clock reading or a known peak)."""
        if not (self.sm_clock_mhz and self.peak_tflops and self.max_sm_clock_mhz):
            return None
        return self.tflops / (self.peak_tflops * self.sm_clock_mhz / self.max_sm_clock_mhz)

    def method_text(self) -> str:
        """'method flushed (what it is), normal fills'; for "nvidia" also how long it warmed up and whether
        the clock had settled."""
        text = f"method {self.method} ({METHODS.get(self.method, ('', 'unknown'))[1]}), {self.fill} fills"
        if self.method == "nvidia" and self.warmup_s is not None:
            settle = {True: "clock settled", False: "clock still drifting", None: "clock not sampled"}[self.settled]
            text += f"; warm-up {self.warmup_s:.1f} s, {settle}"
        if self.graphed is False:
            text += "; launched one by one (the calls could not be captured in a CUDA graph)"
        if self.launch_bound:
            text += "; Python launched slower than the kernel ran, so gaps between calls were timed"
        return text

    def clock_text(self) -> str:
        """'yours 1,755 MHz 698 W, cuBLAS 1,740 MHz 699 W (nvml)', or why there is no reading."""
        if self.sm_clock_mhz is None and self.cublas_sm_clock_mhz is None:
            return "clock and power not sampled" + (f" ({self.clock_source})" if self.clock_source else "")

        def side(mhz: float | None, watts: float | None) -> str:
            return "not sampled" if mhz is None else f"{mhz:,.0f} MHz {watts:,.0f} W"

        return (f"yours {side(self.sm_clock_mhz, self.power_w)}, cuBLAS "
                f"{side(self.cublas_sm_clock_mhz, self.cublas_power_w)} ({self.clock_source})")

    def light_text(self) -> str:
        """The speed of light and how busy the tensor cores were, or '' when the GPU's peak is unknown."""
        if self.light_ms is None:
            return ""
        text = f"speed of light {self.light_ms:.4f} ms"
        share = self.tensor_share
        if share is not None:
            text += f"; tensor cores {share:.0%} busy at {self.sm_clock_mhz:,.0f} MHz"
        return text

    @property
    def interval(self) -> tuple[float, float] | None:
        """``(ratio_low, ratio_high)``, or None for a result without rounds."""
        if self.ratio_low is None or self.ratio_high is None:
            return None
        return self.ratio_low, self.ratio_high

    def spread_text(self) -> str:
        """'96% interval 0.965–0.979, 12 rounds', or why there is none."""
        if self.interval is None or self.coverage is None:
            return f"median of {self.reps} runs; no interval: fewer than 2 rounds"
        return f"{interval_text(self.ratio_low, self.ratio_high, self.coverage)}, {self.rounds} rounds"

    def compare(self, other: "BenchResult | None" = None, level: float = LEVEL) -> Comparison:
        """Does this kernel differ from cuBLAS (``other=None``), or from ``other``, beyond the noise?

        Against cuBLAS: the interval of the per-round ratios, which holds 1.0 when they are within
        noise. Against another result of the same problem on the same GPU: the ratio of the two
        kernels' speeds (each measured against cuBLAS in its own run) with a rank-sum interval.
        Print the returned :class:`gemmlab.timing.spread.Comparison`; ``.within_noise`` is the verdict."""
        if other is None:
            if len(self.round_ratios) < 2:
                raise NoSpreadError(f"{self.label} was timed in {self.rounds} round(s): a comparison needs "
                                    "at least 2 (bench_gemm(..., rounds=12)).")
            return against_one(self.label, "cuBLAS", self.round_ratios, level,
                               f"median of {len(self.round_ratios)} rounds, cuBLAS interleaved")
        if (self.shape, self.convention, self.dtype, self.out_dtype) != (
                other.shape, other.convention, other.dtype, other.out_dtype):
            raise GemmlabError(f"{self.label} and {other.label} timed different problems "
                               f"({self._problem()} and {other._problem()}): compare timings of the same one.")
        if (self.method, self.fill) != (other.method, other.fill):
            raise GemmlabError(f"{self.label} was timed with method {self.method!r} on {self.fill} inputs and "
                               f"{other.label} with {other.method!r} on {other.fill} inputs: the method and the data "
                               "move ratios by several percent; compare timings made the same way.")
        if self.device != other.device:
            raise GemmlabError(f"{self.label} was timed on {self.device} and {other.label} on {other.device}: "
                               "ratios to cuBLAS from different GPUs differ by more than this noise; "
                               "time both on one GPU.")
        short = [r.label for r in (self, other) if len(r.round_ratios) < 2]
        if short:
            raise NoSpreadError(f"{', '.join(short)} carries fewer than 2 rounds: time it again with "
                                "bench_gemm(..., rounds=12) to compare beyond the noise.")
        subject, reference = self.label, other.label
        if subject == reference:
            subject, reference = f"{subject} (this run)", f"{reference} (the other run)"
        return between(subject, reference, self.round_ratios, other.round_ratios, level)

    def _problem(self) -> str:
        M, N, K = self.shape
        return f"{M}×{N}×{K} {self.convention} {self.dtype}→{self.out_dtype}"

    def _noise_note(self) -> str:
        """A sentence when cuBLAS (1.000×) lies inside this run's interval, else ''."""
        if self.interval is None or not self.ratio_low <= 1.0 <= self.ratio_high:
            return ""
        return "cuBLAS (1.000×) lies inside the interval: within noise of cuBLAS."

    def __str__(self) -> str:
        M, N, K = self.shape
        text = (f"{self.label}: {M}×{N}×{K} {self.convention} {self.dtype}→{self.out_dtype} on {self.device}\n"
                f"  yours : {self.ms:9.4f} ms  {self.tflops:8.1f} TFLOPS\n"
                f"  cuBLAS: {self.cublas_ms:9.4f} ms  {self.cublas_tflops:8.1f} TFLOPS\n"
                f"  ratio : {self.ratio:.3f}× cuBLAS  ({self.spread_text()})\n"
                f"  how   : {self.method_text()}\n"
                f"  clock : {self.clock_text()}")
        if self.light_text():
            text += f"\n  limit : {self.light_text()}"
        note = self._noise_note()
        return text + (f"\n          {note}" if note else "")

    def _repr_html_(self) -> str:
        M, N, K = self.shape
        colour = "#e6f4ea" if self.ratio >= 0.8 else "#fff4e5" if self.ratio >= 0.3 else "#fce8e6"
        note = self._noise_note()
        return (
            f"<table><caption>{html.escape(self.label)}: {M}×{N}×{K} {self.convention} "
            f"{self.dtype}→{self.out_dtype} on {html.escape(self.device)}</caption>"
            "<tr><th></th><th>ms</th><th>TFLOPS</th></tr>"
            f"<tr><td>yours</td><td>{self.ms:.4f}</td><td>{self.tflops:.1f}</td></tr>"
            f"<tr><td>cuBLAS</td><td>{self.cublas_ms:.4f}</td><td>{self.cublas_tflops:.1f}</td></tr>"
            f"<tr style='background:{colour}'><td colspan=3><b>{self.ratio:.3f}× cuBLAS</b> "
            f"({html.escape(self.spread_text())})"
            + (f"<br>{html.escape(note)}" if note else "") + "</td></tr>"
            f"<tr><td colspan=3><small>{html.escape(self.method_text())}<br>clock: {html.escape(self.clock_text())}"
            + (f"<br>{html.escape(self.light_text())}" if self.light_text() else "") + "</small></td></tr></table>"
        )


__all__ = ["COPY_DTYPES", "FILLS", "MAX_COPY_ELEMENTS", "MAX_OFFSET", "MAX_PAD", "MAX_SIDE", "MAX_WHO_ELEMENTS",
           "METHODS", "ROUNDS", "SUITES", "BenchResult", "CheckResult", "CopyResult", "CopyRow", "CopyTiming", "Row",
           "RowVerdicts", "Shape", "Shape2", "copy_shape", "nonzero_tiles"]
