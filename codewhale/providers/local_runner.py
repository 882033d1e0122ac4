"""Child process that serves the bundled model over llama.cpp's OpenAI-compatible API.

Started by `LocalServer` as `python -m codewhale.providers.local_runner`. It loads the
model, binds a free loopback port itself (so no other process can take the port
between choosing and binding it), prints `{"port": N}` on stdout once requests can be
accepted, and exits when its parent goes away, so a killed CodeWhale never leaves a
model server behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import threading
import time

PARENT_POLL_SECS = 1.0


def _exit_when_orphaned(parent_pid: int) -> None:
    # A dead parent re-parents us (to init or a subreaper), so the ppid changes.
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_SECS)
    os._exit(0)


def _add_usage_to_streams() -> None:
    """Make streamed chat completions end with OpenAI's usage chunk.

    llama-cpp-python 0.3.x reports usage only on non-streamed responses, and the
    status line and sub-agent budgets need real token counts. Token counts are taken
    where llama.cpp evaluates: `generate` sees the whole prompt and yields each new
    token (the end-of-generation token is not part of the completion). Requests run
    one at a time (the server holds a lock per model), so counters on the instance
    are safe. The version is pinned in pyproject.toml, which keeps this patch honest.
    """
    import llama_cpp

    generate = llama_cpp.Llama.generate
    create_chat_completion = llama_cpp.Llama.create_chat_completion

    def counting_generate(self, tokens, *args, **kwargs):
        self.codewhale_usage[0] = len(tokens)
        vocab = self._model.vocab
        for token in generate(self, tokens, *args, **kwargs):
            if not llama_cpp.llama_vocab_is_eog(vocab, token):
                self.codewhale_usage[1] += 1
            yield token

    def with_usage(self, chunks):
        last = None
        for chunk in chunks:
            last = chunk
            yield chunk
        if last is not None:
            prompt, completion = self.codewhale_usage
            yield {
                "id": last["id"],
                "object": "chat.completion.chunk",
                "created": last["created"],
                "model": last["model"],
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }

    def chat_completion(self, *args, **kwargs):
        self.codewhale_usage = [0, 0]
        result = create_chat_completion(self, *args, **kwargs)
        return with_usage(self, result) if kwargs.get("stream") else result

    # Replacing llama_cpp's methods is the point here; mypy forbids assigning to methods.
    llama_cpp.Llama.generate = counting_generate  # type: ignore[method-assign]
    llama_cpp.Llama.create_chat_completion = chat_completion  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="codewhale.providers.local_runner")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--chat-format", default=None)
    args = parser.parse_args(argv)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()

    _add_usage_to_streams()

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    model = ModelSettings(
        model=args.model,
        model_alias=args.alias,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        n_ctx=args.context,
        chat_format=args.chat_format,
        verbose=False,
    )
    # interrupt_requests=False: by default the server ends a running stream with [DONE]
    # as soon as another request arrives, which would silently truncate one sub-agent's
    # answer whenever a sibling asks for a turn. Requests queue instead.
    app = create_app(
        server_settings=ServerSettings(host="127.0.0.1", port=0, interrupt_requests=False),
        model_settings=[model],
    )
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(json.dumps({"port": listener.getsockname()[1]}), flush=True)
    # Nobody reads our stdout after the announcement: send anything later to the log.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    asyncio.run(server.serve(sockets=[listener]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
