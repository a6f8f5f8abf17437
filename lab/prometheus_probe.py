"""What the monitoring tests ask a node (molecule/default's and molecule/monitoring's): its
cluster address, what listens on a port, and the controller's Prometheus HTTP API, asked from
the controller itself (the API listens on the cluster address only)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from testinfra.host import Host

PROMETHEUS_PORT = 9090


def cluster_address(node: Host) -> str:
    """The address of the interface that holds the default route (the roles' default)."""
    route = node.check_output("ip -4 -o route get 192.0.2.1")
    found = re.search(r"\bsrc (\S+)", route)
    assert found, route
    return found.group(1)


def listeners(node: Host, port: int) -> set[str]:
    """The addresses something listens on for TCP `port`."""
    lines = node.check_output("ss -Htln").splitlines()
    local = [line.split()[3] for line in lines if len(line.split()) > 3]
    return {address.rsplit(":", 1)[0] for address in local if address.endswith(f":{port}")}


def prometheus_api(controller: Host, path: str, **params: str) -> Any:
    """The `data` of a successful answer of Prometheus' HTTP API at `path` with `params`."""
    url = f"http://{cluster_address(controller)}:{PROMETHEUS_PORT}{path}"
    script = (
        "import json, sys, urllib.parse, urllib.request; "
        "params = json.loads(sys.argv[2]); "
        "url = sys.argv[1] + ('?' + urllib.parse.urlencode(params) if params else ''); "
        "print(urllib.request.urlopen(url, timeout=10).read().decode())"
    )
    out = controller.check_output(
        f"python3 -c {shlex.quote(script)} {shlex.quote(url)} {shlex.quote(json.dumps(params))}"
    )
    answer = json.loads(out)
    assert answer["status"] == "success", answer
    return answer["data"]


def prometheus_query(controller: Host, expr: str) -> list[dict[str, Any]]:
    """An instant query's series."""
    result: list[dict[str, Any]] = prometheus_api(controller, "/api/v1/query", query=expr)["result"]
    return result
