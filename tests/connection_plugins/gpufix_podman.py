# Test transport: run tasks in a podman container with pipelining, as ssh does in ansible.cfg.
# containers.podman.podman cannot pipeline (its `podman exec` gets no -i), so every task costs
# it five `podman exec` calls (home, mkdir, chmod, run, rm); pipelined, a task costs one.
from __future__ import annotations

import os
import shlex
import shutil
import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect

DOCUMENTATION = """
name: gpufix_podman
short_description: Run tasks in a local podman container, pipelined (gpufix's tests only)
description:
  - Executes with C(podman exec -i), so Ansible can pipeline modules over stdin.
  - Files go through C(podman cp).
author: gpufix
options:
  remote_addr:
    description: The container's name or id.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
  remote_user:
    description: The user to run as in the container (default the image's).
    vars:
      - name: ansible_user
  pipelining:
    description: Send modules over stdin (on unless turned off).
    type: boolean
    default: true
    env:
      - name: ANSIBLE_PIPELINING
    vars:
      - name: ansible_pipelining
  podman_executable:
    description: The podman binary.
    default: podman
    vars:
      - name: ansible_podman_executable
"""


class Connection(ConnectionBase):
    transport = "gpufix_podman"
    has_pipelining = True

    def __init__(self, play_context, new_stdin, *args, **kwargs):
        super().__init__(play_context, new_stdin, *args, **kwargs)
        self._container = None

    def _podman(self, args, in_data=None):
        exe = shutil.which(self.get_option("podman_executable"))
        if exe is None:
            raise AnsibleError("podman not found on PATH")
        argv = [to_bytes(a, errors="surrogate_or_strict") for a in [exe, *args]]
        proc = subprocess.run(argv, input=in_data, capture_output=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def _connect(self):
        super()._connect()
        self._container = self.get_option("remote_addr")
        self._connected = True
        return self

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec"]
        if in_data is not None:
            args.append("-i")
        user = self.get_option("remote_user")
        if user:
            args += ["--user", user]
        args.append(self._container)
        args += shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        rc, out, err = self._podman(args, in_data)
        if rc != 0 and not self._running():
            # the container is stopped or gone: unreachable, as a host is over ssh
            raise AnsibleConnectionFailure(to_native(err).strip() or "podman exec failed")
        return rc, out, err

    def _running(self):
        rc, out, _ = self._podman(
            ["container", "inspect", "-f", "{{.State.Running}}", self._container]
        )
        return rc == 0 and out.strip() == b"true"

    @ensure_connect
    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        if not os.path.exists(to_bytes(in_path, errors="surrogate_or_strict")):
            raise AnsibleError(f"file not found: {in_path}")
        rc, _, err = self._podman(["cp", in_path, f"{self._container}:{out_path}"])
        if rc != 0:
            raise AnsibleError(f"podman cp to {out_path} failed: {to_native(err)}")

    @ensure_connect
    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        rc, _, err = self._podman(["cp", f"{self._container}:{in_path}", out_path])
        if rc != 0:
            raise AnsibleError(f"podman cp from {in_path} failed: {to_native(err)}")

    def close(self):
        super().close()
        self._connected = False
