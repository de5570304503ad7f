"""An n8n instance's own history, read through its public REST API: its workflows and the timings of their
executions (never payloads), summarised per workflow as a profile at its own rate for the advisor to size the mix.

May import advisor (profiles) and n8n (the REST client).
"""
