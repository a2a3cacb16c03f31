"""Which admission layer guards the tenants' objects, as the operator finds it at start.

Two layers keep a tenant from having the operator do what the tenant may not do itself
(docs/security.md, "Admission policies"): the tenant ValidatingAdmissionPolicy of the
installation, with which the API server checks the *requesting user* of an MCPServer or
AgentRun, and the operator's own opt-in label checks, which always apply. This module
looks once, at start, for the policy the installation names (``--tenant-admission-policy``)
and its binding of the same name, and says which layer the status reports
(``status.admission``). What the labels check is the controllers' business.
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


async def admission_layer(kube: Kube, policy_name: str | None) -> AdmissionLayer:
    """The layer guarding tenants' objects: the policy and the labels when the API server
    holds ``policy_name`` and a binding of that name that denies, else the labels alone.

    A policy the operator may not read (a namespace-scoped identity cannot read
    cluster-scoped objects) counts as absent: the status vouches only for what it saw.
    """
    if not policy_name:
        logger.info("No tenant admission policy configured: opt-in labels alone guard tenants")
        return LABELS
    try:
        policy = await kube.get(VALIDATING_ADMISSION_POLICIES, None, policy_name)
        binding = await kube.get(VALIDATING_ADMISSION_POLICY_BINDINGS, None, policy_name)
    except KubeError as error:
        logger.warning(
            "Could not read ValidatingAdmissionPolicy %s (%s): opt-in labels alone are reported",
            policy_name,
            error.status,
        )
        return LABELS
    if not enforced(policy, binding):
        logger.warning(
            "ValidatingAdmissionPolicy %s or its Deny binding is missing: opt-in labels alone "
            "guard tenants",
            policy_name,
        )
        return LABELS
    logger.info(
        "ValidatingAdmissionPolicy %s checks the requesting users; opt-in labels apply too",
        policy_name,
    )
    return POLICY_AND_LABELS
