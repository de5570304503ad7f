"""The one exception type the CLI turns into a one-line message and exit code 2.

Library code raises `InputError` with a message that names the bad input and the fix
("--workers must be >= 1 in queue mode; try --workers 2"). The CLI prints it as
`n8n-sizer: <message>` on stderr, with no traceback, and exits 2.
"""


class InputError(ValueError):
    """Bad input from the user: a flag, a file, a stack config. The message is shown as is."""
