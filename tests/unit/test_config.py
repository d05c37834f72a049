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
