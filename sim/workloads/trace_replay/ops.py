"""Operation classes of a measured trace and their times on a modelled device.

A recorded operation (an `aten::` op of a PyTorch profiler trace, a Chakra compute node, a GPU kernel
whose launching op is known) falls into one category:

- `gemm`: aten::mm / addmm / bmm / baddbmm / matmul / linear (shapes (m, n, k, batch) from the
  recorded input dims);
- `attention`: scaled_dot_product_attention and its flash / efficient / math kernels, forward and
  backward (batch, heads, query and key lengths, head dim; backward = 2.5x the forward FLOPs, the
  FlashAttention-2 count);
- `embedding`: embedding_bag / embedding and their backward (rows gathered or scattered, indices
  and outputs streamed);
- `elementwise`: pointwise ops, reductions, norms, softmax, copies and optimizer updates
  (memory-bound: the bytes of the tensor inputs plus one output the size of the largest input);
- `collective`: gloo / nccl / c10d collectives and send/recv (op and bytes: `collective_of`);
- `other`: everything else (views, allocation, Python, autograd bookkeeping) - kept as measured.

`model_time_s(spec, op)` prices one op (pass `recorded_op_device(spec)` for ops as a trace records them) with hardware_models' cost functions (`gemm_time_s`,
`attention_time_s`, `memory_time_s`); None when the op's shapes were not recorded (profile with
`record_shapes=True`) or its dtype has no peak on the device. Nothing here reads files or imports torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hardware_models.gpu import DTYPE_BYTES, DeviceSpec

CATEGORIES = ("gemm", "attention", "embedding", "elementwise", "collective", "other")
MODELLED = ("gemm", "attention", "embedding", "elementwise")  # categories a device model can re-time

GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm", "_addmm_activation"}
ATTENTION_RE = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|_fused_sdp|flash_attn")
EMBEDDING_RE = re.compile(
    r"^(_?embedding_bag|embedding|_embedding_bag_forward_only|embedding_dense_backward|"
    r"_embedding_bag_backward|_embedding_bag_dense_backward|_embedding_bag_sparse_backward|"
    r"embedding_backward)$"
)
ELEMENTWISE_OPS = {
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "relu", "relu_", "clamp_min", "clamp",
    "threshold_backward", "gelu", "gelu_backward", "silu", "silu_backward", "sigmoid", "sigmoid_backward", "tanh",
    "tanh_backward", "exp", "log", "sqrt", "rsqrt", "pow", "sum", "mean", "copy_", "fill_", "zero_", "softmax",
    "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data", "native_layer_norm",
    "native_layer_norm_backward", "layer_norm", "rms_norm", "_fused_rms_norm", "mse_loss", "mse_loss_backward",
    "nll_loss_forward", "nll_loss_backward", "addcmul_", "addcdiv_", "lerp_", "_foreach_add_", "_foreach_mul_",
    "_foreach_addcmul_", "_foreach_addcdiv_", "_foreach_sqrt", "_foreach_div_", "_foreach_lerp_", "where",
    "dropout", "native_dropout", "native_dropout_backward", "cat", "clone", "contiguous", "_to_copy", "index_add_",
}  # fmt: skip
COLLECTIVE_OPS = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "allreduce_": "all_reduce",
    "allreduce_coalesced": "all_reduce", "allreduce_coalesced_": "all_reduce",
    "all_gather": "all_gather", "allgather": "all_gather", "allgather_": "all_gather",
    "_allgather_base": "all_gather", "_allgather_base_": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "allgather_into_tensor_coalesced_": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base": "reduce_scatter",
    "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter", "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "alltoall_": "all_to_all", "alltoall_base": "all_to_all",
    "alltoall_base_": "all_to_all", "all_to_all_single": "all_to_all", "all_to_allv": "all_to_all",
    "broadcast": "broadcast", "broadcast_": "broadcast", "reduce": "reduce", "reduce_": "reduce",
    "send": "send", "recv": "recv", "recv_": "recv", "recv_any_source_": "recv", "barrier": "barrier",
}  # fmt: skip
TORCH_DTYPES = {
    "float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "BFloat16": "bf16", "Half": "fp16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "signed char": "int8", "long int": "int64",
    "int": "int32", "double": "fp64", "bool": "bool", "unsigned char": "uint8",
    "float32": "fp32", "bfloat16": "bf16", "float16": "fp16",
}  # fmt: skip
ELEMENT_BYTES = {**DTYPE_BYTES, "int64": 8, "int32": 4, "fp64": 8, "bool": 1, "uint8": 1}
ATTENTION_BACKWARD_FLOP_FACTOR = 2.5  # FlashAttention-2: backward = 2.5x the forward matmul FLOPs


@dataclass(frozen=True)
class OpRecord:
    """What classification needs of one recorded op: its name, input dims and types (as recorded,
    may be empty) and the `Concrete Inputs` strings (scalars such as is_causal)."""

    name: str
    dims: tuple = ()
    types: tuple = ()
    concrete: tuple = ()


def base_name(name: str) -> str:
    """`aten::addmm` -> `addmm`, `gloo:all_reduce` -> `all_reduce`, `c10d::allreduce_` -> `allreduce_`."""
    return name.rsplit(":", 1)[-1].strip()


def is_collective_name(name: str) -> bool:
    lower = name.lower()
    return lower.startswith(("gloo:", "nccl:", "c10d::", "record_param_comms", "ncclkernel", "nccldevkernel"))


def category(op: OpRecord) -> str:
    name = op.name
    if is_collective_name(name):
        return "collective"
    base = base_name(name)
    if not name.startswith("aten::") and "::" in name:  # autograd::engine::..., profiler::, ...
        return "other"
    if base in GEMM_OPS:
        return "gemm"
    if ATTENTION_RE.search(base):
        return "attention"
    if EMBEDDING_RE.match(base):
        return "embedding"
    if base in ELEMENTWISE_OPS:
        return "elementwise"
    return "other"


def dtype_of(op: OpRecord, index: int = 0) -> str | None:
    types = [t for t in op.types if t in TORCH_DTYPES and TORCH_DTYPES[t] in ELEMENT_BYTES]
    if not types:
        return None
    t = op.types[index] if index < len(op.types) and op.types[index] in TORCH_DTYPES else types[0]
    return TORCH_DTYPES[t]


def _tensor_dims(op: OpRecord) -> list[list[int]]:
    """Tensor input dims (TensorLists flattened; scalars and empty entries dropped)."""
    out = []
    for d in op.dims:
        if isinstance(d, list) and d and isinstance(d[0], list):
            out += [x for x in d if x]
        elif isinstance(d, list) and d:
            out.append(d)
    return out


def _numel(dims) -> float:
    return float(math.prod(dims)) if dims else 1.0


def gemm_shape(op: OpRecord) -> tuple[float, float, float, float] | None:
    """(m, n, k, batch) of a GEMM-class op from its input dims."""
    base, d = base_name(op.name), [list(x) for x in op.dims if isinstance(x, list)]
    try:
        if base == "mm":
            (m, k), (_, n) = d[0], d[1]
            return m, n, k, 1
        if base in ("addmm", "_addmm_activation"):
            (m, k), (_, n) = d[1], d[2]
            return m, n, k, 1
        if base == "bmm":
            (b, m, k), (_, _, n) = d[0], d[1]
            return m, n, k, b
        if base in ("baddbmm", "addbmm"):
            (b, m, k), (_, _, n) = d[1], d[2]
            return m, n, k, b
        if base == "linear":
            x, w = d[0], d[1]
            return _numel(x[:-1]), w[0], x[-1], 1
        if base == "matmul":
            a, b = d[0], d[1]
            if len(b) == 2:
                return _numel(a[:-1]), b[1], a[-1], 1
            return a[-2], b[-1], a[-1], _numel(a[:-2])
    except (IndexError, ValueError, TypeError):
        return None
    return None


def _is_causal(op: OpRecord) -> bool:
    """is_causal as recorded (the 5th argument of scaled_dot_product_attention and its CPU flash
    kernel); unrecorded: causal, as decoder models run."""
    for i in (4, 3):
        if i < len(op.concrete) and op.concrete[i] in ("True", "False"):
            return op.concrete[i] == "True"
    return True


def attention_time_s(spec: DeviceSpec, op: OpRecord, dtype: str) -> float | None:
    t = _tensor_dims(op)
    if len(t) < 3 or len(t[0]) != 4 or len(t[1]) != 4:
        return None
    (b, h, q, d), (_, hk, kv, _) = t[0], t[1]
    backward = "backward" in op.name
    causal = _is_causal(op)
    flop = spec.attention_flop(q, kv, h, d, causal, b) * (ATTENTION_BACKWARD_FLOP_FACTOR if backward else 1.0)
    return spec.attention_time_s(q, kv, h, d, kv_heads=hk, dtype=dtype, causal=causal, batch=b, flop=flop)


def embedding_time_s(spec: DeviceSpec, op: OpRecord) -> float | None:
    t = _tensor_dims(op)
    base = base_name(op.name)
    e = ELEMENT_BYTES.get(dtype_of(op) or "fp32", 4)
    if "backward" in base:  # grad [n, dim] (or [bags, dim]) and the indices: rows scattered
        if len(t) < 2:
            return None
        grad, idx = t[0], t[1]
        dim = grad[-1]
        lookups = _numel(idx)
        return spec.memory_time_s(lookups * 8 + _numel(grad) * e, gather_bytes=lookups * dim * e)
    if len(t) < 2 or len(t[0]) != 2:
        return None
    (_, dim), idx = t[0], t[1]
    lookups = _numel(idx)
    bags = _numel(t[2]) if "bag" in base and len(t) > 2 else lookups
    return spec.memory_time_s(lookups * 8 + bags * dim * e, gather_bytes=lookups * dim * e)


def elementwise_time_s(spec: DeviceSpec, op: OpRecord) -> float | None:
    """Bytes of the tensor inputs plus one output the size of the largest (a reduction's small output
    is then over-counted; in-place updates write what they read)."""
    t = _tensor_dims(op)
    types = [TORCH_DTYPES.get(x) for x in op.types]
    sizes = []
    for i, dims in enumerate(t):
        e = ELEMENT_BYTES.get(types[i] if i < len(types) and types[i] else "fp32", 4)
        sizes.append(_numel(dims) * e)
    if not sizes:
        return None
    return spec.memory_time_s(sum(sizes) + max(sizes))


def recorded_op_device(spec: DeviceSpec) -> DeviceSpec:
    """The device as it prices a *recorded* op: without `launch_overhead`, because a trace's op or
    kernel duration excludes the dispatch/launch time around it, which the trace keeps as the
    enclosing op's own time or the launching runtime call (replayed as measured)."""
    return spec.model_copy(update={"launch_overhead": 0.0})


