"""What the runner keeps from ansible-runner's events for a loop task (shapes as Ansible 2.16
sends them): each changed item's file, and the reason a host was unreachable. A review found
`gpufix uninstall --check` saying "changed 1" for two files and "All items completed" as the
reason a host could not be reached."""

from __future__ import annotations

from gpufix import runner


def event(kind: str, res: dict) -> dict:
    return {"event": kind, "event_data": {"host": "h1", "task": "Remove the files", "res": res}}


def test_a_loop_task_records_each_changed_file() -> None:
    hosts: dict[str, runner.HostResult] = {}
    handle = runner._handler(hosts, None)
    handle(event("runner_on_ok", {
        "changed": True, "msg": "All items completed",
        "results": [
            {"changed": True, "path": "/usr/local/lib/gpufix/gpufix_probe.py", "state": "absent"},
            {"changed": False, "path": "/var/lib/gpufix/absent.json", "state": "absent"},
            {"changed": True, "path": "/var/lib/gpufix/probe.json", "state": "absent"},
        ],
    }))  # fmt: skip
    handle(event("runner_on_ok", {"changed": True, "dest": "/etc/nccl.conf"}))
    hr = hosts["h1"]
    assert hr.changed == 2
    assert [r.get("paths") for r in hr.results] == [
        ["/usr/local/lib/gpufix/gpufix_probe.py", "/var/lib/gpufix/probe.json"],
        ["/etc/nccl.conf"],
    ]


def test_an_unreachable_loop_says_why() -> None:
    hosts: dict[str, runner.HostResult] = {}
    runner._handler(hosts, None)(event("runner_on_unreachable", {
        "msg": "All items completed", "unreachable": True,
        "results": [{"msg": "Failed to connect to the host via ssh: Connection refused",
                     "unreachable": True}],
    }))  # fmt: skip
    assert hosts["h1"].status == "unreachable"
    assert hosts["h1"].message == "Failed to connect to the host via ssh: Connection refused"
