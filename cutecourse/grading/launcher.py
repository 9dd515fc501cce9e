"""The grader's launcher: a kernel answer's compiled module run on the grader's inputs, in a process that imports no
learner code and no torch.

The grader starts this module in the grade's walls, like a learner process but with no answers in it
(``sandbox.Learner(program=sandbox.LAUNCHER)``), and sends it the module (:mod:`modules` has read it as data first)
with the arguments of one call. Here the object file is loaded with the DSL's own loader
(``cutlass.runtime.load_module``), the inputs are put in device memory the CUDA driver gives this process, the outputs
are filled with NaN (-1 for integers), the module's host function launches its kernels, and the outputs come back to
the grader, which judges them. Whatever the learner's Python did while compiling, it is not here: what is judged is
what the compiled kernel wrote.

The tensors are DLPack tensors over driver allocations (`DeviceArray`), made into CuTe tensors exactly as the
course's harness makes torch tensors (`harness.as_cute`), so the module sees the same layouts it was compiled for.

A call may also time the module (``repeat``): after the checked launch the outputs are poisoned again, the host
function runs `repeat` times back to back between two CUDA events, and the outputs come back as that last launch
left them, so a kernel that is right only on its first launch (a counter it never resets) is judged wrong. The
reply's value is the milliseconds per launch. Two modules timed by the same launcher process (a learner's kernel and
the package's step, exported alike) are timed the same way on the same GPU: their ratio is the judgement, never a
time.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
import tempfile
from typing import Any

import numpy as np

from cutecourse.grading import harness, wire
from cutecourse.grading.sandbox import describe

# DLPack's C structures (dlpack.h, v0.8): what `from_dlpack` reads from a capsule named "dltensor".
_DL_CUDA = 2
_DL_INT, _DL_UINT = 0, 1
#: numpy's host type and DLPack's (type code, bits) for each dtype a kernel exercise uses.
DTYPES = {"float32": (np.float32, 2, 32), "float16": (np.float16, 2, 16), "bfloat16": (np.uint16, 4, 16),
          "int32": (np.int32, 0, 32), "int64": (np.int64, 0, 64), "int8": (np.int8, 0, 8), "uint8": (np.uint8, 1, 8)}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


_KEEP = _DELETER(lambda _: None)  # the memory belongs to its DeviceArray, which outlives the call
_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype, _capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _driver(result: Any, doing: str) -> Any:
    """The value of a cuda-bindings call (which returns (error, value...)); RuntimeError naming the error."""
    from cuda.bindings import driver

    error, *values = result if isinstance(result, tuple) else (result,)
    if error != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver error {error.name} while {doing}")
    return values[0] if len(values) == 1 else values


class DeviceArray:
    """A row-major array in device memory, as DLPack shows it: what `harness.as_cute` takes in place of a torch
    tensor (``dim()``, ``element_size()``, ``__dlpack__``)."""

    def __init__(self, host: np.ndarray, dtype: str):
        from cuda.bindings import driver

        self.shape, self.dtype = tuple(host.shape), dtype
        self.host_type, code, bits = DTYPES[dtype]
        self.nbytes = host.nbytes
        self.pointer = int(_driver(driver.cuMemAlloc(max(self.nbytes, 1)), "allocating a tensor"))
        _driver(driver.cuMemcpyHtoD(self.pointer, np.ascontiguousarray(host).ctypes.data, self.nbytes),
                "copying an input to the GPU")
        self._shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        strides = [1] * len(self.shape)
        for mode in range(len(self.shape) - 2, -1, -1):
            strides[mode] = strides[mode + 1] * self.shape[mode + 1]
        self._strides = (ctypes.c_int64 * max(len(self.shape), 1))(*strides)
        self._managed = _DLManagedTensor(_DLTensor(self.pointer, _DLDevice(_DL_CUDA, 0), len(self.shape),
                                                   _DLDataType(code, bits, 1), self._shape, self._strides, 0),
                                         None, _KEEP)

    def dim(self) -> int:
        return len(self.shape)

    def element_size(self) -> int:
        return DTYPES[self.dtype][2] // 8

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CUDA, 0)

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return _capsule(ctypes.addressof(self._managed), b"dltensor", None)

    def read(self) -> np.ndarray:
        """The array's values now, as float32 (floating dtypes, as the grader's wire carries torch tensors) or ints."""
        from cuda.bindings import driver

        host = np.empty(self.shape, dtype=self.host_type)
        _driver(driver.cuMemcpyDtoH(host.ctypes.data, self.pointer, self.nbytes), "copying an output back")
        if self.dtype == "bfloat16":
            return (host.astype(np.uint32) << 16).view(np.float32)
        return host.astype(np.float32) if self.dtype == "float16" else host

    def fill(self, host: np.ndarray) -> None:
        """Overwrite the array with `host` (its dtype's bits, this array's size)."""
        from cuda.bindings import driver

        _driver(driver.cuMemcpyHtoD(self.pointer, np.ascontiguousarray(host).ctypes.data, self.nbytes),
                "filling a tensor")

    def free(self) -> None:
        from cuda.bindings import driver

        driver.cuMemFree(self.pointer)


def to_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` in `dtype`'s bits on the host, rounded to nearest even (as torch's ``.to(dtype)`` rounds)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: the launcher takes {', '.join(DTYPES)}")
    if dtype == "bfloat16":
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.asarray(values).astype(DTYPES[dtype][0])


def poison(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An output's first contents: NaN for floating dtypes, -1 for integers (what the learner's path poisons with)."""
    if dtype in DTYPES and DTYPES[dtype][1] in (_DL_INT, _DL_UINT):
        return np.full(shape, -1).astype(DTYPES[dtype][0])
    return to_dtype(np.full(shape, np.nan, dtype=np.float32), dtype)


