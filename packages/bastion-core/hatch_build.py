"""Puts parts of the repository's tree into a wheel: the ``trees`` the project's
``[tool.hatch.build.targets.wheel.hooks.custom]`` table lists (``bastion/core`` for
bastion-core; bastion-conformance points its hook at this file too); and, for
bastion-core, the embedding guide into its metadata.

Only a standard wheel gets the files: an editable install instead puts the repository root on
the path (``dev-mode-dirs``), so that the checkout's own sources are what runs, never a
copy made at install time. bastion-core's long description (its page on a package index,
``importlib.metadata.metadata("bastion-core")["Description"]``) is its README.md followed
by docs/embedding.md, so the guide ships with every wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GUIDE = REPO / "docs" / "embedding.md"


class TreeSources(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            for tree in self.config["trees"]:
                build_data["force_include"][str(REPO / tree)] = tree


class GuideInReadme(MetadataHookInterface):  # type: ignore[misc]
    def update(self, metadata: dict[str, Any]) -> None:
        text = f"{(HERE / 'README.md').read_text()}\n{GUIDE.read_text()}"
        metadata["readme"] = {"content-type": "text/markdown", "text": text}
