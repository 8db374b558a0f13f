"""ZooKeeper authentication and the ACLs of a group's nodes (``zookeeper.set.acl``): pure logic, no I/O.

Kafka 0.8.2's consumer wrote every node world-writable: anyone reaching ZooKeeper could move a group's offsets
or steal its partitions. Kafka 0.9 added ``zookeeper.set.acl`` (the consumer turned it on with a JAAS file):
nodes created ``CREATOR_ALL_ACL`` + ``READ_ACL_UNSAFE``, ``/consumers`` itself left open "as different consumers
will write under this node". We do the same for every node under ``/consumers/<group>``, naming the principal
explicitly (digest ``user:hash`` and/or ``sasl:user``) instead of ZooKeeper's ``auth`` shorthand, so the ACL is
the same whichever member created the node and can be compared in tests and tools.

Deliberate difference: Kafka's secure clients also protect the broker, topic and config nodes they create; our
consumer and tools create those open, as zkconsumer's local broker does not authenticate (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions, make_digest_acl

from zkconsumer.errors import IllegalArgument
from zkconsumer.zk.layout import CONSUMERS_PATH

#: Property names: Kafka's for the switch; ours for credentials (Kafka read them from a JAAS file).
SET_ACL = "zookeeper.set.acl"
DIGEST = "zkconsumer.zookeeper.digest"
SASL = "zkconsumer.zookeeper.sasl"
SASL_MECHANISM = "DIGEST-MD5"


@dataclass(frozen=True)
class Credentials:
    """``user:password`` for one ZooKeeper auth scheme; the password never appears in ``repr``."""

    user: str
    password: str = field(repr=False)

    @classmethod
    def parse(cls, prop: str, text: str) -> Credentials:
        """``user:password`` (the password may contain ':'); IllegalArgument naming ``prop`` otherwise."""
        user, colon, password = text.partition(":")
        if not colon or not user.strip():
            raise IllegalArgument(f"{prop} must be user:password")
        return cls(user.strip(), password)

    def masked(self) -> str:
        return f"{self.user}:******"


@dataclass(frozen=True)
class ZkSecurity:
    """How a client authenticates to ZooKeeper and which ACL the nodes it creates get."""

    digest: Credentials | None = None
    sasl: Credentials | None = None
    set_acl: bool = False

    def __post_init__(self) -> None:
        if self.set_acl and not self.authenticated:
            # Kafka refuses zookeeper.set.acl without a JAAS login the same way: an ACL naming nobody locks all out.
            raise IllegalArgument(f"{SET_ACL}=true needs credentials: {DIGEST}=user:password or {SASL}=user:password")

    @property
    def authenticated(self) -> bool:
        return self.digest is not None or self.sasl is not None

    def client_kwargs(self) -> dict[str, Any]:
        """KazooClient arguments: ``auth_data`` for digest, ``sasl_options`` for SASL DIGEST-MD5."""
        kwargs: dict[str, Any] = {}
        if self.digest:
            kwargs["auth_data"] = [("digest", f"{self.digest.user}:{self.digest.password}")]
        if self.sasl:
            kwargs["sasl_options"] = {"mechanism": SASL_MECHANISM, "username": self.sasl.user,
                                      "password": self.sasl.password}
        return kwargs

    def principal_acls(self) -> list[ACL]:
        """ALL (read, write, create, delete, admin) for each identity this client authenticates as."""
        acls = []
        if self.digest:
            acls.append(make_digest_acl(self.digest.user, self.digest.password, all=True))
        if self.sasl:
            acls.append(ACL(Permissions.ALL, Id("sasl", self.sasl.user)))
        return acls

    def group_acl(self) -> list[ACL]:
        """A group node's ACL: the principal may do anything, everyone else may only read."""
        return self.principal_acls() + READ_ACL_UNSAFE

    def acl_for(self, path: str) -> list[ACL] | None:
        """The ACL for a node created at ``path`` (chroot-relative), or None to keep kazoo's default.

        With ``set_acl`` every path gets an answer, because kazoo passes a child's ACL on to the parents it
        creates (``makepath``, ``ensure_path``): ``/consumers`` and everything outside a group stay open,
        ``/consumers/<group>`` and below (ids, owners, offsets, their ephemeral children) get :meth:`group_acl`.
        Group members share the principal, so each may create and delete children of ``ids`` and
        ``owners/<topic>``; an ephemeral node still vanishes with its creator's session whatever its ACL.
        """
        if not self.set_acl:
            return None
        return self.group_acl() if in_group(path) else OPEN_ACL_UNSAFE

    def describe(self) -> str:
        """For logs: schemes and users, never passwords."""
        parts = [f"digest {self.digest.user}"] if self.digest else []
        parts += [f"sasl {SASL_MECHANISM} {self.sasl.user}"] if self.sasl else []
        return (", ".join(parts) or "unauthenticated") + (f", {SET_ACL}=true" if self.set_acl else "")


NO_SECURITY = ZkSecurity()


def in_group(path: str) -> bool:
    """Is ``path`` a group's node or below one (``/consumers/<group>[/...]``)?"""
    prefix = CONSUMERS_PATH.rstrip("/") + "/"
    return path.startswith(prefix) and bool(path[len(prefix):].strip("/"))
