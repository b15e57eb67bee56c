"""Per-tenant policy of the client-facing paths (docs/protocol.md, *Trust*): who may INSERT, who may pin, how many slots each holds.

Clients name their tenant in every request; the operator decides which tenants may announce blocks (INSERT),
which may ask for a pin (F_PIN), and a quota of switch slots per tenant. A refused request is answered with
ERR_DENIED and counted in the `denied` metric by reason. Operator actions (CLI pin) are not subject to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TenantPolicy:
    """What tenants may do; the default lets every tenant INSERT and pin, without quota."""

    insert: frozenset[int] | None = None
    """Tenants allowed to INSERT; None = every tenant."""
    pin: frozenset[int] | None = None
    """Tenants allowed to ask for a pin (INSERT with F_PIN); None = every tenant."""
    quota: Mapping[int, int] = field(default_factory=dict)
    """Switch slots a tenant may hold at most, by tenant."""
    default_quota: int | None = None
    """Slots of any tenant not in `quota`; None = unlimited."""

    def may_insert(self, tenant: int) -> bool:
        return self.insert is None or tenant in self.insert

    def may_pin(self, tenant: int) -> bool:
        return self.pin is None or tenant in self.pin

    def quota_of(self, tenant: int) -> int | None:
        return self.quota.get(tenant, self.default_quota)

    @classmethod
    def from_options(cls, insert: str | None = None, pin: str | None = None, quotas: Iterable[str] = (),
                     default_quota: int | None = None) -> TenantPolicy:
        """From command-line text: `insert="1,2"`, `pin="1"`, quotas `["1=100", "2=50"]`; ValueError explains."""
        quota = {}
        for item in quotas:
            tenant, sep, slots = item.partition("=")
            if not sep:
                raise ValueError(f"tenant quota {item!r}: expected TENANT=SLOTS, e.g. 1=100")
            quota[_tenant(tenant)] = _count(slots, item)
        if default_quota is not None and default_quota < 0:
            raise ValueError(f"default tenant quota must be ≥ 0, got {default_quota}")
        return cls(_tenants(insert), _tenants(pin), quota, default_quota)


def _tenant(text: str) -> int:
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"tenant must be a decimal number, got {text!r}") from None
    if not 0 <= value < 1 << 16:
        raise ValueError(f"tenant {value} outside 0..65535")
    return value


def _count(text: str, item: str) -> int:
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"tenant quota {item!r}: SLOTS must be a number") from None
    if value < 0:
        raise ValueError(f"tenant quota {item!r}: SLOTS must be ≥ 0")
    return value


def _tenants(text: str | None) -> frozenset[int] | None:
    if text is None or text.strip() in ("", "*", "all"):
        return None
    if text.strip() == "none":
        return frozenset()
    return frozenset(_tenant(t) for t in text.split(",") if t.strip())