def default_timing(category_name: str, device_kind: str) -> str:
    """`auto` for a category: the device model, except elementwise ops on a CPU, kept as measured -
    the CPU profile streams from DRAM, while a trace's small elementwise ops run from cache."""
    return "measured" if category_name == "elementwise" and device_kind == "cpu" else "model"


def model_time_s(spec: DeviceSpec, op: OpRecord, cat: str | None = None) -> float | None:
    """The device model's time for one op of a modelled category, None if it cannot be priced."""
    cat = cat or category(op)
    try:
        if cat == "gemm":
            shape, dtype = gemm_shape(op), dtype_of(op, 1 if base_name(op.name) in ("addmm", "baddbmm") else 0)
            if shape is None or dtype is None:
                return None
            m, n, k, b = shape
            return spec.gemm_time_s(m, n, k, dtype, b)
        if cat == "attention":
            dtype = dtype_of(op)
            return attention_time_s(spec, op, dtype) if dtype else None
        if cat == "embedding":
            return embedding_time_s(spec, op)
        if cat == "elementwise":
            return elementwise_time_s(spec, op)
    except (ValueError, KeyError, TypeError):  # a dtype without a peak on this device, odd dims
        return None
    return None


@dataclass(frozen=True)
class CollectiveCall:
    """A collective as recorded: the dcsim op (sim/network/collectives.py name, or broadcast/reduce/
    send/recv/barrier), bytes per rank in the nccl-tests convention, the group size if recorded."""

    op: str
    nbytes: float
    group_size: int | None = None


