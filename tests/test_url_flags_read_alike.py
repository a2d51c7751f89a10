"""A URL's flags are read alike: ``?ssl_check_hostname=off`` is False as ``?wake_waiters=off`` is
(redis-py's reader made it True), a word that is no flag is refused by name (``maybe`` was taken
as True), and an option given no value (``?replicas_ack=``, a template's empty ``${N}``) is
refused by name (redis-py dropped it: no durability, without a word). Found in review."""

from __future__ import annotations

import pytest

from turbolock import InvalidArgumentError
from turbolock.options import options_from_url

URL = "rediss://127.0.0.1:6379/0"


def test_off_means_false_for_every_flag_of_a_url() -> None:
    assert options_from_url("redis://127.0.0.1:6379/0?wake_waiters=off").wake_waiters is False  # control
    options = options_from_url(URL + "?ssl_check_hostname=off", insecure=True)
    assert options.ssl_check_hostname is False


def test_a_word_that_is_no_flag_is_refused_by_name() -> None:
    with pytest.raises(InvalidArgumentError) as control:
        options_from_url("redis://127.0.0.1:6379/0?wake_waiters=maybe")
    assert control.value.argument == "wake_waiters"
    with pytest.raises(InvalidArgumentError) as raised:
        options_from_url(URL + "?ssl_check_hostname=maybe", insecure=True)
    assert raised.value.argument == "ssl_check_hostname"


@pytest.mark.parametrize("option", ["replicas_ack", "timeout", "wake_waiters", "db"])
def test_an_option_with_no_value_is_refused_by_name(option: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        options_from_url(f"redis://127.0.0.1:6379/0?{option}=")
    assert raised.value.argument == option


def test_an_empty_password_is_read_as_redis_py_reads_it() -> None:
    assert options_from_url("redis://127.0.0.1:6379/0?password=").password is None  # not refused
