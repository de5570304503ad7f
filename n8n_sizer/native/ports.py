"""Ports for a native stack: picked free at start, and picked anew when one was taken before the process bound it
(n8n binds its HTTP port only after migrations, and every outgoing connection on this machine takes an ephemeral
port from the same range). `FreePorts` is a part of `LocalStack` (native/stack.py)."""

from __future__ import annotations

from n8n_sizer.native import services
from n8n_sizer.native.services import ServiceError

PORT_RETRIES = 2


# How Postgres, Redis and n8n (HTTP server, task broker) report a port that is taken.
PORT_TAKEN_SIGNS = ("already in use", "EADDRINUSE")


def unique_ports(count: int) -> list[int]:
    found: list[int] = []
    while len(found) < count:
        port = services.free_port()
        if port not in found:
            found.append(port)
    return found


class FreePorts:
    """LocalStack's port choice (it has `ports`, `postgres_port`, `redis_port`, `lb_port`, `webhook_names`)."""

    def _ready_on_free_ports(self, name: str, spawned: bool = False) -> None:
        """Start `name` and wait for it; if a port picked in `_prepare` was taken before the process bound
        it (n8n binds its HTTP port only after migrations, and every outgoing connection on this machine
        takes an ephemeral port from the same range), pick new ports and try again."""
        for attempt in range(PORT_RETRIES + 1):
            try:
                if not spawned:
                    self.start_process(name, wait=False)
                self.wait_ready(name)
                return
            except ServiceError as exc:
                if attempt == PORT_RETRIES or not any(sign in str(exc) for sign in PORT_TAKEN_SIGNS):
                    raise
                self.stop_process(name, timeout_s=5)
                self._repick_ports(name)
                spawned = False

    def _repick_ports(self, name: str) -> None:
        taken = {self.postgres_port, self.redis_port, self.lb_port} | {
            p for ports in self.ports.values() for p in (ports.http, ports.broker, ports.health)
        }
        fresh = [p for p in unique_ports(len(taken) + 2) if p not in taken][:2]
        if name == "postgres":
            self.postgres_port = fresh[0]
        elif name == "redis":
            self.redis_port = fresh[0]
            self._write_redis_config(self.options.redis_persistence)
        elif name == "main":  # workers are spawned after main: they take main's new HTTP port with them
            self.ports = {
                n: p.model_copy(update={"http": fresh[0]}) if n not in self.webhook_names else p
                for n, p in self.ports.items()
            }
            self.ports["main"] = self.ports["main"].model_copy(update={"broker": fresh[1]})
        elif name == "caddy":
            self.lb_port = fresh[0]
        elif name in self.webhook_names:
            self.ports[name] = self.ports[name].model_copy(update={"http": fresh[0], "broker": fresh[1]})
        else:
            self.ports[name] = self.ports[name].model_copy(update={"broker": fresh[0], "health": fresh[1]})