def collective_of(op: OpRecord, args: dict | None = None) -> CollectiveCall | None:
    """The collective an op records: its op from the name, its bytes from the input tensors (or the
    `In msg nelems`/`dtype` args of record_param_comms). all_gather and reduce_scatter are counted as
    nccl-tests does: the total buffer (per-rank input x group size for all_gather)."""
    args = args or {}
    name = args.get("Collective name") or base_name(op.name)
    kind = COLLECTIVE_OPS.get(str(name).lower())
    if kind is None:
        return None
    group = args.get("Group size")
    group = int(group) if isinstance(group, (int, float)) and group > 0 else None
    if "In msg nelems" in args:
        e = ELEMENT_BYTES.get(TORCH_DTYPES.get(str(args.get("dtype", "float")), "fp32"), 4)
        nelems = float(args.get("In msg nelems") or 0)
        if kind == "all_gather":
            nelems = float(args.get("Out msg nelems") or nelems * (group or 1))
        return CollectiveCall(kind, nelems * e, group)
    t = _tensor_dims(op)
    types = [TORCH_DTYPES.get(x) for x in op.types if x]
    e = ELEMENT_BYTES.get(next((x for x in types if x in ELEMENT_BYTES), "fp32"), 4)
    nbytes = _numel(t[0]) * e if t else 0.0
    if kind == "all_gather" and len(t) >= 2:  # (output, input) or a list of outputs: the output is the total
        nbytes = max(_numel(x) for x in t) * e if base_name(op.name).startswith("_allgather") else nbytes
    return CollectiveCall(kind, nbytes, group)
