"""Guards for hostile input and hostile conditions, shared by every command.

- `numbers`: one validator for numeric flags (finite, in range, the range in the message);
- `files`: one reader for every file argument (exists, regular file, readable, size cap, UTF-8; for a file
  whose secrets are adopted, also the user's own and not open to group or others);
- `yamldoc`: YAML with bounded nesting and bounded alias expansion, checked before anything expands;
- `jsondoc`: JSON with bounded nesting and bounded numbers, measured before anything is parsed;
- `network`: one grammar for private subnets, SSH source ranges, host names and login users;
- `write`: the one writer for user data (exclusive temp file, never a followed link, fsync, atomic rename),
  and the check of a folder before anything is written into it;
- `frozen`: the one base of the package's records (frozen pydantic models refusing undeclared fields).

Each raises `InputError` with one line that names the input and the fix. May import: `n8n_sizer.errors`,
PyYAML, pydantic and the standard library.
"""
