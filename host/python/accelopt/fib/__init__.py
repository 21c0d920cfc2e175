"""FlashInfer-Bench on the host: inputs, evaluation and judging of FIB solutions (docs/flashinfer.md).

The data model (definitions, workloads, solutions, traces) is C++
(``flashinfer/``); this package holds what needs torch: seeded inputs, the
reference and solution runs (:mod:`.untrusted`, in a worker), the judge
(:mod:`.trusted`, in the host), and the Python syntax checks the C++
validator asks for (:mod:`.syntax`).
"""
