"""CreateDelegationToken (38), RenewDelegationToken (39),
ExpireDelegationToken (40) and DescribeDelegationToken (41): Kafka's
KafkaApis / ControllerApis token handlers (KIP-48, KIP-900 on KRaft).

* Token requests are refused with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a
  PLAINTEXT listener, on an SSL listener without a client certificate
  (User:ANONYMOUS), and from a token-authenticated session (Kafka's
  allowTokenRequests). A request a broker forwarded was checked there; the
  controller checks the session's token flag (carried by the Envelope's
  principal) again.
* Create: a requester asking for a token owned by another principal needs
  CREATE_TOKENS on that User (DELEGATION_TOKEN_AUTHORIZATION_FAILED); a
  renewer that is not a User is INVALID_PRINCIPAL_TYPE. Create, Renew and
  Expire are then the active controller's (DelegationTokenControlManager;
  a cluster's broker forwards them after its checks).
* Describe answers from the broker's metadata image: null owners lists
  every token the requester may see, an empty list none. A token is seen by
  its owner and renewers, and by whoever has DESCRIBE on the token id
  (DELEGATION_TOKEN resource) or DESCRIBE_TOKENS on its owner (USER).
  Without delegation.token.secret.key: DELEGATION_TOKEN_AUTH_DISABLED.

Failed answers carry -1 timestamps (Kafka's ErrorTimestamp), an empty token
id and HMAC; Create's names the owner and requester anyway.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from kfast.protocol import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_CREATE_TOKENS,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_DESCRIBE_TOKENS,
    ACL_RESOURCE_DELEGATION_TOKEN,
    ACL_RESOURCE_USER,
)
from kfast.security.delegation_token import TokenInformation, token_hmac
from kfast.security.principal import ANONYMOUS, KafkaPrincipal
from kfast.server.apis import ApiRegistry, RequestContext

CREATE_DELEGATION_TOKEN = api_keys.BY_NAME["CreateDelegationToken"].key
RENEW_DELEGATION_TOKEN = api_keys.BY_NAME["RenewDelegationToken"].key
EXPIRE_DELEGATION_TOKEN = api_keys.BY_NAME["ExpireDelegationToken"].key
DESCRIBE_DELEGATION_TOKEN = api_keys.BY_NAME["DescribeDelegationToken"].key

_ERROR_TIMESTAMP = -1

_Response = TypeVar("_Response")


def _same(a: KafkaPrincipal, b: KafkaPrincipal) -> bool:
    """KafkaPrincipal.equals: type and name (not the token flag)."""
    return (a.principal_type, a.name) == (b.principal_type, b.name)


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's allowTokenRequests."""
    principal = ctx.principal
    if principal.token_authenticated:
        return False
    if ctx.forwarded is not None or ctx.in_process:
        return True  # the forwarding broker checked the client's channel
    protocol = ctx.broker.listener_security[ctx.listener_name].security_protocol
    if protocol == "PLAINTEXT":
        return False
    return not (protocol == "SSL" and _same(principal, ANONYMOUS))


async def _forwarded(
    ctx: RequestContext, api_key: int, request: Any, response_type: type[_Response]
) -> _Response | None:
    """The active controller's response when this node's controller is not
    the active one (a cluster's broker), else None."""
    forwarder = getattr(ctx.broker, "forwarder", None)
    if ctx.forwarded is None and forwarder is not None and forwarder.forwards(api_key):
        response = await forwarder.forward(api_key, ctx.api_version, request, ctx)
        if not isinstance(response, response_type):
            raise errors.UnknownServerException(f"unexpected answer {type(response).__name__}")
        return response
    return None


# -- CreateDelegationToken -------------------------------------------------------------------
def _owner(ctx: RequestContext, request: CreateDelegationTokenRequest) -> KafkaPrincipal | None:
    """The owner the request names (v3+), or None: the requester."""
    name = request.owner_principal_name
    if not name:
        return None
    return KafkaPrincipal(request.owner_principal_type or "", name)


_Described = TypeVar(
    "_Described",
    CreateDelegationTokenResponse,
    DescribeDelegationTokenResponse.DescribedDelegationToken,
)


