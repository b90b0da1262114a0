"""``cotenant_a`` version 2: the same implementation as version 1 (loaded from
``../1/model.py``) with the config's ``service_time_s_v2``: the slowed "regression"."""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "fleetwatch_cotenant_impl", pathlib.Path(__file__).resolve().parents[1] / "1" / "model.py"
)
_impl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_impl)
TritonPythonModel = _impl.TritonPythonModel
