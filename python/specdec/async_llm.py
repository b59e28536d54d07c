"""specdec.AsyncLLM: the scheduler behind asyncio, in the shape of vLLM's AsyncLLM (AsyncLLMEngine).

    engine = specdec.AsyncLLM(max_num_seqs=8)            # LLM's arguments; None = the bundled pair
    async for out in engine.generate("And God said", specdec.SamplingParams(max_tokens=32), "req-1"):
        print(out.outputs[0].text)                       # cumulative text so far; out.finished at the end

Every request goes through the same specdec_scheduler as LLM's calls (continuous batching: requests
of any number of coroutines, on any event loops, decode together). The outputs are LLM.generate's:
the last RequestOutput of a request is what generate() returns for the same prompt, parameters and
seed (same text, token_ids, finish and stop reasons, logprobs, metrics).

How results reach the event loop: the token callback (on the scheduler's thread) hands each token's
text to the request's loop (call_soon_threadsafe), and one collector thread per engine waits with
specdec_scheduler_wait_any (libspecdec 0.5.5) for any request to finish, collects it and hands the
result over the same way. No thread is held per request and nothing polls.
"""
from __future__ import annotations

import asyncio
import enum
import threading
import uuid
from typing import AsyncIterator, Iterable, Optional, Union

from .errors import InvalidArgumentError, ShutDownError, SpecdecError, UnsupportedError
from .llm import LLM, _StopCutter
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .sampling import RequestOutputKind, SamplingParams

_COLLECT_MS = 1000  # the collector's wait_any bound (it ends at SHUT_DOWN anyway; this only bounds a wake-up)


class AsyncEngineArgs:
    """vLLM's AsyncEngineArgs for AsyncLLM.from_engine_args: the model and LLM's keyword arguments
    (draft, speculative_config, backend, n_ctx, max_num_seqs, seed, enable_prefix_caching, ...)."""

    def __init__(self, model: Optional[str] = None, **kwargs):
        self.model = model
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"AsyncEngineArgs(model={self.model!r}, {self.kwargs!r})"


class _Stream:
    """One generate() call: its requests (one per sample), the event loop it runs on and the queue the
    scheduler's and the collector's threads post to: ("tok", sample, token, text bytes), ("done", sample,
    (tokens, stats, outcome)), ("error", sample, exception)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, request_id: str):
        self.loop = loop
        self.request_id = request_id
        self.queue: asyncio.Queue = asyncio.Queue()
        self.reqs: list = []

    def post(self, item) -> None:
        """From any thread; a closed loop (its coroutine is gone) drops the item."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:
            pass


class _Sample:
    """The state of one sample while it streams: its text (cut at stop strings as generate() cuts it), its
    token ids, what the last output carried (DELTA) and, once finished, its CompletionOutput."""

    def __init__(self, params: SamplingParams):
        self.cut = _StopCutter(params.stop_list, params.include_stop_str_in_output)
        self.released = ""  # text released by the cutter so far
        self.tokens: list = []
        self.sent_text = 0
        self.sent_tokens = 0
        self.final: Optional[CompletionOutput] = None
        self.final_output: Optional[RequestOutput] = None
        self.finish_sent = False  # DELTA: an output carried its finish_reason already


