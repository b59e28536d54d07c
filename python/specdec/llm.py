"""specdec.LLM: a target (+ draft) model pair behind the library's request scheduler.

Every request, from generate(), stream() or chat(), goes through one specdec_scheduler: requests
queue FIFO and up to max_num_seqs of them decode together (continuous batching, one batched
target pass per round). The library guarantees each output equals what specdec_generate alone
(`specdec generate`) produces for the same prompt, parameters and seed.
"""
from __future__ import annotations

import collections
import itertools
import numbers
import os
import queue
import random
import secrets
import threading
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

from . import _paths
from ._ffi import binding
from .errors import (InternalError, InvalidArgumentError, QueueFullError, ShutDownError, SpecdecError,
                     UnsupportedError)
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling import CONSTRAINTS, MASK_FIELDS, SamplingParams, StructuredOutputsParams
from .tokenizer import Tokenizer, token_id_array

# speculative_config "method" -> the specdec_draft_method value it selects (specdec 0.4's
# specdec_generate_params.draft_method; a libspecdec without the field offers 'draft_model' only and
# the other methods raise UnsupportedError).
# speculative_config {"method": "suffix"} without ngram_corpus_tokens: the corpus it keeps (as `specdec serve`'s)
_SUFFIX_CORPUS_TOKENS = 1 << 18
_DRAFT_METHODS = {"draft_model": "SPECDEC_DRAFT_MODEL", "ngram": "SPECDEC_DRAFT_NGRAM",
                  "eagle3": "SPECDEC_DRAFT_EAGLE3", "mtp": "SPECDEC_DRAFT_MTP",
                  # vLLM's model-specific names of the checkpoint's own MTP layer (it maps them to "mtp")
                  "deepseek_mtp": "SPECDEC_DRAFT_MTP", "glm4_moe_mtp": "SPECDEC_DRAFT_MTP"}
_MTP_METHODS = {"mtp", "deepseek_mtp", "glm4_moe_mtp"}
_SPEC_KEYS = {"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max", "tree",
              "draft_nodes", "verify"}
# The CLI's names where they are not the enum's lower-cased suffix.
_ENUM_NAMES = {"SPECDEC_STOP_STRING": "stop_string", "SPECDEC_STOP_TOKEN_ID": "stop_token_id"}
_POLL_MS = 100  # a wait returns at least this often, so Ctrl-C is seen within it
GRAMMAR_CACHE_SIZE = 16  # compiled grammars an LLM keeps (least recently used dropped first)


class _Grammar:
    """One compiled specdec_grammar and the LLM's reference to it. The C grammar is freed when free() is
    called (LLM.close) or when the last Python holder lets go (evicted from the cache and no request made
    from it still waits to be submitted); a submitted scheduler request holds its own C reference."""

    __slots__ = ("handle", "key", "__weakref__")

    def __init__(self, handle, key):
        self.handle = handle
        self.key = key

    def free(self) -> None:
        h, self.handle = self.handle, None
        if h is not None:
            binding().lib.specdec_grammar_free(h)

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass


def cache_salt_hash(salt) -> int:
    """vLLM's prompt field cache_salt (a non-empty str) as specdec_generate_params.cache_salt: FNV-1a 64 of
    its UTF-8 bytes, then mixed, never 0 — the hash of `specdec serve` (tools/server/sd_server_request.c,
    parse_cache_salt), so one salt string shares prefix-cache rows alike through either."""
    if not isinstance(salt, str) or not salt or "\0" in salt:
        raise InvalidArgumentError(f"cache_salt = {salt!r} must be a non-empty str (without NUL)")
    try:
        data = salt.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"cache_salt = {salt!r} is not valid Unicode: {e}") from None
    h = _fnv1a64(data)
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    return h or 1


_M64 = 2**64 - 1


def _fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & _M64
    return h


def _enum_short(ctype, value: int):
    names = list(ctype.elements.values())
    name = ctype.elements.get(value)
    if name is None:
        return value
    if name in _ENUM_NAMES:
        return _ENUM_NAMES[name]
    prefix = os.path.commonprefix(names)
    prefix = prefix[: prefix.rfind("_") + 1]
    return name[len(prefix):].lower()


class _StopCutter:
    """Cuts streamed text before the first stop string (after it with include: vLLM's
    include_stop_str_in_output), holding back the tail that could still become one (nothing with
    include: the stop string stays anyway). generate() and stream() share it, so both give the same
    text."""

    def __init__(self, stops: list, include: bool = False):
        self.stops = [s for s in stops if s]
        self.include = include
        self.back = max((len(s) for s in self.stops), default=1) - 1  # a stop may start this far before
        self.hold = 0 if include else self.back
        self.text = ""
        self.sent = 0
        self.matched: Optional[str] = None

    def feed(self, piece: str) -> str:
        if self.matched is not None:
            return ""
        self.text += piece
        if self.stops:
            start = max(0, self.sent - self.back)
            hits = [(i, s) for s in self.stops if (i := self.text.find(s, start)) >= 0]
            if hits:  # the earliest; at one place, the first in the list (as the server)
                i, self.matched = min(hits, key=lambda h: h[0])
                if self.include:
                    i += len(self.matched)
                out, self.sent = self.text[self.sent:i], max(self.sent, i)
                self.text = self.text[:i]
                return out
        end = max(self.sent, len(self.text) - self.hold)
        out, self.sent = self.text[self.sent:end], end
        return out

    def finish(self) -> str:
        out, self.sent = self.text[self.sent:], len(self.text)
        return out


class _Request:
    """One submitted request: its C parameters and buffers (kept alive until it is collected)."""

    def __init__(self, index: int, prompt: Optional[str], ids: list, params: SamplingParams, sample: int = 0):
        self.index = index
        self.sample = sample  # 0..params.n-1: its CompletionOutput.index and random stream (sequence_id)
        self.prompt = prompt
        self.ids = ids
        self.params = params
        self.keep = []  # cffi objects the C parameters point to
        self.gp = None
        self.id = 0  # specdec_request_id once submitted
        self.capacity = 0
        self.callback = None
        self.lp_callback = None  # the logprob callback (SamplingParams.logprobs / prompt_logprobs), kept alive
        self.lp_rows = None  # with logprobs: one (token, logprob, rank, top ids, top logprobs) per token
        self.prompt_rows = None  # with prompt_logprobs: one (position, token, logprob, rank, top ids, top logprobs)


def _top_ranks(top_logprobs) -> list:
    """The rank of each entry of a top list (most likely first): 1 + the entries strictly more likely,
    the library's definition of specdec_token_logprobs.rank (every more likely id is in the list)."""
    ranks = []
    for i, v in enumerate(top_logprobs):
        ranks.append(ranks[-1] if i and top_logprobs[i - 1] == v else i + 1)
    return ranks


