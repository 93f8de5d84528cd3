"""Where sweep points run. Every executor has one method, `run(fn, tasks)`: a generator that yields
`fn(task)` for each task in completion order and cancels what is left when it is closed (Ctrl-C, an
error in the caller).

- `InProcess`: one point after another in this process (`--workers 1`; easiest to debug).
- `ProcessPool`: a local `concurrent.futures.ProcessPoolExecutor` (the default, `--workers N`). Its
  processes are forked from a forkserver that has already imported dcsim, so they start fast and
  never inherit threads of the parent; each watches the sweep process and exits when it is gone
  (kill -9, OOM), so a crashed sweep leaves no orphans behind.
- `Dask`: submits each point as one task to a dask.distributed scheduler (`--dask tcp://host:8786`,
  `--dask local` for a LocalCluster of N processes, or a `distributed.Client` from a notebook). A
  point whose worker dies (dask's KilledWorker after its retries) becomes an error record instead of
  stopping the sweep. Workers need dcsim installed; the base scenario travels with each task.

`fn` must be a module-level function (it is pickled); sim.studies.sweep.run_point is.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from sim.errors import ScenarioError
from sim.studies.sweep import PointTask, default_workers, error_record

DASK_CONNECT_TIMEOUT_S = 10
PARENT_CHECK_INTERVAL_S = 1.0


def exit_with_parent(parent_pid: int) -> None:
    """Pool initializer: a daemon thread that ends this worker once `parent_pid` no longer exists."""

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_INTERVAL_S)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass  # alive, owned by someone else: keep going

    threading.Thread(target=watch, daemon=True, name="dcsim-sweep-parent-watch").start()


class InProcess:
    workers = 1

    def run(self, fn: Callable[[PointTask], dict], tasks: Sequence[PointTask]) -> Iterator[dict]:
        for task in tasks:
            yield fn(task)


class ProcessPool:
    def __init__(self, workers: int) -> None:
        self.workers = workers

    def run(self, fn: Callable[[PointTask], dict], tasks: Sequence[PointTask]) -> Iterator[dict]:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["sim.studies.sweep", "sim.runner"])
        pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=context, initializer=exit_with_parent, initargs=(os.getpid(),)
        )
        futures = [pool.submit(fn, task) for task in tasks]
        try:
            for future in as_completed(futures):
                try:
                    yield future.result()
                except BrokenProcessPool:
                    raise ScenarioError(
                        "a worker process died (out of memory or killed); finished points are "
                        "kept, rerun the same command to resume",
                        path="--workers",
                    ) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


class Dask:
    def __init__(self, target: Any, workers: int) -> None:
        self.target = target
        self.workers = workers

    def _client(self):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ScenarioError("needs dask.distributed: pip install 'dcsim[sweep]'", path="--dask") from None
        if not isinstance(self.target, str):
            return self.target, None  # a Client given by the caller: not ours to close
        if self.target == "local":
            cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True, dashboard_address=None)
            return Client(cluster), cluster
        try:
            return Client(self.target, timeout=DASK_CONNECT_TIMEOUT_S), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise ScenarioError(
                f"cannot reach the dask scheduler ({type(exc).__name__}); expected tcp://HOST:PORT "
                f"of a running `dask scheduler`, or 'local'",
                path="--dask",
                value=self.target,
            ) from None

    def run(self, fn: Callable[[PointTask], dict], tasks: Sequence[PointTask]) -> Iterator[dict]:
        from distributed import as_completed as dask_completed

        client, cluster = self._client()
        owned = cluster is not None or isinstance(self.target, str)
        futures = client.map(fn, tasks, key=[f"dcsim-point-{t.point}" for t in tasks], pure=False)
        task_of = {f.key: t for f, t in zip(futures, tasks)}
        try:
            for future in dask_completed(futures):
                try:
                    yield future.result()
                except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: record it, keep going
                    yield error_record(task_of[future.key], f"dask: {type(exc).__name__}: {exc}")
                finally:
                    future.release()
        finally:
            client.cancel(futures)
            if owned:
                client.close()
            if cluster is not None:
                cluster.close()


def make_executor(workers: int | None = None, dask: Any = None, points: int | None = None):
    """`dask` set -> Dask; else 1 worker -> InProcess; else a ProcessPool of `workers` (default: CPUs)."""
    if workers is not None and workers < 1:
        raise ScenarioError("must be at least 1", path="--workers", value=workers)
    n = workers or default_workers()
    if dask is not None:
        return Dask(dask, n)
    n = min(n, points) if points else n
    return InProcess() if n == 1 else ProcessPool(n)
