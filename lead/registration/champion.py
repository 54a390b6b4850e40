"""The champion alias: who holds it, moving it (the gate's decision or `lead promote`), and when."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lead.config import RegisterParams, TrackingParams
from lead.io.tracking import tracking_uri

CHAMPION, CHALLENGER = "champion", "challenger"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def champion_version(client, name: str):
    """The ``@champion`` version of ``name``, or None (no such model, or no alias yet)."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return None


def move_champion(client, name: str, version: str, how: str, reason: str) -> None:
    """Point ``@champion`` at ``version`` and record the move on both versions (time, how, why)."""
    stamp = f"{_now()} by {how}: {reason}"
    previous = champion_version(client, name)
    if previous is not None and str(previous.version) != str(version):
        client.set_model_version_tag(name, previous.version, "champion.replaced", f"{stamp} (by v{version})")
    client.set_registered_model_alias(name, CHAMPION, str(version))
    client.set_model_version_tag(name, str(version), "champion.promoted", stamp)


def promote(reg: RegisterParams, tracking: TrackingParams, version: str, reason: str) -> dict[str, Any]:
    """``lead promote``: make ``version`` the champion by hand, whatever the gate said; the reason is recorded.
    A version that is champion already is left as it is (its recorded promotion and reason stay): ``already``
    says so."""
    import mlflow
    from mlflow import MlflowClient

    if not reason.strip():
        raise ValueError("a promotion needs a reason (it is recorded on the model version)")
    mlflow.set_tracking_uri(tracking_uri(tracking))
    client = MlflowClient()
    name = reg.model_name
    target = client.get_model_version(name, str(version))  # a clear MLflow error when it does not exist
    if CHAMPION in target.aliases:
        return {
            "model_name": name,
            "champion": str(version),
            "reason": target.tags.get("champion.promoted", ""),
            "failed_gate": None,
            "already": True,
        }
    gate = target.tags.get("gate", "")
    failed = gate.startswith("gate failed")
    how = f"hand (lead promote, over the {gate})" if failed else "hand (lead promote)"
    move_champion(client, name, str(version), how, reason)
    return {
        "model_name": name,
        "champion": str(version),
        "reason": reason,
        "failed_gate": gate if failed else None,
        "already": False,
    }
