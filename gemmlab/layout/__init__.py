"""CuTe layouts in Python: the algebra, tensors, tiling, atoms, TiledMMA and TiledCopy.

Built on pycute (NVIDIA's Python CuTe); names and semantics follow CuTe C++ and the CuTe
DSL so what you learn here reads straight into ``cute::`` and ``cute.`` code. Coordinates
with ``None`` stand for CuTe's ``_`` (keep this mode).
"""
from __future__ import annotations

from types import ModuleType as _ModuleType

from .algebra import (
    Layout,
    blocked_product,
    coalesce,
    complement,
    composition,
    cosize,
    crd2idx,
    downcast,
    filter,
    flat_divide,
    flatten,
    full_slice,
    idx2crd,
    is_layout,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    product,
    product_each,
    rank,
    raked_product,
    recast_layout,
    right_inverse,
    shape,
    size,
    slice_and_offset,
    tiled_divide,
    tiled_product,
    upcast,
    with_shape,
    zipped_divide,
    zipped_product,
)
from .atoms import CopyAtom, MmaAtom, copy_atom, copy_atom_names, gmma_c_layout, mma_atom, mma_atom_names
from .errors import LayoutError
from .evaluate import layout_to_array, mode_sizes, tv_to_array, tv_to_tile_table
from .printing import cute_str
from .swizzle import ComposedLayout, Swizzle, make_composed_layout, make_swizzle
from .tensor import Tensor, make_identity_tensor, make_tensor
from .tiled_copy import (
    ThrCopy,
    TiledCopy,
    make_tiled_copy,
    make_tiled_copy_A,
    make_tiled_copy_B,
    make_tiled_copy_C,
    make_tiled_copy_tv,
)
from .tiled_mma import ThrMMA, TiledMMA, make_tiled_mma, permutation_problem
from .tiling import dice, get_flat_coord, get_hier_coord, inner_partition, local_partition, local_tile, outer_partition

__all__ = [name for name, value in globals().items()
           if not name.startswith("_") and name != "annotations" and not isinstance(value, _ModuleType)]
