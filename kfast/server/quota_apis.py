"""DescribeClientQuotas (48) and AlterClientQuotas (49), as Kafka's KRaft
broker and controller answer them.

AlterClientQuotas goes to the controller (a cluster's broker forwards it):
ClientQuotaControlManager validates each entry and writes its
ClientQuotaRecords; the answer has one entry per request entry, its entity
echoed, an error (INVALID_REQUEST with Kafka's message) or none.
``validate_only`` validates and writes nothing.

DescribeClientQuotas is answered from the broker's metadata image
(Kafka's ClientQuotasImage.describe). Each filter component names an
entity type and how to match it: EXACT (that name; null is refused),
DEFAULT (the type's default entity; a name is refused), SPECIFIED (any
entity of the type, default included; a name is refused). An entity
matches when it has every component's type with a matching name; with
``strict`` it has no other type either. A type twice, an empty type, or
``ip`` together with ``user`` or ``client-id`` is INVALID_REQUEST; an
unknown entity type is UNSUPPORTED_VERSION; an unknown match type
INVALID_REQUEST. Errors fail the whole request (error_code with entries
null).
"""

from __future__ import annotations

from kfast.protocol import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    api_keys,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_ALTER_CONFIGS,
    ACL_OPERATION_DESCRIBE_CONFIGS,
    QUOTA_ENTITY_CLIENT_ID,
    QUOTA_ENTITY_IP,
    QUOTA_ENTITY_USER,
    QUOTA_MATCH_DEFAULT,
    QUOTA_MATCH_EXACT,
    QUOTA_MATCH_SPECIFIED,
)
from kfast.server.apis import ApiRegistry, RequestContext

ALTER_CLIENT_QUOTAS = api_keys.BY_NAME["AlterClientQuotas"].key
DESCRIBE_CLIENT_QUOTAS = api_keys.BY_NAME["DescribeClientQuotas"].key
_ENTITY_TYPES = (QUOTA_ENTITY_USER, QUOTA_ENTITY_CLIENT_ID, QUOTA_ENTITY_IP)


# -- DescribeClientQuotas ---------------------------------------------------------------
def _parse_filter(
    components: list[DescribeClientQuotasRequest.ComponentData],
) -> tuple[dict[str, str | None], set[str]]:
    """(exact: {type: name or None}, specified: {type}) of a request's filter."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise errors.InvalidRequestException("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in specified:
            raise errors.InvalidRequestException(
                f"Entity type {c.entity_type} cannot appear more than once in the filter."
            )
        if c.entity_type not in _ENTITY_TYPES:
            raise errors.UnsupportedVersionException(f"Unsupported entity type {c.entity_type}")
        if c.match_type == QUOTA_MATCH_EXACT:
            if c.match is None:
                raise errors.InvalidRequestException(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null."
                )
            exact[c.entity_type] = c.match
        elif c.match_type == QUOTA_MATCH_DEFAULT:
            if c.match is not None:
                raise errors.InvalidRequestException(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[c.entity_type] = None
        elif c.match_type == QUOTA_MATCH_SPECIFIED:
            if c.match is not None:
                raise errors.InvalidRequestException(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(c.entity_type)
        else:
            raise errors.InvalidRequestException(f"Unknown match type {c.match_type}")
    named = set(exact) | specified
    if QUOTA_ENTITY_IP in named and named & {QUOTA_ENTITY_USER, QUOTA_ENTITY_CLIENT_ID}:
        raise errors.InvalidRequestException(
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component."
        )
    return exact, specified


def matches(
    entity: dict[str, str | None],
    exact: dict[str, str | None],
    specified: set[str],
    strict: bool,
) -> bool:
    """Kafka's ClientQuotasImage.matches: ``entity`` is {type: name or None}."""
    if strict and len(entity) != len(exact) + len(specified):
        return False
    for entity_type, name in exact.items():
        if entity_type not in entity or entity[entity_type] != name:
            return False
    return all(entity_type in entity for entity_type in specified)


def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    ctx.authorize_cluster(ACL_OPERATION_DESCRIBE_CONFIGS)
    exact, specified = _parse_filter(request.components)
    Entry = DescribeClientQuotasResponse.EntryData
    entries: list[DescribeClientQuotasResponse.EntryData] = []
    for entity, values in ctx.broker.metadata_image.client_quotas.items():
        if matches(dict(entity), exact, specified, request.strict):
            entries.append(
                Entry(
                    entity=[
                        DescribeClientQuotasResponse.EntityData(entity_type=t, entity_name=n)
                        for t, n in entity
                    ],
                    values=[
                        DescribeClientQuotasResponse.ValueData(key=k, value=v)
                        for k, v in sorted(values.items())
                    ],
                )
            )
    return DescribeClientQuotasResponse(error_code=0, error_message=None, entries=entries)


def _describe_error(
    ctx: RequestContext, request: DescribeClientQuotasRequest, error: errors.KafkaError
) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(
        error_code=error.code, error_message=str(error) or None, entries=None
    )


# -- AlterClientQuotas --------------------------------------------------------------------
async def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    ctx.authorize_cluster(ACL_OPERATION_ALTER_CONFIGS)
    alterations = [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [(op.key, None if op.remove else op.value) for op in entry.ops],
        )
        for entry in request.entries
    ]
    results: list[errors.KafkaError | None] = await ctx.broker.controller.alter_client_quotas(
        alterations, request.validate_only
    )
    return _alter_response(request, results)


def _alter_response(
    request: AlterClientQuotasRequest, results: list[errors.KafkaError | None]
) -> AlterClientQuotasResponse:
    Entry = AlterClientQuotasResponse.EntryData
    return AlterClientQuotasResponse(
        entries=[
            Entry(
                error_code=0 if error is None else error.code,
                error_message=None if error is None else str(error) or None,
                entity=[
                    AlterClientQuotasResponse.EntityData(
                        entity_type=e.entity_type, entity_name=e.entity_name
                    )
                    for e in entry.entity
                ],
            )
            for entry, error in zip(request.entries, results)
        ]
    )


def _alter_error(
    ctx: RequestContext, request: AlterClientQuotasRequest, error: errors.KafkaError
) -> AlterClientQuotasResponse:
    return _alter_response(request, [error] * len(request.entries))


def register(apis: ApiRegistry) -> None:
    apis.register(
        DESCRIBE_CLIENT_QUOTAS, handle_describe_client_quotas, error_response=_describe_error
    )
    apis.register(ALTER_CLIENT_QUOTAS, handle_alter_client_quotas, error_response=_alter_error)
