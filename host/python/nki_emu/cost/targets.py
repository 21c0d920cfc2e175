"""Hardware constants and calibration knobs per target (nki-facts §3.1, 3.2, 5.4).

Every field names its source: [D] documented (AWS Neuron SDK docs, nki-facts §3.1),
[M] measured (nki-facts §5), [I] inferred / tunable default (fitted with
bench/calibrate.py against the trn1 NKIBench baselines of nki-facts §5.1).
"""
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Target:
    """Constants of one NeuronCore generation. Times in ns, clocks in GHz, sizes in bytes."""

    name: str
    label: str  # "calibrated" (trn1) or "unvalidated" (trn2): nki-facts §5.4 step 3
    clock_ghz: dict = field(default_factory=dict)  # per engine [D nki-facts §3.1]
    dma_queues: int = 16  # DMA engines per core [D S3/S4]
    # DMA (nki-facts §3.1, §3.4; docs/nki-emulator.md "DMA and engine model")
    dma_bytes_per_ns: float = 27.2  # one engine, loads and stores together: "theoretical bandwidth of
    #                                 27.2 GB/s" per engine [D S4 DMA overview]
    hbm_bytes_per_ns: float = 410.0  # the core's HBM share (820 GB/s per 2-core chip) caps the 16 engines [D S3/S4]
    dma_queue_bytes_per_ns: float = 21.0  # one queue (direction) per engine, before descriptor costs [I, fitted:
    #                                       with dma_desc_ns, >= 4 KiB payloads move at the documented 17 B/ns]
    dma_desc_ns: float = 46.0  # per contiguous chunk (DMA packet) and engine [I, fitted as above]
    dma_start_ns: float = 1300.0  # "semaphore-to-start latency (~1300 ns cross-engine)" of a transfer that
    #                               waits for a compute engine [D S4 DMA bandwidth guide]
    dma_latency_ns: float = 0.0  # completion latency after the last byte: none (an isolated 32 KiB transfer
    #                              took exactly 32 KiB / 23 B/ns on trn2) [D S4 DMA overview]
    dma_partitions_per_queue: int = 8  # 128 partitions over 16 engines [D S3 arch]
    dma_fixed_ns: float = 0.0  # per-transfer queue occupancy beyond descriptors [I, fitted: 0]
    dma_transpose_efficiency_hbm: float = 0.9  # DMA transpose HBM->SBUF: "up to 90 %" of DMA throughput [D S4 trn2
    #                                            guide]; trn1's "much lower bandwidth" is not quantified [I same]
    dma_transpose_efficiency_sbuf: float = 0.5  # SBUF->SBUF: "up to 50 %" [D S4 trn2 guide; I for trn1]
    hwdge_ns: float = 600.0  # hardware DGE, per dma_copy instruction [D S4 nki-dge] (NC-v3 only)
    sbuf_partition_bytes: int = 192 * 1024  # [D] trn1 192 KiB; trn2 224 KiB
    sbuf_reserved_bytes: int = 16 * 1024  # compiler reserve [D S3 compiler/sbuf.py]
    hoist_share: float = 0.0  # max SBUF share kept for hoisted (loop-invariant) loads [I, fitted]
    static_hoist_share: float = 0.7  # SBUF share pinned for loop-invariant inputs (residency.py) [I, fitted to nki-facts §5.2]
    spill_at_eviction: bool = True  # a live computed block is saved when evicted; the evicting write waits [I]
    release_dead_blocks: bool = False  # free SBUF blocks after their last access in the trace (residency.py) [I]
    psum_banks: int = 8  # 8 x 2 KiB per partition [D]
    min_ii: int = 64  # MIN_II cycles [D S3 isa docs]
    instr_overhead_cycles: int = 0  # extra static cost per compute instruction, engine cycles [I]
    act_overhead_cycles: int = 64  # extra ScalarE cost per instruction: the SBUF/PSUM access bubble, ~60
    #                                cycles on NC-v2 [D S3 arch]; ActReadAccumulator ~64 [D]; checked against the
    #                                measured ScalarE active times (matmul 2.40 ms measured, 2.42 estimated) [M]
    buffers_affine: int = 2  # physical buffers per SBUF allocation site in affine loops / block dims [I, fitted]
    buffers_sequential: int = 1  # ... for tiles allocated in sequential (Python range) loops [I, fitted]
    buffer_share: float = 0.5  # at most this fraction of usable SBUF per site ring [I]
    # software pipelining of affine loops (scheduler docstring "Pipelined order"): an instruction
    # at this dependency depth within its iteration or deeper is handed over after the next
    # iteration's shallower ones; 0 = program order. Affine iterations are independent [D nki-facts
    # §2.4] and the compiler reorders an engine's instructions [nki-facts §3.6]; the depth is
    # [I]: 3. Leave-one-out over 0..3 picks 1 in every fold, but 1 fails the monotonicity property
    # test on one mutation (a ring-assignment shift, docs/nki-emulator.md "Pipelined order"), 2
    # gives median 12.4 %; 3 is the best that passes (issue 35, docs/benchmarks/emulator-calibration.txt).
    # Tracer.pipe_stages keeps depths 1..6.
    pipeline_depth: int = 3
    auto_engine: str = "scalar"  # engine=unknown ops: "scalar" or "vector" [M nki-facts §3.5: ScalarE]
    sync_ns: float = 30.0  # cross-engine semaphore wait per dependency edge [I nki-facts §3.6]
    launch_ns: float = 30000.0  # fixed launch/teardown [I nki-facts §3.6]
    reciprocal_factor: float = 2.0  # VectorE reciprocal = factor*N (doc says 8N; nki-facts §5.2 [M])
    tensor_tensor_factor: float = 1.75  # fp32 SBUF/SBUF tensor_tensor: documented 2N [D S3]; fitted [I]
    tensor_tensor_psum_factor: float = 1.7  # tensor_tensor with a PSUM operand = factor*N (documented N [D S3]):
    #                                        the measured VectorE active times of lora and swiglu, whose VectorE work
    #                                        is mostly such adds, imply ~1.65-1.77 N [M engine-time.txt, issue 35]
    tensor_reduce_factor: float = 1.45  # VectorE tensor_reduce = factor*N (documented N [D S3]): gqa_full's and
    #                                    bmm_softmax's VectorE active times (8192 reduces of N 512 each) imply
    #                                    1.35-1.46 N; leave-one-out 1.40-1.55 [M engine-time.txt, issue 35]
    fp32_matmul_factor: int = 4  # fp32 matmul = 4 x max(...) [D S3 nc_matmul]
    onezero_factor: int = 2  # fp32 with is_*_onezero "2x better" [D S3]
    transpose_speedup: float = 1.0  # trn2 fp32 transpose mode 2x [D S4]
    shared_ports: bool = True  # trn1: DVE/GpSimd share SBUF port, DVE/ACT share PSUM [D S3]
    vector_perf_mode: bool = False  # trn2: VectorE 2x/4x for 16-bit tensor_copy/tensor_scalar/tensor_tensor [D S4]
    peak_flops: float = 91.75e12  # profiler's hfu denominator [M nki-facts §3.8]
    dram_bytes_per_s: float = 410e9  # profiler's peak_flops_bandwidth_ratio denominator [M]

    @property
    def sbuf_capacity(self):
        """Usable SBUF bytes per partition."""
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    def buffers(self, kind, bytes_pp):
        """Physical buffers of an SBUF allocation site of ``bytes_pp`` bytes per partition.

        ``kind``: "affine" (block dims, affine/static loops) or "sequential".
        """
        n = self.buffers_affine if kind == "affine" else self.buffers_sequential
        cap = int(self.sbuf_capacity * self.buffer_share) // max(1, bytes_pp)
        return max(1, min(n, cap))

    def ns(self, engine, cycles):
        """Converts ``cycles`` of ``engine`` to nanoseconds."""
        return cycles / self.clock_ghz[engine]


TRN1 = Target(
    name="trn1", label="calibrated",
    clock_ghz={"tensor": 2.8, "vector": 1.12, "scalar": 1.4, "gpsimd": 1.4},  # [D S3 arch guide]
)

TRN2 = replace(
    TRN1, name="trn2", label="unvalidated",
    clock_ghz={"tensor": 2.4, "vector": 0.96, "scalar": 1.2, "gpsimd": 1.2},  # [D S4 trn2 guide]
    dma_queue_bytes_per_ns=27.2, dma_desc_ns=27.5,  # [I] 4 KiB rows at the documented 23 B/ns [D S4]
    hbm_bytes_per_ns=2900.0 / 8, sbuf_partition_bytes=224 * 1024, transpose_speedup=2.0,
    shared_ports=False, vector_perf_mode=True, peak_flops=79e12, dram_bytes_per_s=362e9,
)

TARGETS = {"trn1": TRN1, "trn2": TRN2}


def get(name):
    """Target by name ("trn1"/"trn2"); raises ValueError otherwise."""
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}")
    return TARGETS[name]
