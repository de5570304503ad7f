"""The cluster drills on a deployed lab: what each does and judges (`cluster_drills.py`, the network partition in
`partition.py`, the rolling restart in `rolling.py`), the actions they are built from (`actions.py`), the pure rules
that judge them (`judge.py`: n8n's promises, windows, partition rules) and a drill's context, background load and
record (`context.py`). They act on the cluster through `lab.cluster_handle.LabClusterHandle`."""