def _with_requester(version: int, message: _Described, requester: KafkaPrincipal) -> _Described:
    """``message`` naming the token's requester: fields that exist from v3 on."""
    if version >= 3:
        message.token_requester_principal_type = requester.principal_type
        message.token_requester_principal_name = requester.name
    return message


def _create_failed(
    ctx: RequestContext,
    owner: KafkaPrincipal,
    requester: KafkaPrincipal,
    error: errors.KafkaError,
) -> CreateDelegationTokenResponse:
    response = CreateDelegationTokenResponse(
        error_code=error.code,
        principal_type=owner.principal_type,
        principal_name=owner.name,
        issue_timestamp_ms=_ERROR_TIMESTAMP,
        expiry_timestamp_ms=_ERROR_TIMESTAMP,
        max_timestamp_ms=_ERROR_TIMESTAMP,
        token_id="",
        hmac=b"",
    )
    return _with_requester(ctx.api_version, response, requester)


async def handle_create_delegation_token(
    ctx: RequestContext, request: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    requester = ctx.principal
    owner = _owner(ctx, request)
    effective_owner = requester if owner is None else owner
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in request.renewers]
    if not allow_token_requests(ctx):
        return _create_failed(
            ctx, effective_owner, requester, errors.UnsupportedByAuthenticationException()
        )
    if not _same(effective_owner, requester) and not ctx.authorize(
        ACL_OPERATION_CREATE_TOKENS, ACL_RESOURCE_USER, str(effective_owner)
    ):
        return _create_failed(
            ctx, effective_owner, requester, errors.DelegationTokenAuthorizationException()
        )
    forwarded = await _forwarded(
        ctx, CREATE_DELEGATION_TOKEN, request, CreateDelegationTokenResponse
    )
    if forwarded is not None:
        return forwarded
    created = await ctx.broker.controller.create_delegation_token(
        KafkaPrincipal(requester.principal_type, requester.name),
        owner,
        renewers,
        request.max_lifetime_ms,
    )
    token: TokenInformation | None = created.token
    if created.error is not None or token is None:
        return _create_failed(
            ctx, effective_owner, requester, created.error or errors.UnknownServerException()
        )
    response = CreateDelegationTokenResponse(
        error_code=0,
        principal_type=token.owner.principal_type,
        principal_name=token.owner.name,
        issue_timestamp_ms=token.issue_timestamp_ms,
        expiry_timestamp_ms=token.expiry_timestamp_ms,
        max_timestamp_ms=token.max_timestamp_ms,
        token_id=token.token_id,
        hmac=created.hmac,
    )
    return _with_requester(ctx.api_version, response, token.requester)


def _create_error(
    ctx: RequestContext, request: CreateDelegationTokenRequest, error: errors.KafkaError
) -> CreateDelegationTokenResponse:
    owner = _owner(ctx, request)
    return _create_failed(ctx, ctx.principal if owner is None else owner, ctx.principal, error)


# -- RenewDelegationToken / ExpireDelegationToken --------------------------------------------
_ExpiryResponse = TypeVar(
    "_ExpiryResponse", RenewDelegationTokenResponse, ExpireDelegationTokenResponse
)


async def _change_expiry(
    ctx: RequestContext,
    request: RenewDelegationTokenRequest | ExpireDelegationTokenRequest,
    response_type: type[_ExpiryResponse],
    period_ms: int,
) -> _ExpiryResponse:
    """Renew or Expire (the same checks, the same answer)."""
    if not allow_token_requests(ctx):
        error = errors.UnsupportedByAuthenticationException.code
        return response_type(error_code=error, expiry_timestamp_ms=_ERROR_TIMESTAMP)
    forwarded = await _forwarded(ctx, ctx.api_key, request, response_type)
    if forwarded is not None:
        return forwarded
    controller = ctx.broker.controller
    change = (
        controller.renew_delegation_token
        if response_type is RenewDelegationTokenResponse
        else controller.expire_delegation_token
    )
    failed, expiry = await change(ctx.principal, bytes(request.hmac), period_ms)
    return response_type(
        error_code=0 if failed is None else failed.code, expiry_timestamp_ms=expiry
    )


