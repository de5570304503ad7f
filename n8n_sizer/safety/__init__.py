"""Guards for hostile input and hostile conditions, shared by every command.

- `numbers`: one validator for numeric flags (finite, in range, the range in the message);
- `files`: one reader for every file argument (exists, regular file, readable, size cap, UTF-8; for a file
  whose secrets are adopted, also the user's own and not open to group or others);
- `yamldoc`: YAML with bounded nesting and bounded alias expansion, checked before anything expands, and read
  as Compose and Pulumi read it (duplicate keys, clashing merges, foreign tags, a second document refused);
- `jsondoc`: JSON with bounded nesting and bounded numbers, measured before anything is parsed;
- `network`: one grammar for private subnets, SSH source ranges, host names and login users;
- `urls`: one grammar for every URL taken or written (http/https, no credentials, a real host and port);
- `text`: `printable`, for every name read from a file that reaches a terminal or a report;
- `write`: the one writer for user data (exclusive temp file, never a followed link, fsync, atomic rename),
  and `output_folder`, the one gate of every folder written into (no link on the way, nobody else's, not open
  to others);
- `frozen`: the one base of the package's records (frozen pydantic models refusing undeclared fields).

Each raises `InputError` with one line that names the input and the fix. May import: `n8n_sizer.errors`,
PyYAML, pydantic and the standard library.
"""
