"""plugin_utils.base.waits: one judge of a wait's bound, for the CLI's options and the action plugins' arguments."""

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.waits import DAY, HOUR, bounded_seconds


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", 0, None, "soon", HOUR + 1])
def test_what_is_no_bound_is_refused(value):
    with pytest.raises(ValueError):
        bounded_seconds(value, HOUR)


def test_a_bound_is_taken_as_a_number_or_its_text_up_to_its_limit():
    assert bounded_seconds("2.5", HOUR) == 2.5
    assert bounded_seconds(7200, DAY) == 7200.0
    assert bounded_seconds(DAY, DAY) == DAY
