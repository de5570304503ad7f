"""The two exception types the CLI turns into one line on stderr, with no traceback.

- `InputError` (exit 2): the user's input is wrong: a flag, a file, a stack config. The message names the bad
  input and the fix ("--workers must be >= 1 in queue mode; try --workers 2").
- `RemoteError` (exit 1): the input was fine but something outside this process failed: a host (SSH), a
  provider API, a service (Postgres, Redis, n8n) or a drill that could not set its situation up. The message
  names who failed and what to check.

Every subcommand's entry point (`n8n_sizer.cli._run`) catches both once; library code raises them with a
message that is shown as is.
"""


class InputError(ValueError):
    """Bad input from the user: a flag, a file, a stack config. Exit code 2."""


class RemoteError(RuntimeError):
    """A host, provider, service or n8n failed while the input was fine. Exit code 1."""


EXIT_INPUT = 2
EXIT_REMOTE = 1
