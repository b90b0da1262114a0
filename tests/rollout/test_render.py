"""The comparison as text (:mod:`fleetwatch.rollout.render`): counts written for a person
(whole numbers in digits, never ``1.23457e+06`` nor ``299.99999999999994``), one band
called a band; the JSON keeps every digit."""

from __future__ import annotations

import json

from fleetwatch.rollout.compare import compare
from fleetwatch.rollout.render import render, to_json
from fleetwatch.rollout.summary import BandSLI, SLOSummary


def _summary(version: str, bands: dict[str, tuple[float, float]]) -> SLOSummary:
    return SLOSummary("s", "m", version, "triton", "latency", 0.9,
                      {b: BandSLI(b, g, t) for b, (g, t) in bands.items()})


def test_counts_are_whole_digits_or_one_decimal():
    from fleetwatch.rollout.render import count

    assert count(1234567.0) == "1234567"
    assert count(299.99999999999994) == "300"
    assert count(0.0) == "0"
    assert count(12.5) == "12.5"
    assert count(2.0**53) == "9007199254740992"


def test_the_text_writes_large_and_extrapolated_counts_for_a_person():
    """An ``increase()`` over a range gives counts such as 299.99999999999994; a busy
    fleet millions: the table writes 300 and 1234567; ``--json`` keeps the floats."""
    base = _summary("1", {"1": (1234000.0, 1234567.0), "2": (299.99999999999994, 300.0)})
    cand = _summary("2", {"1": (1233000.0, 1234567.0), "2": (150.00000000000003, 300.0)})
    c = compare("m", "1", "2", [base], [cand])
    text = render(c)
    assert "1234000/1234567" in text and "300/300" in text and "150/300" in text, text
    assert "e+0" not in text and "99999" not in text and "0000003" not in text, text
    assert "SLO s: worse (band 2);" in text, text  # one band, singular
    doc = json.loads(to_json(c))
    bands = {b["band"]: b for b in doc["slos"][0]["bands"]}
    assert bands["2"]["baseline"]["good"] == 299.99999999999994


def test_percentages_have_the_decimals_the_margin_needs():
    """A 99.9 % objective's margin is 0.05 percentage points: with one decimal 9995/10000
    read ``100.0%`` beside 10000/10000 and a difference of ``-0.1pp``; now 99.95% and
    -0.05pp. A 90 % objective keeps one decimal."""
    def one(objective: float, good: float) -> str:
        base = SLOSummary("s", "m", "1", "triton", "latency", objective,
                          {"1": BandSLI("1", 10000, 10000)})
        cand = SLOSummary("s", "m", "2", "triton", "latency", objective,
                          {"1": BandSLI("1", good, 10000)})
        return render(compare("m", "1", "2", [base], [cand]))

    text = one(0.999, 9995)
    assert "9995/10000 99.95%" in text and "-0.05pp" in text, text
    assert "|diff| ≥ 0.05pp" in text
    text = one(0.9, 9500)
    assert "9500/10000 95.0%" in text and "-5.0pp" in text, text