class LLM:
    """A speculative-decoding engine in vLLM's shape.

    model: a Hugging Face model directory; None = the bundled KJV target (and, unless told
    otherwise, its draft). draft: a draft model or EAGLE-3 head directory (as speculative_config["model"]).
    speculative_config: {"method": "draft_model"|"ngram"|"eagle3"|"mtp" (absent: the draft given drafts, a head
    as eagle3; "eagle3" needs a head, "draft_model" a draft model; "mtp" (or vLLM's "deepseek_mtp",
    "glm4_moe_mtp") drafts with the target checkpoint's own MTP layer: GLM-4.5, DeepSeek-V3, CPU backend;
    "model" then defaults to the target's directory), "model": DIR,
    "num_speculative_tokens": γ, "prompt_lookup_min"/"prompt_lookup_max": N (ngram), "tree": [4, 2, 1],
    "draft_nodes": N, "verify": "auto"|"rejection"|"greedy"|"match"}.
    backend: "auto" (CUDA when a device is usable), "cpu" or "cuda". n_ctx: context length (None =
    min(max_position_embeddings, 4096)). max_num_seqs: requests decoded at once. seed: None = every
    request without its own seed gets a random one; an int makes the run reproducible.
    enable_prefix_caching (vLLM's name): automatic prefix caching, the scheduler's specdec_prefix_cache:
    None = the library's default (on where the model and backend can cache), True = on (UnsupportedError
    where they cannot), False = off. A request's RequestOutput.num_cached_tokens says how many of its
    prompt tokens came from the cache; the outputs are the same either way.
    prefill_chunk: chunked prefill, the scheduler's prefill_chunk: prompt tokens prefilled between two
    decode rounds, so a long prompt joins over several rounds while the running requests keep
    decoding (0 = no limit: a prompt joins at once). The outputs are the same either way.
    cpu_threads: CPU backend threads of each model's forward pass (specdec_engine_params.cpu_threads, since
    libspecdec 0.5.3; llama.cpp's -t): None = the library's default ($SPECDEC_CPU_THREADS, else the physical
    cores, at most 8), else 1..256. The outputs are the same for every count.
    ngram_corpus_tokens (libspecdec 0.5.10): the n-gram drafter's cross-request corpus, in tokens (0 = none):
    the outputs of finished requests are kept (oldest evicted first) and an "ngram" request also proposes what
    followed its suffix there, as vLLM's "suffix" method's cache does. The outputs are the same either way.
    speculative_config={"method": "suffix"} is "ngram" with such a corpus (262,144 tokens unless
    ngram_corpus_tokens says otherwise); vLLM's suffix_decoding_* keys are not supported.
    num_gpu_blocks_override, block_size (vLLM's names; any backend): the KV pool's blocks per model and
    tokens per block (the scheduler's kv_pool_blocks / kv_block_tokens; None = every slot's full context,
    16). kv_admission (libspecdec 0.5.4): how a request claims the pool, "optimistic" (its prompt and one
    round; the newest request is preempted and recomputed when the pool runs short: vLLM's way) or
    "reserve" (every block it may ever hold); None = the library's default (optimistic where the pool is
    paged). RequestOutput.metrics["n_preemptions"] counts a request's preemptions; the outputs are the
    same either way. scheduling_policy (vLLM's; libspecdec 0.5.4): "fcfs" (first come, first served) or
    "priority": generate(..., priority=[...]) then orders the queue (lower first) and who is preempted.
    """

    def __init__(self, model: Optional[str] = None, draft: Optional[str] = None,
                 speculative_config: Optional[dict] = None, backend: str = "auto", n_ctx: Optional[int] = None,
                 max_num_seqs: int = 8, seed: Optional[int] = None, enable_prefix_caching: Optional[bool] = None,
                 prefill_chunk: int = 0, cpu_threads: Optional[int] = None,
                 num_gpu_blocks_override: Optional[int] = None, block_size: Optional[int] = None,
                 kv_admission: Optional[str] = None, scheduling_policy: str = "fcfs",
                 ngram_corpus_tokens: int = 0):
        b = self._b = binding()
        self._sched = None
        self._models = []
        self.tokenizer = None
        self._closing = False
        self._inflight = 0  # calls using the scheduler now; close() waits for them before freeing it
        self._cv = threading.Condition()
        self._close_lock = threading.Lock()
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._decoded = {}  # token id -> its text decoded alone (Logprob.decoded_token)
        self._grammars = collections.OrderedDict()  # (kind, spec bytes) -> _Grammar, least recently used first
        self._grammar_lock = threading.Lock()
        spec = self._spec = self._parse_spec(speculative_config)
        target_dir, draft_dir = self._model_dirs(model, draft, spec)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64):
            raise InvalidArgumentError(f"LLM(seed={seed!r}): an int in [0, 2**64) or None")
        self._rng = random.Random(seed) if seed is not None else None
        if spec.get("_suffix") and not ngram_corpus_tokens:
            ngram_corpus_tokens = _SUFFIX_CORPUS_TOKENS
        ep = self._engine_params(backend, n_ctx, cpu_threads, ngram_corpus_tokens)
        sp = b.ffi.new("specdec_scheduler_params *", b.lib.specdec_scheduler_default_params())
        if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int):
            raise InvalidArgumentError(f"LLM(max_num_seqs={max_num_seqs!r}) must be an int")
        sp.max_active = _c_int(max_num_seqs, "max_num_seqs")
        self._set_prefix_cache(sp, enable_prefix_caching)
        if isinstance(prefill_chunk, bool) or not isinstance(prefill_chunk, int) or prefill_chunk < 0:
            raise InvalidArgumentError(f"LLM(prefill_chunk={prefill_chunk!r}): an int >= 0")
        if prefill_chunk:
            if not b.has_field("specdec_scheduler_params", "prefill_chunk"):
                raise UnsupportedError(f"LLM(prefill_chunk={prefill_chunk!r}): this libspecdec ({b.version}) has no "
                                       "specdec_scheduler_params.prefill_chunk (since 0.4.1)")
            sp.prefill_chunk = _c_int(prefill_chunk, "prefill_chunk")
        self._set_kv(sp, num_gpu_blocks_override, block_size, kv_admission)
        if scheduling_policy not in ("fcfs", "priority"):
            raise InvalidArgumentError(f"LLM(scheduling_policy={scheduling_policy!r}): \"fcfs\" or \"priority\"")
        if scheduling_policy == "priority":
            if not b.has_field("specdec_scheduler_params", "scheduling_policy"):
                raise UnsupportedError(f"LLM(scheduling_policy='priority'): this libspecdec ({b.version}) has no "
                                       "specdec_scheduler_params.scheduling_policy (since 0.5.4)")
            sp.scheduling_policy = b.enum_value("specdec_scheduling_policy", "SPECDEC_SCHEDULING_PRIORITY")
        try:
            self.model = target_dir
            self.draft = draft_dir
            self._target = self._load_model(target_dir, "target")
            mtp = spec.get("method") in _MTP_METHODS
            self._draft = self._load_model(draft_dir, "MTP layer of the" if mtp else "draft", mtp) if draft_dir \
                else b.ffi.NULL
            if draft_dir:
                self._check_draft_kind(draft_dir, spec)
            self.tokenizer = Tokenizer(target_dir)
            out = b.ffi.new("specdec_scheduler **")
            b.check(b.lib.specdec_scheduler_create(self._target, self._draft, ep, sp, out), b.lib.specdec_last_error,
                    f"creating the scheduler (max_num_seqs={max_num_seqs}, n_ctx={n_ctx}, backend={backend!r}, "
                    f"enable_prefix_caching={enable_prefix_caching!r}, cpu_threads={cpu_threads!r})")
            self._sched = out[0]
        except BaseException:
            self.close()
            raise
        self.n_ctx = int(b.lib.specdec_scheduler_n_ctx(self._sched))
        self.max_num_seqs = max_num_seqs
        self.enable_prefix_caching = enable_prefix_caching
        self.prefill_chunk = prefill_chunk
        self.cpu_threads = cpu_threads
        self.num_gpu_blocks_override = num_gpu_blocks_override
        self.block_size = block_size
        self.kv_admission = kv_admission
        self.scheduling_policy = scheduling_policy
        self.backend = self._backend_used(ep.backend)
        self._template = self._template_params()

    # ---- construction helpers -------------------------------------------------------------------
    @staticmethod
    def _parse_spec(cfg) -> dict:
        if cfg is None:
            return {}
        if not isinstance(cfg, dict):
            raise InvalidArgumentError("speculative_config must be a dict")
        unknown = sorted(set(cfg) - _SPEC_KEYS)
        if unknown:
            raise InvalidArgumentError(f"speculative_config: unknown key(s) {unknown}; known: {sorted(_SPEC_KEYS)}")
        method = cfg.get("method", "draft_model")
        if method not in _DRAFT_METHODS and method != "suffix":
            raise InvalidArgumentError(f"speculative_config['method'] = {method!r}: one of "
                                       f"{sorted(list(_DRAFT_METHODS) + ['suffix'])}")
        spec = dict(cfg)  # no "method": the library's AUTO (the draft model, or eagle3 for an EAGLE-3 head)
        if method == "suffix":  # vLLM's SuffixDecoding: the n-gram drafter over the request and the corpus
            spec["method"] = method = "ngram"
            spec["_suffix"] = True
        for k in ("num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max", "draft_nodes"):
            v = spec.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise InvalidArgumentError(f"speculative_config['{k}'] = {v!r} must be an int")
        tree = spec.get("tree")
        if tree is not None and (not isinstance(tree, (list, tuple)) or
                                 not all(isinstance(w, int) and not isinstance(w, bool) for w in tree)):
            raise InvalidArgumentError(f"speculative_config['tree'] = {tree!r} must be a list of ints, e.g. [4, 2, 1]")
        verify = spec.get("verify", "auto")
        if verify not in ("auto", "rejection", "greedy", "match"):
            raise InvalidArgumentError(f"speculative_config['verify'] = {verify!r}: auto, rejection, greedy or match")
        if method != "ngram" and ("prompt_lookup_min" in spec or "prompt_lookup_max" in spec):
            raise InvalidArgumentError("speculative_config: prompt_lookup_min/max apply to method 'ngram' only")
        return spec

    def _model_dirs(self, model, draft, spec):
        if draft is not None and spec.get("model") is not None and os.fspath(draft) != os.fspath(spec["model"]):
            raise InvalidArgumentError(f"LLM(draft={draft!r}) and speculative_config['model'] = {spec['model']!r} "
                                       "name different draft models")
        draft = spec.get("model", draft)
        method = spec.get("method", "draft_model")
        if method == "ngram" and draft is not None:
            raise InvalidArgumentError("speculative_config method 'ngram' drafts by prompt lookup: "
                                       "give no draft model")
        if model is None:
            bundled_target, bundled_draft = _paths.bundled_pair()
            model = bundled_target
            if draft is None and method == "draft_model":
                draft = bundled_draft
        if method == "eagle3" and draft is None:
            raise InvalidArgumentError("speculative_config method 'eagle3' needs 'model': the EAGLE-3 head's directory")
        if method in _MTP_METHODS and draft is None:
            draft = model  # the target checkpoint's own MTP layer
        return os.fspath(model), (os.fspath(draft) if draft is not None else None)

    def _set_kv(self, sp, blocks, block_size, admission) -> None:
        """The scheduler's KV pool: kv_pool_blocks, kv_block_tokens, kv_admission (see the class)."""
        for name, v, lo, hi in (("num_gpu_blocks_override", blocks, 1, 2**31 - 1), ("block_size", block_size, 1, 4096)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi):
                raise InvalidArgumentError(f"LLM({name}={v!r}): an int in [{lo}, {hi}] or None")
        if blocks is not None:
            sp.kv_pool_blocks = blocks
        if block_size is not None:
            sp.kv_block_tokens = block_size
        if admission is None:
            return
        if admission not in ("optimistic", "reserve"):
            raise InvalidArgumentError(f"LLM(kv_admission={admission!r}): \"optimistic\", \"reserve\" or None")
        b = self._b
        if not b.has_field("specdec_scheduler_params", "kv_admission"):
            raise UnsupportedError(f"LLM(kv_admission={admission!r}): this libspecdec ({b.version}) has no "
                                   "specdec_scheduler_params.kv_admission (since 0.5.4)")
        sp.kv_admission = b.enum_value("specdec_kv_admission", "SPECDEC_KV_ADMISSION_" + admission.upper())

    def _set_prefix_cache(self, sp, enable) -> None:
        """specdec_scheduler_params.prefix_cache from enable_prefix_caching: None = AUTO, True = ON, False = OFF."""
        b = self._b
        if enable is not None and not isinstance(enable, bool):
            raise InvalidArgumentError(f"LLM(enable_prefix_caching={enable!r}): True, False or None")
        if not b.has_field("specdec_scheduler_params", "prefix_cache"):
            if enable is not None:
                raise UnsupportedError(f"LLM(enable_prefix_caching={enable!r}): this libspecdec ({b.version}) has no "
                                       "specdec_scheduler_params.prefix_cache (since 0.4.1)")
            return
        mode = "AUTO" if enable is None else "ON" if enable else "OFF"
        sp.prefix_cache = b.enum_value("specdec_prefix_cache", "SPECDEC_PREFIX_CACHE_" + mode)

    def _engine_params(self, backend, n_ctx, cpu_threads=None, ngram_corpus_tokens=0):
        b = self._b
        ep = b.ffi.new("specdec_engine_params *", b.lib.specdec_engine_default_params())
        names = {"auto", "cpu", "cuda"}
        if backend not in names:
            raise InvalidArgumentError(f"LLM(backend={backend!r}): one of {sorted(names)}")
        ep.backend = b.enum_value("specdec_backend", "SPECDEC_BACKEND_" + backend.upper())
        if n_ctx is not None:
            if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx <= 0:
                raise InvalidArgumentError(f"LLM(n_ctx={n_ctx!r}) must be a positive int or None")
            ep.n_ctx = _c_int(n_ctx, "n_ctx")
        if cpu_threads is not None:
            if isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int) or not 1 <= cpu_threads <= 256:
                raise InvalidArgumentError(f"LLM(cpu_threads={cpu_threads!r}): an int in 1..256 or None")
            if not b.has_field("specdec_engine_params", "cpu_threads"):
                raise UnsupportedError(f"LLM(cpu_threads={cpu_threads!r}): this libspecdec ({b.version}) has no "
                                       "specdec_engine_params.cpu_threads (since 0.5.3)")
            ep.cpu_threads = cpu_threads
        if isinstance(ngram_corpus_tokens, bool) or not isinstance(ngram_corpus_tokens, int) or \
                not 0 <= ngram_corpus_tokens <= 1 << 26:
            raise InvalidArgumentError(f"LLM(ngram_corpus_tokens={ngram_corpus_tokens!r}): an int in 0..2**26")
        if ngram_corpus_tokens:
            if not b.has_field("specdec_engine_params", "ngram_corpus_tokens"):
                raise UnsupportedError(f"LLM(ngram_corpus_tokens={ngram_corpus_tokens!r}): this libspecdec "
                                       f"({b.version}) has no specdec_engine_params.ngram_corpus_tokens (since 0.5.10)")
            ep.ngram_corpus_tokens = ngram_corpus_tokens
        return ep

    def _load_model(self, path, role, mtp=False):
        b = self._b
        out = b.ffi.new("specdec_model **")
        params = b.ffi.NULL
        if mtp:
            if not b.has_field("specdec_model_params", "mtp"):
                raise UnsupportedError(f"speculative_config method 'mtp': this libspecdec ({b.version}) has no "
                                       "specdec_model_params.mtp (since 0.5.7)")
            params = b.ffi.new("specdec_model_params *", b.lib.specdec_model_default_params())
            params.mtp = 1
        b.check(b.lib.specdec_model_load(os.fsencode(path), params, out), b.lib.specdec_last_error,
                f"loading the {role} model {path}")
        self._models.append(out[0])
        return out[0]

    def _check_draft_kind(self, draft_dir, spec):
        """'eagle3' needs an EAGLE-3 head as the draft, an explicit 'draft_model' a draft model (no method: the
        library picks eagle3 for a head)."""
        b = self._b
        if not b.has_field("specdec_model_info", "model_kind"):
            return
        info = b.ffi.new("specdec_model_info *")
        b.check(b.lib.specdec_model_get_info(self._draft, info), b.lib.specdec_last_error, f"reading {draft_dir}")
        head = info.model_kind == b.enum_value("specdec_draft_method", "SPECDEC_DRAFT_EAGLE3")
        method = spec.get("method")
        if method in _MTP_METHODS:
            return  # loaded as the MTP layer (specdec_model_load refuses a checkpoint without one)
        if method == "eagle3" and not head:
            raise InvalidArgumentError(f"speculative_config method 'eagle3': {draft_dir} is not an EAGLE-3 head "
                                       "(use 'draft_model')")
        if method == "draft_model" and head:
            raise InvalidArgumentError(f"speculative_config method 'draft_model': {draft_dir} is an EAGLE-3 head "
                                       "(use 'eagle3')")

    def _backend_used(self, backend: int) -> str:
        b = self._b
        if backend == b.enum_value("specdec_backend", "SPECDEC_BACKEND_AUTO"):
            return "cuda" if b.lib.specdec_has_cuda() and b.lib.specdec_cuda_device_count() > 0 else "cpu"
        return _enum_short(b.ffi.typeof("specdec_backend"), backend)

    def _template_params(self):
        """The generate params every request starts from: defaults + speculative_config."""
        b, spec = self._b, self._spec
        gp = b.ffi.new("specdec_generate_params *", b.lib.specdec_generate_default_params())
        gp.verify = b.enum_value("specdec_verify_mode", "SPECDEC_VERIFY_" + spec.get("verify", "auto").upper())
        if spec.get("num_speculative_tokens") is not None:
            gp.n_draft = _c_int(spec["num_speculative_tokens"], "speculative_config['num_speculative_tokens']")
        if spec.get("draft_nodes") is not None:
            gp.draft_nodes = _c_int(spec["draft_nodes"], "speculative_config['draft_nodes']")
        if spec.get("tree") is not None:
            widths = spec["tree"]
            arr = b.ffi.new("int32_t[]", [_c_int(w, "speculative_config['tree']") for w in widths] or [0])
            b.check(b.lib.specdec_generate_params_set_tree(gp, arr, len(widths)), b.lib.specdec_last_error,
                    "speculative_config['tree']")
        self._set_draft_method(gp, spec)
        return gp

    def _set_draft_method(self, gp, spec):
        b = self._b
        method = spec.get("method", "draft_model")
        if not b.has_field("specdec_generate_params", "draft_method"):
            if method != "draft_model":
                raise UnsupportedError(f"speculative_config method {method!r}: this libspecdec ({b.version}) has no "
                                       "specdec_generate_params.draft_method; only 'draft_model' is available")
            return
        if "method" in spec:
            gp.draft_method = b.enum_value("specdec_draft_method", _DRAFT_METHODS[method])
        if method == "ngram":
            if spec.get("prompt_lookup_min") is not None:
                gp.ngram_min = _c_int(spec["prompt_lookup_min"], "speculative_config['prompt_lookup_min']")
            if spec.get("prompt_lookup_max") is not None:
                gp.ngram_max = _c_int(spec["prompt_lookup_max"], "speculative_config['prompt_lookup_max']")

    # ---- lifetime -------------------------------------------------------------------------------
    def close(self) -> None:
        """Shut the scheduler down (requests still running end with finish_reason "abort"), wait for
        the calls other threads are making to return, then free everything. Idempotent, thread-safe."""
        b = self._b
        with self._close_lock:
            with self._cv:
                self._closing = True  # new calls get ShutDownError
                sched = self._sched
            if sched is not None:
                b.lib.specdec_scheduler_shutdown(sched)  # thread-safe: cancels everything, ends every wait
                with self._cv:
                    while self._inflight:
                        self._cv.wait()
                    self._sched = None
                b.lib.specdec_scheduler_free(sched)
            with self._grammar_lock:  # no request can be submitted any more: every grammar may go
                grammars, self._grammars = list(self._grammars.values()), collections.OrderedDict()
            for g in grammars:
                g.free()
            if self.tokenizer is not None:
                self.tokenizer.close()
            for m in self._models:
                b.lib.specdec_model_free(m)
            self._models = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def get_tokenizer(self) -> Tokenizer:
        return self.tokenizer

    @contextmanager
    def _using(self, entry: bool = True):
        """Hold the scheduler for a call: close() frees it only after every such call has left. A public
        call (entry) is refused once close() began; the steps of one already running go on (their
        requests end as cancelled)."""
        with self._cv:
            if self._sched is None or (entry and self._closing):
                raise ShutDownError("the LLM was closed")
            self._inflight += 1
        try:
            yield self._sched
        finally:
            with self._cv:
                self._inflight -= 1
                self._cv.notify_all()

    def scheduler_metrics(self) -> dict:
        """specdec_scheduler_get_metrics as a dict (request counts, queue, tokens, KV blocks)."""
        b = self._b
        m = b.ffi.new("specdec_scheduler_metrics *")
        with self._using() as sched:
            b.check(b.lib.specdec_scheduler_get_metrics(sched, m))
        return {n: getattr(m, n) for n, _ in b.ffi.typeof("specdec_scheduler_metrics").fields
                if not n.startswith("reserved")}

    # ---- requests -------------------------------------------------------------------------------
    def _prompts(self, prompts) -> list:
        """(text or None, ids, cache salt) for every prompt: str, token-id list, or {"prompt"/"prompt_token_ids",
        optionally "cache_salt"} (vLLM's TextPrompt / TokensPrompt); the salt is cache_salt_hash's, 0 without one."""
        if isinstance(prompts, (str, dict)) or (isinstance(prompts, Sequence) and prompts and
                                                isinstance(prompts[0], numbers.Integral)):
            prompts = [prompts]  # one prompt: a text or a list of token ids
        if not isinstance(prompts, Sequence):
            raise InvalidArgumentError("prompts must be a str, a list of token ids, or a list of those")
        out = []
        for i, p in enumerate(prompts):
            salt = 0
            if isinstance(p, dict):
                if p.get("cache_salt") is not None:
                    try:
                        salt = cache_salt_hash(p["cache_salt"])
                    except InvalidArgumentError as e:
                        raise InvalidArgumentError(f"prompts[{i}]: {e.message}") from None
                if "prompt_token_ids" in p:
                    p = p["prompt_token_ids"]
                elif "prompt" in p:
                    p = p["prompt"]
                else:
                    raise InvalidArgumentError(f"prompts[{i}]: a dict needs 'prompt' or 'prompt_token_ids'")
            if isinstance(p, str):
                out.append((p, self.tokenizer.encode(p), salt))
            elif not isinstance(p, (bytes, dict)) and hasattr(p, "__iter__"):  # token ids (a list, a numpy array)
                arr = token_id_array(p, f"prompts[{i}]")
                out.append((None, [int(t) for t in arr] if arr is not None else [], salt))
            else:
                raise InvalidArgumentError(f"prompts[{i}] is a {type(p).__name__}: a str or a list of token ids")
        return out

    def _requests(self, index, prompt, ids, params, salt: int = 0, priority: int = 0) -> list:
        """The params.n requests of one prompt: one seed, sequence_id = the sample's index."""
        first = self._request(index, prompt, ids, params, salt=salt)
        reqs = [first] + [self._request(index, prompt, ids, params, sample=j, seed=first.gp.seed, salt=salt)
                          for j in range(1, params.n)]
        if priority:
            for r in reqs:
                r.gp.priority = priority
        return reqs

    def _priorities(self, priority, n: int) -> list:
        """generate(priority=): None (all 0) or one int per prompt, 0 unless scheduling_policy='priority'."""
        if priority is None:
            return [0] * n
        if isinstance(priority, (str, bytes)) or not isinstance(priority, Sequence) or len(priority) != n or any(
                isinstance(v, bool) or not isinstance(v, int) or not -2**31 <= v < 2**31 for v in priority):
            raise InvalidArgumentError(f"priority must be a list of {n} ints (one per prompt) or None")
        if any(priority) and self.scheduling_policy != "priority":
            raise InvalidArgumentError("priority other than 0 needs LLM(scheduling_policy='priority')")
        return list(priority)

    def _request(self, index, prompt, ids, params, callback=None, sample: int = 0, seed=None,
                 salt: int = 0) -> _Request:
        b = self._b
        r = _Request(index, prompt, ids, params, sample)
        gp = b.ffi.new("specdec_generate_params *", self._template[0])
        room = max(1, self.n_ctx - len(ids))
        try:
            gp.n_predict = params.max_tokens if params.max_tokens is not None else self.n_ctx
            gp.temperature = params.temperature
            gp.top_k = params.top_k
            gp.top_p = params.top_p
            gp.min_p = params.min_p
            gp.ignore_eos = int(params.ignore_eos)
        except OverflowError as e:
            raise InvalidArgumentError(f"request {index}: SamplingParams value out of range: {e}") from None
        gp.sequence_id = sample
        if seed is not None:  # a later sample of the prompt: the first one's seed
            gp.seed = seed
        elif params.seed is not None:
            gp.seed = params.seed
        elif self._rng is not None:
            with self._lock:
                gp.seed = self._rng.getrandbits(63)
        else:
            gp.seed = secrets.randbits(63)
        gp.tokenizer = self.tokenizer.handle
        if params.stop_list:
            strs = [b.ffi.new("char[]", s.encode("utf-8", "surrogatepass")) for s in params.stop_list]
            arr = b.ffi.new("char *[]", strs)
            r.keep += strs + [arr]
            gp.stop_strings = arr
            gp.n_stop_strings = len(strs)
        if callback is not None:
            r.callback = b.ffi.callback("specdec_token_callback", callback)
            gp.callback = r.callback
        if params.logprobs is not None or (params.prompt_logprobs is not None and sample == 0):
            self._want_logprobs(r, gp, params, prompt=sample == 0)
        self._set_processors(r, gp, params)
        self._set_masks(r, gp, params)
        self._set_grammar(r, gp, params)
        if salt:
            if not b.has_field("specdec_generate_params", "cache_salt"):
                raise UnsupportedError(f"cache_salt: this libspecdec ({b.version}) has no "
                                       "specdec_generate_params.cache_salt (since 0.4.1)")
            gp.cache_salt = salt
        r.gp = gp
        r.capacity = max(1, min(gp.n_predict, room)) if gp.n_predict > 0 else 1
        r.c_ids = token_id_array(ids, "prompt")
        return r

    def _set_processors(self, r: _Request, gp, params: SamplingParams) -> None:
        """The logits processors (specdec_generate_params' fields of the same names, since 0.5); the arrays
        stay alive in r.keep as long as the request."""
        b = self._b
        on = params.processors_set()
        for name in on:
            if not b.has_field("specdec_generate_params", name):
                raise UnsupportedError(f"SamplingParams.{name}: this libspecdec ({b.version}) has no "
                                       f"specdec_generate_params.{name} (since 0.5)")
        if not on:
            return
        if params.logit_bias:
            arr = b.ffi.new("specdec_logit_bias[]", list(params.logit_bias.items()))
            r.keep.append(arr)
            gp.logit_bias, gp.n_logit_bias = arr, len(params.logit_bias)
        if params.stop_token_ids:
            arr = b.ffi.new("int32_t[]", params.stop_token_ids)
            r.keep.append(arr)
            gp.stop_token_ids, gp.n_stop_token_ids = arr, len(params.stop_token_ids)
        gp.min_tokens = params.min_tokens
        gp.presence_penalty = params.presence_penalty
        gp.frequency_penalty = params.frequency_penalty
        gp.repetition_penalty = params.repetition_penalty

    def _set_masks(self, r: _Request, gp, params: SamplingParams) -> None:
        """vLLM's allowed_token_ids and bad_words (specdec_generate_params since 0.5.2; the words tokenized
        by specdec_tokenize_bad_words); the arrays stay alive in r.keep."""
        b = self._b
        for name in params.masks_set():
            if not b.has_field("specdec_generate_params", MASK_FIELDS[name]):
                raise UnsupportedError(f"SamplingParams.{name}: this libspecdec ({b.version}) has no "
                                       f"specdec_generate_params.{MASK_FIELDS[name]} (since 0.5.2)")
        if params.allowed_token_ids:
            arr = b.ffi.new("int32_t[]", params.allowed_token_ids)
            r.keep.append(arr)
            gp.allowed_token_ids, gp.n_allowed_token_ids = arr, len(params.allowed_token_ids)
        if params.bad_words:
            words = [b.ffi.new("char[]", w.encode("utf-8", "surrogatepass")) for w in params.bad_words]
            ids = b.ffi.new("int32_t[]", b.lib.SPECDEC_MAX_BAD_WORDS_TOKENS)
            offsets = b.ffi.new("int32_t[]", b.lib.SPECDEC_MAX_BAD_WORDS + 1)
            n = b.ffi.new("int32_t *")
            b.check(b.lib.specdec_tokenize_bad_words(self.tokenizer.handle, b.ffi.new("char *[]", words), len(words),
                                                     ids, offsets, n), lambda: b.lib.specdec_last_error(),
                    "SamplingParams.bad_words")
            r.keep += [ids, offsets]
            gp.bad_words_ids, gp.bad_words_offsets, gp.n_bad_words = ids, offsets, n[0]

    def _set_grammar(self, r: _Request, gp, params: SamplingParams) -> None:
        """specdec_generate_params.grammar from params' structured-output constraint. r keeps the _Grammar
        until it is collected, so the C grammar outlives the request's submission even if the cache drops it
        meanwhile (the scheduler holds its own reference from the submission on)."""
        c = params.constraint
        if c is None:
            return
        g = self._compiled_grammar(c, "structured_outputs" if params.structured_outputs is not None
                                   else "guided_decoding")
        r.keep.append(g)
        gp.grammar = g.handle
        after = params.structured_outputs_after
        if after:
            b = binding()
            if not b.has_field("specdec_generate_params", "grammar_after_tokens"):
                raise UnsupportedError(f"SamplingParams.structured_outputs_after: this libspecdec ({b.version}) has no "
                                       "specdec_generate_params.grammar_after_tokens (libspecdec 0.5.4)")
            arr = b.ffi.new("int32_t[]", after)
            r.keep.append(arr)
            gp.grammar_after_tokens, gp.n_grammar_after_tokens = arr, len(after)

    def _compiled_grammar(self, constraint: StructuredOutputsParams, name: str = "structured_outputs") -> _Grammar:
        """The compiled grammar of a constraint, from the LLM's cache (the GRAMMAR_CACHE_SIZE most recently
        used, keyed by (kind, spec bytes)) or compiled now with the LLM's tokenizer (specdec_grammar_compile).
        A spec the library refuses raises its InvalidArgumentError / UnsupportedError with its message."""
        b = self._b
        kind, spec = key = constraint.grammar_spec()
        with self._grammar_lock:
            g = self._grammars.get(key)
            if g is not None:
                self._grammars.move_to_end(key)
                return g
        field = next(f for f in CONSTRAINTS if getattr(constraint, f) not in (None, False))
        where = f"SamplingParams.{name}.{field}"
        if not b.has_field("specdec_generate_params", "grammar"):
            raise UnsupportedError(f"{where}: this libspecdec ({b.version}) has no specdec_generate_params.grammar "
                                   "(since 0.5.1)")
        try:
            compile_fn = b.lib.specdec_grammar_compile
        except AttributeError:  # a header that declares it over a library that does not define it
            raise UnsupportedError(f"{where}: this libspecdec ({b.version}) does not define "
                                   "specdec_grammar_compile") from None
        try:
            kind_value = b.enum_value("specdec_grammar_kind", kind)
        except KeyError:  # an older header: e.g. no SPECDEC_GRAMMAR_GBNF before 0.5.2
            raise UnsupportedError(f"{where}: this libspecdec ({b.version}) has no {kind}") from None
        out = b.ffi.new("specdec_grammar **")
        st = compile_fn(self.tokenizer.handle, kind_value,
                        spec if spec is not None else b.ffi.NULL, len(spec) if spec is not None else 0, out)
        self.tokenizer._check(st, where)  # the detail: specdec_last_error, as for the tokenizer's other calls
        fresh = _Grammar(out[0], key)
        with self._grammar_lock:
            g = self._grammars.get(key)
            if g is None:  # another thread may have compiled the same spec meanwhile: keep the first
                g = self._grammars[key] = fresh
                while len(self._grammars) > GRAMMAR_CACHE_SIZE:
                    self._grammars.popitem(last=False)  # freed once no unsubmitted request holds it
            self._grammars.move_to_end(key)
        return g

    def _want_logprobs(self, r: _Request, gp, params: SamplingParams, prompt: bool = True) -> None:
        """Ask the library for log-probabilities: every emitted token's and its top `logprobs`
        (specdec_generate_params.logprobs) and/or every prompt token's but the first and its top
        `prompt_logprobs` (.prompt_logprobs, reported before anything is generated). One callback, on the
        scheduler thread, copies each record into r.lp_rows or, for a position inside the prompt, r.prompt_rows."""
        b = self._b
        for name in ("logprobs", "prompt_logprobs"):
            if getattr(params, name) is not None and not b.has_field("specdec_generate_params", name):
                raise UnsupportedError(f"SamplingParams.{name}: this libspecdec ({b.version}) has no "
                                       f"specdec_generate_params.{name} (since 0.4.1)")
        ffi, n_prompt = b.ffi, len(r.ids)
        rows = [] if params.logprobs is not None else None
        prompt_rows = [] if params.prompt_logprobs is not None and prompt else None

        def on_logprob(user_data, lp):
            try:
                n = lp.n_top
                tops = (ffi.unpack(lp.top_tokens, n), ffi.unpack(lp.top_logprobs, n)) if n > 0 else ([], [])
                if lp.position < n_prompt:
                    prompt_rows.append((lp.position, lp.token, lp.logprob, lp.rank, *tops))
                else:
                    rows.append((lp.token, lp.logprob, lp.rank, *tops))
            except BaseException:  # never unwind into the library; _logprobs / _prompt_logprobs see it missing
                pass
            return 0

        r.lp_rows, r.prompt_rows = rows, prompt_rows
        r.lp_callback = ffi.callback("specdec_logprob_callback", on_logprob)
        gp.logprob_callback = r.lp_callback
        if rows is not None:
            gp.logprobs = 1
            gp.top_logprobs = params.logprobs
        if prompt_rows is not None:
            gp.prompt_logprobs = 1
            gp.prompt_top_logprobs = params.prompt_logprobs

    def _decode_one(self, token: int) -> str:
        text = self._decoded.get(token)
        if text is None:
            text = self._decoded[token] = self.tokenizer.decode([token], skip_special_tokens=False)
        return text

    def _logprobs(self, r: _Request, tokens):
        """(CompletionOutput.logprobs, cumulative_logprob) from the rows the callback collected: one dict
        per token, the sampled token first, then the top list (vLLM's SampleLogprobs)."""
        rows = r.lp_rows
        if rows is None:
            return None, None
        bad = next((i for i, (row, t) in enumerate(zip(rows, tokens)) if row[0] != t), None)
        if len(rows) != len(tokens) or bad is not None:  # the library broke its logprob_callback contract
            raise InternalError(f"request {r.index}: the logprob callback reported {len(rows)} tokens for "
                                f"{len(tokens)} generated" + (f", token {bad} differs" if bad is not None else ""))
        out = [self._logprob_dict(*row) for row in rows]
        return out, sum(row[1] for row in rows)

    def _logprob_dict(self, token, logprob, rank, top_ids, top_lps) -> dict:
        """One record as vLLM gives it: {token: Logprob}, the token itself first, then the top list in rank
        order (the token is not repeated when it is among them)."""
        d = {token: Logprob(logprob, rank, self._decode_one(token))}
        for t, lp, rk in zip(top_ids, top_lps, _top_ranks(top_lps)):
            d[t] = Logprob(lp, rk, self._decode_one(t))
        return d

    def _prompt_logprobs(self, r: _Request, cancelled: bool):
        """RequestOutput.prompt_logprobs (vLLM's PromptLogprobs): None for the first prompt token (nothing
        precedes it), then one dict per prompt token from the records the callback collected (positions
        1..n_prompt-1). A request cancelled before they were all reported gets those it got."""
        rows, ids = r.prompt_rows, r.ids
        if rows is None:
            return None
        bad = next((i for i, row in enumerate(rows) if row[0] != i + 1 or i + 1 >= len(ids) or
                    row[1] != ids[i + 1]), None)
        if bad is not None or (len(rows) != max(0, len(ids) - 1) and not cancelled):
            raise InternalError(f"request {r.index}: the logprob callback reported {len(rows)} prompt records for "
                                f"{len(ids)} prompt tokens" + (f", record {bad} differs" if bad is not None else ""))
        return ([None] if ids else []) + [self._logprob_dict(*row[1:]) for row in rows]

    def _submit(self, r: _Request) -> None:
        b = self._b
        rid = b.ffi.new("specdec_request_id *")
        with self._using(entry=False) as sched:
            st = b.lib.specdec_scheduler_submit(sched, r.c_ids if r.c_ids is not None else b.ffi.NULL, len(r.ids),
                                                r.gp, rid)
            b.check(st, lambda: b.lib.specdec_scheduler_last_error(sched), f"request {r.index}")
        r.id = rid[0]

    def _wait(self, r: _Request, timeout_ms: int):
        """(tokens, stats, outcome) once finished, None on timeout."""
        b = self._b
        n = b.ffi.new("int32_t *")
        outcome = b.ffi.new("specdec_status *")
        stats = b.ffi.new("specdec_stats *")
        with self._using(entry=False) as sched:
            while True:
                out = b.ffi.new("int32_t[]", r.capacity)
                st = b.lib.specdec_scheduler_wait(sched, r.id, timeout_ms, out, r.capacity, n, stats, outcome)
                if st == b.status_values["SPECDEC_ERR_TIMEOUT"]:
                    return None
                if st == b.status_values["SPECDEC_ERR_BUFFER_TOO_SMALL"]:
                    r.capacity = n[0]
                    continue
                b.check(st, lambda: b.lib.specdec_scheduler_last_error(sched), f"request {r.index}")
                r.id = 0
                return list(b.ffi.unpack(out, n[0])), stats, outcome[0]

    def _abandon(self, reqs) -> None:
        """Cancel every submitted, uncollected request and collect it (Ctrl-C, an error, a closed stream)."""
        b = self._b
        live = [r for r in reqs if r.id]
        try:
            with self._using(entry=False) as sched:
                for r in live:
                    b.lib.specdec_scheduler_cancel(sched, r.id)
                for r in live:
                    try:
                        self._wait(r, -1)
                    except SpecdecError:
                        pass
        except ShutDownError:  # closed meanwhile: freeing the scheduler collects them
            pass

    def _metrics(self, stats) -> RequestMetrics:
        b = self._b
        m = RequestMetrics()
        for name, f in b.ffi.typeof("specdec_stats").fields:
            if name.startswith("reserved"):
                continue
            v = getattr(stats, name)
            if f.type.kind == "enum":
                v = _enum_short(f.type, v)
            elif f.type.kind == "array":
                v = list(v)
            m[name] = v
        m["backend"] = self.backend
        return m

    def _output(self, r: _Request, tokens, stats, outcome, text: str, matched, lp=None) -> RequestOutput:
        """r's RequestOutput. lp: (logprobs, cumulative_logprob, prompt_logprobs) already built by
        _lp_parts (AsyncLLM builds them on its collector thread, while the tokenizer is surely open)."""
        b = self._b
        metrics = self._metrics(stats)
        if outcome == b.status_values["SPECDEC_ERR_CANCELLED"]:
            finish, reason = "abort", None
        elif outcome != 0:
            raise b.error(outcome, "", f"request {r.index}")
        else:
            stop = metrics["stop_reason"]
            finish = "length" if stop in ("n_predict", "context_full") else "stop"
            # vLLM's stop_reason: the stop string or the stop token id; None for EOS and the rest
            reason = matched if stop == "stop_string" else tokens[-1] if stop == "stop_token_id" and tokens else None
        logprobs, cumulative, prompt_logprobs = lp if lp is not None else self._lp_parts(r, tokens, outcome)
        comp = CompletionOutput(r.sample, text, tokens, cumulative_logprob=cumulative, logprobs=logprobs,
                                finish_reason=finish, stop_reason=reason)
        return RequestOutput(str(next(self._counter)), r.prompt, list(r.ids), [comp], metrics=metrics,
                             prompt_logprobs=prompt_logprobs, num_cached_tokens=int(metrics.get("n_cached_prompt", 0)))

    def _lp_parts(self, r: _Request, tokens, outcome) -> tuple:
        """(CompletionOutput.logprobs, cumulative_logprob, RequestOutput.prompt_logprobs) of a finished r."""
        logprobs, cumulative = self._logprobs(r, tokens)
        cancelled = outcome == self._b.status_values["SPECDEC_ERR_CANCELLED"]
        return logprobs, cumulative, self._prompt_logprobs(r, cancelled)

    def _text(self, stream, tokens, params: SamplingParams, stats):
        """The streamed text of tokens (the library's streaming decoder, as `specdec generate` prints
        it), cut before the first stop string (after it with include_stop_str_in_output); a
        stop_token_ids id's text is left out unless include_stop_str_in_output (vLLM's)."""
        b = self._b
        cut = _StopCutter(params.stop_list, params.include_stop_str_in_output)
        text = b.ffi.new("char **")
        n = b.ffi.new("size_t *")
        parts = []
        by_id = stats.stop_reason == b.enum_value("specdec_stop_reason", "SPECDEC_STOP_TOKEN_ID")
        for t in tokens[:-1] if by_id and tokens and not params.include_stop_str_in_output else tokens:
            b.check(b.lib.specdec_detok_stream_push(stream, t, text, n))
            parts.append(cut.feed(b.ffi.unpack(text[0], n[0]).decode("utf-8", "replace")))
        b.check(b.lib.specdec_detok_stream_flush(stream, text, n))
        parts.append(cut.feed(b.ffi.unpack(text[0], n[0]).decode("utf-8", "replace")))
        parts.append(cut.finish())
        return "".join(parts), cut.matched

    def _params_list(self, sampling_params, n: int) -> list:
        if sampling_params is None:
            return [SamplingParams()] * n
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * n
        if isinstance(sampling_params, Sequence) and all(isinstance(p, SamplingParams) for p in sampling_params):
            if len(sampling_params) != n:
                raise InvalidArgumentError(f"{len(sampling_params)} SamplingParams for {n} prompts")
            return list(sampling_params)
        raise InvalidArgumentError("sampling_params must be a SamplingParams, a list of them, or None")

    # ---- public API -----------------------------------------------------------------------------
    def generate(self, prompts, sampling_params=None, use_tqdm: bool = True, priority=None) -> list:
        """Generate for one prompt or many (str, token-id list, or a list of those), all through the
        scheduler at once; returns one RequestOutput per prompt, in order. priority (vLLM's): one int per
        prompt, lower served first, with LLM(scheduling_policy="priority"). Ctrl-C cancels every
        request of the call and re-raises KeyboardInterrupt."""
        with self._using():
            items = self._prompts(prompts)
            params = self._params_list(sampling_params, len(items))
            prios = self._priorities(priority, len(items))
            reqs = [r for i, ((p, ids, salt), sp) in enumerate(zip(items, params))
                    for r in self._requests(i, p, ids, sp, salt, prios[i])]
            return _by_prompt(self._run(reqs, use_tqdm), reqs)

    def _run(self, reqs, use_tqdm) -> list:
        b = self._b
        results = [None] * len(reqs)
        bar = _progress(len(reqs), use_tqdm)
        stream = b.ffi.new("specdec_detok_stream **")
        b.check(b.lib.specdec_detok_stream_create(self.tokenizer.handle, 1, stream),
                lambda: b.lib.specdec_tokenizer_last_error(self.tokenizer.handle))
        next_submit, done, n_tokens = 0, 0, 0
        try:
            while done < len(reqs):
                while next_submit < len(reqs):
                    try:
                        self._submit(reqs[next_submit])
                    except QueueFullError:
                        if next_submit == done:
                            raise
                        break
                    next_submit += 1
                r = reqs[done]
                got = self._wait(r, _POLL_MS)
                if got is None:
                    continue
                tokens, stats, outcome = got
                text, matched = self._text(stream[0], tokens, r.params, stats)
                results[done] = self._output(r, tokens, stats, outcome, text, matched)
                done += 1
                n_tokens += len(tokens)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix_str(f"{n_tokens} tokens out", refresh=False)
        except BaseException:
            self._abandon(reqs)
            raise
        finally:
            b.lib.specdec_detok_stream_free(stream[0])
            if bar is not None:
                bar.close()
        return results

    def stream(self, prompt, sampling_params: Optional[SamplingParams] = None) -> Iterator[str]:
        """Yield the text of one request as it is generated (deltas; their concatenation equals
        generate()'s text). The generator's return value (StopIteration.value) is the RequestOutput
        (with SamplingParams.logprobs / prompt_logprobs, its logprobs / prompt_logprobs: the deltas stay
        plain text).
        Closing the generator early, or Ctrl-C, cancels the request."""
        with self._using():
            items = self._prompts(prompt)
            if len(items) != 1:
                raise InvalidArgumentError("stream() takes one prompt")
            params = self._params_list(sampling_params, 1)[0]
            if params.n != 1:
                raise InvalidArgumentError(f"stream() yields one sequence: SamplingParams.n = {params.n} (use generate())")
        pieces: queue.SimpleQueue = queue.SimpleQueue()

        drop_after = set() if params.include_stop_str_in_output else set(params.stop_token_ids or ())
        dropping = []  # a stop id came: its text and what follows are left out (vLLM's)

        def on_token(user_data, token, piece, piece_len):
            try:
                if token in drop_after:
                    dropping.append(token)
                if dropping:
                    piece_len = 0
                pieces.put(bytes(self._b.ffi.buffer(piece, piece_len)) if piece_len else b"")
            except BaseException:  # never let an exception unwind into the library
                pass
            return 0

        (text, ids, salt), = items
        with self._using():
            r = self._request(0, text, ids, params, callback=on_token, salt=salt)
        return self._stream(r, pieces)

    def _stream(self, r, pieces) -> Iterator[str]:
        cut = _StopCutter(r.params.stop_list, r.params.include_stop_str_in_output)
        with self._using():
            self._submit(r)
        try:
            while True:
                with self._using():  # each step: ShutDownError once the LLM is closed
                    got = self._wait(r, 0)
                while True:
                    try:
                        piece = pieces.get(timeout=_POLL_MS / 1000 if got is None else 0)
                    except queue.Empty:
                        break
                    delta = cut.feed(piece.decode("utf-8", "replace"))
                    if delta:
                        yield delta
                if got is not None:
                    break
            rest = cut.finish()
            if rest:
                yield rest
        except BaseException:
            self._abandon([r])
            raise
        tokens, stats, outcome = got
        return self._output(r, tokens, stats, outcome, cut.text, cut.matched)

    def chat(self, messages, sampling_params=None, use_tqdm: bool = True, add_generation_prompt: bool = True,
             chat_template: Optional[str] = None, tools=None, chat_template_kwargs=None,
             continue_final_message: bool = False) -> list:
        """Generate replies to one conversation ([{"role", "content"}, ...]) or a list of them, the
        prompt rendered with the model's chat template (specdec_chat_tokenize; chat_template forces a
        family by name). As vLLM's LLM.chat, messages may carry tool calls (arguments as JSON text
        or dicts), tool results, content null or a list of text parts and reasoning; tools (OpenAI's
        [{"type": "function", "function": {...}}]) and chat_template_kwargs (e.g. {"enable_thinking":
        False}) reach the template (specdec_chat_apply_json). RequestOutput.prompt is the rendered
        text. The output is text: tool calls in it are not parsed (vLLM's LLM.chat neither).
        continue_final_message (vLLM's; with add_generation_prompt=False): the prompt ends right after the last
        message's content, so the model continues it (Tokenizer.apply_chat_template)."""
        with self._using():
            convs = [messages] if messages and isinstance(messages[0], dict) else messages
            if not isinstance(convs, Sequence) or not convs:
                raise InvalidArgumentError("messages must be a conversation (list of dicts) or a list of them")
            params = self._params_list(sampling_params, len(convs))
            reqs = []
            for i, (conv, sp) in enumerate(zip(convs, params)):
                text = self.tokenizer.apply_chat_template(conv, False, add_generation_prompt, chat_template, tools,
                                                          chat_template_kwargs, continue_final_message)
                ids = self.tokenizer.apply_chat_template(conv, True, add_generation_prompt, chat_template, tools,
                                                         chat_template_kwargs, continue_final_message)
                reqs += self._requests(i, text, ids, sp)
            return _by_prompt(self._run(reqs, use_tqdm), reqs)


def _by_prompt(results, reqs) -> list:
    """One RequestOutput per prompt: sample 0's, its outputs followed by the other samples' (in index
    order; requests are laid out prompt by prompt, sample 0 first)."""
    out = []
    for res, r in zip(results, reqs):
        if r.sample == 0:
            out.append(res)
        else:
            out[-1].outputs.extend(res.outputs)
    return out


def _c_int(v: int, what: str) -> int:
    if not -2**31 <= v < 2**31:
        raise InvalidArgumentError(f"{what} = {v} does not fit an int32")
    return v


def _progress(total: int, use_tqdm: bool):
    if not use_tqdm or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="Processed prompts", dynamic_ncols=True)
