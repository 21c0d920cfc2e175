"""Python side of accelopt-host.

Modules:
  profile   -- ``profile_kernel(request)``: correctness over seeds + latency.
  backends  -- where kernels run: the NKI emulator or real Neuron hardware.
  peak      -- AccelOpt's per-problem peak-latency model (percent of peak).
  nkibench  -- reading ``nkibench/summary.json`` and its cases.
"""
