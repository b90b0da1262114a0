"""Coverage-guided fuzzing of the parser and the mapping engine with atheris (libFuzzer).

    pip install atheris          # or: pip install -e '.[fuzz]'
    python tools/fuzz_atheris.py -max_total_time=60 [corpus_dir]

Each input is decoded as UTF-8 (invalid bytes replaced), normalized with every source
table, pass-through on, and rendered; the run stops at the first exception — a crash in
the normalizer, or a rendered exposition that fleetwatch's parser or prometheus_client's
reads with a problem, or a cumulative sample that is NaN, infinite or negative. The
hypothesis suite (tests/exporters/test_fuzz.py) checks the same properties in CI; this tool is for
longer, coverage-guided runs by hand. Without a corpus folder, the first 4 KB of each
captured fixture seed a fresh one in a temporary folder (its path is printed).
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from prometheus_client.parser import text_string_to_metric_families

    from fleetwatch.exporters.normalize import Normalizer
    from fleetwatch.exporters.parser import parse_exposition
    from fleetwatch.exporters.render import render
    from fleetwatch.exporters.sources import TABLES
    from fleetwatch.labels.schema import METRICS_BY_NAME

ROOT = Path(__file__).resolve().parent.parent
_CUMULATIVE = {m.name for m in METRICS_BY_NAME.values() if m.type == "counter"} | {
    m.name + s for m in METRICS_BY_NAME.values() if m.type in ("histogram", "summary")
    for s in ("_bucket", "_count", "_sum")}


def one_input(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    for table in TABLES.values():
        out = render([Normalizer(table, passthrough=True).normalize(text)])
        samples, meta = parse_exposition(out)
        if meta.invalid:
            raise AssertionError(f"rendered output has a bad line: {meta.invalid[0]}")
        list(text_string_to_metric_families(out))
        for name, labels, v in samples:
            if name in _CUMULATIVE and not (math.isfinite(v) and v >= 0):
                raise AssertionError(f"cumulative sample {name}{labels} = {v}")


def main() -> None:
    args = sys.argv
    if not any(not a.startswith("-") for a in args[1:]):
        # a fresh corpus: the first 4 KB of each captured fixture
        corpus = Path(tempfile.mkdtemp(prefix="fw-fuzz-corpus-"))
        for i, p in enumerate(sorted((ROOT / "tests" / "fixtures" / "expositions")
                                     .rglob("*.prom"))):
            (corpus / f"seed{i}").write_bytes(p.read_bytes()[:4096])
        args = [*args, "-max_len=8192", str(corpus)]
        print(f"corpus: {corpus}", file=sys.stderr)
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
