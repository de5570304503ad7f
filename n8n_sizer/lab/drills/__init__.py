"""The cluster drills on a deployed lab: what each does and judges (`catalog.py`, the network partition in
`partition.py`, the rolling restart in `rolling.py`), the shared steps they are built from (`steps.py`), the pure
rules that judge them (`plan.py`: n8n's promises, windows, partition rules) and a drill's context, background load
and record (`run.py`). They act on the cluster through `lab.cluster_handle.LabClusterHandle`."""
