"""Owners of normalized series where upstream series may meet (exporters/owners.py)."""

from __future__ import annotations

from fleetwatch.exporters.owners import Owners

P = 'modelserver_requests_total{model="m"}'
Q = 'modelserver_requests_total{model="n"}'


def test_the_first_series_owns_and_a_second_makes_the_prefix_shared() -> None:
    owners = Owners()
    owners.track(P, "a")
    owners.track(P, "a")  # the same series again: still alone
    assert not owners.sharing and owners.stale == set()
    owners.track(P, "b")
    assert owners.shared == {P} and owners.stale == {"a"}
    owners.track(P, "c")  # already shared: the owner is stale once
    assert owners.shared == {P} and owners.stale == {"a"}


def test_a_shared_prefix_fed_by_one_series_is_owned_by_it_again() -> None:
    owners = Owners()
    owners.track(P, "a")
    owners.track(P, "b")
    owners.track(Q, "c")
    owners.track(Q, "d")
    owners.stale = set()
    assert owners.unshare({P: {"b"}, Q: {"c", "d"}}) == {P}
    assert owners.shared == {Q}
    owners.track(P, "b")  # its owner now
    assert owners.shared == {Q} and owners.stale == set()
    owners.track(P, "a")  # met again: shared, and "b" compiled again
    assert owners.shared == {P, Q} and owners.stale == {"b"}


def test_keep_and_clear_forget_owners_but_not_what_is_stale() -> None:
    owners = Owners()
    owners.track(P, "a")
    owners.track(P, "b")
    owners.track(Q, "c")
    owners.keep({Q})
    assert not owners.sharing and owners.stale == {"a"}
    owners.track(P, "x")  # P forgotten: a new owner, not a meeting
    assert not owners.sharing
    owners.clear()
    owners.track(Q, "d")  # Q forgotten too
    assert not owners.sharing and owners.stale == {"a"}
