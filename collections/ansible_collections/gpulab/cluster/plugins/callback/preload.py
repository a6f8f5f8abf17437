# Copyright: gpulab contributors
# MIT License (see LICENSE)
"""Callback gpulab.cluster.preload: loads, once in the controller, the plugins that every task's
worker would otherwise load anew."""

# Ansible plugins import after DOCUMENTATION.
# ruff: noqa: E402

from __future__ import annotations

DOCUMENTATION = """
name: preload
type: aggregate
short_description: load the connection, shell, become and lookup plugins once per run
version_added: "2.0.0"
description:
  - Ansible runs each task on each host in a worker process forked from the controller. A
    worker that loads a plugin the controller has not loaded reads the plugin's code and its
    documentation (YAML, the source of its settings) anew; for the ssh connection plugin, which
    every task loads, that was about a sixth of the controller's CPU time in a converge of
    gpulab.cluster.site.
  - When the run starts this callback loads the configured connection plugin, ssh and local
    (tasks delegated to the control machine), the sh shell, the configured become method and
    the lookups the gpulab.cluster roles call, so that every worker inherits them.
  - Before each task it moves the controller's objects to the garbage collector's permanent
    generation (Python's gc.freeze), so that the collections in a forked worker do not write
    to the pages it shares with the controller, which the kernel would then copy.
  - It changes no result and prints nothing.
requirements:
  - enable in configuration (callbacks_enabled = gpulab.cluster.preload)
"""

import gc

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import (
    PluginLoader,
    become_loader,
    connection_loader,
    lookup_loader,
    shell_loader,
)

# ansible.builtin lookups that gpulab.cluster's roles and playbooks call in their tasks, and env
# (the lab's and molecule's playbooks); tests/collection/test_preload_callback.py checks the list.
ROLE_LOOKUPS = ("env", "file", "first_found", "password", "pipe", "template", "vars", "varnames")


def _load(loader: PluginLoader, name: str) -> None:
    """Load a builtin plugin by its short name and by its FQCN: Ansible keeps the settings of
    each apart, and inventories and roles use either (ansible_connection: ansible.builtin.ssh)."""
    short = name.removeprefix("ansible.builtin.")
    for alias in (short, f"ansible.builtin.{short}"):
        loader.get(alias, class_only=True)


def preload() -> None:
    """Load the plugins' code and settings into this process (the controller)."""
    for name in dict.fromkeys((C.DEFAULT_TRANSPORT, "ssh", "local")):
        _load(connection_loader, name)
    _load(shell_loader, "sh")
    _load(become_loader, C.DEFAULT_BECOME_METHOD)
    for name in ROLE_LOOKUPS:
        _load(lookup_loader, name)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpulab.cluster.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        # Callbacks load before the first worker forks.
        preload()

    def v2_playbook_on_task_start(self, task: object, is_conditional: bool) -> None:
        # The workers of this task fork after this. A frozen object is never collected: what
        # becomes garbage in the controller stays until the run ends (about 1 MB in a converge of the lab).
        gc.freeze()

    def v2_playbook_on_handler_task_start(self, task: object) -> None:
        gc.freeze()
