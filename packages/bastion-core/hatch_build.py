"""Puts the repository's bastion/core into the bastion-core wheel.

Only a standard wheel gets the files: an editable install instead puts the repository root on
the path (``dev-mode-dirs``), so that the checkout's own bastion/core is what runs, never a
copy made at install time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

CORE = Path(__file__).resolve().parents[2] / "bastion" / "core"


class CoreSources(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            build_data["force_include"][str(CORE)] = "bastion/core"
