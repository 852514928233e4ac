"""The ``with`` protocol for objects that own resources and have a ``close()``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class Closeable:
    """Mixin: ``with obj:`` gives ``obj`` and calls ``obj.close()`` on leaving the block, whether
    it ends normally or by an exception (which is not suppressed). The class defines ``close()``."""

    __slots__ = ()

    if TYPE_CHECKING:

        def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
