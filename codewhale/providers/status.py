"""Turn an HTTP error response into a ProviderError a person can act on."""

from __future__ import annotations

import json
import unicodedata

from codewhale.providers import errors
from codewhale.providers.http_types import Response
from codewhale.providers.retry import parse_retry_after
from codewhale.providers.settings import ProviderSettings

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


def server_message(response: Response, settings: ProviderSettings) -> str:
    """The error text the server sent, cleaned for display and stripped of the key."""
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        detail = body.get("error", body)
        if isinstance(detail, dict):
            text = str(detail.get("message") or detail.get("detail") or detail)
        elif detail is not None:
            text = str(detail)
    if settings.api_key:
        text = text.replace(settings.api_key, "[redacted]")
    cleaned = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    cleaned = " ".join(cleaned.split())
    return cleaned[:300] + ("…" if len(cleaned) > 300 else "")


def error_for_status(response: Response, settings: ProviderSettings) -> errors.ProviderError:
    """Map a non-200 response to the matching error class and message."""
    status = response.status_code
    name = settings.label
    detail = server_message(response, settings) or response.reason_phrase or "no details"
    key_origin = settings.api_key_source or "no configured source"
    if status == 429:
        return errors.RateLimitError(
            f"{name} is rate limiting requests (HTTP 429): {detail}",
            status=status,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )
    if status in RETRYABLE_STATUSES:
        return errors.ServerError(
            f"{name} had a server error (HTTP {status}): {detail}",
            status=status,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
        )
    known: dict[int, tuple[type[errors.ProviderError], str]] = {
        400: (errors.BadRequestError, f"{name} rejected the request (HTTP 400): {detail}"),
        401: (
            errors.AuthenticationError,
            f"{name} rejected the API key (HTTP 401). The key came from {key_origin}; "
            "check that it is current and belongs to this provider.",
        ),
        402: (
            errors.InsufficientBalanceError,
            f"{name} reports insufficient balance (HTTP 402): {detail}. "
            "Top up the account or switch provider.",
        ),
        403: (
            errors.PermissionDeniedError,
            f"{name} denied access (HTTP 403): {detail}. The key may not be allowed to use "
            f"model '{settings.model}'.",
        ),
        404: (
            errors.NotFoundError,
            f"{name} answered 404 Not Found for {response.url}: {detail}. "
            f"Check base_url and that model '{settings.model}' exists.",
        ),
        422: (
            errors.UnprocessableError,
            f"{name} could not process the request parameters (HTTP 422): {detail}",
        ),
    }
    error_class, message = known.get(
        status, (errors.ProviderError, f"{name} answered HTTP {status}: {detail}")
    )
    return error_class(message, status=status)
