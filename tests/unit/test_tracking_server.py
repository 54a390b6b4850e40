"""A tracking server that goes away: each retry is said as it happens, and giving up is one line."""

import socket

import pytest

from lead.io.tracking import use_experiment
from lead.stages._common import user_error
from tests.conftest import tmp_params


def test_a_server_that_does_not_answer_is_said_at_each_retry_then_in_one_line(tmp_path, monkeypatch, capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    params = tmp_params(tmp_path, tracking={"uri": f"http://127.0.0.1:{port}"})
    with pytest.raises(Exception) as info:  # MLflow's own exception, whatever its class
        use_experiment(params.tracking)
    lines = [line for line in capsys.readouterr().err.splitlines() if "MLflow server" in line]
    assert lines == [
        f"MLflow server http://127.0.0.1:{port} does not answer (Connection refused): retrying, {n} tries left"
        for n in (1, 0)
    ], lines
    said = user_error(info.value)
    assert (
        said is not None
        and said.startswith("the MLflow server did not answer")
        and "after every retry" in said
    )
    assert f"127.0.0.1:{port}" in said and "\n" not in said
