"""The RLM kernel: runs in its own `python -I` process, standard library only.

Protocol. The parent writes one JSON object per line to stdin. The kernel answers on
stdout with frames: a line starting with a random sentinel (given in argv and kept
out of the namespace), a space, and one JSON object. User code's prints are captured
per eval, so they never reach the real stdout; even a direct os.write(1, ...) cannot
forge a frame without knowing the sentinel.

Requests: {"op": "load", "context": str, "meta": {...}}, {"op": "eval", "code": str},
{"op": "rpc_result", "id": n, "result": ...}. Frames: {"type": "result", ...},
{"type": "rpc", "id": n, "method": str, "params": {...}}.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import traceback

OUTPUT_LIMIT = 1_000_000  # characters of stdout/stderr kept per eval
BATCH_LIMIT = 16
INDEPENDENT_MODES = ("independent", "parallel_safe", "map_reduce")
PR_SET_CHILD_SUBREAPER = 36


def confine(cpu_secs: int, memory_mb: int) -> None:
    """Hard limits set before any user code runs; user code cannot raise them again.

    Windows has no `resource` module: there the kernel runs without these limits.
    """
    try:
        import resource
    except ImportError:
        return
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_secs, cpu_secs))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform.startswith("linux"):
        # A subreaper adopts its orphans: a daemon started with setsid or a double fork
        # stays below the kernel, where the parent finds and ends it after each eval.
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def main() -> None:
    sentinel = sys.argv[1]
    confine(int(sys.argv[2]), int(sys.argv[3]))
    real_stdout = sys.stdout
    requests = sys.stdin
    rpc_counter = [0]

    def send(frame: dict) -> None:
        real_stdout.write(f"{sentinel} {json.dumps(frame, default=repr)}\n")
        real_stdout.flush()

    def rpc(method: str, **params):
        rpc_counter[0] += 1
        send({"type": "rpc", "id": rpc_counter[0], "method": method, "params": params})
        reply = json.loads(requests.readline())
        if reply.get("error"):
            raise RuntimeError(reply["error"])
        return reply.get("result")

    namespace = _helpers(rpc)
    finals: list = []
    namespace["_finals"] = finals
    for line in requests:
        request = json.loads(line)
        if request["op"] == "load":
            namespace["_context"] = namespace["content"] = request["context"]
            namespace["_meta"] = request.get("meta", {})
            send({"type": "result", "ok": True})
        elif request["op"] == "eval":
            send(_evaluate(request["code"], namespace, finals))


def _evaluate(code: str, namespace: dict, finals: list) -> dict:
    out, err = io.StringIO(), io.StringIO()
    before = len(finals)
    ok, error = True, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            compiled = compile(code, "<rlm_eval>", "exec")
            exec(compiled, namespace)
        except SystemExit as exit_request:
            ok, error = False, f"SystemExit({exit_request.code}) — the kernel keeps running"
        except BaseException:
            ok, error = False, traceback.format_exc(limit=5)
    return {
        "type": "result",
        "ok": ok,
        "error": error,
        "stdout": out.getvalue()[:OUTPUT_LIMIT],
        "stderr": err.getvalue()[:OUTPUT_LIMIT],
        "finals": finals[before:],
    }


def _helpers(rpc) -> dict:
    """The functions user code can call; they close over `rpc`, not over the sentinel."""
    namespace: dict = {"__name__": "__rlm__"}

    def context_meta() -> dict:
        text = namespace["_context"]
        return {**namespace.get("_meta", {}), "chars": len(text), "lines": text.count("\n") + 1}

    def peek(start: int = 0, end: int | None = None, unit: str = "chars") -> str:
        text = namespace["_context"]
        if unit == "lines":
            return "".join(text.splitlines(keepends=True)[start:end])
        if unit != "chars":
            raise ValueError("unit must be 'chars' or 'lines'")
        return text[start:end]

    def search(pattern: str, max_hits: int = 100) -> list[dict]:
        text = namespace["_context"]
        hits = []
        for match in re.finditer(pattern, text, re.MULTILINE):
            line = text.count("\n", 0, match.start()) + 1
            start = text.rfind("\n", 0, match.start()) + 1
            stop = text.find("\n", match.end())
            hits.append(
                {
                    "start": match.start(),
                    "end": match.end(),
                    "line": line,
                    "text": text[start : stop if stop >= 0 else len(text)][:300],
                }
            )
            if len(hits) >= max_hits:
                break
        return hits

    def chunk(max_chars: int = 20_000, overlap: int = 0) -> list[dict]:
        if max_chars <= 0 or not 0 <= overlap < max_chars:
            raise ValueError("need max_chars > 0 and 0 <= overlap < max_chars")
        text = namespace["_context"]
        chunks: list[dict] = []
        start, index = 0, 0
        while start < len(text) or not chunks:
            end = min(start + max_chars, len(text))
            chunks.append({"index": index, "start": start, "end": end, "text": text[start:end]})
            if end >= len(text):
                break
            start, index = end - overlap, index + 1
        return chunks

    def chunk_coverage(chunks: list[dict]) -> dict:
        total = len(namespace["_context"])
        covered, position = 0, 0
        for part in sorted(chunks, key=lambda c: c["start"]):
            start = max(part["start"], position)
            if part["end"] > start:
                covered += part["end"] - start
                position = part["end"]
        return {
            "covered_chars": covered,
            "total_chars": total,
            "fraction": covered / total if total else 1.0,
        }

    def llm_query(prompt: str, system: str | None = None, max_tokens: int | None = None) -> str:
        return rpc("llm_query", prompt=str(prompt), system=system, max_tokens=max_tokens)

    def llm_query_batched(
        prompts: list, dependency_mode: str = "independent", system: str | None = None
    ) -> list[str]:
        if dependency_mode not in INDEPENDENT_MODES:
            return [
                f"refused: dependency_mode '{dependency_mode}' is not a batch mode "
                f"({', '.join(INDEPENDENT_MODES)}); for steps that depend on each other use "
                "sub_query_sequence(prompt, slices) instead"
            ] * len(prompts)
        if len(prompts) > BATCH_LIMIT:
            return [
                f"error: a batch holds at most {BATCH_LIMIT} prompts, got {len(prompts)}; "
                "split it into several calls"
            ] * len(prompts)
        return rpc("llm_batch", prompts=[str(p) for p in prompts], system=system)

    def rlm_query(prompt: str, context: str | None = None) -> str:
        """Ask a sub-model that gets its own REPL over `context` (default: this context)."""
        return rpc("rlm_query", prompt=str(prompt), context=context)

    def _slice_text(slice_):
        if slice_ is None:
            return ""
        if isinstance(slice_, dict):
            return slice_.get("text") or peek(slice_.get("start", 0), slice_.get("end"))
        if isinstance(slice_, tuple | list) and len(slice_) == 2:
            return peek(slice_[0], slice_[1])
        return str(slice_)

    def _with_slice(prompt: str, slice_) -> str:
        text = _slice_text(slice_)
        return f"{prompt}\n\n<context_slice>\n{text}\n</context_slice>" if text else prompt

    def sub_query(prompt: str, slice=None) -> str:
        return llm_query(_with_slice(prompt, slice))

    def sub_query_batch(prompt: str, slices: list) -> list[str]:
        return llm_query_batched([_with_slice(prompt, s) for s in slices])

    def sub_query_map(prompts: list, slices: list) -> list[str]:
        if len(prompts) != len(slices):
            raise ValueError("sub_query_map needs one prompt per slice")
        return llm_query_batched([_with_slice(p, s) for p, s in zip(prompts, slices, strict=True)])

    def sub_query_sequence(prompt: str, slices: list, carry_prompt: str | None = None) -> list:
        results, previous = [], None
        for part in slices:
            step = prompt
            if previous is not None:
                carry = carry_prompt or "Result of the previous step:"
                step = f"{prompt}\n\n{carry}\n{previous}"
            previous = sub_query(step, part)
            results.append(previous)
        return results

    def SHOW_VARS() -> dict:
        return {
            name: type(value).__name__
            for name, value in namespace.items()
            if not name.startswith("_") and name not in helpers and name != "__builtins__"
        }

    def repl_get(name: str):
        return namespace[name]

    def repl_set(name: str, value) -> None:
        namespace[name] = value

    def finalize(value, confidence: float | None = None):
        namespace["_finals"].append({"value": value, "confidence": confidence})
        return value

    def FINAL(value):
        return finalize(value)

    def FINAL_VAR(name: str):
        return finalize(namespace[name])

    helpers = {
        "context_meta": context_meta,
        "peek": peek,
        "search": search,
        "chunk": chunk,
        "chunk_coverage": chunk_coverage,
        "llm_query": llm_query,
        "llm_query_batched": llm_query_batched,
        "sub_query": sub_query,
        "sub_query_batch": sub_query_batch,
        "sub_query_map": sub_query_map,
        "sub_query_sequence": sub_query_sequence,
        "rlm_query": rlm_query,
        "SHOW_VARS": SHOW_VARS,
        "repl_get": repl_get,
        "repl_set": repl_set,
        "finalize": finalize,
        "FINAL": FINAL,
        "FINAL_VAR": FINAL_VAR,
    }
    namespace.update(helpers)
    return namespace


if __name__ == "__main__":
    main()
