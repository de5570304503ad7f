"""`check` and `check --topology`: pure rules over rendered (or hand-written) bundles.

one_host.py reads one compose file and holds the host rules' registry; rules_n8n.py holds the rules about the n8n
processes, rules_access.py those about who may log in where (Postgres role, Redis ACL); all_hosts.py reads every host of
a rendered topology and runs rules_cluster.py's rules across hosts. rule.py is the shared result type.
"""
