"""``configure_from_env``: when it exports, when it leaves things alone, and what it refuses."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import pytest
from test_cli import free_port, interlock

from interlock.telemetry import configure_from_env


@pytest.mark.parametrize(
    ("env", "outcome"),
    [
        ({}, "not-requested"),
        ({"OTEL_SERVICE_NAME": "x"}, "not-requested"),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "disabled"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "disabled"),
    ],
)
def test_nothing_is_installed_unless_asked(env: dict[str, str], outcome: str) -> None:
    assert configure_from_env(env) == outcome


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER names zipkin"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
        ),
    ],
)
def test_what_cannot_be_exported_is_refused_with_what_to_set(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        configure_from_env(env)


def test_a_provider_the_application_set_is_kept(tmp_path: pathlib.Path) -> None:
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from interlock.telemetry import configure_from_env

        mine = TracerProvider()
        trace.set_tracer_provider(mine)
        assert configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) == "already-configured"
        assert trace.get_tracer_provider() is mine
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_serve_refuses_an_exporter_it_cannot_use(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "echo_app.py").write_text(
        "from interlock import PromptAgent\nfrom interlock.testing import EchoModel\n"
        "agents = [PromptAgent('echo', EchoModel())]\n"
    )
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    proc = interlock("serve", "echo_app:agents", "--port", str(free_port()), cwd=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert "OTEL_TRACES_EXPORTER names zipkin" in err and "Traceback" not in err
