#!/usr/bin/env bash
# Regenerate the README gallery (docs/img/) with the project's own commands. Run from the repo root.
set -euo pipefail
dcsim run scenarios/alltoall-fattree-oversub.yaml --quiet --out runs/gallery-fattree > /dev/null
cp runs/gallery-fattree/topology.png docs/img/topology-fattree-oversub.png
dcsim run scenarios/cp-70b-h100-2hosts-128k.yaml --set workload.simulate.layers=2 --quiet \
    --trace-window 0:45ms --out runs/gallery-cp > /dev/null
cp runs/gallery-cp/cp_breakdown.png docs/img/cp-70b-breakdown.png
python -m sim.report.trace_view runs/gallery-cp/trace.json docs/img/trace-cp-70b.png --window 0:45ms --lanes 12
dcsim run scenarios/ingest-dlrm-on-trainer.yaml --quiet --out runs/gallery-ingest > /dev/null
cp runs/gallery-ingest/ingestion_buffers.png docs/img/ingestion-buffers.png
