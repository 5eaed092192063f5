"""A torch dispatch mode built from one function: how gemmlab watches the torch operators a call runs.

Why not a plain ``TorchDispatchMode`` subclass: torch wraps a subclass's own ``__torch_dispatch__`` so that
its compiler never traces it, and that wrapper imports the compiler (``torch._dynamo``, about 1 s of CPU)
on the first operator. A graded check watches every call it makes, so each grading kernel and each
student's first check paid that second for a compiler nothing here uses. The handler is set on the class
after it is made, which torch does not wrap; every operator still reaches it, compiled code's included
(tests/gemmlab/test_integrity.py checks both).
"""
from __future__ import annotations

from typing import Any, Callable

#: ``handler(func, args, kwargs)`` sees one aten operator before it runs and returns its result
#: (normally ``func(*args, **kwargs)``).
Handler = Callable[[Any, tuple, dict], Any]


def dispatch_watch(handler: Handler) -> Any:
    """A fresh torch dispatch mode (use it in a ``with``) that passes every operator to ``handler``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    def torch_dispatch(self: Any, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        return handler(func, args, kwargs or {})

    class Watch(TorchDispatchMode):
        pass

    Watch.__torch_dispatch__ = torch_dispatch   # after the class exists: see the module's docstring
    return Watch()
