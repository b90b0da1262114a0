"""The /metrics assembler: a family or series served by a part of higher precedence is
dropped, counted by origin, never served twice (exact expected output)."""

from __future__ import annotations

import subprocess
import sys

from fleetwatch.exporters.assemble import (
    NORMALIZED,
    PASSTHROUGH,
    SELF,
    Family,
    Part,
    assemble,
    parse_families,
)
from tests.support.helpers import ROOT
from tests.support.promtool_check import check_metrics

SELF_TEXT = """# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 12.0
# HELP fleetwatch_upstream_up [STABLE] 1 when up.
# TYPE fleetwatch_upstream_up gauge
fleetwatch_upstream_up{target="v"} 1.0
"""
UPSTREAM_A = """# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 40.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto"} 1.0
"""
UPSTREAM_B = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{cache_dtype="auto", block_size="16"} 1.0
vllm:cache_config_info{block_size="32",cache_dtype="auto"} 1.0
# HELP fleetwatch_upstream_up a clash with the sidecar's own family
# TYPE fleetwatch_upstream_up counter
fleetwatch_upstream_up 3
"""
NORMALIZED_FAMILY = Family("modelserver_requests_total", "counter", "[STABLE] Requests.",
                           ['modelserver_requests_total{model="m",backend="vllm"} 1'])

EXPECTED = """# HELP modelserver_requests_total [STABLE] Requests.
# TYPE modelserver_requests_total counter
modelserver_requests_total{model="m",backend="vllm"} 1
# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 12.0
# HELP fleetwatch_upstream_up [STABLE] 1 when up.
# TYPE fleetwatch_upstream_up gauge
fleetwatch_upstream_up{target="v"} 1.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto"} 1.0
vllm:cache_config_info{block_size="32",cache_dtype="auto"} 1.0
"""


def _parts() -> list[Part]:
    return [Part(NORMALIZED, [NORMALIZED_FAMILY], check_names=False, check_series=False),
            Part(SELF, parse_families(SELF_TEXT)),
            Part(PASSTHROUGH, parse_families(UPSTREAM_A)),
            Part(PASSTHROUGH, parse_families(UPSTREAM_B))]


def test_precedence_merge_and_counts():
    result = assemble(_parts())
    assert result.text == EXPECTED
    # process_open_fds (1) and fleetwatch_upstream_up (1) lost to self; one series of
    # vllm:cache_config_info was passed through twice (label order differs)
    assert result.dropped == {PASSTHROUGH: 3}
    assert check_metrics(result.text) == []


def test_concatenation_is_what_promtool_rejects():
    """The checker sees the bug the assembler fixes (two HELP lines for one name)."""
    problems = check_metrics(SELF_TEXT + UPSTREAM_A)
    assert any("process_open_fds" in p for p in problems), problems


def test_sample_name_clash_drops_the_family():
    parts = [Part(NORMALIZED, [Family("x_seconds", "histogram", "h",
                                      ['x_seconds_bucket{le="+Inf"} 1', "x_seconds_sum 1",
                                       "x_seconds_count 1"])], check_names=False),
             Part(PASSTHROUGH, [Family("x_seconds_count", "gauge", "g", ["x_seconds_count 5"])])]
    result = assemble(parts)
    assert "x_seconds_count 5" not in result.text
    assert result.dropped == {PASSTHROUGH: 1}


def test_assembly_is_the_same_in_another_process():
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
            "from tests.exporters.test_assemble import _parts; "
            "from fleetwatch.exporters.assemble import assemble; "
            "sys.stdout.write(assemble(_parts()).text)")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "7", "PATH": ""})
    assert other.stdout == assemble(_parts()).text == EXPECTED
