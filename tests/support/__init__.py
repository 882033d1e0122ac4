"""Test support: a real loopback LLM server and helpers shared by tests and benchmarks."""
