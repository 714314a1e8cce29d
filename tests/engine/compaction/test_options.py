"""Compaction trigger and target arithmetic (SPEC §4, seed 003) and option checks."""

from __future__ import annotations

import pytest

from engine.compaction import CompactionOptions, thresholds
from engine.errors import SettingsError


def test_seed_003_figures():
    # 128,000 × (1 − 0.08) = 117,760; × 0.80 = 94,208; target 65 % = 83,200
    assert thresholds(128_000) == (94_208, 83_200)


def test_small_limit_case():
    assert thresholds(1_000) == (736, 650)
    assert thresholds(6_000) == (4_416, 3_900)


def test_options_change_the_figures_and_round_down():
    opts = CompactionOptions.from_options({"threshold_percent": 90, "response_buffer_percent": 10,
                                           "target_percent": 50})
    assert thresholds(1_001, opts) == (810, 500)  # 1001 × 0.9 × 0.9 = 810.81; 500.5


def test_cap_defaults_to_a_tenth_of_the_limit_within_bounds():
    o = CompactionOptions()
    assert (o.cap_for(6_000), o.cap_for(128_000), o.cap_for(100)) == (600, 8_000, 64)
    assert CompactionOptions(summary_cap_tokens=20).cap_for(128_000) == 20


@pytest.mark.parametrize("bad", [{"threshold_percent": 0}, {"keep_recent": -1}, {"retry_delay_s": "soon"},
                                 {"response_buffer_percent": 100}])
def test_bad_options_are_invalid_settings(bad):
    with pytest.raises(SettingsError) as err:
        CompactionOptions.from_options(bad)
    assert err.value.code == "INVALID_SETTINGS" and "strategy_options." in err.value.message
