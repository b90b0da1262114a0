"""Pass-through: the lines of upstream families that no rule maps, copied unchanged.

With ``passthrough=True`` (the sidecar's ``passthrough:``) the normalizer re-emits every
*unmapped* family's sample lines as the upstream wrote them, after checking each one as
a Prometheus would read it: a value Prometheus parses otherwise is refused
(:data:`~.validate.BAD_VALUE`), and so is a line checked under another TYPE than the
family is served with (:data:`~.validate.TYPE_MISMATCH`). A family is served with the
TYPE declared before its first line (its *ptype*); rendering turns the TYPEs the text
format cannot carry into valid families (:func:`~.render.passthrough_families`).
"""

from __future__ import annotations

from collections.abc import Mapping

from fleetwatch.exporters.entry import Entry
from fleetwatch.exporters.validate import BAD_VALUE, TYPE_MISMATCH, prometheus_float

__all__ = ["pass_through"]


def pass_through(entry: Entry, key: str, tok: str, lines: dict[str, list[str]],
                 ptypes: dict[str, str | None], types: Mapping[str, str]) -> str | None:
    """Copy one line (``key``, value token ``tok``) of an unmapped family into ``lines``
    (family → lines), or say why not: :data:`~.validate.BAD_VALUE` or
    :data:`~.validate.TYPE_MISMATCH` (see the module). ``ptypes`` (family → TYPE it is
    served with) gets a family's TYPE from ``types`` (the TYPE lines read so far) at its
    first line."""
    if prometheus_float(tok) is None:
        return BAD_VALUE
    fam = entry.unmapped_family
    assert fam is not None
    fam_lines = lines.get(fam)
    if fam_lines is None:
        fam_lines = lines[fam] = []
        ptypes[fam] = types.get(fam)
    if entry.ptype != ptypes[fam]:
        return TYPE_MISMATCH
    fam_lines.append(f"{key} {tok}")
    return None
