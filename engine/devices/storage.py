"""What each pod's PersistentVolumeClaims mean for placement, resolved once per snapshot.

Upstream's VolumeBinding, VolumeZone, NodeVolumeLimits and VolumeRestrictions each look a pod's claims up
again in listers; here engine.reading.resolve resolves them once per snapshot into `model.PodVolumes` (blocked or not,
bound volumes' node affinity and zones, unbound WaitForFirstConsumer claims, CSI volumes attached, ReadWriteOncePod claims),
so the constraint kinds read facts and pods whose claims ask alike stay one class. `volume_steps` is the other
half: which PersistentVolume each claim of a placed pod gets, or which claims are left to a provisioner (the
binder's PreBind).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..model.cluster import NO_VOLUMES, CapacityReport, Claim, ClaimUse, Node, Pod, PodVolumes, Storage, Volume

NO_PROVISIONER = "kubernetes.io/no-provisioner"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
# VolumeZone's labels (GA and the legacy beta ones a PV may still carry)
ZONE_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
               "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region")
GA_LABEL = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
            "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}


def pending_volumes(pod: Pod, storage: Storage) -> PodVolumes:
    """VolumeBinding's PreFilter and the facts every volume filter reads, in upstream's words."""
    claims = []
    for name in pod.claims:
        claim = storage.claims.get(f"{pod.namespace}/{name}")
        blocked = _claim_problem(claim, name)
        if blocked:
            return PodVolumes(blocked=blocked)
        assert claim is not None
        claims.append(claim)
    bound = [c for c in claims if c.bound]
    unbound = [c for c in claims if not c.bound]
    if any(not _delayed(c, storage) or c.volume_name for c in unbound):
        return PodVolumes(blocked="pod has unbound immediate PersistentVolumeClaims ("
                          + ", ".join(c.name for c in unbound if not _delayed(c, storage) or c.volume_name) + ")")
    volumes = [storage.volumes.get(c.volume_name) for c in bound]
    present = [v for v in volumes if v is not None]
    return PodVolumes(
        pv_missing=len(present) < len(volumes),
        bound_terms=tuple(v.node_terms for v in present if v.node_terms is not None),
        zones=tuple(z for v in present for z in volume_zones(v)),
        waiting=tuple(_use(c, storage) for c in unbound),
        attach=_attached(claims, storage),
        provisioned=_provisioned(unbound, storage),
        read_write_once_pod=tuple(c.key for c in claims if READ_WRITE_ONCE_POD in c.modes),
    )


def held_volumes(pod: Pod, storage: Storage) -> PodVolumes:
    """A bound pod's claims: the CSI volumes it keeps attached and the ReadWriteOncePod claims it uses."""
    claims = [c for c in (storage.claims.get(f"{pod.namespace}/{n}") for n in pod.claims) if c is not None]
    if not claims:
        return NO_VOLUMES
    return PodVolumes(attach=_attached(claims, storage),
                      read_write_once_pod=tuple(c.key for c in claims if READ_WRITE_ONCE_POD in c.modes))


def _claim_problem(claim: Claim | None, name: str) -> str:
    if claim is None:
        return f'persistentvolumeclaim "{name}" not found'
    if claim.lost:
        return f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{claim.volume_name}"'
    if claim.deleting:
        return f'persistentvolumeclaim "{name}" is being deleted'
    return ""


def _delayed(claim: Claim, storage: Storage) -> bool:
    """The claim's class binds on first consumer (a claim without a known class binds immediately)."""
    cls = storage.classes.get(claim.storage_class)
    return cls is not None and cls.wait_for_consumer


def _use(claim: Claim, storage: Storage) -> ClaimUse:
    cls = storage.classes[claim.storage_class]
    provisioner = "" if cls.provisioner == NO_PROVISIONER else cls.provisioner
    return ClaimUse(claim.storage_class, claim.request, claim.modes, claim.block, claim.selector, provisioner,
                    cls.topology, _capacities(claim, provisioner, storage))


def _capacities(claim: Claim, provisioner: str, storage: Storage) -> tuple[CapacityReport, ...] | None:
    """The class's CSIStorageCapacities by name when the provisioner's CSIDriver tracks capacity (upstream's
    hasEnoughCapacity checks nothing for a claim without a storage request or a driver that does not)."""
    if not provisioner or not storage.tracked.get(provisioner) or claim.request <= 0:
        return None
    return tuple(sorted((r for r in storage.capacities.values() if r.storage_class == claim.storage_class),
                        key=lambda r: r.name))


def _attached(claims: list[Claim], storage: Storage) -> tuple[tuple[str, str], ...]:
    """(driver, driver/handle) of each bound CSI volume: upstream's unique volume name."""
    pvs = (storage.volumes.get(c.volume_name) for c in claims if c.volume_name)
    return tuple(sorted({(pv.driver, f"{pv.driver}/{pv.handle}") for pv in pvs if pv is not None and pv.driver}))


