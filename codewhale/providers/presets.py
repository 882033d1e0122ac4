"""Known OpenAI-compatible endpoints: where they live, which env var holds their key.

This module is imported by the config loader, so it must stay free of httpx and
anything else heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from codewhale.providers.local_model import MODEL_ALIAS

# For endpoints that serve whatever was loaded (vLLM, SGLang, llama.cpp, custom): a guess
# on the small side, since compacting early costs a summary while a request past the
# real window fails. `[context] window` sets the real figure.
DEFAULT_CONTEXT_WINDOW = 32_768
# The n_ctx the offline model's server is started with (LocalServer's context_tokens).
LOCAL_CONTEXT_WINDOW = 8_192

# Context windows of well-known model ids (tokens, prompt + answer). A model served under
# an aggregator's name ("deepseek/deepseek-chat") is looked up by its last segment too.
MODEL_WINDOWS: dict[str, int] = {
    "deepseek-v4-pro": 128_000,
    "deepseek-v4-flash": 128_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "kimi-k2-0905-preview": 262_144,
    "kimi-k2-turbo-preview": 262_144,
    MODEL_ALIAS: LOCAL_CONTEXT_WINDOW,
}


@dataclass(frozen=True)
class ProviderPreset:
    """Defaults for one provider; every field can be overridden in config."""

    name: str
    label: str
    base_url: str
    key_env: str | None
    default_model: str
    fast_model: str
    needs_key: bool = True
    # Ids the official endpoint accepts; empty means "pass any id through".
    accepted_models: tuple[str, ...] = ()
    # False where streaming breaks when tools are offered: such turns go non-streamed.
    stream_tools: bool = True
    # True where `content: null` (an assistant message that only calls tools) is rejected.
    needs_text_content: bool = False
    # A floor under [network] stream_idle_timeout_secs, for servers that queue requests.
    min_idle_timeout_secs: float = 0.0
    # Tokens (prompt + answer) its models take, for a model MODEL_WINDOWS does not know.
    context_window: int = DEFAULT_CONTEXT_WINDOW
    # How its API takes `reasoning_effort`: as OpenAI's top-level field, as OpenRouter's
    # `reasoning: {effort}` object, or not at all ("": the model decides, e.g. DeepSeek's
    # thinking is a choice of model).
    effort_field: str = "reasoning_effort"


PRESETS: dict[str, ProviderPreset] = {
    preset.name: preset
    for preset in (
        ProviderPreset(
            name="deepseek",
            label="DeepSeek",
            base_url="https://api.deepseek.com",
            key_env="DEEPSEEK_API_KEY",
            default_model="deepseek-v4-pro",
            fast_model="deepseek-v4-flash",
            accepted_models=(
                "deepseek-v4-pro",
                "deepseek-v4-flash",
                "deepseek-chat",
                "deepseek-reasoner",
            ),
            context_window=128_000,
            effort_field="",
        ),
        ProviderPreset(
            name="openai",
            label="OpenAI",
            base_url="https://api.openai.com/v1",
            key_env="OPENAI_API_KEY",
            default_model="gpt-4.1",
            fast_model="gpt-4.1-mini",
            context_window=128_000,
        ),
        ProviderPreset(
            name="openrouter",
            label="OpenRouter",
            base_url="https://openrouter.ai/api/v1",
            key_env="OPENROUTER_API_KEY",
            default_model="deepseek/deepseek-chat",
            fast_model="deepseek/deepseek-chat",
            effort_field="reasoning",
        ),
        ProviderPreset(
            name="moonshot",
            label="Moonshot",
            base_url="https://api.moonshot.ai/v1",
            key_env="MOONSHOT_API_KEY",
            default_model="kimi-k2-0905-preview",
            fast_model="kimi-k2-turbo-preview",
            context_window=128_000,
            effort_field="",
        ),
        ProviderPreset(
            name="ollama",
            label="Ollama",
            base_url="http://127.0.0.1:11434/v1",
            key_env="OLLAMA_API_KEY",
            default_model="qwen2.5-coder",
            fast_model="qwen2.5-coder",
            needs_key=False,
        ),
        ProviderPreset(
            name="vllm",
            label="vLLM",
            base_url="http://127.0.0.1:8000/v1",
            key_env="VLLM_API_KEY",
            default_model="default",
            fast_model="default",
            needs_key=False,
        ),
        ProviderPreset(
            name="sglang",
            label="SGLang",
            base_url="http://127.0.0.1:30000/v1",
            key_env="SGLANG_API_KEY",
            default_model="default",
            fast_model="default",
            needs_key=False,
        ),
        ProviderPreset(
            name="llamacpp",
            label="llama.cpp server",
            base_url="http://127.0.0.1:8080/v1",
            key_env="LLAMACPP_API_KEY",
            default_model="default",
            fast_model="default",
            needs_key=False,
        ),
        ProviderPreset(
            name="local",
            label="offline SmolLM2-135M",
            # Assigned when CodeWhale starts the server on a free loopback port.
            base_url="",
            key_env=None,
            default_model=MODEL_ALIAS,
            fast_model=MODEL_ALIAS,
            needs_key=False,
            effort_field="",
            # llama-cpp-python answers a streamed request that ends in a tool call with
            # HTTP 200 and an empty body.
            stream_tools=False,
            # Its request schema types content as a string: null is a 500, not a 400.
            needs_text_content=True,
            # It answers one request at a time; one queued behind sub-agents' turns gets
            # no data (only keep-alive comments) until its turn comes.
            min_idle_timeout_secs=600.0,
            context_window=LOCAL_CONTEXT_WINDOW,
        ),
        ProviderPreset(
            name="custom",
            label="Custom endpoint",
            base_url="",
            key_env=None,
            default_model="",
            fast_model="",
            needs_key=False,
        ),
    )
}

DEFAULT_PROVIDER = "deepseek"


def context_window(provider: str, model: str) -> int:
    """The tokens `model` takes on `provider`'s endpoint: known per model, else per preset."""
    known = MODEL_WINDOWS.get(model) or MODEL_WINDOWS.get(model.rsplit("/", 1)[-1])
    if known is not None:
        return known
    preset = PRESETS.get(provider)
    return preset.context_window if preset is not None else DEFAULT_CONTEXT_WINDOW


def preset_for(name: str) -> ProviderPreset:
    """Return the preset called `name` (case-insensitive); KeyError lists the known names."""
    try:
        return PRESETS[name.strip().lower()]
    except KeyError:
        known = ", ".join(PRESETS)
        raise KeyError(f"Unknown provider '{name}'. Known providers: {known}.") from None
