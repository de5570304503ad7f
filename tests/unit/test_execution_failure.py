"""`execution_failure`: what a drill records of an execution that did not succeed, from the record n8n's public
API returns with includeData (the shape n8n 2.41.1 stores: data.resultData.error and each node run's error)."""

from __future__ import annotations

from n8n_sizer.drills.common import execution_failure

FAILED = {
    "id": "412",
    "status": "error",
    "startedAt": "2026-12-02T03:40:01.100Z",
    "stoppedAt": "2026-12-02T03:40:02.050Z",
    "data": {
        "resultData": {
            "lastNodeExecuted": "Double",
            "error": {
                "message": "Task request timed out",
                "description": "The task runner did not answer",
                "node": {"name": "Double"},
            },
            "runData": {
                "Webhook": [{"executionTime": 1}],
                "Double": [{"executionTime": 950, "error": {"message": "Task request timed out"}}],
            },
        }
    },
}


def test_the_error_its_node_and_the_node_runs_errors_are_kept() -> None:
    got = execution_failure("412", FAILED)
    assert got["status"] == "error" and got["last_node"] == "Double" and got["error_node"] == "Double"
    assert got["error"] == "Task request timed out" and got["description"] == "The task runner did not answer"
    assert got["node_errors"] == {"Double": "Task request timed out"}
    assert got["started"] == FAILED["startedAt"] and got["stopped"] == FAILED["stoppedAt"]


def test_an_execution_without_run_data_still_gives_its_status() -> None:
    got = execution_failure("7", {"id": "7", "status": "crashed", "data": None})
    assert got["status"] == "crashed" and got["error"] == "" and got["node_errors"] == {} and got["last_node"] is None
