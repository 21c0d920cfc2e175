"""neuron-profile style summary of an emulated run (nki-facts §3.8).

Field names follow ``neuron-profile view --output-format summary-json`` as
used by AccelOpt (S1 ``prompts/profile_list.json``): ``total_time`` in
seconds, byte counters, ``hardware_flops`` (fp32 counted twice like the
profiler [M]), ``hfu_estimated_percent`` = flops / (peak * time) as a
fraction, ``*_engine_active_time_percent`` as fractions (0-1).
"""


class Counters:
    """Byte/flop/instruction counters accumulated by the tracer."""

    def __init__(self):
        self.hbm_read = self.hbm_write = 0
        self.spill_save = self.spill_reload = 0
        self.flops = self.transpose_flops = 0
        self.instructions = self.dma_count = self.hoisted = 0
        self.access = {("sbuf", "read"): 0, ("sbuf", "write"): 0, ("psum", "read"): 0, ("psum", "write"): 0}

    def add_access(self, buffer, direction, nbytes):
        key = (buffer, direction)
        if key in self.access:
            self.access[key] += nbytes


def profile(t, state):
    """Profile dict of a finished replay (``tracer._Replay``) on target ``t``; see the
    module docstring for units."""
    s, m = state.sched, state.m
    total_ns = s.end + t.launch_ns
    total_s = total_ns * 1e-9
    busy = {k: v * 1e-6 for k, v in s.busy.items()}
    hbm = state.hbm_read + state.hbm_write
    frac = {k: (v / total_ns if total_ns else 0.0) for k, v in s.busy.items()}
    return {
        "total_time": total_s,
        "latency_ms": total_ns * 1e-6,
        "estimated": True,
        "target": t.name,
        "target_status": t.label,
        "hbm_read_bytes": int(state.hbm_read),
        "hbm_write_bytes": int(state.hbm_write),
        "psum_read_bytes": int(m.access[("psum", "read")]),
        "psum_write_bytes": int(m.access[("psum", "write")]),
        "sbuf_read_bytes": int(m.access[("sbuf", "read")]),
        "sbuf_write_bytes": int(m.access[("sbuf", "write")]),
        "spill_save_bytes": int(state.spill_save),
        "spill_reload_bytes": int(state.spill_reload),
        "hardware_flops": int(m.flops),
        "transpose_flops": int(m.transpose_flops),
        "peak_flops_bandwidth_ratio": t.peak_flops / t.dram_bytes_per_s,
        "mm_arithmetic_intensity": (m.flops - m.transpose_flops) / hbm if hbm else 0.0,
        "hfu_estimated_percent": m.flops / (t.peak_flops * total_s) if total_s else 0.0,
        "tensor_engine_active_time_percent": frac["tensor"],
        "vector_engine_active_time_percent": frac["vector"],
        "scalar_engine_active_time_percent": frac["scalar"],
        "gpsimd_engine_active_time_percent": frac["gpsimd"],
        "dma_active_time_percent": frac["dma"],
        "engine_busy_ms": busy,
        "bottleneck": max(busy, key=busy.get),
        "instruction_count": int(m.instructions + state.dma_count),
        "dma_count": int(state.dma_count),
        "hoisted_loads": int(state.hoisted),
    }
