"""write_bundle: file modes, secrets kept across re-renders, never printed; bad --out refused."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.render import write_bundle
from n8n_sizer.bundle.secrets import ENV_NAMES, env_of_cloud_init, generate_secrets, merge_secrets, parse_env_text
from n8n_sizer.errors import InputError


def write_private_env(path, text):
    """A user's own .env as a careful user keeps it: mode 0600 (a group/other-readable one is refused)."""
    path.write_text(text)
    path.chmod(0o600)


QUEUE = Setup(mode="queue", workers=2)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_three_files_with_private_modes(tmp_path: Path) -> None:
    out = tmp_path / "stack"
    messages = write_bundle(QUEUE, out)
    assert sorted(p.name for p in out.iterdir()) == [".env", "cloud-init.yaml", "docker-compose.yml"]
    assert _mode(out / ".env") == 0o600
    assert _mode(out / "cloud-init.yaml") == 0o600  # it embeds the .env
    env = parse_env_text((out / ".env").read_text())
    assert set(ENV_NAMES.values()) <= set(env)
    assert len(env["N8N_ENCRYPTION_KEY"]) == 64
    text = "\n".join(messages)
    assert all(value not in text for value in env.values() if len(value) > 8)
    assert "new secret(s)" in text


def test_rerender_keeps_every_secret_and_says_so(tmp_path: Path) -> None:
    write_bundle(Setup(mode="regular", db="sqlite"), tmp_path)
    before = parse_env_text((tmp_path / ".env").read_text())
    messages = write_bundle(Setup(mode="queue", workers=4), tmp_path)
    after = parse_env_text((tmp_path / ".env").read_text())
    for name in ENV_NAMES.values():
        assert after[name] == before[name]
    text = "\n".join(messages)
    assert "kept 5 existing secret(s)" in text and "N8N_ENCRYPTION_KEY" in text
    assert before["N8N_ENCRYPTION_KEY"] not in text
    # cloud-init embeds the same .env (gzip+base64 once a 4-worker stack would pass the 32 KiB user-data limit)
    embedded = env_of_cloud_init((tmp_path / "cloud-init.yaml").read_text(), tmp_path / "cloud-init.yaml")
    assert parse_env_text(embedded)["N8N_ENCRYPTION_KEY"] == before["N8N_ENCRYPTION_KEY"]
    assert "n8n-worker-4" in (tmp_path / "docker-compose.yml").read_text()


def test_user_written_env_is_kept_including_other_variables(tmp_path: Path) -> None:
    write_private_env(
        tmp_path / ".env",
        "# mine\nN8N_ENCRYPTION_KEY='my-own-key-from-n8n-config-file'\nPOSTGRES_PASSWORD=hunter2hunter2hunter2\n"
        "SMTP_HOST=mail.example.com\nN8N_PUBLIC_URL=https://n8n.example.org/\n",
    )
    messages = write_bundle(QUEUE, tmp_path, generate_missing_secrets=True)
    env = parse_env_text((tmp_path / ".env").read_text())
    assert env["N8N_ENCRYPTION_KEY"] == "my-own-key-from-n8n-config-file"
    assert env["POSTGRES_PASSWORD"] == "hunter2hunter2hunter2"
    assert env["SMTP_HOST"] == "mail.example.com"
    assert env["N8N_PUBLIC_URL"] == "https://n8n.example.org/"
    assert len(env["REDIS_PASSWORD"]) == 48  # missing ones are generated
    text = "\n".join(messages)
    assert "kept 2 existing secret(s)" in text and "REDIS_PASSWORD" in text and "SMTP_HOST" in text
    assert _mode(tmp_path / ".env") == 0o600


def test_an_unsafe_existing_secret_is_refused_not_replaced(tmp_path: Path) -> None:
    original = "N8N_ENCRYPTION_KEY=has a space in it and more\n"
    write_private_env(tmp_path / ".env", original)
    with pytest.raises(InputError, match="N8N_ENCRYPTION_KEY"):
        write_bundle(QUEUE, tmp_path, generate_missing_secrets=True)
    assert (tmp_path / ".env").read_text() == original
    assert not (tmp_path / "docker-compose.yml").exists()


def test_a_refused_render_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="max_connections|--max-connections"):
        write_bundle(Setup(mode="queue", workers=4, db_pool_size=10), tmp_path, max_connections=20)
    assert list(tmp_path.iterdir()) == []


def test_out_under_a_file_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="--out"):
        write_bundle(QUEUE, blocker / "stack")
    with pytest.raises(InputError, match="is a file"):
        write_bundle(QUEUE, blocker)


def test_merge_keeps_present_and_fills_missing() -> None:
    fresh = generate_secrets()
    merged, kept = merge_secrets({"REDIS_PASSWORD": "existing-redis-password"}, fresh)
    assert kept == ["REDIS_PASSWORD"]
    assert merged.redis_password == "existing-redis-password"
    assert merged.encryption_key == fresh.encryption_key


def test_parse_env_text_handles_quotes_comments_and_export() -> None:
    parsed = parse_env_text("# c\nexport A=1\nB=\"two words\"\nC='x'\nD=plain # note\n\nnot a line\nE=a=b\n")
    assert parsed == {"A": "1", "B": "two words", "C": "x", "D": "plain", "E": "a=b"}


def test_a_changed_compose_file_is_kept_beside(tmp_path: Path) -> None:
    write_bundle(QUEUE, tmp_path)
    again = write_bundle(QUEUE, tmp_path)
    assert not (tmp_path / "docker-compose.yml.previous").exists()  # same content: nothing to keep
    assert not any("previous" in line for line in again)
    edited = (tmp_path / "docker-compose.yml").read_text() + "# my own edit\n"
    (tmp_path / "docker-compose.yml").write_text(edited)
    messages = write_bundle(Setup(mode="queue", workers=3), tmp_path)
    assert (tmp_path / "docker-compose.yml.previous").read_text() == edited
    assert "n8n-worker-3" in (tmp_path / "docker-compose.yml").read_text()
    assert any("kept as" in line and "docker-compose.yml.previous" in line for line in messages)
