"""Deprecated import place (one release): the mapping engine is split into
:mod:`.table` (the table model), :mod:`.compile` (one series' slots), :mod:`.normalize`
(:class:`Normalizer`, :class:`Normalized`) and :mod:`.render`. Import from those."""

from __future__ import annotations

from fleetwatch.exporters.normalize import Normalized, Normalizer, value_of
from fleetwatch.exporters.render import render
from fleetwatch.exporters.table import Rule, SourceTable, TargetContext, ValueMap

__all__ = ["Normalized", "Normalizer", "Rule", "SourceTable", "TargetContext", "ValueMap",
           "render", "value_of"]
