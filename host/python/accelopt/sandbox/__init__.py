"""Evaluation of untrusted candidate kernels (docs/isolation.md).

The profiling harness is split in two:

* :mod:`.trusted` runs in the host's interpreter: it loads the reference,
  draws fresh inputs per seed (plus one hidden, randomly seeded input set),
  computes the reference outputs, scans the kernel's source
  (:mod:`.static_check`) and finally judges what the worker sent back.
* :mod:`.untrusted` runs inside a worker process (``accelopt-host worker``):
  it only executes the kernel on the inputs it is given and returns the raw
  outputs, input digests and the cost model's latency. It never sees a
  reference output.

:mod:`.worker_entry` is the worker's request loop body and
:mod:`.integrity` its check that NumPy and the backend were not tampered with.
"""
