#!/bin/sh
# As n8n's image: arguments are n8n's (`worker --concurrency=10`), none starts the main process.
if [ "$#" -gt 0 ]; then
  exec n8n "$@"
else
  exec n8n
fi
