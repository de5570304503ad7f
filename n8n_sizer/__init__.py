"""n8n-sizer: sizing advice, tested stacks, a benchmark fleet and a benchmark driver for self-hosted n8n."""

__version__ = "0.1.0"
