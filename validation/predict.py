"""Prediction: every measured record becomes a dcsim prediction on the calibrated hardware.

- Compute primitives (gemm, sdpa, copy, embedding_bag) use the calibrated device's cost functions
  (all in-sample: gemm/sdpa/copy fit the roofline, embedding_bag the gather efficiency).
- Message primitives (send_recv, all_reduce, all_to_all) run the `collective` workload through
  `sim.runner.run` on a 2-device cluster whose link is the calibrated one (all_to_all held out).
- Compositions run their workload through `sim.runner.run` on the calibrated profile: the
  transformer prefill and ring attention as `cp_inference` (cp = 1, or cp = 2 over the calibrated
  link with the measured ring), the DataLoader as `ingestion`, the embedding step as
  `embedding_training` (the case's `method` names the workload that predicted it).
- Published figures (cp_ttft) run `cp_inference` on the paper's hardware from the catalog.

Every scenario is built as a dict; with `scenario_dir` it is also written as YAML (hardware naming
the profile files by path) so a user can `dcsim run` it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from sim.runner import run
from sim.scenario.model import scenario_from_dict
from sim.workloads import config_class
from validation.calibrate import Calibration, primitive_time_s

COLLECTIVES = ("send_recv", "all_reduce", "all_to_all")


@dataclass
class Case:
    name: str
    family: str
    workload: str
    measured_s: float
    predicted_s: float | None
    method: str
    excluded: bool = False  # used for calibration (published figures): not in error figures

    @property
    def rel_error(self) -> float | None:
        if self.predicted_s is None:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


def _literal_args(model, field: str) -> tuple:
    ann = model.model_fields[field].annotation
    return tuple(getattr(ann, "__args__", ()))


def hardware(cal: Calibration, devices: int) -> dict:
    """A cluster of `devices` calibrated devices (one per 'host'), joined by the calibrated link."""
    hw = {
        "gpu": cal.device.model_dump(mode="json"),
        "gpus_per_node": 1,
        "nodes": devices,
        "host_cpu": cal.device.model_dump(mode="json"),
        "topology": {"kind": "single-switch", "switch_latency": 0},
    }
    if cal.link is not None:
        hw["nic"] = cal.link.model_dump(mode="json")
    return hw


class Predictor:
    def __init__(self, cal: Calibration, scenario_dir: str | Path | None = None) -> None:
        self.cal = cal
        self.scenario_dir = Path(scenario_dir) if scenario_dir else None

    # ---- running scenarios ------------------------------------------------------------------
    def run_scenario(self, name: str, workload: dict, devices: int = 1, hw: dict | None = None):
        data = {"name": name, "seed": 0, "hardware": hw or hardware(self.cal, devices), "workload": workload}
        if self.scenario_dir is not None:
            self._write(name, data)
        return run(scenario_from_dict(data))

    def _write(self, name: str, data: dict) -> None:
        self.scenario_dir.mkdir(parents=True, exist_ok=True)
        shown = dict(data, hardware=dict(data["hardware"]))
        for key, spec, path in (
            ("gpu", self.cal.device, self.cal.device_path),
            ("gpu", self.cal.lockstep, self.cal.lockstep_path),
            ("host_cpu", self.cal.device, self.cal.device_path),
            ("nic", self.cal.link, self.cal.link_path),
        ):
            if path is not None and spec is not None and shown["hardware"].get(key) == spec.model_dump(mode="json"):
                shown["hardware"][key] = str(Path(path).resolve())
        fname = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) + ".yaml"
        from sim.report.output import write_text  # atomic: temp file + rename

        write_text(self.scenario_dir / fname, yaml.safe_dump(shown, sort_keys=False))

    # ---- per workload ---------------------------------------------------------------------------
    def collectives(self, records: list) -> dict[str, tuple[float, str]]:
        out = {}
        if self.cal.link is None:
            return out
        for op in COLLECTIVES:
            recs = [r for r in records if r.workload == op]
            if not recs:
                continue
            sizes = sorted({int(r.params["bytes"]) for r in recs})
            algorithm = "direct" if op in ("all_to_all", "send_recv") else "ring"
            # protocol none: the calibrated link's latency already holds the library's (gloo or NCCL, measured)
            workload = {"kind": "collective", "op": op, "bytes": sizes, "algorithm": algorithm, "protocol": "none"}
            result = self.run_scenario(f"validate-{op}", workload, devices=2)
            rows = result.metrics.get("per_size") or [dict(result.metrics, bytes=sizes[0])]
            by_size = {int(row["bytes"]): row["time_s"] for row in rows}
            for r in recs:
                out[r.name] = (by_size[int(r.params["bytes"])], f"sim collective ({algorithm})")
        return out

    def compute_primitive(self, r) -> tuple[float, str]:
        if r.processes == 2 and self.cal.lockstep is not None:
            return primitive_time_s(self.cal.lockstep, r.workload, r.params), "x2 device model (fitted)"
        spec = self.cal.device
        return primitive_time_s(spec, r.workload, r.params), "device model (fitted)"

    def transformer(self, r) -> tuple[float, str]:
        p = r.params
        cp = int(p.get("cp", 1))
        ring = p.get("ring", "pass-kv")
        model = {
            "layers": p["layers"],
            "hidden": p["hidden"],
            "ffn": p["ffn"],
            "heads": p["heads"],
            "kv_heads": p["heads"],
            "vocab": 256,
            "mlp": "swiglu",
        }
        workload = {
            "kind": "cp_inference",
            "model": model,
            "dtype": p.get("dtype", "fp32"),
            "parallelism": {"tp": 1, "cp": cp},
            "ring": ring if cp > 1 else "auto",
            "requests": [{"prompt_tokens": p["seq"], "cached_tokens": 0, "decode_tokens": 0}],
        }
        hw = hardware(self.cal, cp)
        device = self.cal.lockstep if cp > 1 and self.cal.lockstep is not None else self.cal.device
        hw["gpu"] = device.model_dump(mode="json")
        dtype = p.get("dtype", "fp32")
        if dtype in _literal_args(config_class("cp_inference"), "attention_dtype"):
            workload["attention_dtype"] = dtype
        elif dtype == "fp32":
            # cp_inference's attention_dtype admits no fp32: run the attention in its bf16 slot on a
            # device view whose bf16 peak is the fitted fp32 peak (GEMMs are fp32 and unaffected).
            view = device.model_copy(update={"peak": device.peak.model_copy(update={"bf16": device.peak.fp32})})
            hw = dict(hw, gpu=view.model_dump(mode="json"))
        result = self.run_scenario(f"validate-{r.name}", workload, hw=hw)
        shown = f", {ring}" + (", x2 profile" if device is self.cal.lockstep else "") if cp > 1 else ""
        return result.metrics["ttft_s"], f"sim cp_inference (cp={cp}{shown})"

    def dataloader(self, r) -> tuple[float, str]:
        p = r.params
        # The DataLoader as on-trainer preprocessing: one trainer host whose `workers` cores (the
        # calibrated 1-core device x workers sockets) all preprocess; each batch is made on one core
        # (cores_per_batch 1, like a DataLoader worker); the in-memory dataset sits on storage that
        # is never the bottleneck; the trainer consumes batch / step_s samples/s and buffers
        # prefetch_factor x workers batches. service_cv is the measured spread of the per-sample cost.
        batch, c = p["batch"], p["cpu_s_per_sample"]
        supply = p["workers"] / c
        demand = batch / p["step_s"]
        duration = 400 * batch / min(supply, demand)
        fast = {"bandwidth": "1 TB/s", "latency": 0}
        workload = {
            "kind": "ingestion",
            "dataset": {
                "samples": int(10 * duration * supply),
                "bytes_per_sample": p["sample_bytes"],
                "partition_bytes": 16 * batch * p["sample_bytes"],
            },
            "storage": {
                "nodes": 1,
                "replication": 1,
                "nic": fast,
                "media": {"name": "in-memory", "kind": "ddr", "capacity": "1 TiB", "latency": 0, **fast},
            },
            "preprocessing": {
                "mode": "on_trainer",
                "cpu_s_per_sample": {"dataset_getitem": c},
                "batch_samples": batch,
                "cores_per_batch": 1,
                "service_cv": p.get("cpu_s_per_sample_spread", 0.0) / 1.349 / c,
            },
            "trainers": {
                "demand_samples_per_s_per_host": demand,
                "buffer_batches": 2 * p["workers"],
                "training_cores": 0,
            },
            "duration_s": duration,
            "warmup_s": duration / 10,
        }
        hw = dict(hardware(self.cal, 1), host_cpus=p["workers"])
        result = self.run_scenario(f"validate-{r.name}", workload, hw=hw)
        rate = result.metrics["trainer_samples_per_s"]
        return p["batches"] * batch / rate, "sim ingestion (on_trainer)"

    def embedding_step(self, r) -> tuple[float, str]:
        p = r.params
        # One 'GPU' (the calibrated CPU core) holding every table in its own memory ('hbm'), fp32 rows
        # and dense layers, the torch model's MLPs and dot interaction, SGD on both.
        tables = [
            {
                "name": f"t{i}",
                "rows": p["rows"],
                "dim": p["dim"],
                "pooling": p["pooling"],
                "zipf_alpha": p["zipf_alpha"],
                "dtype": p.get("dtype", "fp32"),
            }
            for i in range(p["tables"])
        ]
        workload = {
            "kind": "embedding_training",
            "batch_size_per_gpu": p["batch"],
            "tables": tables,
            "dense": {
                "bottom_mlp": [p["dense_features"], *p["bottom_mlp"]],
                "top_mlp": p["top_mlp"],
                "interaction": "dot",
                "dtype": p.get("dtype", "fp32"),
                "grad_bytes_per_param": 4,
            },
            "optimizer": p.get("optimizer", "sgd"),
            "placements": ["hbm"],
            "sharding": {"planner": "size_greedy"},
            "index_dtype": "int64",
            "embedding_backward": "unfused",  # the reference's update: per-lookup rows, scatter_add
            "iterations": 5,
        }
        result = self.run_scenario(f"validate-{r.name}", workload, devices=1)
        return result.metrics["iteration_s"], "sim embedding_training"

    def published(self, r) -> tuple[float | None, str]:
        if r.workload != "cp_ttft":
            return None, "no predictor"
        p = r.params
        from hardware_models import catalog

        gpu = p.get("gpu_calibrated") if p.get("gpu_calibrated") in catalog.names("device") else p["gpu"]
        hw = {
            "gpu": gpu,
            "gpus_per_node": p["gpus_per_node"],
            "nodes": p["hosts"],
            "scale_up": p["scale_up"],
            "nic": p["nic"],
            "topology": {"kind": "single-switch"},
        }
        workload = {
            "kind": "cp_inference",
            "model": p["model"],
            "dtype": p["dtype"],
            "ffn_dtype": p["ffn_dtype"],
            "parallelism": {"tp": p["tp"], "cp": p["hosts"]},
            "requests": [{"prompt_tokens": p["prompt_tokens"], "cached_tokens": 0, "decode_tokens": 0}],
        }
        result = self.run_scenario(f"validate-{r.name}", workload, hw=hw)
        return result.metrics["ttft_s"], f"sim cp_inference ({gpu})"

    # ---- all records --------------------------------------------------------------------------
    def predict(self, records: list) -> list[Case]:
        collective = self.collectives(records)
        cases = []
        for r in records:
            if r.family == "published":
                pred, method = self.published(r)
            elif r.workload in COLLECTIVES:
                pred, method = collective.get(r.name, (None, "no calibrated link"))
            elif r.workload in ("gemm", "sdpa", "copy", "embedding_bag"):
                pred, method = self.compute_primitive(r)
            elif r.workload in ("transformer_prefill", "ring_attention"):
                pred, method = self.transformer(r)
            elif r.workload == "dataloader":
                pred, method = self.dataloader(r)
            elif r.workload == "embedding_step":
                pred, method = self.embedding_step(r)
            else:
                pred, method = None, "no predictor"
            cases.append(Case(r.name, r.family, r.workload, r.median_s, pred, method, excluded=r.used_for_calibration))
        return cases
