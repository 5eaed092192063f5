"""What a ``profile`` or ``trace`` request may say beyond a check's fields: bounded, checked, as data.

Why a module of its own: the two actions (an Nsight Compute readout, an in-kernel timeline) need a
few options the other actions do not (how many records a warp may write, how many CTAs to trace,
names of the kernel's own states), and the protocol only has to know that they exist.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import JudgeError

#: The actions that profile a kernel (each holds its GPU alone, like a timing).
PROFILE_ACTIONS = ("profile", "trace")
#: Records a warp may write, at most, and by default.
MAX_CAPACITY = 4096
DEFAULT_CAPACITY = 512
#: Records the GPU buffer may hold in all (CTAs × warps × capacity): 64 MiB at 16 bytes each.
MAX_BUFFER_RECORDS = 1 << 22
#: Most names of the kernel's own states.
MAX_NAMES = 32
CUSTOM_FIRST, CUSTOM_LAST = 32, 127


@dataclass(frozen=True)
class ProfileOptions:
    """A trace's records per warp, how many CTAs from the first to trace (None: as many as the buffer holds),
    and names of the kernel's own states (ids 32 to 127). A profile takes none of them."""

    capacity: int = DEFAULT_CAPACITY
    ctas: int | None = None
    names: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.capacity) is not int or not 1 <= self.capacity <= MAX_CAPACITY:
            raise JudgeError(f"a trace's capacity is 1 to {MAX_CAPACITY} records per warp, not {self.capacity!r:.30}.")
        if self.ctas is not None and (type(self.ctas) is not int or not 1 <= self.ctas <= MAX_BUFFER_RECORDS):
            raise JudgeError(f"a trace's ctas is a number of CTAs from 1 (or null: as many as fit), not "
                             f"{self.ctas!r:.30}.")
        if not isinstance(self.names, dict) or len(self.names) > MAX_NAMES:
            raise JudgeError(f"a trace's names are at most {MAX_NAMES} state ids with a name each.")
        for key, value in self.names.items():
            if type(key) is not int or not CUSTOM_FIRST <= key <= CUSTOM_LAST or not isinstance(value, str) \
                    or not 0 < len(value) <= 40:
                raise JudgeError(f"a state of the kernel's own has an id from {CUSTOM_FIRST} to {CUSTOM_LAST} and a "
                                 f"name of 1 to 40 characters, not {key!r:.20}: {value!r:.50}.")

    def to_dict(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "ctas": self.ctas, "names": {str(k): v for k, v in self.names.items()}}

    @classmethod
    def from_dict(cls, data: Any) -> "ProfileOptions":
        if not isinstance(data, dict) or set(data) - {"capacity", "ctas", "names"}:
            raise JudgeError("profile options are an object with capacity, ctas and names.")
        names = data.get("names") or {}
        if not isinstance(names, dict):
            raise JudgeError("a trace's names are an object of state id -> name.")
        try:
            keys = {int(k): v for k, v in names.items()}
        except (TypeError, ValueError):
            raise JudgeError("a trace's names are keyed by state ids (numbers from 32 to 127).") from None
        return cls(data.get("capacity", DEFAULT_CAPACITY), data.get("ctas"), keys)


def checked_options(value: Any, action: str) -> ProfileOptions | None:
    """The options of a request: a profile or trace gets defaults, any other action takes none."""
    if action not in PROFILE_ACTIONS:
        if value is not None:
            raise JudgeError("profile options apply to the profile and trace actions only.")
        return None
    if value is None:
        return ProfileOptions()
    if isinstance(value, ProfileOptions):
        return value
    return ProfileOptions.from_dict(value)


__all__ = ["CUSTOM_FIRST", "CUSTOM_LAST", "DEFAULT_CAPACITY", "MAX_BUFFER_RECORDS", "MAX_CAPACITY", "MAX_NAMES",
           "PROFILE_ACTIONS", "ProfileOptions", "checked_options"]
