"""Every seconds option goes through one validated type: bounded, finite, positive. A wait that can
reasonably last hours (a watch's rounds, a job, a person recabling) takes up to a day; the rest up to an hour."""

import pytest

from mlx_fleet.cli import build_parser

LONG = [["watch", "-i", "inv", "--every", "7200"],
        ["verify", "-i", "inv", "--timeout", "7200"],
        ["onboard", "-i", "inv", "mini-4", "--address", "10.0.0.4", "--cable-timeout", "7200"],
        ["os-update", "-i", "inv", "--timeout", "7200"]]
SHORT = [["watch", "-i", "inv", "--connect-timeout", "S"],
         ["watch", "-i", "inv", "--rdma-timeout", "S"],
         ["explain", "log", "--connect-timeout", "S"],
         ["os-update", "-i", "inv", "--poll", "S"]]


def _parse(argv):
    return build_parser(argv[0]).parse_args(argv)


@pytest.mark.parametrize("argv", LONG, ids=lambda a: f"{a[0]} {a[-2]}")
def test_long_waits_take_hours_but_not_more_than_a_day(argv, capsys):
    option = argv[-2].lstrip("-").replace("-", "_")
    assert getattr(_parse(argv), option) == 7200
    with pytest.raises(SystemExit) as refused:
        _parse(argv[:-1] + ["86401"])
    assert refused.value.code == 2


@pytest.mark.parametrize("argv", SHORT, ids=lambda a: f"{a[0]} {a[-2]}")
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "3601", "1e9"])
def test_short_waits_refuse_what_is_no_bound(argv, value, capsys):
    with pytest.raises(SystemExit) as refused:
        _parse(argv[:-1] + [value])
    assert refused.value.code == 2
    assert getattr(_parse(argv[:-1] + ["2.5"]), argv[-2].lstrip("-").replace("-", "_")) == 2.5
