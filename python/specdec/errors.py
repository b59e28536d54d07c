"""specdec.SpecdecError and one subclass per specdec_status of include/specdec.h.

Every error carries the status number (.status), its name as in the header (.status_name, e.g.
"SPECDEC_ERR_INVALID_ARGUMENT") and the library's detail message (.message, naming the field,
file or value). A status this module does not know (a newer library) raises SpecdecError itself.
"""
from __future__ import annotations

import builtins


class SpecdecError(Exception):
    """A call into libspecdec failed; .status, .status_name and .message say how."""

    status_name = "SPECDEC_ERR"

    def __init__(self, message: str, status: int | None = None, status_name: str | None = None):
        self.message = message
        if status_name is not None:
            self.status_name = status_name
        if status is None:  # raised by the Python side: the number the header gives the name
            try:
                from ._ffi import binding
                status = binding().status_values.get(self.status_name)
            except Exception:
                pass
        self.status = status
        super().__init__(f"{self.status_name}: {message}" if message else self.status_name)


def _make(name: str, status_name: str, doc: str, *bases):
    return type(name, (SpecdecError, *bases), {"status_name": status_name, "__doc__": doc})


InvalidArgumentError = _make("InvalidArgumentError", "SPECDEC_ERR_INVALID_ARGUMENT",
                             "A NULL pointer or a value out of range (also a ValueError).", ValueError)
OutOfMemoryError = _make("OutOfMemoryError", "SPECDEC_ERR_OUT_OF_MEMORY", "A host or device allocation failed.")
IoError = _make("IoError", "SPECDEC_ERR_IO", "A file is missing or unreadable.")
FormatError = _make("FormatError", "SPECDEC_ERR_FORMAT", "Malformed safetensors / JSON / tokenizer.")
UnsupportedError = _make("UnsupportedError", "SPECDEC_ERR_UNSUPPORTED", "Well-formed but not supported.")
ModelMismatchError = _make("ModelMismatchError", "SPECDEC_ERR_MODEL_MISMATCH",
                           "A tensor is missing or misshapen, or target and draft disagree.")
ContextFullError = _make("ContextFullError", "SPECDEC_ERR_CONTEXT_FULL", "The tokens do not fit the context.")
BackendUnavailableError = _make("BackendUnavailableError", "SPECDEC_ERR_BACKEND_UNAVAILABLE",
                                "CUDA was requested but is not built in or there is no device.")
DeviceLostError = _make("DeviceLostError", "SPECDEC_ERR_DEVICE_LOST", "A sticky device error.")
BusyError = _make("BusyError", "SPECDEC_ERR_BUSY", "The engine is in use by another thread.")
BufferTooSmallError = _make("BufferTooSmallError", "SPECDEC_ERR_BUFFER_TOO_SMALL", "An output buffer was too small.")
InternalError = _make("InternalError", "SPECDEC_ERR_INTERNAL", "A bug in specdec: please report it.")
QueueFullError = _make("QueueFullError", "SPECDEC_ERR_QUEUE_FULL", "The scheduler's queue is full.")
NotFoundError = _make("NotFoundError", "SPECDEC_ERR_NOT_FOUND", "No such request id.")
CancelledError = _make("CancelledError", "SPECDEC_ERR_CANCELLED", "The request was cancelled.")
TimeoutError = _make("TimeoutError", "SPECDEC_ERR_TIMEOUT", "A wait ran out of time (also builtins.TimeoutError).",
                     builtins.TimeoutError)
ShutDownError = _make("ShutDownError", "SPECDEC_ERR_SHUT_DOWN", "The scheduler (or the LLM) was shut down / closed.")

BY_STATUS_NAME = {c.status_name: c for c in (
    InvalidArgumentError, OutOfMemoryError, IoError, FormatError, UnsupportedError, ModelMismatchError,
    ContextFullError, BackendUnavailableError, DeviceLostError, BusyError, BufferTooSmallError, InternalError,
    QueueFullError, NotFoundError, CancelledError, TimeoutError, ShutDownError)}

__all__ = ["SpecdecError"] + [c.__name__ for c in BY_STATUS_NAME.values()]
