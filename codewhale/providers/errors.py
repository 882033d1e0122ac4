"""Provider failures, each with a message a person can act on.

`retryable` tells the client, the one layer that retries, whether trying again may help;
`reason` is what the retry notice calls the failure.
"""

from __future__ import annotations


class ProviderError(Exception):
    """Base class: the request did not produce a usable response."""

    retryable = False
    reason = "request failed"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def annotate(self, note: str) -> None:
        """Append `(note)` to the message, e.g. how many attempts were made."""
        self.message = f"{self.message} ({note})"
        self.args = (self.message,)


class MissingApiKeyError(ProviderError):
    """The provider needs a key and none is configured."""


class InsecureEndpointError(ProviderError):
    """A plain-http URL that is not on this machine, without opt-in."""


class BadRequestError(ProviderError):
    """HTTP 400: the request body was rejected."""


class AuthenticationError(ProviderError):
    """HTTP 401: the key was rejected."""


class InsufficientBalanceError(ProviderError):
    """HTTP 402: the account has run out of credit."""


class PermissionDeniedError(ProviderError):
    """HTTP 403: the key may not use this model or endpoint."""


class NotFoundError(ProviderError):
    """HTTP 404: wrong base URL or unknown model."""


class UnprocessableError(ProviderError):
    """HTTP 422: the parameters could not be processed."""


class RetryableStatusError(ProviderError):
    """An HTTP status worth retrying; `retry_after` is the server's wish in seconds."""

    retryable = True

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after
        self.reason = f"HTTP {status}" + ("" if retry_after is None else ", Retry-After")


class RateLimitError(RetryableStatusError):
    """HTTP 429."""


class ServerError(RetryableStatusError):
    """HTTP 500, 502, 503 or 504."""


class ProviderConnectionError(ProviderError):
    """The endpoint could not be reached or dropped the connection before answering."""

    retryable = True
    reason = "connection failed"


class StreamInterruptedError(ProviderError):
    """The stream ended early: connection cut, no [DONE] and no finish_reason."""

    retryable = True
    reason = "stream cut"


class IdleTimeoutError(ProviderError):
    """No data arrived within the idle timeout (keep-alive comments do not count)."""

    retryable = True
    reason = "idle timeout"


class RequestTimeoutError(IdleTimeoutError):
    """The caller's own idle limit for the request ran out (a sub-agent's api_timeout_secs).

    Not retried: the caller set the limit to decide what follows itself (a child is
    interrupted with its checkpoint kept, and continued later).
    """

    retryable = False


class EmptyResponseError(ProviderError):
    """HTTP 200 with nothing in the body; retrying the same request rarely helps."""


class ProtocolError(ProviderError):
    """The provider sent something that is not valid chat-completions data."""


class LocalServerError(ProviderError):
    """The offline model server could not be started."""
