"""The ``llm`` categorisation method as executor work (``vhd categorize --method llm --executor ray``).

Each worker builds and checks its own backend once; the driver sends it one harmful annotation
at a time and saves the `vhd.store.categories.Categorization` that comes back, so the driver is
the only writer of the store. The model spec, the backend tables and the taxonomy are resolved
on the driver; API keys reach workers only as the environment variables the tables name.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from vhd.execution import Work, named_env

if TYPE_CHECKING:
    from vhd.backends.base import Backend
    from vhd.media.load import MediaSettings
    from vhd.store.categories import Categorization, HarmfulAnnotation
    from vhd.taxonomy.taxonomy import Taxonomy


class LlmCategorizeWork(Work["HarmfulAnnotation", "Categorization"]):
    """Ask a model backend about one harmful annotation (`vhd.categorize.llm.categorize_with_llm`).

    Args:
        spec: The backend's ``BACKEND:MODEL`` spec.
        tables: The config's ``[backends.*]`` tables.
        taxonomy: The categories.
        media: Show the model the sample itself, loaded with these settings (by path).
    """

    def __init__(
        self, spec: str, tables: Mapping[str, Any], taxonomy: Taxonomy, media: MediaSettings | None = None
    ) -> None:
        self.spec = spec
        self.tables = dict(tables)
        self.taxonomy = taxonomy
        self.media = media
        self.backend: Backend | None = None

    def env_vars(self) -> list[str]:
        """The variables the backend tables name (keys by name only)."""
        return named_env(self.tables)

    async def setup(self) -> None:
        """Build and check this worker's backend."""
        from vhd.backends.registry import create_backend

        self.backend = create_backend(self.spec, self.tables)
        await self.backend.check()

    async def run(self, item: HarmfulAnnotation) -> Categorization:
        """The categorisation of one annotation (status ok, unparsed or error)."""
        from vhd.categorize.llm import categorize_with_llm

        assert self.backend is not None, "setup() first"
        found: list[Categorization] = []
        await categorize_with_llm([item], self.backend, self.taxonomy, save=found.append, media=self.media)
        return found[0]

    async def aclose(self) -> None:
        """Close the backend."""
        if self.backend is not None:
            with suppress(Exception):
                await self.backend.aclose()