def _provisioned(claims: list[Claim], storage: Storage) -> tuple[str, ...]:
    """The provisioner of each unbound claim's class, when it provisions (upstream's getCSIDriverInfoFromSC):
    a volume that does not exist yet is attached nowhere, so it is new on any node."""
    out = []
    for c in claims:
        cls = storage.classes.get(c.storage_class)
        if not c.volume_name and cls is not None and cls.provisioner not in ("", NO_PROVISIONER):
            out.append(cls.provisioner)
    return tuple(sorted(out))


def volume_zones(pv: Volume) -> list[tuple[str, frozenset[str]]]:
    """VolumeZone: the PV's zone and region labels, each a set of values joined by "__"."""
    labels = dict(pv.labels)
    return [(key, frozenset(labels[key].split("__"))) for key in ZONE_LABELS if labels.get(key)]


def zone_ok(zones: tuple[tuple[str, frozenset[str]], ...], node: Node) -> bool:
    """Upstream VolumeZone.Filter: a node without any zone or region label takes anything."""
    if not any(key in node.labels for key in ZONE_LABELS):
        return True
    for key, values in zones:
        value = node.labels.get(key, node.labels.get(GA_LABEL.get(key, key)))
        if value is None or value not in values:
            return False
    return True


# -- matching claims to volumes ---------------------------------------------------------------------------

def fits(use: ClaimUse, pv: Volume) -> bool:
    """FindMatchingVolume's checks, node affinity aside: an available PV of the class, big enough, of the
    volume mode, with every access mode asked for, matching the claim's selector."""
    return (pv.available and not pv.deleting and pv.claim is None and pv.storage_class == use.storage_class
            and pv.capacity >= use.request and pv.block == use.block and use.modes <= pv.modes
            and (use.selector is None or use.selector.matches(dict(pv.labels))))


def provisionable(use: ClaimUse, node: Node, capacity: bool = True) -> bool:
    """checkVolumeProvisions: a provisioner, the class's allowedTopologies admit the node, and (with `capacity`)
    a CSIStorageCapacity of the node holds the claim where the driver tracks capacity."""
    return (bool(use.provisioner) and (use.topology is None or any(t.matches(node) for t in use.topology))
            and (not capacity or node_capacity(use, node) is not False))


def node_capacity(use: ClaimUse, node: Node) -> CapacityReport | bool:
    """hasEnoughCapacity: the first report (by name) of the claim's class that admits `node` and whose limit
    (maximum volume size, else capacity) holds the claim; True when capacity is not checked; False when none."""
    if use.capacities is None:
        return True
    for report in use.capacities:
        limit = report.limit()
        if limit is not None and limit >= use.request and report.nodes.matches(node.labels):
            return report
    return False


def match_claims(uses: Iterable[ClaimUse], volumes: list[Volume], node: Node,
                 taken: Iterable[str] = (), capacity: bool = True) -> list[Volume | None] | None:
    """Upstream's findMatchingVolumes on one node: claims smallest first, each the smallest fitting PV not yet
    chosen (`volumes` are those whose node affinity admits the node), else provisioned; None when a claim
    can have neither. The answer is aligned with the claims sorted by size."""
    chosen = set(taken)
    out: list[Volume | None] = []
    for use in sorted(uses, key=lambda u: u.request):
        best = min((v for v in volumes if v.name not in chosen and fits(use, v)), key=lambda v: v.capacity, default=None)
        if best is not None:
            chosen.add(best.name)
        elif not provisionable(use, node, capacity):
            return None
        out.append(best)
    return out


@dataclass(frozen=True, slots=True)
class VolumeStep:
    """One API write before a pod's binding (upstream's PreBind): bind PV `volume` to claim `claim`
    (namespace/name), or, with volume "", ask the provisioner for the claim on the pod's node."""

    claim: str
    volume: str = ""


def volume_steps(pod: Pod, node: Node, storage: Storage, taken: set[str]) -> list[VolumeStep] | None:
    """The writes that prepare `pod`'s unbound claims on `node`, choosing PVs not in `taken` (which grows by
    those chosen); None when the claims cannot be met there any more (the plan is stale)."""
    unbound = [storage.claims[f"{pod.namespace}/{n}"] for n in pod.claims
               if f"{pod.namespace}/{n}" in storage.claims and not storage.claims[f"{pod.namespace}/{n}"].bound]
    if not unbound:
        return []
    uses = [_use(c, storage) for c in unbound]
    usable = [v for v in storage.volumes.values() if v.node_terms is None or any(t.matches(node) for t in v.node_terms)]
    chosen = match_claims(uses, usable, node, taken)
    if chosen is None:
        return None
    ordered = sorted(zip(unbound, uses), key=lambda cu: cu[1].request)
    steps = []
    for (claim, _), pv in zip(ordered, chosen):
        steps.append(VolumeStep(claim.key, pv.name if pv is not None else ""))
        if pv is not None:
            taken.add(pv.name)
    return steps
