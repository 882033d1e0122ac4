"""Refuse endpoints that would send the API key somewhere it should not go."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from codewhale.providers.errors import InsecureEndpointError
from codewhale.providers.settings import ProviderSettings


def is_loopback_host(host: str) -> bool:
    """True for localhost names and 127.0.0.0/8 or ::1 addresses."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(settings: ProviderSettings) -> None:
    """Plain http:// is allowed only to this machine unless the user opted in."""
    parts = urlsplit(settings.base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InsecureEndpointError(
            f"base_url '{settings.base_url}' is not an http(s) URL; "
            "use something like https://api.example.com/v1."
        )
    remote = not is_loopback_host(parts.hostname)
    if parts.scheme == "http" and remote and not settings.allow_insecure_http:
        raise InsecureEndpointError(
            f"Refusing plain http:// to {parts.hostname}: the API key and your code "
            "would cross the network unencrypted. Use https://, or set "
            "allow_insecure_http = true in your user config for a trusted network."
        )
