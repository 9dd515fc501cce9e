"""The sandbox's wire format: the values the grader and a learner process exchange, as JSON with tags for the types
the checks use (tuples, dicts, numpy arrays, and objects sent as the text they print), and the requests for torch
tensors that the learner process makes on its side. No pickle: nothing from the learner is ever unpickled.
"""

from __future__ import annotations

import base64
from typing import Any


def encode(value: Any) -> Any:
    """`value` as JSON-able data: tuples, dicts, numpy arrays and torch tensors tagged; any other object as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        value = value.detach().float().cpu().numpy() if value.is_floating_point() else value.detach().cpu().numpy()
        module = "numpy"
    if module == "numpy" and hasattr(value, "dtype") and hasattr(value, "shape"):
        import numpy as np

        array = np.ascontiguousarray(value)
        return {"$array": {"dtype": array.dtype.str, "shape": list(array.shape),
                           "data": base64.b64encode(array.tobytes()).decode()}}
    if module == "numpy":  # numpy scalars
        return encode(value.item())
    return {"$str": str(value)}  # layouts and other objects are compared by what they print


def decode(value: Any) -> Any:
    """What `encode` made, back: an object that went as its text comes back as `Printed`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    if "$dict" in value:
        return {decode(k): decode(v) for k, v in value["$dict"]}
    if "$array" in value:
        import numpy as np

        spec = value["$array"]
        flat = np.frombuffer(base64.b64decode(spec["data"]), dtype=np.dtype(spec["dtype"]))
        return flat.reshape(spec["shape"]).copy()
    if "$str" in value:
        return Printed(value["$str"])
    raise ValueError(f"unknown value on the wire: {sorted(value)}")


class Printed(str):
    """An object that came back from the learner as the text it prints (e.g. a Layout)."""


def tensor(array: Any, dtype: str = "float32", device: str = "cuda") -> dict[str, Any]:
    """Ask the learner process for a torch tensor with these values (sent as float32/int data, cast there)."""
    return {"$tensor": {"array": encode(array), "dtype": dtype, "device": device}}


def poisoned(shape: tuple[int, ...], dtype: str = "float32", device: str = "cuda") -> dict[str, Any]:
    """Ask for an output tensor filled with NaN (or -1 for integers), returned to the grader after the call."""
    return {"$poisoned": {"shape": list(shape), "dtype": dtype, "device": device}}


def is_tensor_request(value: Any) -> bool:
    """Whether `value` is a `tensor` or `poisoned` request (sent as it is; the learner process makes the tensor)."""
    return isinstance(value, dict) and ("$tensor" in value or "$poisoned" in value)


def argument(value: Any) -> Any:
    """An argument the grader sends to a learner's function, on the wire: a tensor request as it is, data encoded;
    TypeError for an object that would only go as the text it prints."""
    if is_tensor_request(value):
        return value
    encoded = encode(value)
    if isinstance(encoded, dict) and "$str" in encoded:
        raise TypeError(f"cannot send {type(value).__name__} to the learner; send data (ints, tuples, arrays)")
    return encoded
