"""``cotenant_b``: the neighbour of ``cotenant_a`` on the shared device, with the same
implementation (loaded from ``cotenant_a/1/model.py``) and its own service time and instance
count (config.pbtxt)."""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "fleetwatch_cotenant_impl",
    pathlib.Path(__file__).resolve().parents[2] / "cotenant_a" / "1" / "model.py",
)
_impl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_impl)
TritonPythonModel = _impl.TritonPythonModel
