"""Drift: the fields of a model's running configuration that differ from its declaration.

:func:`compare` turns a registry declaration
(:class:`~fleetwatch.labels.declared.DeclaredSpec`) and what the server reports
(:class:`~fleetwatch.governance.running.RunningConfig`) into one :class:`FieldDrift` per
field both sides state, in :data:`FIELDS` order. Values are compared and shown as text:

* ``engine_version``, ``quantization`` — as reported (``2.51.0``, ``fp8``);
* ``model_version`` — the loaded versions joined by ``,`` (declared ``2`` against loaded
  ``1,2`` drifts: the declaration names the one version that must be loaded);
* ``instance_groups`` — ``KIND_GPU x2 gpus 0,1; KIND_CPU x1``, order-insensitive;
* ``dynamic_batching`` — ``true`` or ``false``.

:func:`exposition` renders the sidecar's families (text format 0.0.4):
``fleetwatch_config_drift{model, field}`` 1 when the field drifts, else 0;
``fleetwatch_config_drift_info{model, field, declared, running}`` 1; and
``modelserver_model_config_changes_total{model, backend}``, the running configuration's
changes the sidecar counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleetwatch.governance.running import RunningConfig, declared_running
from fleetwatch.labels.declared import DeclaredSpec
from fleetwatch.labels.schema import metric
from fleetwatch.labels.text import render_labels

#: The compared fields, in the order they are reported (the registry's ``declared:`` keys).
FIELDS = ("engine_version", "quantization", "model_version", "instance_groups",
          "dynamic_batching")


@dataclass(frozen=True, slots=True)
class FieldDrift:
    """One compared field of one model: its declared and running values as text."""

    model: str
    field: str
    declared: str
    running: str

    @property
    def drifted(self) -> bool:
        """True when the running value differs from the declared one."""
        return self.declared != self.running


def values(cfg: RunningConfig) -> dict[str, str]:
    """The fields ``cfg`` states, as text (see the module docstring); absent = unknown."""
    out: dict[str, str] = {}
    if cfg.engine_version is not None:
        out["engine_version"] = cfg.engine_version
    if cfg.quantization is not None:
        out["quantization"] = cfg.quantization
    if cfg.model_versions is not None:
        out["model_version"] = ",".join(cfg.model_versions)
    if cfg.instance_groups is not None:
        out["instance_groups"] = "; ".join(g.text() for g in cfg.instance_groups)
    if cfg.dynamic_batching is not None:
        out["dynamic_batching"] = "true" if cfg.dynamic_batching else "false"
    return out


def compare(model: str, declared: DeclaredSpec, running: RunningConfig) -> list[FieldDrift]:
    """One :class:`FieldDrift` per field both the declaration and the server state."""
    want, have = values(declared_running(declared)), values(running)
    return [FieldDrift(model, f, want[f], have[f]) for f in FIELDS if f in want and f in have]


def exposition(drifts: Iterable[FieldDrift], changes: Mapping[tuple[str, str], int]) -> str:
    """The drift and change families (see the module docstring); ``changes`` maps
    ``(model, backend)`` to the running configuration's changes counted."""
    rows = sorted(drifts, key=lambda d: (d.model, FIELDS.index(d.field)))
    out = _header("fleetwatch_config_drift")
    out += [f"fleetwatch_config_drift{render_labels((('model', d.model), ('field', d.field)))}"
            f" {int(d.drifted)}" for d in rows]
    out += _header("fleetwatch_config_drift_info")
    out += ["fleetwatch_config_drift_info" + render_labels(
        (("model", d.model), ("field", d.field), ("declared", d.declared),
         ("running", d.running))) + " 1" for d in rows]
    out += _header("modelserver_model_config_changes_total")
    out += [f"modelserver_model_config_changes_total"
            f"{render_labels((('model', m), ('backend', b)))} {n}"
            for (m, b), n in sorted(changes.items())]
    return "\n".join(out) + "\n"


def _header(name: str) -> list[str]:
    """``# HELP`` and ``# TYPE`` of a schema family (counters named without ``_total``
    in TYPE, as the text format 0.0.4 writes them with prometheus_client)."""
    m = metric(name)
    return [f"# HELP {name} {m.exposition_help}", f"# TYPE {name} {m.type}"]
