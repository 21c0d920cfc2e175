"""NEFF/NTFF stand-ins that carry the emulated profile (issue 20; docs/nki-emulator.md,
"Running the peers' harnesses unmodified").

AccelOpt's ``NKIKernel.profile()`` and nki-kernel-agent's kernel wrapper call
``nki.baremetal(kernel, save_neff_name=NEFF, save_trace_name=NTFF, ...)(*inputs)`` and
then the shell command ``neuron-profile view --output-format summary-json -n NEFF -s
NTFF``, reading ``summary[first key]["total_time"]`` (seconds) and the fields of their
``profile_list.json`` (docs/nki-facts.md §3.8). The emulator's ``baremetal`` writes:

* NEFF stand-in: JSON ``{"format": "nki-emu-neff", "version": 1, "id", "kernel",
  "target", "additional_compile_opt"}``;
* NTFF stand-in: JSON ``{"format": "nki-emu-ntff", "version": 1, "neff_id", "summary"}``
  where ``summary`` is the neuron-profile summary of the emulated run (:func:`summary`).

``scripts/neuron-profile`` (stdlib only) answers the ``view`` call from these files and
hands any other NEFF to the real ``neuron-profile`` further down ``PATH``.
"""
import json
import os
import uuid

NEFF_FORMAT, NTFF_FORMAT, VERSION = "nki-emu-neff", "nki-emu-ntff", 1


def summary(profile):
    """The ``neuron-profile view --output-format summary-json`` entry of an emulated
    profile (``nki_emu.cost.metrics.profile``): every scalar field (``total_time`` in
    seconds, byte counters, flops, ``*_active_time_percent`` fractions 0-1, ...) plus
    ``dma_active_time`` (DMA busy time in seconds [I]: the unit of that nki-kernel-agent
    field is not documented; the fraction is ``dma_active_time_percent``) and
    ``*_engine_active_time`` (busy seconds per engine)."""
    out = {k: v for k, v in profile.items() if isinstance(v, (int, float, str, bool))}
    busy_ms = profile.get("engine_busy_ms", {})
    for engine in ("tensor", "vector", "scalar", "gpsimd"):
        out[f"{engine}_engine_active_time"] = busy_ms.get(engine, 0.0) * 1e-3
    out["dma_active_time"] = busy_ms.get("dma", 0.0) * 1e-3
    return out


def write(neff_path, ntff_path, profile, kernel_name, target, compile_opt):
    """Writes the NEFF stand-in (when ``neff_path``) and the NTFF stand-in (when
    ``ntff_path``) of one emulated run; ``profile``: the run's profile dict (None when not
    traced: then no NTFF is written). Raises OSError when a file cannot be written."""
    ident = str(uuid.uuid4())
    if neff_path:
        neff = {"format": NEFF_FORMAT, "version": VERSION, "id": ident, "kernel": kernel_name, "target": target,
                "additional_compile_opt": compile_opt or ""}
        _dump(neff_path, neff)
    if ntff_path and profile is not None:
        _dump(ntff_path, {"format": NTFF_FORMAT, "version": VERSION, "neff_id": ident if neff_path else None,
                          "kernel": kernel_name, "target": target, "summary": summary(profile)})


def _dump(path, data):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def target_of(platform_target, environ=None):
    """The emulated target for ``nki.baremetal``: ``platform_target`` ("trn1"/"trn2", or
    the simulator's "gen2"/"gen3"), else ``NEURON_PLATFORM_TARGET_OVERRIDE`` (the variable
    AWS's NKI simulator reads, nki-facts §2.7), else "trn1". Raises ValueError for
    another value."""
    environ = os.environ if environ is None else environ
    value = platform_target or environ.get("NEURON_PLATFORM_TARGET_OVERRIDE") or "trn1"
    name = {"gen2": "trn1", "gen3": "trn2", "trn1": "trn1", "trn2": "trn2", "inf2": "trn1"}.get(str(value).lower())
    if name is None:
        raise ValueError(f"platform_target {value!r} is not emulated (trn1/gen2 or trn2/gen3)")
    return name
