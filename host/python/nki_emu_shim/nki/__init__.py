"""The NKI emulator under the Neuron SDK's top-level name ``nki`` (SDK >= 2.28).

Put ``host/python/nki_emu_shim`` on ``PYTHONPATH`` to run a harness written for the
real SDK (AccelOpt, nki-kernel-agent) unmodified on the emulator: ``import nki``
installs the emulator (``nki_emu.install``) and yields its ``nki`` module
(docs/nki-emulator.md, "Running the peers' harnesses unmodified"). The folder name
contains ``nki_emu``, so SDK detection (accelopt.backends.sdk) never takes it for a
real SDK.
"""
import os
import sys

_HOST_PYTHON = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _HOST_PYTHON not in sys.path:
    sys.path.insert(0, _HOST_PYTHON)

import nki_emu  # noqa: E402

nki_emu.install()
sys.modules[__name__] = sys.modules["nki"]
