"""Output coverage: every element of a returned HBM output was written by an instruction.

A kernel on Trainium hands back only what its stores/DMAs wrote to HBM; values
computed on the host, or never written, do not exist there. The emulator
keeps a written-element mask for every HBM tensor the kernel allocates
(``nki_emu.tensor.write``/``update_in_place`` set it, i.e. ``nl.store``,
assignment and ``+=`` into HBM), and :func:`check_outputs` refuses a result
that is not covered (docs/isolation.md, ``unwritten_output``).
"""
from .errors import UnwrittenOutputError
from .tensor import HBM_BUFFERS, NkiTensor, unwritten


def _describe(value):
    if isinstance(value, NkiTensor):
        article = "an" if value.buffer == "sbuf" else "a"
        return f"{article} {value.buffer.upper()} tile '{value.root.name}'"
    return f"a host value of type {type(value).__name__}"


def _flatten(values):
    for value in values:
        if isinstance(value, (tuple, list)):
            yield from _flatten(value)
        else:
            yield value


def check_outputs(result, arguments=()):
    """Checks what a kernel returned: None, one value, or a tuple/list of values.

    Each value must be an HBM tensor (or view): one the kernel allocated, whose
    every element a store wrote in this run, or one of ``arguments`` (the
    kernel's bound arguments, also inside tuples/lists; returning an input is
    left to the harness's aliasing rule). Raises UnwrittenOutputError naming the first output that
    fails, with the count of unwritten elements and the first unwritten index.
    """
    if result is None:
        return
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    inputs = {id(a.root) for a in _flatten(arguments) if isinstance(a, NkiTensor)}
    for index, value in enumerate(outputs):
        if not isinstance(value, NkiTensor) or value.buffer not in HBM_BUFFERS:
            raise UnwrittenOutputError(
                f"output {index} is {_describe(value)}, not an HBM tensor written by nl.store/DMA",
                index)
        found = unwritten(value)
        if found is None:
            if id(value.root) in inputs:
                continue
            raise UnwrittenOutputError(
                f"output {index} ('{value.root.name}') is an HBM tensor that no store/DMA of the kernel "
                f"wrote (made from host data)", index, value.size, value.size)
        if found[0] == 0:
            continue
        missing, first = found
        total = value.size
        raise UnwrittenOutputError(
            f"output {index} ('{value.root.name}', shape {list(value.shape)}): {missing} of {total} "
            f"elements were never written by a store/DMA (first unwritten index {list(first)})",
            index, missing, total, first)
