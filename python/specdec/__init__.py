"""specdec: speculative decoding (a small draft model proposes, the target verifies) from Python.

    import specdec
    with specdec.LLM() as llm:                      # the bundled KJV target/draft pair
        out = llm.generate(["And God said"], specdec.SamplingParams(temperature=0, max_tokens=32))
        print(out[0].outputs[0].text, out[0].metrics.acceptance_rate)

The binding goes through libspecdec's public C ABI only (include/specdec.h, read with cffi).
"""
from ._paths import bundled_pair
from .errors import *  # noqa: F401,F403  (SpecdecError and one subclass per status)
from .errors import __all__ as _error_names
from .async_llm import AsyncEngineArgs, AsyncLLM
from .llm import LLM
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling import GuidedDecodingParams, RequestOutputKind, SamplingParams, StructuredOutputsParams
from .tokenizer import Tokenizer

try:
    from importlib.metadata import PackageNotFoundError, version as _dist_version
    __version__ = _dist_version("specdec")
except PackageNotFoundError:  # run from a source checkout
    __version__ = "0+source"


def library_version() -> str:
    """The version of the libspecdec actually loaded."""
    from ._ffi import binding
    return binding().version


__all__ = ["LLM", "AsyncLLM", "AsyncEngineArgs", "RequestOutputKind", "SamplingParams", "StructuredOutputsParams", "GuidedDecodingParams", "RequestOutput", "CompletionOutput", "Logprob", "RequestMetrics", "Tokenizer",
           "bundled_pair", "library_version", *_error_names]
