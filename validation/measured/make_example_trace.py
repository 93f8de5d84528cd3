"""Write the shipped example trace of `scenarios/trace-replay-cpu-mlp.yaml`.

    python -m validation.measured.make_example_trace [--out scenarios/traces/cpu-mlp-rank0.json]

Profiles 3 training steps of a small MLP (256-512-512-256, batch 128, fp32, one CPU thread) with
torch.profiler (record_shapes=True) on this machine (record_torch.profile_mlp) and keeps only the
complete and metadata events. The trace is a measurement of whatever machine ran this script; the
scenario replays it on the calibrated CPU profile in validation/profiles/.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from validation.measured.record_torch import profile_mlp, strip_trace

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "scenarios" / "traces" / "cpu-mlp-rank0.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    path = profile_mlp(args.out)
    strip_trace(path)
    print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
