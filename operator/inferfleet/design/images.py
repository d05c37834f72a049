"""The vLLM build each tier runs (pure).

vLLM ships one build per accelerator vendor: the CUDA image cannot use an AMD GPU and
the ROCm image cannot use an NVIDIA one. The image of a tier is, first match wins:

1. `tiers[].image` (this tier only);
2. `spec.serving.image` (every tier without its own; design.checks refuses it when those
   tiers span several vendors, since one image cannot serve both);
3. the operator's default for the tier GPU's vendor: `vllm_image` (NVIDIA, Helm
   `images.vllm.nvidia`) or `vllm_image_amd` (AMD, Helm `images.vllm.amd`).

A vendor without a default (a CPU-only inline tier, a catalog_file GPU of another vendor)
needs 1 or 2; design.checks says so before anything is rendered.
"""

from __future__ import annotations

from inferfleet.api import InferenceService, TierSpec
from inferfleet.catalog.placement import tier_gpu
from inferfleet.config import OperatorSettings

NVIDIA = "nvidia"
AMD = "amd"


class NoImage(ValueError):
    """No image for a tier: its vendor has no default and the spec names none."""


def vendor(tier: TierSpec, settings: OperatorSettings) -> str:
    """The tier GPU's vendor (catalog `vendor`, or an inline GPU's resource name)."""
    gpu = tier_gpu(tier, settings.catalogs())
    return gpu.vendor if gpu is not None else NVIDIA


def default_image(vendor_name: str, settings: OperatorSettings) -> str | None:
    return {NVIDIA: settings.vllm_image, AMD: settings.vllm_image_amd}.get(vendor_name)


def explicit_image(service: InferenceService, tier: TierSpec) -> str | None:
    """The image the spec itself names for a tier (tier first, then serving), if any."""
    serving = service.spec.serving
    return tier.image or (serving.image if serving is not None else None)


def vllm_image(service: InferenceService, tier: TierSpec, settings: OperatorSettings) -> str:
    image = explicit_image(service, tier) or default_image(vendor(tier, settings), settings)
    if image is None:
        raise NoImage(
            f"tier {tier.name}: no default vLLM image for {vendor(tier, settings)} GPUs; "
            f"set spec.tiers[].image or spec.serving.image"
        )
    return image


def tier_images(service: InferenceService, settings: OperatorSettings) -> dict[str, str]:
    """The image each tier will run, for the planner: its tag names the vLLM release whose
    memory accounting the plan models (an AMD tier runs the ROCm build's release, not the
    CUDA image's). Tiers without an image are left out; design.checks refuses them."""
    images: dict[str, str] = {}
    for tier in service.spec.tiers:
        try:
            images[tier.name] = vllm_image(service, tier, settings)
        except NoImage:
            continue
    return images
