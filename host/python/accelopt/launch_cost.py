"""The fixed launch cost inside a kernel's latency: time no change to the kernel removes.

The emulator's cost model adds ``launch_ns`` of its target (``nki_emu.cost.targets``;
fitted to the smallest NKIBench kernels, docs/nki-emulator.md "Cost model") to every
estimate. The planner prompt shows it next to the latency (docs/optimize.md), because on
small problems it is most of the latency and makes every engine look idle.
A latency measured on Trainium also includes the runtime's launch cost, but the profile
does not report it, so none is stated then.
"""


def describe(request):
    """Returns the launch cost included in a latency.

    ``request`` (dict): ``estimated`` (bool: the latency is the emulator's estimate),
    ``target`` ("trn1" | "trn2", default "trn1").
    Returns ``{"launch_ms": float (ms) or None, "source": str}``; ``launch_ms`` is None
    for a measured latency. Raises ValueError for an unknown target.
    """
    if not request.get("estimated", False):
        return {"launch_ms": None, "source": "measured latency: the launch cost is not reported"}
    from nki_emu.cost import targets

    target = targets.get(request.get("target") or "trn1")
    return {"launch_ms": target.launch_ns * 1e-6, "source": f"nki_emu.cost.targets.{target.name.upper()}.launch_ns"}