def _array(request: dict[str, Any], outputs: list[DeviceArray], held: list[DeviceArray]) -> DeviceArray:
    if "$tensor" in request:
        spec = request["$tensor"]
        array = DeviceArray(to_dtype(wire.decode(spec["array"]), spec["dtype"]), spec["dtype"])
    else:
        spec = request["$poisoned"]
        array = DeviceArray(poison(tuple(spec["shape"]), spec["dtype"]), spec["dtype"])
        outputs.append(array)
    held.append(array)
    return array


_LOADED: dict[str, Any] = {}


def _host(obj: bytes) -> Any:
    """The module's host function, loaded (linked by the DSL's execution engine) once per module in this process."""
    from cutlass.runtime import load_module

    key = hashlib.sha256(obj).hexdigest()
    if key not in _LOADED:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "answer.o")
            with open(path, "wb") as f:
                f.write(obj)
            _LOADED[key] = load_module(path)[harness.MODULE_PREFIX]
    return _LOADED[key]


def run(obj: bytes, args: list[Any], vector: int = 1, repeat: int = 0) -> tuple[list[np.ndarray], float | None]:
    """Launch the host function of the module `obj` on `args` (wire values: tensor requests and scalars); the outputs
    after the kernels finished, and None. With `repeat`, the outputs are then poisoned again and the host runs
    `repeat` more times back to back between two CUDA events: the outputs after the last of them, and the
    milliseconds per launch."""
    from cuda.bindings import driver

    outputs: list[DeviceArray] = []
    held: list[DeviceArray] = []
    try:
        values = [_array(a, outputs, held) if wire.is_tensor_request(a) else wire.decode(a) for a in args]
        ms = None
        if not any(isinstance(v, DeviceArray) and v.numel() == 0 for v in values):
            host = _host(obj)
            call = [harness.as_cute(v, vector) if isinstance(v, DeviceArray) else v for v in values]
            host(*call, driver.CUstream(0))
            _driver(driver.cuCtxSynchronize(), "running the kernel")
            if repeat > 0:
                ms = _timed(host, call, outputs, repeat)
        return [o.read() for o in outputs], ms
    finally:
        for array in held:
            array.free()


def _timed(host: Any, call: list[Any], outputs: list[DeviceArray], repeat: int) -> float:
    """Milliseconds per launch of `host(*call)` over `repeat` back-to-back launches, after poisoning `outputs` again
    (what the launches leave there is what comes back)."""
    from cuda.bindings import driver

    for array in outputs:
        array.fill(poison(array.shape, array.dtype))
    start, end = (_driver(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT), "making an event")
                  for _ in range(2))
    try:
        stream = driver.CUstream(0)
        _driver(driver.cuEventRecord(start, stream), "recording an event")
        for _ in range(repeat):
            host(*call, stream)
        _driver(driver.cuEventRecord(end, stream), "recording an event")
        _driver(driver.cuEventSynchronize(end), "running the timed kernels")
        return float(_driver(driver.cuEventElapsedTime(start, end), "reading the events")) / repeat
    finally:
        for event in (start, end):
            driver.cuEventDestroy(event)


def _serve() -> None:
    """The launcher's side of `sandbox.Learner`'s protocol: a spec line (nothing in it is used), "ready", then one
    reply per request {"args": [the object's bytes, then the call's arguments], "options": {"vector": n}} (and
    "repeat": n to time the module: the reply's value is then its milliseconds per launch)."""
    sys.modules["torch"] = None  # type: ignore[assignment]  # nothing here computes with torch, or may
    from cuda.bindings import driver

    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the module prints goes to stderr; the channel carries only replies
    sys.stdout = sys.stderr
    sys.stdin.readline()
    _driver(driver.cuInit(0), "starting CUDA")
    device = _driver(driver.cuDeviceGet(0), "finding the GPU")
    _driver(driver.cuCtxSetCurrent(_driver(driver.cuDevicePrimaryCtxRetain(device), "making a context")),
            "making a context current")
    channel.write(json.dumps({"ready": True, "errors": {}}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            obj, *args = request["args"]
            outputs, ms = run(wire.decode(obj).tobytes(), args, **request.get("options", {}))
            reply = {"ok": True, "value": ms, "outputs": [wire.encode(o) for o in outputs]}
        except BaseException as exc:  # noqa: BLE001 - a failed launch is the answer's failure, reported
            reply = {"ok": False, "error": describe(exc)}
        channel.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    _serve()
