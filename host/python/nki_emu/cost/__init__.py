"""Trainium latency model of the NKI emulator (nki-facts §3).

``targets`` (constants), ``formulas`` (cycles per instruction), ``scheduler``
(engine queues, DMA queues, dependencies, PSUM banks), ``residency`` (SBUF
hoisting/re-issue/spills), ``tracer`` (glue) and ``metrics`` (profile dict).
"""
