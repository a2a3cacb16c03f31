"""Which admission layer guards the tenants' objects, as the operator finds it at start.

Two layers keep a tenant from having the operator do what the tenant may not do itself
(docs/security.md, "Admission policies"): the tenant ValidatingAdmissionPolicy of the
installation, with which the API server checks the *requesting user* of an MCPServer or
AgentRun, and the operator's own opt-in label checks, which always apply. This module
looks once, at start, for the policy the installation names (``--tenant-admission-policy``)
and its binding of the same name, and says which layer the status reports
(``status.admission``); likewise for the bridge-key policy (``--bridge-key-policy``), which
managed servers' ``Isolation`` condition reports. What the labels check is the
controllers' business.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from mcp_operator.api.common import AdmissionLayer
from mcp_operator.kube import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    Kube,
    KubeError,
)

logger = logging.getLogger(__name__)

POLICY_AND_LABELS: AdmissionLayer = "PolicyAndLabels"
LABELS: AdmissionLayer = "Labels"


def enforced(policy: Mapping[str, Any] | None, binding: Mapping[str, Any] | None) -> bool:
    """Whether ``binding`` makes the API server deny what ``policy`` refuses (pure)."""
    if not policy or not binding:
        return False
    spec = binding.get("spec") or {}
    name = (policy.get("metadata") or {}).get("name")
    return spec.get("policyName") == name and "Deny" in (spec.get("validationActions") or [])


async def found(kube: Kube, policy_name: str) -> bool:
    """Whether the API server holds ``policy_name`` and a binding of that name that denies.

    A policy the operator may not read (a namespace-scoped identity cannot read
    cluster-scoped objects) counts as absent: the status vouches only for what it saw.
    """
    try:
        policy = await kube.get(VALIDATING_ADMISSION_POLICIES, None, policy_name)
        binding = await kube.get(VALIDATING_ADMISSION_POLICY_BINDINGS, None, policy_name)
    except KubeError as error:
        logger.warning(
            "Could not read ValidatingAdmissionPolicy %s (%s)", policy_name, error.status
        )
        return False
    if not enforced(policy, binding):
        logger.warning("ValidatingAdmissionPolicy %s or its Deny binding is missing", policy_name)
        return False
    return True


async def admission_layer(kube: Kube, policy_name: str | None) -> AdmissionLayer:
    """The layer guarding tenants' objects: the policy and the labels when the API server
    holds ``policy_name`` and a binding of that name that denies, else the labels alone."""
    if not policy_name:
        logger.info("No tenant admission policy configured: opt-in labels alone guard tenants")
        return LABELS
    if not await found(kube, policy_name):
        logger.warning("Opt-in labels alone guard tenants: no tenant policy %s", policy_name)
        return LABELS
    logger.info(
        "ValidatingAdmissionPolicy %s checks the requesting users; opt-in labels apply too",
        policy_name,
    )
    return POLICY_AND_LABELS


async def bridge_key_policy(kube: Kube, policy_name: str | None) -> str | None:
    """``policy_name`` when it guards the bridges' keys (found with a binding that denies),
    else ``None``: every managed server's ``Isolation`` condition then says what nobody
    prevents (:mod:`~mcp_operator.controller.mcpserver.isolation`)."""
    if not policy_name:
        logger.warning(
            "No bridge-key admission policy configured: managed servers report Isolation=False"
        )
        return None
    if not await found(kube, policy_name):
        logger.warning(
            "Managed servers report Isolation=False: no bridge-key policy %s", policy_name
        )
        return None
    logger.info("ValidatingAdmissionPolicy %s keeps servers' tokens to bridges", policy_name)
    return policy_name
