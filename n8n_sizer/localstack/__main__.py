"""`python -m n8n_sizer.localstack COMMAND --state DIR`: see `n8n_sizer.localstack.cli`."""

import sys

from n8n_sizer.localstack.cli import main

sys.exit(main())
