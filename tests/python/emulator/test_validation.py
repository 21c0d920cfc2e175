"""One test per neuronxcc refusal rule the emulator enforces (nki-facts §4)."""
import numpy as np

from emulator.emu_helpers import expect_error, rand
import nki_emu
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def _run(body, *args):
    return nki_emu.run(body, list(args), trace=False)


def test_partition_over_128_refused():
    def k(x):
        nl.ndarray((256, 4), dtype=np.float32, buffer=nl.sbuf)
    err = expect_error("err_num_partition_exceed_arch_limit", _run, k, rand(2, 2))
    assert "number of partitions 256 exceed architecture limitation of 128." in str(err)


def test_error_points_at_kernel_line():
    def k(x):
        return nl.load(x[nl.arange(256)[:, None], nl.arange(4)[None, :]])
    err = expect_error("err_num_partition_exceed_arch_limit", _run, k, rand(256, 4))
    assert err.filename.endswith("test_validation.py") and err.lineno > 0
    assert str(err).startswith(f"{err.filename}:{err.lineno}: error: [err_num_partition_exceed_arch_limit]")


def test_matmul_moving_free_over_512_refused():
    def k(a, b):
        nisa.nc_matmul(nl.load(a), nl.load(b))
    expect_error("err_moving_free_size_exceed_limit", _run, k, rand(128, 128), rand(128, 1024))


def test_matmul_stationary_free_over_128_refused():
    def k(a, b):
        nisa.nc_matmul(nl.load(a), nl.load(b))
    expect_error("err_stationary_free_size_exceed_limit", _run, k, rand(128, 256), rand(128, 512))


def test_mixing_basic_and_advanced_indexing_refused():
    def k(x):
        nl.load(x[nl.arange(128)[:, None], 0:4])
    err = expect_error("err_unsupported_mixing_basic_advanced_tensor_indexing", _run, k, rand(128, 4))
    assert "Mixing basic tensor indexing and advanced tensor indexing is not supported." in err.message


def test_1d_arange_refused():
    def k(x):
        nl.load(x[nl.arange(128)])
    err = expect_error("err_1d_arange_not_supported", _run, k, rand(128))
    assert "with 1d arange is not supported" in err.message


def test_static_out_of_bound_refused():
    def k(x):
        nl.load(x[nl.arange(128)[:, None], nl.arange(4096)[None, :]])
    err = expect_error("err_tensor_access_out_of_bound", _run, k, rand(128, 4000))
    assert "index range [0, 4095] exceed dimension size of 4000" in err.message


def test_basic_slice_out_of_bound_refused():
    def k(x):
        nl.load(x[0:128, 0:4096])
    expect_error("err_tensor_access_out_of_bound", _run, k, rand(128, 4000))


