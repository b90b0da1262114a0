"""Bounded memory when model names churn (thousands of new models per scrape): the registry's
lookup cache and the scraper's per-model facts stay bounded."""

from __future__ import annotations

from fleetwatch.labels.registry import ModelEntry, Registry


def test_registry_lookup_cache_is_bounded():
    reg = Registry([ModelEntry(name="ranker-*", team="t", owner="o", oncall="c")])
    for scrape in range(20):  # 3000 new names per scrape
        names = [(f"ranker-{scrape}-{i}", "1") for i in range(3000)]
        lines = reg.info_lines((m, v, "triton", "python") for m, v in names)
        assert len(lines) == 3000 and 'team="t"' in lines[0]
        assert len(reg._cache) <= Registry.CACHE_MAX
    assert reg.lookup("ranker-x", "1").team == "t"  # still right after clearing
    assert reg.lookup("other", "1") is None
