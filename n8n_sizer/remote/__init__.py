"""Programs that run on another host (over SSH, or on this machine), and the one launcher that starts them.

The protocol, in `protocol.py` and nowhere else: a program is `python -m n8n_sizer.remote.<program>`, a typer
app; it prints its result as JSON on its last stdout line and exits 0, or prints one line on stderr and exits
2 (its input was refused) or 1 (something outside it failed). `protocol.run(host, Program.X, args, Model)`
starts one on a `hosts.host.Host` and parses that line into the model; `protocol.serve(app, ...)` is every
program's side of it. `tests/unit/test_remote_protocol.py` fails on a second parser or launch string.

The programs (each parses its options and calls its room's function):
- `native_stack.py`: the native stack's commands (`up`, `status`, `signal`, ... of `native.stack`);
- `install_n8n.py`: Node.js and n8n into the shared cache (`native.install`);
- `lab_data.py`, `lab_n8n.py`, `lab_ingest.py`: a lab host's data role, n8n process and load balancer;
- `lab_agent.py`: the drills' hands on a lab host (`ps`, `stop`, `start`, `signal`, `ready`);
- `load_agent.py`: one load generator's share of a rate step (`bench.load`).

May import: hosts (the launcher); the programs import the room whose function they run (native, lab,
bench, drills, advisor). Rooms import only `remote.protocol`, never a program, so no module cycle appears.
"""
