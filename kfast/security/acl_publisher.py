"""AclPublisher: keeps an authorizer's ACLs equal to the committed metadata
(Kafka's AclPublisher). Subscribed to the controller like the broker's
metadata publisher; duck-typed on the image (``acls``) and the delta
(``changed_acls``: ACL id -> ACL, or None when removed), so the security
layer imports no controller code.
"""

from __future__ import annotations

from typing import Any

from kfast.security.authorizer import StandardAuthorizer


class AclPublisher:
    def __init__(self, authorizer: StandardAuthorizer) -> None:
        self.authorizer = authorizer

    # Any: the controller's MetadataDelta and MetadataImage (duck-typed above).
    def on_metadata_update(self, delta: Any, image: Any) -> None:
        changes = delta.changed_acls
        if not changes and len(self.authorizer) == len(image.acls):
            return
        self.authorizer.apply(changes)
        # After a snapshot load an ACL can be gone with no change naming it:
        # then the authorizer holds more than the image, and reloads.
        if len(self.authorizer) != len(image.acls):
            self.authorizer.load(image.acls)
