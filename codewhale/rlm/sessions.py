"""Open RLM sessions: each a kernel holding one long context, plus the sub-LLM bridge."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.approval_rules import approval_rule
from codewhale.config_models import RlmConfig, SandboxConfig
from codewhale.handles import HandleStore
from codewhale.providers.client import ChatClient
from codewhale.providers.types import Usage
from codewhale.redaction import Redactor
from codewhale.rlm.kernel import Kernel, KernelError, KernelLimits
from codewhale.sandbox import SandboxSpec, hidden_paths, sandbox_status

INLINE_OUTPUT_BYTES = 1000
PREVIEW_CHARS = 300


class RlmError(ValueError):
    """A request the RLM tools refuse; the message tells the model what to do."""


@dataclass
class RlmSession:
    name: str
    id: str
    context: str
    meta: dict[str, Any]
    kernel: Kernel = field(init=False)
    output_feedback: str = "full"
    sub_query_timeout_secs: int = 120
    sub_rlm_max_depth: int = 1
    evals: int = 0
    finals: int = 0
    total_duration_ms: int = 0
    usage: Usage = field(default_factory=Usage)

    @property
    def handle_session(self) -> str:
        return f"rlm:{self.id}"


def slug(text: str) -> str:
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:40]
    return value or "context"


class RlmManager:
    """Owns every open RLM session of one engine."""

    def __init__(
        self,
        *,
        client: ChatClient,
        config: RlmConfig,
        handles: HandleStore,
        limits: KernelLimits | None = None,
        on_usage: Callable[[Usage], None] = lambda usage: None,
        workspace: Path | None = None,
        sandbox: SandboxConfig | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.workspace = (workspace or Path.cwd()).resolve()
        self.client = client
        self.config = config
        self.handles = handles
        self.limits = limits or KernelLimits(
            eval_timeout_secs=config.eval_timeout_secs,
            cpu_secs=config.cpu_limit_secs,
            memory_mb=config.memory_limit_mb,
            max_processes=config.max_processes,
        )
        self.sandbox_config = sandbox if sandbox is not None else SandboxConfig()
        self.sandbox_status = sandbox_status(self.sandbox_config.enabled)
        self.on_usage = on_usage
        # Kernel code can put what it read into a sub-LLM prompt: the secrets come out first.
        self.redactor = redactor if redactor is not None else Redactor()
        self.sessions: dict[str, RlmSession] = {}
        self.child_model = config.child_model or client.settings.fast_model

    @property
    def sandboxed(self) -> bool:
        """Whether kernels run in the OS sandbox: read-only, offline, secrets hidden."""
        return self.sandbox_status.available

    def _kernel_sandbox(self) -> SandboxSpec | None:
        """The sandbox a kernel runs in, the same in every mode: RLM code is for reading."""
        if self.sandboxed:
            hidden = hidden_paths(self.workspace, self.sandbox_config.hide, os.environ)
            return SandboxSpec(self.workspace, self.workspace, False, False, hidden)
        if self.sandbox_config.enabled is True:
            raise RlmError(
                "RLM code must run sandboxed ([sandbox] enabled = true), but the sandbox "
                f"cannot start: {self.sandbox_status.reason}. Nothing was run."
            )
        return None

    async def open(self, name: str | None, context: str, meta: dict[str, Any]) -> dict:
        name = slug(name or meta.get("source", "context"))
        if name in self.sessions:
            raise RlmError(
                f"an RLM session named '{name}' is already open; close it or pick another name"
            )
        session = RlmSession(
            name=name,
            id="rlm_" + secrets.token_hex(4),
            context=context,
            meta=meta,
            sub_query_timeout_secs=self.config.sub_query_timeout_secs,
            sub_rlm_max_depth=self.config.sub_rlm_max_depth,
        )
        session.kernel = Kernel(
            self.limits,
            lambda method, params: self._rpc(session, method, params),
            workspace=self.workspace,
            sandbox=self._kernel_sandbox(),
        )
        await self._load(session)
        self.sessions[name] = session
        digest = hashlib.sha256(context.encode("utf-8", "replace")).hexdigest()
        return {
            "name": name,
            "id": session.id,
            "length": len(context),
            "type": "str",
            "preview": context[:PREVIEW_CHARS],
            "sha256": digest,
        }

    async def _load(self, session: RlmSession) -> None:
        meta = {**session.meta, "name": session.name, "id": session.id}
        await session.kernel.request({"op": "load", "context": session.context, "meta": meta})

    def get(self, name: Any) -> RlmSession:
        session = self.sessions.get(str(name))
        if session is None:
            open_names = ", ".join(self.sessions) or "none"
            raise RlmError(f"no open RLM session '{name}' (open: {open_names}); use rlm_open")
        return session

    async def evaluate(self, name: Any, code: str) -> dict[str, Any]:
        session = self.get(name)
        if not session.kernel.alive:
            await self._load(session)  # restarted after a crash or timeout
        started = time.monotonic()
        try:
            frame = await session.kernel.request({"op": "eval", "code": code})
        except KernelError as error:
            raise RlmError(str(error)) from None
        finally:
            session.total_duration_ms += int((time.monotonic() - started) * 1000)
        session.evals += 1
        reply: dict[str, Any] = {"name": session.name, "ok": frame["ok"]}
        if frame.get("error"):
            reply["error"] = frame["error"]
        for stream in ("stdout", "stderr"):
            reply.update(self._output(session, stream, frame.get(stream, "")))
        finals = []
        for final in frame.get("finals", []):
            session.finals += 1
            handle = self.handles.put(
                session.handle_session, f"final_{session.finals}", _jsonable(final["value"])
            )
            finals.append({"handle": handle, "confidence": final.get("confidence")})
        if finals:
            reply["finals"] = finals
        return reply

    def _output(self, session: RlmSession, stream: str, text: str) -> dict[str, Any]:
        if not text:
            return {}
        if session.output_feedback == "metadata":
            return {f"{stream}_chars": len(text)}
        if len(text.encode()) <= INLINE_OUTPUT_BYTES:
            return {stream: text}
        handle = self.handles.put(session.handle_session, f"{stream}_{session.evals}", text)
        return {f"{stream}_preview": text[: INLINE_OUTPUT_BYTES // 2], f"{stream}_handle": handle}

    def configure(self, name: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        session = self.get(name)
        feedback = arguments.get("output_feedback")
        if feedback is not None:
            if feedback not in ("full", "metadata"):
                raise RlmError("output_feedback must be 'full' or 'metadata'")
            session.output_feedback = feedback
        if arguments.get("sub_query_timeout_secs") is not None:
            session.sub_query_timeout_secs = min(
                max(int(arguments["sub_query_timeout_secs"]), 1), 600
            )
        if arguments.get("sub_rlm_max_depth") is not None:
            session.sub_rlm_max_depth = min(max(int(arguments["sub_rlm_max_depth"]), 0), 3)
        return {
            "name": session.name,
            "output_feedback": session.output_feedback,
            "sub_query_timeout_secs": session.sub_query_timeout_secs,
            "sub_rlm_max_depth": session.sub_rlm_max_depth,
        }

    async def close(self, name: Any) -> dict[str, Any]:
        session = self.get(name)
        await session.kernel.kill()
        del self.sessions[session.name]
        return {
            "name": session.name,
            "id": session.id,
            "closed": True,
            "evals": session.evals,
            "rpc_count": session.kernel.rpc_count,
            "total_duration_ms": session.total_duration_ms,
            "finals": session.finals,
            "usage": session.usage.counts(),
        }

    async def close_all(self) -> None:
        for name in list(self.sessions):
            await self.close(name)

    # -- the sub-LLM bridge: kernels ask, the parent (which holds the key) calls -----------

    async def _rpc(self, session: RlmSession, method: str, params: dict[str, Any]) -> Any:
        if method == "llm_query":
            return await self._ask(
                session, params["prompt"], params.get("system"), params.get("max_tokens")
            )
        if method == "rlm_query":
            return await self._recurse(session, params["prompt"], params.get("context"))
        if method == "llm_batch":
            return list(
                await asyncio.gather(
                    *(
                        self._ask(session, prompt, params.get("system"), None)
                        for prompt in params["prompts"]
                    )
                )
            )
        raise RlmError(f"unknown kernel request '{method}'")

    async def _ask(
        self, session: RlmSession, prompt: str, system: str | None, max_tokens: int | None
    ) -> str:
        redact = self.redactor.redact
        messages = [{"role": "system", "content": redact(system)}] if system else []
        messages.append({"role": "user", "content": redact(prompt)})
        async with asyncio.timeout(session.sub_query_timeout_secs):
            completion = await self.client.complete(
                messages, model=self.child_model, max_tokens=max_tokens
            )
        if completion.usage is not None:
            session.usage += completion.usage
            self.on_usage(completion.usage)
        return completion.content

    async def _recurse(self, session: RlmSession, prompt: str, context: str | None) -> str:
        """A sub-model with its own REPL over (part of) the context, one level shallower."""
        if session.sub_rlm_max_depth <= 0:
            raise RlmError(
                "rlm_query depth limit reached (sub_rlm_max_depth is 0 here); use llm_query"
            )
        from codewhale.engine.conversation import Conversation
        from codewhale.engine.loop import Engine
        from codewhale.rlm.tools import rlm_tools
        from codewhale.tools.base import ToolContext
        from codewhale.tools.registry import ToolRegistry
        from codewhale.tools.work import HandleRead

        config = self.config.replace(sub_rlm_max_depth=session.sub_rlm_max_depth - 1)
        nested = RlmManager(
            client=self.client,
            config=config,
            handles=self.handles,
            limits=self.limits,
            on_usage=self._count(session),
            workspace=self.workspace,
            sandbox=self.sandbox_config,
            redactor=self.redactor,
        )
        await nested.open(
            "sub",
            context if context is not None else session.context,
            {"source": f"rlm_query from {session.name}"},
        )
        engine = Engine(
            client=self.client,
            tools=ToolRegistry([*rlm_tools(nested, lambda: ""), HandleRead()]),
            context=ToolContext(
                workspace=self.workspace,
                session_id=f"{session.handle_session}/sub",
                handles=self.handles,
                # The user approved the eval that asked for this sub-REPL: its code
                # runs under that approval, in the same kind of kernel.
                always_allowed={approval_rule("rlm_eval", {"name": "sub"})},
                redactor=self.redactor,
            ),
            conversation=Conversation([{"role": "system", "content": SUB_RLM_PROMPT}]),
            model=self.child_model,
            max_steps=SUB_RLM_MAX_STEPS,
        )
        try:
            result = await engine.run_turn(self.redactor.redact(prompt))
        finally:
            await nested.close_all()
        return result.final_text or result.error

    def _count(self, session: RlmSession) -> Callable[[Usage], None]:
        def count(usage: Usage) -> None:
            session.usage += usage
            self.on_usage(usage)

        return count


SUB_RLM_MAX_STEPS = 12
SUB_RLM_PROMPT = (
    "You answer one question about a long text that is loaded in the RLM session named "
    "'sub'. Explore it with rlm_eval (peek, search, chunk, llm_query...) rather than "
    "guessing, then reply with the answer only."
)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
