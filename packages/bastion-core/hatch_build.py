"""Puts parts of the repository's tree into a wheel: the ``trees`` the project's
``[tool.hatch.build.targets.wheel.hooks.custom]`` table lists (``bastion/core`` for
bastion-core; bastion-conformance points its hook at this file too).

Only a standard wheel gets the files: an editable install instead puts the repository root on
the path (``dev-mode-dirs``), so that the checkout's own sources are what runs, never a
copy made at install time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

REPO = Path(__file__).resolve().parents[2]


class TreeSources(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            for tree in self.config["trees"]:
                build_data["force_include"][str(REPO / tree)] = tree
