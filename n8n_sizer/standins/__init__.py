"""Local stand-ins for the services a workflow calls, so that benchmarks never reach the real ones: an
OpenAI-compatible model API (chat completions with and without tool calls, embeddings) and a delayed HTTP/JSON
service, each answering after a configured latency, on 127.0.0.1 or a lab namespace's address.

May import no other room: the standard library and the shared guards only.
"""
