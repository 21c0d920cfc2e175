"""Charts of profile metrics shared by the run kinds: engine busy time and HBM traffic.

A profile's ``metrics`` hold ``engine_busy_ms`` ({tensor, vector, scalar,
gpsimd, dma}: ms each engine is busy), ``hbm_read_bytes`` and
``hbm_write_bytes`` (neuron-profile summary names; docs/nki-emulator.md).
"""
from . import charts

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")


def engine_busy(metrics):
    """{engine: ms} from a metrics dict (zeros where absent)."""
    busy = (metrics or {}).get("engine_busy_ms") or {}
    return {engine: float(busy.get(engine) or 0.0) for engine in ENGINES}


def has_engine_data(metrics_list):
    """True when any of the metrics dicts reports engine busy time."""
    return any(any(engine_busy(m).values()) for m in metrics_list)


def engines_chart(labels, metrics_list, latencies, title, caption):
    """Stacked busy time per engine for each label, with the kernel's latency as a black tick."""
    segments = [(engine, [engine_busy(m)[engine] for m in metrics_list], charts.ENGINE_COLORS[engine])
                for engine in ENGINES]
    return charts.stacked_bars(labels, segments, title, "busy time (ms)",
                               caption + " Engines overlap, so the bars can be longer than the latency.",
                               markers=latencies, marker_label="latency")


def hbm_chart(labels, metrics_list, title, caption):
    """Stacked HBM bytes read and written (MiB) for each label."""
    mib = 1024.0 * 1024.0
    reads = [float((m or {}).get("hbm_read_bytes") or 0) / mib for m in metrics_list]
    writes = [float((m or {}).get("hbm_write_bytes") or 0) / mib for m in metrics_list]
    return charts.stacked_bars(labels, [("HBM read", reads, "#4e79a7"), ("HBM write", writes, "#e15759")],
                               title, "MiB", caption)
