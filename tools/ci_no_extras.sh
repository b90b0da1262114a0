#!/usr/bin/env bash
# CI job "no extras": `pip install .` alone (no test, triton or vllm extras) into a fresh
# venv, then every generator command on examples/. Catches an undeclared runtime
# dependency (e.g. numpy) or a generator that imports the scraper/aiohttp/the engine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check . >"$work/pip.log" 2>&1 \
  || { tail -20 "$work/pip.log"; exit 1; }
fw="$work/venv/bin/fleetwatch"
run() { echo "+ fleetwatch $*"; "$fw" "$@" >"$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }; }
run validate --config examples/sidecar.yaml
run slo validate examples/slos.yaml
run schema
run schema --markdown
for f in tests/fixtures/expositions/*/*.prom; do
  "$fw" normalize "$f" --registry examples/models.yaml >/dev/null 2>"$work/err.txt" \
    || { rc=$?; [ "$rc" = 2 ] || { echo "normalize $f: exit $rc"; cat "$work/err.txt"; exit 1; }; }
done
echo "+ fleetwatch normalize (every fixture)"
run rules --registry examples/models.yaml --slos examples/slos.yaml \
  --receivers examples/receivers.yaml --out "$work/rules" --tests
run alertmanager --registry examples/models.yaml --receivers examples/receivers.yaml \
  --slos examples/slos.yaml --out "$work/alertmanager.yaml"
run dashboards --registry examples/models.yaml --slos examples/slos.yaml --out "$work/dash"
# every sidecar config in examples/: the registry's pools name them (deployment.sidecar)
configs=()
for f in examples/sidecar*.yaml; do configs+=(--config "$f"); done
run manifests "${configs[@]}" \
  --registry examples/models.yaml --slos examples/slos.yaml \
  --receivers examples/receivers.yaml --out "$work/manifests"
run traces tests/fixtures/otlp/triton-2.51-ranker-http.json tests/fixtures/otlp/vllm-0.32-llm_request.pb --json
run traces tests/fixtures/otlp/triton-2.51-streamer-grpc.json --metrics
# the trace receiver needs no extra either (the OTLP metrics export needs 'otel')
"$work/venv/bin/python" -c "import fleetwatch.otlp.receiver, fleetwatch.otlp.start" \
  || { echo "the trace receiver does not import with 'pip install .' alone"; exit 1; }
echo "+ import fleetwatch.otlp.receiver"
echo "no-extras job: every generator command ran with 'pip install .' alone"