class AsyncLLM:
    """An asyncio engine (vLLM's AsyncLLM): generate() is an async generator of RequestOutputs, abort()
    cancels requests by id, shutdown() ends everything.

    Arguments: LLM's (model, draft, speculative_config, backend, n_ctx, max_num_seqs, seed,
    enable_prefix_caching, prefill_chunk, cpu_threads, num_gpu_blocks_override, block_size, kv_admission,
    scheduling_policy, ngram_corpus_tokens). The engine's LLM is AsyncLLM.llm: its generate() / chat() may be used from other
    threads at the same time (their requests share the scheduler).
    SamplingParams.output_kind (vLLM's RequestOutputKind) says what each yielded RequestOutput holds:
    CUMULATIVE (default) the text and token_ids so far, DELTA only what is new since the previous one,
    FINAL_ONLY nothing but the final output. Outputs are yielded as the scheduler produces tokens: a
    speculative round's accepted tokens arrive together, so one output usually carries several tokens.
    The final output (finished True) carries the finish and stop reasons, logprobs, prompt_logprobs and
    metrics; intermediate ones carry text, token_ids and (with SamplingParams.logprobs) the logprobs of
    their tokens. Cancelling the consuming task, or leaving the async for early, cancels the request.
    """

    def __init__(self, model: Optional[str] = None, **kwargs):
        self.llm = LLM(model, **kwargs)
        b = self.llm._b
        try:
            b.lib.specdec_scheduler_wait_any
        except AttributeError:
            self.llm.close()
            raise UnsupportedError(f"AsyncLLM: this libspecdec ({b.version}) has no specdec_scheduler_wait_any "
                                   "(since 0.5.5)") from None
        self._lock = threading.Lock()  # _streams, _by_cid; held across a submission and its registration
        self._streams: dict = {}  # request_id -> _Stream
        self._by_cid: dict = {}  # specdec_request_id -> (_Stream, sample index, _Request)
        self._closed = False
        self._error: Optional[BaseException] = None  # what stopped the collector (None: shutdown or running)
        self._collector = threading.Thread(target=self._collect, name="specdec-async-collector", daemon=True)
        self._collector.start()

    @classmethod
    def from_engine_args(cls, engine_args: AsyncEngineArgs) -> "AsyncLLM":
        if not isinstance(engine_args, AsyncEngineArgs):
            raise InvalidArgumentError("AsyncLLM.from_engine_args takes a specdec.AsyncEngineArgs")
        return cls(engine_args.model, **engine_args.kwargs)

    # ---- state ----------------------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.llm.tokenizer

    async def get_tokenizer(self):
        return self.llm.tokenizer

    @property
    def is_running(self) -> bool:
        return not self._closed and self._error is None and self._collector.is_alive()

    @property
    def is_stopped(self) -> bool:
        return self._closed

    @property
    def errored(self) -> bool:
        return self._error is not None

    @property
    def dead_error(self) -> BaseException:
        return self._error if self._error is not None else ShutDownError("the AsyncLLM was shut down")

    async def check_health(self) -> None:
        """Raise the engine's error (or ShutDownError after shutdown()); None while it runs."""
        if not self.is_running:
            raise self.dead_error

    def scheduler_metrics(self) -> dict:
        return self.llm.scheduler_metrics()

    # ---- lifetime -------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Cancel every request (their generators end with finish_reason "abort"), let the collector hand
        over what finished, then free the engine. Idempotent; callable from any thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        b = self.llm._b
        try:
            with self.llm._using(entry=False) as sched:
                b.lib.specdec_scheduler_shutdown(sched)  # every request ends; wait_any then answers SHUT_DOWN
        except ShutDownError:
            pass
        if threading.current_thread() is not self._collector:
            self._collector.join()
        self.llm.close()

    close = shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.shutdown()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass

    # ---- the collector thread -------------------------------------------------------------------
    def _collect(self) -> None:
        llm = self.llm
        b = llm._b
        idp = b.ffi.new("specdec_request_id *")
        timeout = b.status_values["SPECDEC_ERR_TIMEOUT"]
        cancelled = b.status_values["SPECDEC_ERR_CANCELLED"]
        failure: Optional[BaseException] = None
        try:
            while True:
                with llm._using(entry=False) as sched:
                    st = b.lib.specdec_scheduler_wait_any(sched, _COLLECT_MS, idp)
                    detail = b.lib.specdec_last_error() if st not in (0, timeout) else None
                if st == timeout:
                    continue
                if st != 0:
                    if st != b.status_values["SPECDEC_ERR_SHUT_DOWN"]:
                        failure = b.error(st, b.string(detail), "AsyncLLM")
                    break
                with self._lock:
                    entry = self._by_cid.pop(idp[0], None)
                if entry is None:  # a request of the LLM's own calls: their caller collects it
                    continue
                stream, j, r = entry
                try:
                    got = llm._wait(r, 0)
                    # the logprob dicts decode tokens: built here, while the tokenizer is surely open
                    lp = llm._lp_parts(r, got[0], got[2]) if got[2] in (0, cancelled) else None
                    stream.post(("done", j, got, lp))
                except SpecdecError as e:
                    stream.post(("error", j, e))
        except ShutDownError:
            pass
        except BaseException as e:  # noqa: BLE001 — the engine is dead: every waiting generator is told
            failure = e
        self._error = failure
        with self._lock:
            left, self._by_cid = list(self._by_cid.values()), {}
        for stream, j, _ in left:
            stream.post(("error", j, failure or ShutDownError("the AsyncLLM was shut down")))

    # ---- requests -------------------------------------------------------------------------------
    async def generate(self, prompt, sampling_params: Optional[SamplingParams] = None,
                       request_id: Optional[str] = None, *, priority: int = 0) -> AsyncIterator[RequestOutput]:
        """Generate for one prompt (str, token ids, or {"prompt" / "prompt_token_ids", "cache_salt"}),
        yielding RequestOutputs as tokens arrive (SamplingParams.output_kind), the last one finished.
        request_id: a str unique among the running requests (None: a fresh one); abort() takes it.
        priority: with AsyncLLM(scheduling_policy="priority"), lower is served first. Errors of the
        request (bad parameters, a failed generation) raise here, as LLM.generate raises them."""
        if not self.is_running:
            raise self.dead_error
        llm = self.llm
        loop = asyncio.get_running_loop()
        with llm._using():
            items = llm._prompts(prompt)
            if len(items) != 1:
                raise InvalidArgumentError("AsyncLLM.generate takes one prompt (call it once per prompt)")
            params = llm._params_list(sampling_params, 1)[0]
            prio = llm._priorities([priority], 1)[0] if priority is not None else 0
        request_id = uuid.uuid4().hex if request_id is None else request_id
        if not isinstance(request_id, str) or not request_id:
            raise InvalidArgumentError(f"request_id = {request_id!r} must be a non-empty str")
        stream = _Stream(loop, request_id)
        (text, ids, salt), = items
        samples = [_Sample(params) for _ in range(params.n)]
        with llm._using():
            for j in range(params.n):
                seed = stream.reqs[0].gp.seed if j else None
                r = llm._request(0, text, ids, params, callback=self._on_token(stream, j, params), sample=j,
                                 seed=seed, salt=salt)
                if prio:
                    r.gp.priority = prio
                stream.reqs.append(r)
        self._submit(stream)
        finished = False
        try:
            async for out in self._outputs(stream, samples, params):
                finished = out.finished
                yield out
        finally:
            if not finished:  # the consumer left, was cancelled, or an error is on its way up
                self._cancel(stream)
            with self._lock:
                if self._streams.get(request_id) is stream:
                    del self._streams[request_id]

    def _on_token(self, stream: _Stream, j: int, params: SamplingParams):
        ffi = self.llm._b.ffi
        drop_after = set() if params.include_stop_str_in_output else set(params.stop_token_ids or ())
        dropping = []  # a stop id came: its text and what follows are left out (vLLM's; as LLM.stream)

        def on_token(user_data, token, piece, piece_len):
            try:
                if token in drop_after:
                    dropping.append(token)
                data = bytes(ffi.buffer(piece, piece_len)) if piece_len and not dropping else b""
                stream.post(("tok", j, token, data))
            except BaseException:  # never unwind into the library
                pass
            return 0

        return on_token

    def _submit(self, stream: _Stream) -> None:
        """Submit every sample's request and register it for the collector, under the lock, so a request
        finishing at once is found by the collector."""
        with self._lock:
            if self._closed:
                raise ShutDownError("the AsyncLLM was shut down")
            if stream.request_id in self._streams:
                raise InvalidArgumentError(f"request_id {stream.request_id!r} is already running")
            done = []
            try:
                for j, r in enumerate(stream.reqs):
                    self.llm._submit(r)
                    self._by_cid[r.id] = (stream, j, r)
                    done.append(r)
            except BaseException:
                self._cancel_ids(done)  # the collector collects them; nobody reads their stream
                raise
            self._streams[stream.request_id] = stream

    async def _outputs(self, stream: _Stream, samples: list, params: SamplingParams):
        kind = params.output_kind
        left = len(samples)
        while left:
            items = [await stream.queue.get()]
            while not stream.queue.empty():
                items.append(stream.queue.get_nowait())
            changed = set()
            for item in items:
                what, j, val = item[0], item[1], item[2:]
                s = samples[j]
                if s.final is not None:
                    continue
                if what == "tok":
                    token, data = val
                    if token >= 0:
                        s.tokens.append(token)
                    s.released += s.cut.feed(data.decode("utf-8", "replace")) if data else ""
                    changed.add(j)
                elif what == "done":
                    (tokens, stats, outcome), lp = val
                    s.released += s.cut.finish()
                    out = self.llm._output(stream.reqs[j], tokens, stats, outcome, s.cut.text, s.cut.matched, lp)
                    s.final, s.final_output = out.outputs[0], out
                    left -= 1
                    changed.add(j)
                else:  # "error"
                    raise val[0]
            if left and kind != RequestOutputKind.FINAL_ONLY and changed:
                yield self._partial(stream, samples, changed, kind)
        yield self._final(stream, samples, kind)

    def _partial(self, stream: _Stream, samples: list, changed: set, kind) -> RequestOutput:
        outs = []
        for j, s in enumerate(samples):
            if kind == RequestOutputKind.DELTA and j not in changed:
                continue
            outs.append(self._completion(stream.reqs[j], s, kind))
        r0 = stream.reqs[0]
        return RequestOutput(stream.request_id, r0.prompt, list(r0.ids), outs, finished=False,
                             metrics=RequestMetrics())

    def _completion(self, r, s: _Sample, kind) -> CompletionOutput:
        """Sample s as the output so far (or its final one): whole, or (DELTA) what is new since the last."""
        if s.final is not None:
            text, tokens = s.final.text, s.final.token_ids
            lps, cum, finish, reason = s.final.logprobs, s.final.cumulative_logprob, s.final.finish_reason, \
                s.final.stop_reason
        else:
            text, tokens = s.released, s.tokens
            finish = reason = None
            rows = r.lp_rows[:len(tokens)] if r.lp_rows is not None else None
            try:
                lps = [self.llm._logprob_dict(*row) for row in rows] if rows is not None else None
            except SpecdecError:  # the engine shut down meanwhile (its tokenizer is closed): the final has them
                lps = None
            cum = sum(row[1] for row in rows) if rows is not None else None
        if kind == RequestOutputKind.DELTA:
            s.finish_sent = finish is not None
            a, b = s.sent_text, s.sent_tokens
            s.sent_text, s.sent_tokens = len(text), len(tokens)
            text, tokens = text[a:], tokens[b:]
            if lps is not None:
                lps = lps[b:]
        return CompletionOutput(r.sample, text, list(tokens), cumulative_logprob=cum, logprobs=lps,
                                finish_reason=finish, stop_reason=reason)

    def _final(self, stream: _Stream, samples: list, kind) -> RequestOutput:
        """The finished RequestOutput: sample 0's (metrics, prompt_logprobs, cached tokens) with every
        sample's completion (LLM.generate's for n > 1), under the request's id."""
        out = samples[0].final_output
        out.request_id = stream.request_id
        if kind == RequestOutputKind.DELTA:  # the samples whose end no output has carried yet
            out.outputs = [self._completion(r, s, kind) for r, s in zip(stream.reqs, samples) if not s.finish_sent]
        else:
            out.outputs = [s.final for s in samples]
        out.finished = True
        return out

    # ---- cancellation ---------------------------------------------------------------------------
    def _cancel_ids(self, reqs) -> None:
        b = self.llm._b
        try:
            with self.llm._using(entry=False) as sched:
                for r in reqs:
                    if r.id:
                        b.lib.specdec_scheduler_cancel(sched, r.id)  # NOT_FOUND once collected: nothing to do
        except ShutDownError:
            pass

    def _cancel(self, stream: _Stream) -> None:
        self._cancel_ids(stream.reqs)

    async def abort(self, request_id: Union[str, Iterable[str]]) -> None:
        """Cancel running requests by id (one or several; unknown ids are ignored, as vLLM's): their
        generators yield a final output with finish_reason "abort" and the tokens so far."""
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        with self._lock:
            streams = [self._streams[i] for i in ids if i in self._streams]
        for s in streams:
            self._cancel(s)
