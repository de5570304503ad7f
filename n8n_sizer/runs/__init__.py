"""Run records and the results store: what a bench run wrote, read back, summarised and handed to the advisor.

Owns: the record models (`records`), the results folder (`store`), per-step statistics (`stats`), the ledger
(every accepted request matched to its stored execution, `ledger`), and the advisor's fit input (`fit_input`).
May import: advisor, errors.
"""
