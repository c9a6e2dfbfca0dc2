"""The staleness settings: one name per (m, n, offline), parsed back from it; bad names say which forms exist."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verl_ext.staleness.setting import ALIASES, FORMS, OFFLINE, ON_POLICY, Setting, parse_setting, parse_settings

ONE_NAME = re.compile(r"^(on_policy|offline|sync_interval_[1-9]\d*(_offset_[1-9]\d*)?|sync_offset_[1-9]\d*)$")

any_setting = st.one_of(
    st.just(OFFLINE),
    st.builds(Setting, st.integers(1, 10**9 - 1), st.integers(0, 10**9 - 1)),
)


@settings(max_examples=300, deadline=None)
@given(any_setting)
def test_every_setting_has_one_name_that_parses_back_to_it(setting):
    assert ONE_NAME.match(setting.label), setting.label
    assert parse_setting(setting.label) == setting
    assert parse_setting(f" {setting.label} ") == setting


@pytest.mark.parametrize(
    "name, expected",
    [
        ("on_policy", Setting(1, 0)),
        ("sync_interval_20", Setting(20, 0)),
        ("sync_offset_10", Setting(1, 10)),
        ("sync_interval_16_offset_8", Setting(16, 8)),
        ("offline", Setting(offline=True)),
        ("mixed", Setting(16, 8)),  # the alias of Figure 2's caption
    ],
)
def test_each_form_and_the_alias(name, expected):
    assert parse_setting(name) == expected
    assert parse_setting(name).label == ALIASES.get(name, name)


def test_degenerate_spellings_are_read_and_written_in_the_one_form():
    """(1, 0) is on_policy whichever way it is written; the label never shows an m of 1 or an n of 0."""
    assert parse_setting("sync_interval_1").label == "on_policy"
    assert parse_setting("sync_offset_0").label == "on_policy"
    assert parse_setting("sync_interval_1_offset_3").label == "sync_offset_3"
    assert parse_setting("sync_interval_020").label == "sync_interval_20"


@pytest.mark.parametrize("name", ["m=20,n=0", "m20n0", "sync_interval_20_offset", "sync_interval", "on-policy",
                                  "sync_interval_0", "sync_interval_1234567890", "Offline", ""])
def test_a_bad_name_is_refused_naming_the_forms(name):
    with pytest.raises(ValueError) as error:
        parse_setting(name)
    message = str(error.value)
    assert f"setting {name!r}" in message
    assert FORMS in message or "sync_interval=0 is invalid: allowed values are an integer >= 1" in message


def test_overrides_are_the_delayed_sync_block():
    assert Setting(16, 8).overrides() == [
        "trainer.v1.trainer_mode=delayed_sync",
        "trainer.v1.delayed_sync.sync_interval=16",
        "trainer.v1.delayed_sync.sync_offset=8",
        "trainer.v1.delayed_sync.offline=false",
    ]
    assert OFFLINE.overrides()[-1] == "trainer.v1.delayed_sync.offline=true" and ON_POLICY == Setting()


def test_a_list_takes_commas_or_spaces_and_refuses_a_setting_named_twice():
    assert parse_settings("on_policy, sync_interval_20 offline") == [ON_POLICY, Setting(20, 0), OFFLINE]
    with pytest.raises(ValueError, match="sync_interval_16_offset_8 given twice"):
        parse_settings("mixed,sync_interval_16_offset_8")
    with pytest.raises(ValueError, match="no setting given; allowed: on_policy"):
        parse_settings(" , ")
