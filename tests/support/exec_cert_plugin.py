"""A kubeconfig exec plugin that hands out client certificates, as a real one would.

Run by the API client as ``python exec_cert_plugin.py`` (the kubeconfig's ``exec``).
Each run issues a new pair for the user ``exec-user-<run>`` in the group
``mcp-exec-users``, signed by the CA in ``$CA_CERT``/``$CA_KEY``, valid ``$LIFETIME``
seconds, and prints it as an ``ExecCredential`` in the version ``KUBERNETES_EXEC_INFO``
asks for. ``$MODE``: ``valid``; ``expired`` (a pair that expired an hour ago); ``foreign``
(signed by a CA the API server does not trust, as a revoked issuer would be).
The number of runs is kept in ``$RUNS_FILE``.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.certificates import Authority, issue, new_authority


def main() -> None:
    runs_file = Path(os.environ["RUNS_FILE"])
    run = int(runs_file.read_text()) + 1 if runs_file.exists() else 1
    runs_file.write_text(str(run))
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    mode = os.environ.get("MODE", "valid")
    now = datetime.datetime.now(datetime.UTC)
    lifetime = datetime.timedelta(seconds=int(os.environ.get("LIFETIME", "3600")))
    not_before, not_after = now - datetime.timedelta(minutes=5), now + lifetime
    if mode == "expired":
        not_before, not_after = now - datetime.timedelta(hours=2), now - datetime.timedelta(hours=1)
    authority = Authority(
        Path(os.environ["CA_CERT"]).read_text(), Path(os.environ["CA_KEY"]).read_text()
    )
    if mode == "foreign":
        authority = new_authority("not-the-cluster-ca")
    certificate, key = issue(
        authority,
        f"exec-user-{run}",
        groups=("mcp-exec-users",),
        not_before=not_before,
        not_after=not_after,
    )
    status = {
        "clientCertificateData": certificate,
        "clientKeyData": key,
        "expirationTimestamp": not_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    cluster = info["spec"].get("cluster") or {}
    if cluster.get("server"):
        Path(str(runs_file) + ".server").write_text(cluster["server"])
    print(
        json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status})
    )


if __name__ == "__main__":
    main()