def test_masked_out_of_bound_read_allowed():
    def k(x):
        out = nl.ndarray((200, 8), dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            p = 128 * i + nl.arange(128)[:, None]
            t = nl.load(x[p, nl.arange(8)[None, :]], mask=(p < 200))
            nl.store(out[p, nl.arange(8)[None, :]], value=t, mask=(p < 200))
        return out
    x = rand(200, 8)
    assert np.array_equal(_run(k, x).outputs, x)


def test_writing_immutable_input_refused():
    def k(x):
        nl.store(x[nl.arange(4)[:, None], nl.arange(4)[None, :]], value=nl.load(x[nl.arange(4)[:, None], nl.arange(4)[None, :]]))
    err = expect_error("err_cannot_update_immutable_parameter", _run, k, rand(4, 4))
    assert err.message == "Cannot update immutable parameter"


def test_affine_iterations_writing_same_location_refused():
    def k(x):
        a = nl.ndarray((4, 8), dtype=np.float32, buffer=nl.sbuf)
        for i in nl.affine_range(3):
            a[nl.arange(4)[:, None], nl.arange(8)[None, :]] = nl.load(x[nl.arange(4)[:, None], nl.arange(8)[None, :]])
    err = expect_error("err_unexpected_output_dependencies", _run, k, rand(4, 8))
    assert "different iterations of i loop" in err.message


def test_sequential_iterations_may_write_same_location():
    def k(x):
        a = nl.ndarray((4, 8), dtype=np.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(3):
            a[nl.arange(4)[:, None], nl.arange(8)[None, :]] = nl.load(x[nl.arange(4)[:, None], nl.arange(8)[None, :]])
    _run(k, rand(4, 8))


def test_load_from_sbuf_refused():
    def k(x):
        nl.load(nl.ndarray((4, 4), dtype=np.float32, buffer=nl.sbuf))
    err = expect_error("err_unsupported_memory", _run, k, rand(4, 4))
    assert "Expected operand 'src' of 'load' to be in address space 'hbm', but got a tile in 'sbuf' instead." == err.message


def test_compute_on_hbm_refused():
    def k(x):
        nl.exp(x)
    err = expect_error("err_unsupported_memory", _run, k, rand(4, 4))
    assert "Expected operand 'x' of 'exp' to be in address space 'psum|sbuf', but got a tile in 'hbm' instead." == err.message


def test_partition_mismatch_refused():
    def k(a, b):
        nisa.tensor_tensor(nl.load(a), nl.load(b), op=nl.add)
    err = expect_error("err_num_partition_mismatch", _run, k, rand(128, 512), rand(1, 512))
    assert "(data1[128, 512], data2[1, 512]) of 'tensor_tensor'" in err.message


def test_destination_smaller_than_source_refused():
    def k(a):
        d = nl.ndarray((128, 1), dtype=np.float32, buffer=nl.sbuf)
        d[...] = nl.load(a)
    err = expect_error("err_store_dst_shape_smaller_than_other_shape", _run, k, rand(128, 512))
    assert "shape [128, 1] of parameter 'a' is smaller than other parameter shapes b[128, 512]." in err.message


def test_hbm_tensor_with_init_value_refused():
    def k(a):
        nl.zeros((4, 4), dtype=np.float32, buffer=nl.shared_hbm)
    expect_error("err_hbm_tensor_with_init_value_not_supported", _run, k, rand(4, 4))


def test_control_flow_on_arange_refused():
    def k(a):
        if nl.arange(4)[:, None] > 2:
            pass
    expect_error("err_control_flow_condition_depending_on_arange", _run, k, rand(4, 4))


def test_large_declared_block_tensors_accepted():
    def k(a):
        nl.ndarray((86, 2, nl.par_dim(128), 1024), dtype=np.float32, buffer=nl.sbuf)
        nl.zeros((16, 4, 4, 8, 2, nl.par_dim(128), 512), dtype=np.float32, buffer=nl.psum, lazy_initialization=True)
    _run(k, rand(4, 4))


def test_psum_tile_over_one_bank_refused_for_non_matmul_results():
    def k(x):
        p = nl.ndarray((128, 1024), dtype=np.float32, buffer=nl.psum)
        p[...] = nl.exp(nl.load(x))
    err = expect_error("err_psum_tile_exceed_bank_size", _run, k, rand(128, 1024))
    assert "4096 bytes per partition" in err.message

    def ok(x):
        p = nl.ndarray((128, 512), dtype=np.float32, buffer=nl.psum)
        p[...] = nl.exp(nl.load(x))
    _run(ok, rand(128, 512))


def test_start_partition_alignment_refused():
    def k(x):
        t = nl.load(x)
        nl.exp(t[16:80, :])  # 64 partitions starting at 16: must start at 0 or 64
    err = expect_error("err_unsupported_start_partition", _run, k, rand(128, 8))
    assert "starts at partition 16" in err.message

    def ok(x):
        t = nl.load(x)
        nl.exp(t[64:128, :])  # rope's legal 64-partition view at offset 64
        nl.exp(t[96:112, :])  # P <= 32 may start at 96
    _run(ok, rand(128, 8))


def test_activation_reduce_op_other_than_add_refused_on_trn1():
    def k(x):
        t = nl.load(x)
        r = nl.ndarray((128, 1), dtype=np.float32, buffer=nl.sbuf)
        nisa.activation(op=nl.exp, data=t, reduce_op=nl.max, reduce_res=r)
    expect_error("err_activation_reduce_op_unsupported", _run, k, rand(128, 8))


def test_activation_reciprocal_with_bias_refused_on_trn1():
    def k(x):
        t = nl.load(x)
        b = nisa.memset((128, 1), 0, dtype=np.float32)
        nisa.activation(op=nl.reciprocal, data=t, bias=b)
    expect_error("err_activation_reciprocal_bias_unsupported", _run, k, rand(128, 8))


def test_activation_scale_must_be_fp32():
    def k(x):
        t = nl.load(x)
        s = nisa.memset((128, 1), 1, dtype=np.float16)
        nisa.activation(op=nl.exp, data=t, scale=s)
    expect_error("err_activation_scale_invalid_type", _run, k, rand(128, 8))


def test_tensor_scalar_on_scalar_engine_refused():
    def k(x):
        nisa.tensor_scalar(nl.load(x), nl.multiply, 2.0, engine=nisa.scalar_engine)
    expect_error("err_tensor_scalar_engine_unsupported", _run, k, rand(128, 8))

    def k2(x):
        nisa.tensor_scalar(nl.load(x), nl.maximum, 2.0, engine=nisa.scalar_engine)
    err = expect_error("err_tensor_scalar_engine_unsupported", lambda *a: nki_emu.run(k2, list(a), target="trn2",
                                                                                        trace=False), rand(128, 8))
    assert "(maximum, None)" in err.message
    nki_emu.run(k, [rand(128, 8)], target="trn2", trace=False)  # (multiply, None) is fine on trn2


def test_local_variable_used_out_of_scope_refused():
    def k(x):
        o = nl.ndarray((128, 8), dtype=np.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            tmp = nl.load(x)
        nl.store(o, value=nl.exp(tmp))
        return o
    err = expect_error("err_local_variable_used_out_of_scope", _run, k, rand(128, 8))
    assert "Local variable 'tmp' is referenced outside of its parent scope" in err.message


def test_indirect_dma_on_partition_axis_and_refused_on_free_axis():
    def k(x, idx):
        o = nl.ndarray((4, 8), dtype=np.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.arange(4)[:, None], nl.arange(8)[None, :]
        ids = nl.load(idx)
        nl.store(o, value=nl.load(x[ids[i_p, 0], i_f]))
        return o
    x = rand(16, 8)
    idx = np.array([[3], [0], [15], [7]], np.int32)
    out = _run(k, x, idx).outputs
    assert np.array_equal(out, x[[3, 0, 15, 7]])

    def bad(x, idx):
        ids = nl.load(idx)
        nl.load(x[nl.arange(4)[:, None], ids[nl.arange(1)[:, None], 0]])
    expect_error("err_indirect_indices_free_dim", _run, bad, x, np.zeros((1, 1), np.int32))
