"""Hardware and model-architecture catalogs, HF config.json parsing (pure).

`default_catalogs()` loads the built-in YAML under `catalog/data/` once and returns an
immutable `Catalogs`; `Catalogs.with_gpu_file(path)` merges the operator's extra GPUs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from inferfleet.api.yaml_input import load_one
from inferfleet.catalog.gpus import (
    CatalogInvalid,
    GpuSpec,
    gpu_from_inline,
    index_gpus,
    load_gpu_file,
    parse_gpus,
)
from inferfleet.catalog.hf_config import ConfigInvalid, checkpoint_format, parse_hf_config
from inferfleet.catalog.models import MlaDims, ModelArch, MoeDims


def _model_keys(name: str) -> tuple[str, ...]:
    lowered = name.lower()
    return (lowered, lowered.rsplit("/", 1)[-1])


@dataclass(frozen=True)
class Catalogs:
    """GPU and model catalogs, looked up by name or alias (case-insensitive)."""

    gpus: Mapping[str, GpuSpec]
    models: Mapping[str, ModelArch]
    # lower-cased model name → ((weight format, pre-quantized checkpoint), ...)
    pre_quantized: Mapping[str, tuple[tuple[str, str], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def gpu(self, name: str) -> GpuSpec | None:
        return self.gpus.get(name.lower())

    def model(self, name: str) -> ModelArch | None:
        for key in _model_keys(name):
            found = self.models.get(key)
            if found is not None:
                return found
        return None

    def pre_quantized_of(self, name: str) -> tuple[tuple[str, str], ...]:
        """Pre-quantized checkpoints of `name` in the catalog: (format, checkpoint) pairs."""
        for key in _model_keys(name):
            found = self.pre_quantized.get(key)
            if found:
                return found
        return ()

    def gpu_names(self) -> list[str]:
        return sorted({gpu.name for gpu in self.gpus.values()})

    def model_names(self) -> list[str]:
        return sorted({model.name for model in self.models.values()})

    def with_gpus(self, extra: Iterable[GpuSpec]) -> Catalogs:
        """A new Catalogs with `extra` GPUs added (same names replace built-ins)."""
        merged = dict(self.gpus)
        merged.update(index_gpus(extra))
        return Catalogs(gpus=MappingProxyType(merged), models=self.models, pre_quantized=self.pre_quantized)

    def with_gpu_file(self, path: str | Path) -> Catalogs:
        return self.with_gpus(load_gpu_file(path))


def _expand_layer_pattern(config: dict[str, Any]) -> dict[str, Any]:
    # Catalog shorthand: `layer_types_pattern` repeats over all layers into the real
    # HF key `layer_types` (gpt-oss alternates sliding and full attention).
    pattern = config.pop("layer_types_pattern", None)
    if pattern:
        layers = int(config["num_hidden_layers"])
        config["layer_types"] = [pattern[i % len(pattern)] for i in range(layers)]
    return config


def parse_models(document: Any, source: str) -> list[tuple[ModelArch, tuple[str, ...]]]:
    if not isinstance(document, Mapping) or not isinstance(document.get("models"), list):
        raise CatalogInvalid(f"{source}: expected a mapping with a `models` list")
    found: list[tuple[ModelArch, tuple[str, ...]]] = []
    for index, entry in enumerate(document["models"]):
        try:
            config = _expand_layer_pattern(dict(entry["config"]))
            arch = parse_hf_config(config, str(entry["name"]), float(entry["parametersBillion"]))
        except (KeyError, TypeError, ValueError) as error:
            raise CatalogInvalid(f"{source}: models[{index}]: {error}") from None
        found.append((arch, tuple(entry.get("aliases", ()))))
    return found


def parse_pre_quantized(document: Any, source: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """`preQuantized: [{model, format, checkpoint}]` → lower-cased model → pairs."""
    entries = document.get("preQuantized", []) if isinstance(document, Mapping) else []
    if not isinstance(entries, list):
        raise CatalogInvalid(f"{source}: preQuantized must be a list")
    found: dict[str, list[tuple[str, str]]] = {}
    for index, entry in enumerate(entries):
        try:
            model, fmt, checkpoint = str(entry["model"]), str(entry["format"]), str(entry["checkpoint"])
        except (KeyError, TypeError) as error:
            raise CatalogInvalid(f"{source}: preQuantized[{index}]: {error}") from None
        for key in _model_keys(model):
            found.setdefault(key, []).append((fmt, checkpoint))
    return {key: tuple(pairs) for key, pairs in found.items()}


def _read_data(file_name: str) -> Any:
    text = resources.files("inferfleet.catalog").joinpath("data", file_name).read_text(encoding="utf-8")
    return load_one(text)


@functools.cache
def default_catalogs() -> Catalogs:
    """The built-in catalogs (loaded once; immutable)."""
    gpus = index_gpus(parse_gpus(_read_data("gpus.yaml"), "catalog/data/gpus.yaml"))
    models: dict[str, ModelArch] = {}
    document = _read_data("models.yaml")
    for arch, aliases in parse_models(document, "catalog/data/models.yaml"):
        for name in (*aliases, arch.name):  # the canonical name wins a short-name clash
            for key in _model_keys(name):
                models[key] = arch
    return Catalogs(
        gpus=MappingProxyType(gpus),
        models=MappingProxyType(models),
        pre_quantized=MappingProxyType(parse_pre_quantized(document, "catalog/data/models.yaml")),
    )


__all__ = [
    "CatalogInvalid",
    "Catalogs",
    "ConfigInvalid",
    "GpuSpec",
    "MlaDims",
    "ModelArch",
    "MoeDims",
    "checkpoint_format",
    "default_catalogs",
    "gpu_from_inline",
    "load_gpu_file",
    "parse_hf_config",
]
