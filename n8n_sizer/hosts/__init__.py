"""A host to run commands on: the local machine or one reached over SSH (Fabric); facts about it.

Owns: `host.Host` (LocalHost, SshHost), `CommandResult`, and facts (a command plus a pure parser, `facts`).
May import: fabric/paramiko, errors. Nothing else of the package.
"""
