"""Operator settings come from INFERFLEET_* variables and fail fast on bad values."""

from __future__ import annotations

import pytest

from inferfleet.config import OperatorSettings, SettingsInvalid


def test_defaults_without_environment() -> None:
    settings = OperatorSettings.from_env({})
    assert settings.namespaces == ()
    assert settings.sync_period_s == 15


def test_values_are_read_and_converted() -> None:
    settings = OperatorSettings.from_env(
        {"INFERFLEET_NAMESPACES": "ml, batch", "INFERFLEET_HEADROOM": "0.3", "INFERFLEET_SYNC_PERIOD_S": "30"}
    )
    assert settings.namespaces == ("ml", "batch")
    assert settings.headroom == pytest.approx(0.3)
    assert settings.sync_period_s == 30


def test_bad_value_names_the_variable() -> None:
    with pytest.raises(SettingsInvalid, match="INFERFLEET_SYNC_PERIOD_S"):
        OperatorSettings.from_env({"INFERFLEET_SYNC_PERIOD_S": "1"})


def test_cache_paths_stay_under_the_allowed_root_and_off_system_directories() -> None:
    settings = OperatorSettings.from_env(
        {"INFERFLEET_CACHE_ALLOWED_ROOT": "/data/nvme", "INFERFLEET_CACHE_NODE_PATH": "/data/nvme/weights"}
    )
    assert settings.cache_root == "/data/nvme"
    # Unset, the root is the operator's own default path (an upgrade keeps working).
    default_root = OperatorSettings.from_env({"INFERFLEET_CACHE_NODE_PATH": "/data/weights"}).cache_root
    assert default_root == "/data/weights"
    assert OperatorSettings().cache_root == "/mnt/nvme/inferfleet"
    with pytest.raises(SettingsInvalid, match="INFERFLEET_CACHE_NODE_PATH '/data/weights' must lie under"):
        OperatorSettings.from_env(
            {"INFERFLEET_CACHE_NODE_PATH": "/data/weights", "INFERFLEET_CACHE_ALLOWED_ROOT": "/mnt/nvme"}
        )
    for root in ("/", "/etc", "/var/lib/kubelet", "/proc", "/sys"):
        with pytest.raises(SettingsInvalid, match="INFERFLEET_CACHE_ALLOWED_ROOT"):
            OperatorSettings.from_env(
                {"INFERFLEET_CACHE_ALLOWED_ROOT": root, "INFERFLEET_CACHE_NODE_PATH": "/x"}
            )


def test_vendor_images_and_amd_groups() -> None:
    settings = OperatorSettings.from_env(
        {
            "INFERFLEET_VLLM_IMAGE_AMD": "registry.local/rocm/vllm:1",
            "INFERFLEET_AMD_SUPPLEMENTAL_GROUPS": "44, 992",
        }
    )
    assert settings.vllm_image_amd == "registry.local/rocm/vllm:1"
    assert settings.amd_supplemental_groups == (44, 992)
    with pytest.raises(SettingsInvalid, match="INFERFLEET_AMD_SUPPLEMENTAL_GROUPS"):
        OperatorSettings.from_env({"INFERFLEET_AMD_SUPPLEMENTAL_GROUPS": "video"})
