"""Model-facing tools: one module per family, a registry, and the shared base types."""