def handle_renew_delegation_token(
    ctx: RequestContext, request: RenewDelegationTokenRequest
) -> Awaitable[RenewDelegationTokenResponse]:
    return _change_expiry(ctx, request, RenewDelegationTokenResponse, request.renew_period_ms)


def handle_expire_delegation_token(
    ctx: RequestContext, request: ExpireDelegationTokenRequest
) -> Awaitable[ExpireDelegationTokenResponse]:
    return _change_expiry(
        ctx, request, ExpireDelegationTokenResponse, request.expiry_time_period_ms
    )


def _renew_error(
    ctx: RequestContext, request: RenewDelegationTokenRequest, error: errors.KafkaError
) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(error_code=error.code, expiry_timestamp_ms=_ERROR_TIMESTAMP)


def _expire_error(
    ctx: RequestContext, request: ExpireDelegationTokenRequest, error: errors.KafkaError
) -> ExpireDelegationTokenResponse:
    return ExpireDelegationTokenResponse(
        error_code=error.code, expiry_timestamp_ms=_ERROR_TIMESTAMP
    )


# -- DescribeDelegationToken ------------------------------------------------------------------
def _visible(
    ctx: RequestContext, token: TokenInformation, owners: list[KafkaPrincipal] | None
) -> bool:
    """Kafka's DelegationTokenManager.filterToken."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(ctx.principal):
        return True
    return ctx.authorize(
        ACL_OPERATION_DESCRIBE, ACL_RESOURCE_DELEGATION_TOKEN, token.token_id, audit_denied=False
    ) or ctx.authorize(
        ACL_OPERATION_DESCRIBE_TOKENS, ACL_RESOURCE_USER, str(token.owner), audit_denied=False
    )


def handle_describe_delegation_token(
    ctx: RequestContext, request: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return _describe_error(ctx, request, errors.UnsupportedByAuthenticationException())
    secret = ctx.broker.config["delegation.token.secret.key"]
    if not secret:
        return _describe_error(ctx, request, errors.DelegationTokenDisabledException())
    owners = (
        None
        if request.owners is None
        else [KafkaPrincipal(o.principal_type, o.principal_name) for o in request.owners]
    )
    Token = DescribeDelegationTokenResponse.DescribedDelegationToken
    Renewer = DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
    tokens: list[DescribeDelegationTokenResponse.DescribedDelegationToken] = []
    if owners != []:
        for token_id, token in sorted(ctx.broker.metadata_image.delegation_tokens.items()):
            if not _visible(ctx, token, owners):
                continue
            described = Token(
                principal_type=token.owner.principal_type,
                principal_name=token.owner.name,
                issue_timestamp=token.issue_timestamp_ms,
                expiry_timestamp=token.expiry_timestamp_ms,
                max_timestamp=token.max_timestamp_ms,
                token_id=token_id,
                hmac=token_hmac(secret, token_id),
                renewers=[
                    Renewer(principal_type=r.principal_type, principal_name=r.name)
                    for r in token.renewers
                ],
            )
            tokens.append(_with_requester(ctx.api_version, described, token.requester))
    return DescribeDelegationTokenResponse(error_code=0, tokens=tokens)


def _describe_error(
    ctx: RequestContext, request: DescribeDelegationTokenRequest, error: errors.KafkaError
) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(error_code=error.code, tokens=[])


def register_controller(apis: ApiRegistry) -> None:
    """The APIs a controller serves (Kafka's ControllerApis): the writes."""
    apis.register(
        CREATE_DELEGATION_TOKEN, handle_create_delegation_token, error_response=_create_error
    )
    apis.register(
        RENEW_DELEGATION_TOKEN, handle_renew_delegation_token, error_response=_renew_error
    )
    apis.register(
        EXPIRE_DELEGATION_TOKEN, handle_expire_delegation_token, error_response=_expire_error
    )


def register(apis: ApiRegistry) -> None:
    register_controller(apis)
    apis.register(
        DESCRIBE_DELEGATION_TOKEN,
        handle_describe_delegation_token,
        error_response=_describe_error,
    )
