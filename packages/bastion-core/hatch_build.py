"""Puts the repository's bastion/core into the bastion-core wheel, and the embedding guide
into its metadata.

Only a standard wheel gets the files: an editable install instead puts the repository root on
the path (``dev-mode-dirs``), so that the checkout's own bastion/core is what runs, never a
copy made at install time. The package's long description (its page on a package index,
``importlib.metadata.metadata("bastion-core")["Description"]``) is README.md followed by
docs/embedding.md, so the guide ships with every wheel and sdist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

HERE = Path(__file__).resolve().parent
CORE = HERE.parents[1] / "bastion" / "core"
GUIDE = HERE.parents[1] / "docs" / "embedding.md"


class CoreSources(BuildHookInterface):  # type: ignore[misc]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            build_data["force_include"][str(CORE)] = "bastion/core"


class GuideInReadme(MetadataHookInterface):  # type: ignore[misc]
    def update(self, metadata: dict[str, Any]) -> None:
        text = f"{(HERE / 'README.md').read_text()}\n{GUIDE.read_text()}"
        metadata["readme"] = {"content-type": "text/markdown", "text": text}
