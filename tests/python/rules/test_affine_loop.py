"""Rule ``affine_loop``: a range / sequential_range loop without carried dependencies becomes affine_range."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rules_helpers as H  # noqa: E402

# an elementwise kernel over column tiles written with a Python range over offsets (the published rope's form)
KERNEL = H.kernel_source('''
    @nki.jit
    def kernel(x, y):
        P, S = x.shape
        out = nl.ndarray((P, S), dtype=x.dtype, buffer=nl.shared_hbm)
        tile = 256
        i_p = nl.arange(P)[:, None]
        i_f = nl.arange(tile)[None, :]
        for off in range(0, S, tile):
            # one column tile
            a = nl.ndarray((P, tile), dtype=x.dtype, buffer=nl.sbuf)
            a[i_p, i_f] = nl.load(x[i_p, i_f + off])
            b = nl.load(y[i_p, i_f + off])
            c = nisa.tensor_tensor(a, b, nl.multiply)
            c = nisa.tensor_tensor(c, a, nl.add)
            nl.store(out[i_p, i_f + off], c)
        return out
''')


def test_affine_loop_is_correct_and_overlaps_iterations():
    ref = H.reference("x, y", "x * y + x", [(128, 2048), (128, 2048)])
    assert [p["id"] for p in H.plans(KERNEL, "affine_loop")] == ["affine_loop:off"]
    new, before, after = H.check(KERNEL, ref, "affine_loop")  # strictly faster: loads overlap compute
    assert "for off_i in nl.affine_range((S + tile - 1) // tile):\n" \
           "        off = off_i * tile\n        # one column tile\n" in new, new
    m_before, m_after = H.run(KERNEL, ref)["metrics"], H.run(new, ref)["metrics"]
    assert m_after["engine_busy_ms"] == m_before["engine_busy_ms"]  # same work, only overlapped


def test_affine_loop_keeps_the_argument_of_range_n_and_sequential_range():
    ref = H.reference("x, y", "x * y + x", [(128, 2048), (128, 2048)])
    src = H.edit(KERNEL, "for off in range(0, S, tile):\n", "for j in nl.sequential_range(S // tile):\n"
                 "        off = j * tile\n")
    new, _, _ = H.check(src, ref, "affine_loop")
    assert "for j in nl.affine_range(S // tile):\n" in new, new


def test_affine_loop_refuses_carried_dependencies():
    # an accumulator carried from one iteration to the next
    carried = H.edit(KERNEL, "        nl.store(out[i_p, i_f + off], c)\n",
                     "        acc = nl.add(acc, c)\n        nl.store(out[i_p, i_f + off], acc)\n")
    carried = H.edit(carried, "    for off in range", "    acc = nl.zeros((P, tile), dtype=x.dtype)\n"
                     "    for off in range")
    H.not_applicable(carried, "affine_loop")
    # the output is read back in the loop
    readback = H.edit(KERNEL, "b = nl.load(y[i_p, i_f + off])", "b = nl.load(out[i_p, i_f])")
    H.not_applicable(readback, "affine_loop")
    # a tensor allocated outside is written in place
    outside = H.edit(KERNEL, "        a = nl.ndarray((P, tile), dtype=x.dtype, buffer=nl.sbuf)\n", "")
    outside = H.edit(outside, "    for off in range", "    a = nl.ndarray((P, tile), dtype=x.dtype, "
                     "buffer=nl.sbuf)\n    for off in range")
    H.not_applicable(outside, "affine_loop")
    # a step that is not a provable positive integer
    H.not_applicable(H.edit(KERNEL, "range(0, S, tile)", "range(0, S, P - 128 + tile)"), "affine_loop")
