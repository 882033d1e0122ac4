"""An MCP tool result as the model reads it: text, structured content as JSON, and a
placeholder for each image, audio clip or binary resource (the chat API takes text)."""

from __future__ import annotations

import base64
import binascii
import json

from mcp import types

EMPTY = "(the tool returned no content)"


def result_text(result: types.CallToolResult) -> str:
    """Every content block in order; the structured content when no block has text.

    Servers are asked to send structured content as JSON text too (the SDK's own server
    does, or wraps a plain value as {"result": …}), so text, when there is any, says it.
    """
    parts = [_block(block) for block in result.content]
    texts = any(isinstance(b, types.TextContent) and b.text.strip() for b in result.content)
    if result.structuredContent is not None and not texts:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False, indent=2))
    return "\n".join(part for part in parts if part) or EMPTY


def _block(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return f"[image {block.mimeType}, {_size(block.data)}: not shown to the model]"
    if isinstance(block, types.AudioContent):
        return f"[audio {block.mimeType}, {_size(block.data)}: not played to the model]"
    if isinstance(block, types.ResourceLink):
        return f"[resource {block.uri}" + (f" ({block.name})" if block.name else "") + "]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        kind = resource.mimeType or "binary"
        return f"[resource {resource.uri}, {kind}, {_size(resource.blob)}: not shown to the model]"
    return f"[{getattr(block, 'type', 'unknown')} content: not shown to the model]"


def _size(data: str) -> str:
    """The decoded size of base64 `data`, for a placeholder."""
    try:
        count = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        count = len(data)
    return f"{count} bytes" if count < 1024 else f"{count / 1024:.1f} KB"
