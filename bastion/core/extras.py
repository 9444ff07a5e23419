"""The optional dependencies of ``bastion-core``, imported on first use.

Each extra (``pip install 'bastion-core[NAME]'``) brings one library that only some
embedders need; its module is imported when the feature is first used, never when ``core``
is imported. A missing one raises :class:`MissingExtra`, whose message names the extra to
install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtra", "import_extra"]


class MissingExtra(ModuleNotFoundError):
    """A feature's library is not installed; ``extra`` is what to install for it."""

    def __init__(self, feature: str, module: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs {module}: pip install 'bastion-core[{extra}]'", name=module
        )
        self.extra = extra


def import_extra(module: str, *, extra: str, feature: str) -> ModuleType:
    """``module``, or :class:`MissingExtra` naming ``extra`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.split(".")[0] != exc.name.split(".")[0]:
            raise  # the library is there but broken: its own error says more
        raise MissingExtra(feature, module, extra) from None
