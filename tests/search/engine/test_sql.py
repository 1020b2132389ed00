"""search.engine.sql: SQL fragments that carry their own parameters."""

import pytest

from search.engine.sql import Fragment, compose, join, param, placeholder_count


def test_a_fragment_holds_one_value_per_placeholder():
    # given / when
    fragment = Fragment("a = %s AND b LIKE '50%%' AND c = %s", [1, 2])
    # then: the values are kept as a tuple; an escaped percent sign is no placeholder
    assert fragment.params == (1, 2)
    assert placeholder_count("x %% y %s %%s") == 1
    with pytest.raises(ValueError, match="2 placeholder"):
        Fragment("a = %s AND b = %s", (1,))


def test_param_casts_and_join_keeps_the_order():
    # when
    joined = join([param(0.7, "float8"), "t0", param("x")], " * ")
    # then
    assert joined == Fragment("%s::float8 * t0 * %s", (0.7, "x"))
    assert Fragment("a = %s", (1,)) + " AND " + param(2) == Fragment("a = %s AND %s", (1, 2))


def test_compose_gathers_parameters_in_the_order_the_slots_occur():
    # given: slots used out of the order they are given, one of them twice
    tf = Fragment("(f0 + %s * t0)", (2.0,))
    # when
    composed = compose("{idf} * {tf} / ({tf} + norm) LIMIT {limit}", limit=param(5), tf=tf, idf=param(1.5))
    # then
    assert composed.sql == "%s * (f0 + %s * t0) / ((f0 + %s * t0) + norm) LIMIT %s"
    assert composed.params == (1.5, 2.0, 2.0, 5)
    assert compose("'{{}}'::int[] AND {x}", x="y").sql == "'{}'::int[] AND y"


@pytest.mark.parametrize(
    "template, parts",
    [
        ("a = %s AND {x}", {"x": "y"}),  # a placeholder of the template's own
        ("{x} AND {y}", {"x": "a"}),  # a slot without a part
        ("{x}", {"x": "a", "y": "b"}),  # a part without a slot
        ("{x!r}", {"x": "a"}),  # a conversion: SQL is never formatted from Python values
    ],
)
def test_compose_refuses_what_would_put_values_and_placeholders_out_of_step(template, parts):
    with pytest.raises(ValueError):
        compose(template, **parts)
