"""Kernels started from several threads (in-process profiling of a for_each
batch) each run in their own emulator run, one after another."""
import threading

import numpy as np

from emulator import emu_helpers  # noqa: F401 - installs the neuronxcc aliases
import nki_emu
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def _scale(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        tile = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.multiply(tile, 3.0))
    return out


def test_concurrent_runs_do_not_share_run_state():
    failures = []
    x = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)
    expected = nki_emu.run(_scale, [x]).outputs
    latency = nki_emu.run(_scale, [x]).profile["latency_ms"]

    def worker():
        for _ in range(5):
            try:
                result = nki_emu.run(_scale, [x])
                if not np.array_equal(result.outputs, expected) or result.profile["latency_ms"] != latency:
                    failures.append("different result")
            except Exception as exc:  # noqa: BLE001 - collected for the assertion
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
